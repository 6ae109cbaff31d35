// updatedAt and version kept by the database (the "row_touch", "row_version" and "customer_touch"
// triggers, prisma/migrations/20261207100000_updated_at): a write that changes a contact, a
// conversation (a message, its status, its customer's details) or a message's delivery moves its
// updatedAt, on the database's clock, once per write and together with its version; a write that
// changes nothing, or fails, moves nothing. GET /conversations/{id} with its ETag and 304, the feed and
// the fixture loader carrying the new fields, and the migration's values for existing rows.
// @topology pooler citus
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FixtureError, type LoadResult } from "../../server/admin/fixture.js";
import { openPglite } from "../../server/db/client.js";
import { migrate, MIGRATIONS_DIR } from "../../server/db/migrate.js";
import { readCatalog } from "../helpers/citus.js";
import { expectEnvelope, startApp, untimed, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { analyzeSql, loadSqlParser, tenantModel } from "../helpers/tenant-sql.js";

let app: TestApp;
let ids: LoadResult;
const BIG = { perMinute: 100_000, perDay: 1_000_000 };
const acme = () => ids.tenants.acme!;
const globex = () => ids.tenants.globex!;
const key = (ref = "full", t = acme()) => t.apiKeys[ref]!.key;
const sql = <R = Record<string, unknown>>(text: string, params: unknown[] = []) => untimed(app.db)<R>(text, params);
const req = (
  method: string,
  p: string,
  opts: { body?: unknown; headers?: Record<string, string>; key?: string } = {},
) => app.request(method, `/public/v1${p}`, { key: opts.key ?? key(), body: opts.body, headers: opts.headers });
const ms = (iso: string) => new Date(iso).getTime();
/** The database's clock now, in ms (the coordinator's on Citus: one machine's clock in the tests). */
const dbNow = async () =>
  (await sql<{ t: number }>(`SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS t`))[0]!.t;
/** A row's updatedAt (ms) and version, read from the database. */
const stamp = async (table: string, id: string) =>
  (
    await sql<{ u: number; v: number | null }>(
      `SELECT extract(epoch FROM "updatedAt")::float8 * 1000 AS u, ${table === "Message" ? "NULL" : `"version"`} AS v
         FROM "${table}" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
      [acme().id, id],
    )
  )[0]!;

const data = (ref: string, n: number) =>
  tenant(ref, {
    rateLimit: BIG,
    apiKeys: [
      { ref: "full", owner: "ana", scopes: "all" },
      { ref: "reader", owner: "ana", scopes: ["tenant:conversations.read"] },
      { ref: "none", owner: "ana", scopes: [] },
    ],
    contacts: [
      { ref: "bea", fullName: "Bea Soto", phone: `+3460000000${n}`, email: `bea@${ref}.test` },
      { ref: "carl", fullName: "Carl Ruiz", phone: `+3460000001${n}`, email: `carl@${ref}.test` },
    ],
    conversations: [
      {
        ref: "web",
        channel: "site",
        identity: { externalId: `web-bea-${ref}`, name: "Bea", phone: null, email: null, contact: "bea" },
        messages: [{ role: "user", content: "Hi!", createdAt: "2026-11-21T10:00:00Z" }],
      },
      {
        ref: "other",
        channel: "site",
        identity: { externalId: `web-carl-${ref}`, name: "Carl", phone: null, email: null, contact: "carl" },
        messages: [{ role: "user", content: "Hello", createdAt: "2026-11-21T11:00:00Z" }],
      },
    ],
  });

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(fixture(data("acme", 1), data("globex", 2)));
}, 120_000);
afterAll(() => app?.close());

describe("contacts", () => {
  it("a PATCH that changes the contact moves updatedAt (database clock) and version once; an equal or failed one moves nothing", async () => {
    const id = acme().contacts.bea!;
    const before = await req("GET", `/contacts/${id}`);
    expect(before.status).toBe(200);
    expect(ms(before.body.updatedAt)).toBeGreaterThanOrEqual(ms(before.body.createdAt));

    // The service's clock far in the past: the stamp is the database's, not the service's.
    app.setNow(new Date("2020-01-01T00:00:00Z"));
    try {
      const t0 = await dbNow();
      const r = await req("PATCH", `/contacts/${id}`, { body: { fullName: "Beatriz Soto", marketingOptOut: true } });
      const t1 = await dbNow();
      expect(r.status).toBe(200);
      expect(r.body.version).toBe(before.body.version + 1);
      expect(r.headers.get("etag")).toBe(`"${r.body.version}"`);
      const u = ms(r.body.updatedAt);
      expect(u).toBeGreaterThan(ms(before.body.updatedAt));
      // The transaction's time, stored to the millisecond.
      expect(u).toBeGreaterThanOrEqual(Math.floor(t0) - 1);
      expect(u).toBeLessThanOrEqual(Math.ceil(t1) + 1);
      expect(r.body.marketingOptOutAt).toBe("2020-01-01T00:00:00.000Z");
      expect((await req("GET", `/contacts/${id}`)).body).toEqual(r.body);

      // The same values again: nothing written, nothing moves.
      const same = await req("PATCH", `/contacts/${id}`, { body: { fullName: "Beatriz Soto" } });
      expect(same.status).toBe(200);
      expect(same.body).toEqual(r.body);
      // A refused PATCH (the e-mail another contact holds; a stale If-Match) changes nothing.
      expectEnvelope(
        await req("PATCH", `/contacts/${id}`, { body: { email: `carl@acme.test`, fullName: "X" } }),
        409,
        "ALREADY_EXISTS",
      );
      const stale = await req("PATCH", `/contacts/${id}`, {
        body: { fullName: "Y" },
        headers: { "If-Match": `"${before.body.version}"` },
      });
      expectEnvelope(stale, 412, "PRECONDITION_FAILED");
      expect((await req("GET", `/contacts/${id}`)).body).toEqual(r.body);
    } finally {
      app.setNow(undefined);
    }
  });

  it("a create's updatedAt is the database's, never before its createdAt; PUT's update moves it once", async () => {
    app.setNow(new Date("2020-01-01T00:00:00Z"));
    try {
      const t0 = await dbNow();
      const c = await req("POST", "/contacts", {
        body: { fullName: "Dana", phone: "+34611000001", externalId: "crm-dana" },
      });
      expect(c.status).toBe(201);
      expect(c.body.version).toBe(1);
      expect(c.body.createdAt).toBe("2020-01-01T00:00:00.000Z");
      expect(ms(c.body.updatedAt)).toBeGreaterThanOrEqual(Math.floor(t0) - 1);
      expect((await req("GET", `/contacts/${c.body.id}`)).body).toEqual(c.body);

      const put = await req("PUT", "/contacts/by-external-id/crm-dana", {
        body: { fullName: "Dana Ruiz", phone: "+34611000001" },
      });
      expect(put.status).toBe(200);
      expect(put.body.version).toBe(2);
      expect(ms(put.body.updatedAt)).toBeGreaterThan(ms(c.body.updatedAt));
      const again = await req("PUT", "/contacts/by-external-id/crm-dana", {
        body: { fullName: "Dana Ruiz", phone: "+34611000001" },
      });
      expect(again.body).toEqual(put.body);
    } finally {
      app.setNow(undefined);
    }
  });
});

describe("conversations and messages", () => {
  const conv = () => acme().conversations.web!;
  const get = async (id = conv()) => {
    const r = await req("GET", `/conversations/${id}`);
    expect(r.status).toBe(200);
    return r.body;
  };

  it("a message moves the conversation's updatedAt and version once; its delivery moves only the message's updatedAt", async () => {
    const before = await get();
    const t0 = await dbNow();
    const sent = await req("POST", `/conversations/${conv()}/messages`, {
      body: { content: "We have a flat for you" },
    });
    expect(sent.status).toBe(201);
    // Stored pending, then delivered after the commit (web: inside the service): its updatedAt moved with the delivery.
    expect(sent.body.deliveryStatus).toBe("sent");
    expect(ms(sent.body.updatedAt)).toBeGreaterThan(ms(sent.body.createdAt));
    expect(ms(sent.body.updatedAt)).toBeGreaterThanOrEqual(Math.floor(t0) - 1);

    const after = await get();
    // One write (the message and the last-message fields, one transaction): one version. The delivery
    // after the commit did not change the conversation.
    expect(after.version).toBe(before.version + 1);
    expect(after.lastMessagePreview).toBe("We have a flat for you");
    expect(ms(after.updatedAt)).toBeGreaterThan(ms(before.updatedAt));
    expect(ms(after.updatedAt)).toBeGreaterThanOrEqual(Math.floor(t0) - 1);
    expect(ms(after.updatedAt)).toBeLessThan(ms(sent.body.updatedAt) + 1);

    const listed = await req("GET", `/conversations/${conv()}/messages`);
    expect(listed.body.items[0]).toEqual(sent.body);
  });

  it("a status change, two statements in one transaction, and an update that changes nothing", async () => {
    const before = await get();
    const t = acme().id;
    await sql(`UPDATE "Conversation" SET "status" = 'escalated' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`, [
      t,
      conv(),
    ]);
    const escalated = await get();
    expect(escalated.status).toBe("escalated");
    expect(escalated.version).toBe(before.version + 1);
    expect(ms(escalated.updatedAt)).toBeGreaterThan(ms(before.updatedAt));

    // One transaction, two statements: one version, one updatedAt.
    await app.db.prisma.$transaction([
      app.db.prisma.$executeRawUnsafe(
        `UPDATE "Conversation" SET "status" = 'active' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        t,
        conv(),
      ),
      app.db.prisma.$executeRawUnsafe(
        `UPDATE "Conversation" SET "subject" = 'Flat' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        t,
        conv(),
      ),
    ]);
    const both = await get();
    expect([both.status, both.subject, both.version]).toEqual(["active", "Flat", escalated.version + 1]);
    expect(ms(both.updatedAt)).toBeGreaterThan(ms(escalated.updatedAt));

    // Nothing changes (whatever updatedAt a statement writes: the database's trigger decides).
    await sql(`UPDATE "Conversation" SET "status" = "status" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`, [
      t,
      conv(),
    ]);
    expect(await get()).toEqual(both);
  });

  it("a customer's name change moves its conversations' updatedAt and version, no other's", async () => {
    const t = acme().id;
    const before = await get();
    const other = await get(acme().conversations.other!);
    const foreign = await req("GET", `/conversations/${globex().conversations.web}`, { key: key("full", globex()) });
    await sql(
      `UPDATE "Customer" SET "name" = 'Beatriz' WHERE "tenantId" = $1::uuid
          AND "id" = (SELECT "customerId" FROM "Conversation" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid)`,
      [t, conv()],
    );
    const after = await get();
    expect(after.customer.name).toBe("Beatriz");
    expect(after.version).toBe(before.version + 1);
    expect(ms(after.updatedAt)).toBeGreaterThan(ms(before.updatedAt));
    expect(await get(acme().conversations.other!)).toEqual(other);
    expect(
      (await req("GET", `/conversations/${globex().conversations.web}`, { key: key("full", globex()) })).body,
    ).toEqual(foreign.body);

    // The same name again: the customer's row does not change what the conversation shows.
    await sql(`UPDATE "Customer" SET "name" = 'Beatriz' WHERE "tenantId" = $1::uuid AND "name" = 'Beatriz'`, [t]);
    expect(await get()).toEqual(after);

    // A status change and a customer change in one transaction: one version.
    await app.db.prisma.$transaction([
      app.db.prisma.$executeRawUnsafe(
        `UPDATE "Conversation" SET "status" = 'resolved' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        t,
        conv(),
      ),
      app.db.prisma.$executeRawUnsafe(
        `UPDATE "Customer" SET "email" = 'bea@x.test' WHERE "tenantId" = $1::uuid AND "name" = 'Beatriz'`,
        t,
      ),
    ]);
    const once = await get();
    expect([once.status, once.customer.email, once.version]).toEqual(["resolved", "bea@x.test", after.version + 1]);
  });

  it("a deliveryStatus change moves the message's updatedAt, not its conversation's version or updatedAt", async () => {
    const t = acme().id;
    const conversation = await get();
    const [first] = (await req("GET", `/conversations/${conv()}/messages`)).body.items;
    await sql(`UPDATE "Message" SET "deliveryStatus" = 'delivered' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`, [
      t,
      first.id,
    ]);
    const [delivered] = (await req("GET", `/conversations/${conv()}/messages`)).body.items;
    expect(delivered.deliveryStatus).toBe("delivered");
    expect(ms(delivered.updatedAt)).toBeGreaterThan(ms(first.updatedAt));
    expect(await get()).toEqual(conversation);
    // An update that changes nothing keeps it.
    await sql(`UPDATE "Message" SET "deliveryStatus" = 'delivered' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`, [
      t,
      first.id,
    ]);
    expect(await stamp("Message", first.id)).toEqual({ u: ms(delivered.updatedAt), v: null });
  });
});

describe("GET /conversations/{id}", () => {
  it("200 with the list's object and its version as ETag; 304 on If-None-Match; a new version answers 200 again", async () => {
    const id = acme().conversations.other!;
    const r = await req("GET", `/conversations/${id}`, { key: key("reader") });
    expect(r.status).toBe(200);
    expect(r.headers.get("etag")).toBe(`"${r.body.version}"`);
    const listed = (await req("GET", "/conversations", { key: key("reader") })).body.items.find(
      (c: { id: string }) => c.id === id,
    );
    expect(r.body).toEqual(listed);
    expect(r.body.channel).toBe("web");
    expect(r.body.customer.customerId).toBe(acme().contacts.carl);

    const etag = r.headers.get("etag")!;
    for (const tag of [etag, `W/${etag}`, "*"]) {
      const nm = await req("GET", `/conversations/${id}`, { headers: { "If-None-Match": tag } });
      expect(nm.status).toBe(304);
      expect(nm.text).toBe("");
      expect(nm.headers.get("etag")).toBe(etag);
    }
    expect((await req("GET", `/conversations/${id}`, { headers: { "If-None-Match": '"999999"' } })).status).toBe(200);

    await req("POST", `/conversations/${id}/messages`, { body: { content: "News" } });
    const changed = await req("GET", `/conversations/${id}`, { headers: { "If-None-Match": etag } });
    expect(changed.status).toBe(200);
    expect(changed.body.version).toBe(r.body.version + 1);
    expect(changed.headers.get("etag")).toBe(`"${r.body.version + 1}"`);
  });

  it("404 for another tenant's or an unknown conversation, 422 for a malformed id (GET …/start too), 403 without the scope", async () => {
    const foreign = await req("GET", `/conversations/${globex().conversations.web}`);
    expect(expectEnvelope(foreign, 404, "NOT_FOUND").message).toBe("Conversation not found");
    const unknown = await req("GET", `/conversations/${crypto.randomUUID()}`);
    expect(expectEnvelope(unknown, 404, "NOT_FOUND").message).toBe(foreign.body.message);
    for (const bad of ["not-a-uuid", "start"]) {
      const r = expectEnvelope(await req("GET", `/conversations/${bad}`), 422, "VALIDATION_ERROR");
      expect(r.details.fields[0].field).toBe("id");
    }
    expectEnvelope(
      await req("GET", `/conversations/${acme().conversations.web}`, { key: key("none") }),
      403,
      "PERMISSION_DENIED",
    );
    // POST …/start is still the start operation.
    expectEnvelope(await req("POST", "/conversations/start", { body: {} }), 422, "VALIDATION_ERROR");
  });
});

describe("the changes feed and the fixture format", () => {
  it("the feed's conversations and contacts carry updatedAt and version as their GET answers them", async () => {
    const r = await req("GET", "/changes", { key: key() });
    expect(r.status).toBe(200);
    const item = (type: string, id: string) =>
      r.body.items.find((i: { type: string; id: string }) => i.type === type && i.id === id);
    expect(item("conversation", acme().conversations.web!).data).toEqual(
      (await req("GET", `/conversations/${acme().conversations.web}`)).body,
    );
    expect(item("contact", acme().contacts.bea!).data).toEqual(
      (await req("GET", `/contacts/${acme().contacts.bea}`)).body,
    );
  });

  it("a fixture with updatedAt loads it as given; without, the object's latest known time; before createdAt is refused", async () => {
    const loaded = await app.load(
      fixture(
        tenant("dated", {
          contacts: [
            { ref: "a", phone: "+34612000001", createdAt: "2026-10-01T08:00:00Z", updatedAt: "2026-10-05T08:00:00Z" },
            { ref: "b", phone: "+34612000002", createdAt: "2026-10-01T08:00:00Z" },
          ],
          conversations: [
            {
              ref: "c",
              channel: "site",
              createdAt: "2026-10-02T08:00:00Z",
              updatedAt: "2026-10-09T08:00:00Z",
              identity: null,
              messages: [
                { role: "user", content: "Hi", createdAt: "2026-10-03T08:00:00Z", updatedAt: "2026-10-04T08:00:00Z" },
                { role: "user", content: "Again", createdAt: "2026-10-06T08:00:00Z" },
              ],
            },
            {
              ref: "d",
              channel: "site",
              createdAt: "2026-10-02T08:00:00Z",
              identity: null,
              messages: [{ role: "user", content: "Hi", createdAt: "2026-10-07T08:00:00Z" }],
            },
          ],
        }),
      ),
    );
    const d = loaded.tenants.dated!;
    const k = { key: d.apiKeys.full!.key };
    const contact = async (ref: string) => (await req("GET", `/contacts/${d.contacts[ref]}`, k)).body;
    expect([(await contact("a")).updatedAt, (await contact("b")).updatedAt]).toEqual([
      "2026-10-05T08:00:00.000Z",
      "2026-10-01T08:00:00.000Z",
    ]);
    const c = (await req("GET", `/conversations/${d.conversations.c}`, k)).body;
    expect([c.version, c.updatedAt, c.lastMessageAt]).toEqual([
      1,
      "2026-10-09T08:00:00.000Z",
      "2026-10-06T08:00:00.000Z",
    ]);
    expect((await req("GET", `/conversations/${d.conversations.d}`, k)).body.updatedAt).toBe(
      "2026-10-07T08:00:00.000Z",
    );
    const messages = (await req("GET", `/conversations/${d.conversations.c}/messages`, k)).body.items;
    expect(messages.map((m: { updatedAt: string }) => m.updatedAt)).toEqual([
      "2026-10-06T08:00:00.000Z",
      "2026-10-04T08:00:00.000Z",
    ]);

    const tenants = async () => (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "Tenant"`))[0]!.n;
    const n = await tenants();
    const refused = [
      {
        contacts: [
          { ref: "a", phone: "+34612000003", createdAt: "2026-10-02T08:00:00Z", updatedAt: "2026-10-01T08:00:00Z" },
        ],
      },
      {
        conversations: [
          {
            ref: "c",
            channel: "site",
            identity: null,
            updatedAt: "2026-10-01T08:00:00Z",
            messages: [{ role: "user" as const, content: "x", createdAt: "2026-10-02T08:00:00Z" }],
          },
        ],
      },
      {
        conversations: [
          {
            ref: "c",
            channel: "site",
            identity: null,
            messages: [
              {
                role: "user" as const,
                content: "x",
                createdAt: "2026-10-02T08:00:00Z",
                updatedAt: "2026-10-01T08:00:00Z",
              },
            ],
          },
        ],
      },
    ];
    for (const extra of refused) {
      const err = await app.load(fixture(tenant("refused", extra))).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(FixtureError);
      expect(String((err as Error).message)).toMatch(/updatedAt is before/);
      expect(await tenants()).toBe(n);
    }
  });
});

describe("the triggers", () => {
  it("a contact's touch compares every column but the generated one; the others compare whole rows", async () => {
    const [contact] = await sql<{ def: string }>(
      `SELECT pg_get_triggerdef(g.oid) AS def FROM pg_trigger g WHERE g.tgrelid = '"Contact"'::regclass AND g.tgname = 'Contact_touch_update'`,
    );
    const columns = await sql<{ name: string }>(
      `SELECT attname AS name FROM pg_attribute WHERE attrelid = '"Contact"'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''`,
    );
    for (const { name } of columns)
      expect(contact!.def, name).toMatch(new RegExp(`old\\.(?:"${name}"|${name.toLowerCase()}(?![A-Za-z0-9_"]))`));
    const whole = await sql<{ name: string; def: string }>(
      `SELECT g.tgname AS name, pg_get_triggerdef(g.oid) AS def FROM pg_trigger g WHERE g.tgname IN ('Conversation_touch_update', 'Message_touch_update')`,
    );
    expect(whole.map((w) => w.name).sort()).toEqual(["Conversation_touch_update", "Message_touch_update"]);
    for (const w of whole) expect(w.def).toContain("old.* IS DISTINCT FROM new.*");
  });

  it("customer_touch's statement pins the customer's tenant (the analysis of the API's statements, test/db/tenant-queries.test.ts)", async () => {
    await loadSqlParser();
    const model = tenantModel(await readCatalog(app.db.sql));
    const [fn] = await sql<{ src: string }>(`SELECT prosrc AS src FROM pg_proc WHERE proname = 'customer_touch'`);
    const statements = fn!.src
      .replace(/--[^\n]*/g, "")
      .split(/\bBEGIN\b|\bEND\b|;/)
      .map((s) => s.trim())
      .filter((s) => /^(SELECT|UPDATE|INSERT|DELETE|PERFORM)\b/i.test(s));
    expect(statements).toHaveLength(1);
    const tenantId = acme().id;
    const a = analyzeSql(
      statements[0]!.replace(/NEW\."tenantId"/g, "$1").replace(/NEW\."id"/g, "$2"),
      [tenantId, crypto.randomUUID()],
      model,
    );
    expect(a.problems).toEqual([]);
    expect([...a.tenants]).toEqual([`=${tenantId}`]);
  });
});

describe("the migration", () => {
  it("gives existing rows their values: a message its createdAt, a conversation the latest time it knows and version 1", async () => {
    // The migrations before this one, rows written by them, then this one (PGlite: the statements are the same everywhere).
    const dir = mkdtempSync(path.join(tmpdir(), "crm-updated-at-"));
    const db = await openPglite("memory://");
    try {
      const name = "20261207100000_updated_at";
      cpSync(MIGRATIONS_DIR, path.join(dir, "migrations"), { recursive: true, filter: (src) => !src.includes(name) });
      cpSync(path.join(MIGRATIONS_DIR, "..", "functions"), path.join(dir, "functions"), { recursive: true });
      await migrate(db.sql, path.join(dir, "migrations"));
      const t = crypto.randomUUID();
      await db.sql.query(`INSERT INTO "Tenant" ("id", "name", "plan") VALUES ($1, 'T', 'pro')`, [t]);
      const [ch] = await db.sql.query<{ id: string }>(
        `INSERT INTO "Channel" ("tenantId", "kind", "name") VALUES ($1, 'web', 'W') RETURNING "id"`,
        [t],
      );
      const [cu] = await db.sql.query<{ id: string }>(
        `INSERT INTO "Customer" ("tenantId") VALUES ($1) RETURNING "id"`,
        [t],
      );
      const conversation = (u: string) =>
        db.sql.query<{ id: string }>(
          `INSERT INTO "Conversation" ("tenantId", "channelId", "customerId", "createdAt", "lastMessageAt", "updatedAt")
           VALUES ($1, $2, $3, '2026-10-01T00:00:00Z', '2026-10-03T00:00:00Z', $4) RETURNING "id"`,
          [t, ch!.id, cu!.id, u],
        );
      const [behind] = await conversation("2026-10-02T00:00:00Z");
      const [ahead] = await conversation("2026-10-04T00:00:00Z");
      await db.sql.query(
        `INSERT INTO "Message" ("tenantId", "conversationId", "role", "content", "deliveryStatus", "createdAt")
         VALUES ($1, $2, 'user', 'Hi', 'received', '2026-10-03T00:00:00Z')`,
        [t, behind!.id],
      );
      cpSync(path.join(MIGRATIONS_DIR, name), path.join(dir, "migrations", name), { recursive: true });
      expect(await migrate(db.sql, path.join(dir, "migrations"))).toContain(name);
      const rows = await db.sql.query<{ id: string; u: string; v: number }>(
        `SELECT "id", to_char("updatedAt" AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS u, "version" AS v FROM "Conversation" ORDER BY "updatedAt"`,
      );
      expect(rows).toEqual([
        { id: behind!.id, u: "2026-10-03", v: 1 },
        { id: ahead!.id, u: "2026-10-04", v: 1 },
      ]);
      const [m] = await db.sql.query<{ same: boolean }>(`SELECT "updatedAt" = "createdAt" AS same FROM "Message"`);
      expect(m!.same).toBe(true);
    } finally {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
