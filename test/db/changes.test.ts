// GET /public/v1/changes through HTTP, on both backends: bootstrap, every kind of change
// with its action and data (deep-equal to the resource's own GET/list), compaction, commit order,
// concurrent writers plus (on PostgreSQL) a transaction held open across polls with the mirror
// compared object by object to a fresh full read, scope and tenant matrices, token validation and
// retention (the injectable clock), pagination with limit 1 and 500, the byte bound, the internal
// tRPC procedure.
// @topology pooler
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { encodeSince } from "../../routers/changes/schemas.js";
import { CHANGES_RETENTION_MS, purgeTombstones, sequencePending, TOMBSTONE_KEEP_MS } from "../../server/changes.js";
import { expectEnvelope, startApp, untimed, type Response, type TestApp } from "../helpers/app.js";
import { lockWaits } from "../helpers/cluster.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const TYPES = ["lead", "contact", "conversation", "appointment", "ticket"] as const;
type Type = (typeof TYPES)[number];
const RESOURCE: Record<Type, string> = {
  lead: "leads",
  contact: "contacts",
  conversation: "conversations",
  appointment: "appointments",
  ticket: "tickets",
};
const READ = (t: Type) => `tenant:${RESOURCE[t]}.read`;
const MANAGE = TYPES.map((t) => `tenant:${RESOURCE[t]}.manage`);
const DAY = 86_400_000;

interface Item {
  type: Type;
  id: string;
  action: "upsert" | "delete";
  changedAt: string;
  data: Record<string, any> | null;
}
interface Page {
  items: Item[];
  nextSince: string;
  hasMore: boolean;
}

let app: TestApp & { testDb: { url?: string } };
let ids: LoadResult;
const T = (ref: string) => ids.tenants[ref]!;
const key = (tenantRef: string, keyRef = "full") => T(tenantRef).apiKeys[keyRef]!.key;
const isPg = () => app.db.kind === "postgres";

const keys = [
  { ref: "full", owner: "ana", scopes: "all" as const },
  { ref: "none", owner: "ana", scopes: [] },
  { ref: "manage", owner: "ana", scopes: MANAGE },
  ...TYPES.map((t) => ({ ref: `r_${t}`, owner: "ana", scopes: [READ(t)] })),
];

function data(ref: string) {
  return {
    apiKeys: keys,
    rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 },
    contacts: [
      { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: `bea@${ref}.test` },
      { ref: "carl", fullName: "Carl Diaz", phone: "+34600000002" },
      { ref: "dana", fullName: "Dana Gil", phone: "+34600000003" },
      { ref: "eve", fullName: "Eve Ros", phone: "+34600000004" },
      { ref: "held", fullName: "Held Contact", phone: "+34600000005" },
      { ref: "gone", fullName: "Gone", phone: "+34600000009", deleted: true },
    ],
    conversations: [
      {
        ref: "c1",
        channel: "site",
        identity: { externalId: `web-${ref}`, name: "Bea", contact: "bea" },
        messages: [{ role: "user" as const, content: "Hi", createdAt: "2026-11-01T09:00:00Z" }],
      },
      {
        ref: "c2",
        channel: "wa",
        identity: { externalId: "34600000002", name: "Carl", phone: "+34600000002", contact: "carl" },
        messages: [{ role: "user" as const, content: "Hello", createdAt: "2026-11-01T10:00:00Z" }],
      },
    ],
    leads: [
      { ref: "l1", customerName: "Bea Soto", contact: "bea", conversation: "c1", createdAt: "2026-11-01T09:00:00Z" },
      { ref: "l2", customerName: "Carl Diaz", createdAt: "2026-11-02T09:00:00Z" },
      { ref: "lheld", customerName: "Held Lead", createdAt: "2026-11-03T09:00:00Z" },
    ],
    appointments: [
      {
        ref: "a1",
        assignedTo: "ana",
        title: "Viewing",
        appointmentType: "visit",
        startsAt: "2026-12-01T10:00:00Z",
        endsAt: "2026-12-01T11:00:00Z",
        contact: "bea",
        lead: "l1",
      },
    ],
    tickets: [
      {
        ref: "t1",
        subject: "Broken link",
        createdBy: "ana",
        contact: "bea",
        comments: [{ author: "ana", body: "Looking into it" }],
      },
      { ref: "t2", subject: "Keys", createdBy: "ana", lead: "l1" },
    ],
  };
}

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", data("acme")),
      tenant("other", data("other")),
      tenant("bulk", { apiKeys: keys, rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 } }),
    ),
  );
}, 60_000);
afterAll(() => app?.close());

// ---- helpers ----------------------------------------------------------------------------------------

const get = (k: string, query: Record<string, string | number | undefined> = {}) =>
  app.request<Page>("GET", "/public/v1/changes", { key: k, query });

/** Follows nextSince until hasMore is false. */
async function drain(k: string, since?: string, q: { types?: string; limit?: number } = {}) {
  const items: Item[] = [];
  const pages: Page[] = [];
  for (;;) {
    const r = await get(k, { since, ...q });
    if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
    pages.push(r.body);
    items.push(...r.body.items);
    since = r.body.nextSince;
    if (!r.body.hasMore) return { items, since, pages };
    if (pages.length > 5_000) throw new Error("no end");
  }
}

async function listAll(k: string, path: string): Promise<any[]> {
  const out: any[] = [];
  for (let offset = 0; ; offset += 200) {
    const r = await app.request("GET", path, { key: k, query: { offset, limit: 200 } });
    expect(r.status).toBe(200);
    out.push(...r.body.items);
    if (!r.body.pagination.hasNext) return out;
  }
}

/** A fresh full read of every type through the resources' own lists: "type:id" → object. */
async function fullRead(k: string, types: readonly Type[] = TYPES): Promise<Map<string, unknown>> {
  const m = new Map<string, unknown>();
  for (const t of types) for (const o of await listAll(k, `/public/v1/${RESOURCE[t]}`)) m.set(`${t}:${o.id}`, o);
  return m;
}

function apply(mirror: Map<string, unknown>, items: Item[]) {
  for (const it of items) {
    if (it.action === "delete") mirror.delete(`${it.type}:${it.id}`);
    else mirror.set(`${it.type}:${it.id}`, it.data);
  }
}

const sorted = (m: Map<string, unknown>) => Object.fromEntries([...m.entries()].sort(([a], [b]) => a.localeCompare(b)));

/** acme's full-key chain, kept across tests: every test reads the changes after its own action. */
let tip: string | undefined;
async function changesAfter(action: () => Promise<unknown>, k = key("acme")): Promise<Item[]> {
  tip = (await drain(k, tip)).since;
  await action();
  const r = await drain(k, tip);
  tip = r.since;
  return r.items;
}

async function expectOk(p: Promise<Response>, status = 200) {
  const r = await p;
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${r.text}`);
  return r.body;
}

const listItem = async (type: Type, id: string) =>
  (await listAll(key("acme"), `/public/v1/${RESOURCE[type]}`)).find((o) => o.id === id);
const sql = <R = Record<string, unknown>>(text: string, params: unknown[] = []) => untimed(app.db)<R>(text, params);

function expectInvalid(r: Response, field: string) {
  const b = expectEnvelope(r, 422, "VALIDATION_ERROR");
  expect(b.details.fields.map((f: any) => f.field)).toContain(field);
  return b;
}

// ---- bootstrap --------------------------------------------------------------------------------------

describe("bootstrap (no since)", () => {
  it("returns every live object of the tenant once, as its own list returns it, and nothing else", async () => {
    const r = await drain(key("acme"), undefined, { limit: 3 });
    expect(r.pages.length).toBeGreaterThan(3);
    const seen = r.items.map((i) => `${i.type}:${i.id}`);
    expect(new Set(seen).size).toBe(seen.length);
    expect(r.items.every((i) => i.action === "upsert")).toBe(true);
    const full = await fullRead(key("acme"));
    const mirror = new Map<string, unknown>();
    apply(mirror, r.items);
    expect(sorted(mirror)).toEqual(sorted(full));
    // 6 contacts but one soft-deleted, 2 conversations, 3 leads, 1 appointment, 2 tickets.
    expect(mirror.size).toBe(5 + 2 + 3 + 1 + 2);
    expect(seen).not.toContain(`contact:${T("acme").contacts.gone}`);
    // Another tenant's objects never appear.
    const foreign = new Set(Object.values(T("other").leads).concat(Object.values(T("other").contacts)));
    expect(r.items.filter((i) => foreign.has(i.id))).toEqual([]);
  });

  it("a poll with nothing new returns items: [] and an equivalent nextSince", async () => {
    const k = key("acme");
    const a = await drain(k);
    const b = await get(k, { since: a.since });
    expect(b.status).toBe(200);
    expect(b.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false });
    const c = await get(k, { since: b.body.nextSince });
    expect(c.body.items).toEqual([]);
    await expectOk(
      app.request("PATCH", `/public/v1/leads/${T("acme").leads.l2}`, { key: k, body: { notes: "equivalent tokens" } }),
    );
    const fromA = await drain(k, a.since);
    const fromC = await drain(k, c.body.nextSince);
    expect(fromA.items).toHaveLength(1);
    expect(fromC.items).toEqual(fromA.items);
  });
});

// ---- every kind of change ---------------------------------------------------------------------------

describe("each kind of change appears with its action and data", () => {
  it("lead PATCH → the lead, deep-equal to GET /leads/{id}", async () => {
    const id = T("acme").leads.l1!;
    const items = await changesAfter(() =>
      expectOk(
        app.request("PATCH", `/public/v1/leads/${id}`, { key: key("acme"), body: { quality: "hot", notes: "called" } }),
      ),
    );
    const lead = await expectOk(app.request("GET", `/public/v1/leads/${id}`, { key: key("acme") }));
    expect(lead.notes).toBe("called");
    expect(items).toEqual([{ type: "lead", id, action: "upsert", changedAt: expect.any(String), data: lead }]);
  });

  it("contact PATCH → upsert; soft delete (SQL) → delete with data null", async () => {
    const id = T("acme").contacts.dana!;
    const patched = await changesAfter(() =>
      expectOk(
        app.request("PATCH", `/public/v1/contacts/${id}`, {
          key: key("acme"),
          body: { fullName: "Dana G.", marketingOptOut: true },
        }),
      ),
    );
    expect(patched).toEqual([
      { type: "contact", id, action: "upsert", changedAt: expect.any(String), data: await listItem("contact", id) },
    ]);
    expect(patched[0]!.data!.fullName).toBe("Dana G.");
    const deleted = await changesAfter(() =>
      sql(`UPDATE "Contact" SET "deletedAt" = now(), "updatedAt" = now() WHERE "id" = $1`, [id]),
    );
    expect(deleted).toEqual([{ type: "contact", id, action: "delete", changedAt: expect.any(String), data: null }]);
    expect(await listItem("contact", id)).toBeUndefined();
    // A fresh bootstrap skips the tombstone: the deleted contact appears neither way.
    expect((await drain(key("acme"))).items.filter((i) => i.id === id)).toEqual([]);
  });

  it("conversation start → the new conversation; a new message → its conversation", async () => {
    let convId = "";
    const started = await changesAfter(async () => {
      const c = await expectOk(
        app.request("POST", "/public/v1/conversations/start", {
          key: key("acme"),
          body: {
            channelId: T("acme").channels.wa,
            phone: "+34 611 000 777",
            templateName: "welcome",
            templateLanguage: "en",
            variables: ["Eva", "Ana"],
          },
        }),
        201,
      );
      convId = c.id;
    });
    expect(started).toEqual([
      {
        type: "conversation",
        id: convId,
        action: "upsert",
        changedAt: expect.any(String),
        data: await listItem("conversation", convId),
      },
    ]);
    expect(started[0]!.data!.lastMessagePreview).toBe("Hello Eva, this is Ana");

    const c1 = T("acme").conversations.c1!;
    const sent = await changesAfter(() =>
      expectOk(
        app.request("POST", `/public/v1/conversations/${c1}/messages`, {
          key: key("acme"),
          body: { content: "On my way" },
        }),
        201,
      ),
    );
    expect(sent).toEqual([
      {
        type: "conversation",
        id: c1,
        action: "upsert",
        changedAt: expect.any(String),
        data: await listItem("conversation", c1),
      },
    ]);
    expect(sent[0]!.data!.lastMessagePreview).toBe("On my way");
  });

  it("a message or a ticket comment inserted without touching its parent still changes the parent", async () => {
    const c2 = T("acme").conversations.c2!;
    const viaMessage = await changesAfter(() =>
      sql(
        `INSERT INTO "Message" ("tenantId", "conversationId", "role", "content", "deliveryStatus")
         VALUES ($1, $2, 'user', 'raw', 'received')`,
        [T("acme").id, c2],
      ),
    );
    expect(viaMessage.map((i) => [i.type, i.id, i.action])).toEqual([["conversation", c2, "upsert"]]);
    const t2 = T("acme").tickets.t2!;
    const viaComment = await changesAfter(() =>
      sql(
        `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body")
         VALUES ($1, $2, $3, 'raw comment')`,
        [T("acme").id, t2, T("acme").users.ana],
      ),
    );
    expect(viaComment).toEqual([
      { type: "ticket", id: t2, action: "upsert", changedAt: expect.any(String), data: await listItem("ticket", t2) },
    ]);
    expect(viaComment[0]!.data!.comments.map((c: any) => c.body)).toEqual(["raw comment"]);
    // What a conversation shows of its customer: a change of the customer is a change of it.
    const viaCustomer = await changesAfter(() =>
      sql(
        `UPDATE "Customer" SET "name" = 'Carl D.'
         WHERE "id" = (SELECT "customerId" FROM "Conversation" WHERE "id" = $1)`,
        [c2],
      ),
    );
    expect(viaCustomer).toEqual([
      {
        type: "conversation",
        id: c2,
        action: "upsert",
        changedAt: expect.any(String),
        data: await listItem("conversation", c2),
      },
    ]);
    expect(viaCustomer[0]!.data!.customer.name).toBe("Carl D.");
  });

  it("appointment create, reschedule and cancel", async () => {
    const k = key("acme");
    let id = "";
    const created = await changesAfter(async () => {
      id = (
        await expectOk(
          app.request("POST", "/public/v1/appointments", {
            key: k,
            body: {
              assignedUserId: T("acme").users.ana,
              title: "Second visit",
              appointmentType: "visit",
              startsAt: "2026-12-10T10:00:00Z",
              endsAt: "2026-12-10T11:00:00Z",
            },
          }),
          201,
        )
      ).id;
    });
    expect(created).toEqual([
      {
        type: "appointment",
        id,
        action: "upsert",
        changedAt: expect.any(String),
        data: await listItem("appointment", id),
      },
    ]);
    const moved = await changesAfter(() =>
      expectOk(
        app.request("PATCH", `/public/v1/appointments/${id}`, {
          key: k,
          body: { startsAt: "2026-12-10T12:00:00Z", endsAt: "2026-12-10T13:00:00Z" },
        }),
      ),
    );
    expect(moved).toEqual([
      {
        type: "appointment",
        id,
        action: "upsert",
        changedAt: expect.any(String),
        data: await listItem("appointment", id),
      },
    ]);
    expect(moved[0]!.data!.startsAt).toBe("2026-12-10T12:00:00.000Z");
    const cancelled = await changesAfter(() =>
      expectOk(app.request("PATCH", `/public/v1/appointments/${id}`, { key: k, body: { status: "cancelled" } })),
    );
    expect(cancelled).toEqual([
      {
        type: "appointment",
        id,
        action: "upsert",
        changedAt: expect.any(String),
        data: await listItem("appointment", id),
      },
    ]);
    expect(cancelled[0]!.data!.status).toBe("cancelled");
  });

  it("ticket status change and comment", async () => {
    const k = key("acme");
    const id = T("acme").tickets.t1!;
    const status = await changesAfter(() =>
      expectOk(app.request("PATCH", `/public/v1/tickets/${id}`, { key: k, body: { status: "pending" } })),
    );
    expect(status).toEqual([
      { type: "ticket", id, action: "upsert", changedAt: expect.any(String), data: await listItem("ticket", id) },
    ]);
    expect(status[0]!.data!.status).toBe("pending");
    const commented = await changesAfter(() =>
      expectOk(
        app.request("POST", `/public/v1/tickets/${id}/comments`, { key: k, body: { body: "Technician booked" } }),
        201,
      ),
    );
    expect(commented).toEqual([
      { type: "ticket", id, action: "upsert", changedAt: expect.any(String), data: await listItem("ticket", id) },
    ]);
    expect(commented[0]!.data!.comments.map((c: any) => c.body)).toEqual(["Looking into it", "Technician booked"]);
  });

  it("several changes of one object between two polls are compacted into its latest state; a no-op update is no change", async () => {
    const k = key("acme");
    const id = T("acme").leads.l2!;
    const items = await changesAfter(async () => {
      for (const notes of ["one", "two", "three"])
        await expectOk(app.request("PATCH", `/public/v1/leads/${id}`, { key: k, body: { notes } }));
    });
    expect(items).toHaveLength(1);
    expect(items[0]!.data!.notes).toBe("three");
    expect(
      await changesAfter(() => sql(`UPDATE "Lead" SET "notes" = "notes" WHERE "tenantId" = $1`, [T("acme").id])),
    ).toEqual([]);
  });

  it("items come in commit order", async () => {
    const k = key("acme");
    const a = T("acme");
    const items = await changesAfter(async () => {
      await expectOk(
        app.request("PATCH", `/public/v1/tickets/${a.tickets.t2}`, { key: k, body: { subject: "Keys (2)" } }),
      );
      await expectOk(
        app.request("PATCH", `/public/v1/leads/${a.leads.l1}`, { key: k, body: { notes: "after the ticket" } }),
      );
      await expectOk(
        app.request("PATCH", `/public/v1/contacts/${a.contacts.eve}`, { key: k, body: { fullName: "Eve R." } }),
      );
    });
    expect(items.map((i) => [i.type, i.id])).toEqual([
      ["ticket", a.tickets.t2],
      ["lead", a.leads.l1],
      ["contact", a.contacts.eve],
    ]);
  });
});

// ---- concurrency --------------------------------------------------------------------------------------

describe("concurrent writers and a long-running transaction", () => {
  it("20 concurrent writers with a poller following the feed (and, on PostgreSQL, a transaction held open across polls): the mirror equals a fresh full read", async () => {
    const k = key("acme");
    const a = T("acme");
    const mirror = new Map<string, unknown>();
    const boot = await drain(k);
    apply(mirror, boot.items);
    let since = boot.since;
    let polls = 0;
    const delivered: Item[] = [];
    const pollOnce = async () => {
      const r = await drain(k, since);
      apply(mirror, r.items);
      delivered.push(...r.items);
      since = r.since;
      polls++;
      return r.items;
    };
    let stop = false;
    const poller = (async () => {
      while (!stop) {
        await pollOnce();
        await new Promise((r) => setTimeout(r, 5));
      }
    })();

    // A transaction opened before the writers and committed after them: its changes have older
    // timestamps than everything the writers do, and must still reach the mirror once it commits.
    let held: pg.Client | undefined;
    let heldLeadId = "";
    if (isPg()) {
      held = new pg.Client({ connectionString: app.testDb.url });
      await held.connect();
      await held.query("BEGIN");
      // Every statement pins the tenant (as the service's do): on Citus a statement without it is a
      // multi-shard write, which locks every shard until this transaction ends.
      await held.query(`UPDATE "Lead" SET "notes" = 'held', "updatedAt" = now() WHERE "tenantId" = $2 AND "id" = $1`, [
        a.leads.lheld,
        a.id,
      ]);
      heldLeadId = (
        await held.query(
          `INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1, 'Born in a long transaction', $2)
           RETURNING "id"`,
          [a.id, a.stages.new],
        )
      ).rows[0].id;
      await held.query(
        `UPDATE "Contact" SET "deletedAt" = now(), "updatedAt" = now() WHERE "tenantId" = $2 AND "id" = $1`,
        [a.contacts.held, a.id],
      );
    }

    const statuses: number[] = [];
    const ok = async (p: Promise<Response>) => {
      const r = await p;
      statuses.push(r.status);
      return r.body;
    };
    const writer = async (w: number) => {
      const lead = await ok(
        app.request("POST", "/public/v1/leads", {
          key: k,
          body: { customerName: `Writer ${w}`, customerPhone: `+3462000${String(w).padStart(4, "0")}` },
        }),
      );
      await ok(app.request("PATCH", `/public/v1/leads/${lead.id}`, { key: k, body: { notes: `patched by ${w}` } }));
      await ok(app.request("PATCH", `/public/v1/leads/${a.leads.l2}`, { key: k, body: { notes: `l2 by ${w}` } }));
      const contact = await ok(
        app.request("POST", "/public/v1/contacts", {
          key: k,
          body: { fullName: `Writer ${w}`, phone: `+3463000${String(w).padStart(4, "0")}` },
        }),
      );
      // The same ticket commented and PATCHed by different writers at once (no deadlock between the
      // comment's and the PATCH's row locks), and the same conversation written to.
      if (w % 2 === 0)
        await ok(
          app.request("POST", `/public/v1/tickets/${a.tickets.t1}/comments`, {
            key: k,
            body: { body: `comment ${w}` },
          }),
        );
      else
        await ok(
          app.request("PATCH", `/public/v1/tickets/${a.tickets.t1}`, {
            key: k,
            body: { status: w % 4 === 1 ? "open" : "pending" },
          }),
        );
      await ok(
        app.request("POST", `/public/v1/conversations/${a.conversations.c1}/messages`, {
          key: k,
          body: { content: `message ${w}` },
        }),
      );
      const day = String(1 + w).padStart(2, "0");
      const appt = await ok(
        app.request("POST", "/public/v1/appointments", {
          key: k,
          body: {
            assignedUserId: a.users.ana,
            title: `Visit ${w}`,
            appointmentType: "visit",
            startsAt: `2027-03-${day}T09:00:00Z`,
            endsAt: `2027-03-${day}T10:00:00Z`,
          },
        }),
      );
      if (w % 3 === 0)
        await ok(app.request("PATCH", `/public/v1/appointments/${appt.id}`, { key: k, body: { status: "cancelled" } }));
      if (w % 5 === 0)
        await sql(`UPDATE "Contact" SET "deletedAt" = now(), "updatedAt" = now() WHERE "tenantId" = $2 AND "id" = $1`, [
          contact.id,
          a.id,
        ]);
    };
    await Promise.all(Array.from({ length: 20 }, (_, w) => writer(w)));
    expect(
      statuses.every((s) => s === 200 || s === 201),
      JSON.stringify(statuses),
    ).toBe(true);

    let newestBeforeCommit = "";
    let atCommit = 0;
    if (held) {
      // Several polls while the transaction is still open: none waits for it (a poll queued behind
      // its locks would show among the lock waits, blocked by its backend — on Citus on a worker:
      // test/helpers/cluster.ts), none sees its changes.
      const [{ pid: heldPid }] = (await held.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows as [
        { pid: number },
      ];
      const before = polls;
      while (polls < before + 3) {
        const blocked = (await lockWaits((q, p) => sql(q, p))).filter((w) => w.blockers.includes(heldPid));
        if (blocked.length) await held.query("ROLLBACK");
        expect(blocked, "polls waiting for the open transaction").toEqual([]);
        await new Promise((r) => setTimeout(r, 10));
      }
      await pollOnce();
      expect((mirror.get(`lead:${a.leads.lheld}`) as any).notes).not.toBe("held");
      expect(mirror.has(`lead:${heldLeadId}`)).toBe(false);
      expect(mirror.has(`contact:${a.contacts.held}`)).toBe(true);
      newestBeforeCommit = delivered
        .map((i) => i.changedAt)
        .sort()
        .at(-1)!;
      atCommit = delivered.length;
      await held.query("COMMIT");
      await held.end();
    }
    stop = true;
    await poller;
    await pollOnce();

    const full = await fullRead(k);
    expect(sorted(mirror)).toEqual(sorted(full));
    expect(full.size).toBeGreaterThan(13 + 40);
    if (held) {
      expect((mirror.get(`lead:${a.leads.lheld}`) as any).notes).toBe("held");
      expect(mirror.has(`lead:${heldLeadId}`)).toBe(true);
      expect(mirror.has(`contact:${a.contacts.held}`)).toBe(false);
      // The long transaction's change is older than changes delivered before it committed (a
      // timestamp-based poll would have moved past it), and still arrives, after them.
      const afterCommit = delivered.slice(atCommit);
      const heldItem = afterCommit.find((i) => i.id === a.leads.lheld)!;
      expect(heldItem.data!.notes).toBe("held");
      expect(heldItem.changedAt < newestBeforeCommit).toBe(true);
      expect(afterCommit.find((i) => i.id === a.contacts.held)).toMatchObject({ action: "delete", data: null });
    }
    // Nothing is left unplaced.
    await sequencePending(app.db.prisma);
    expect(await sql(`SELECT 1 FROM "ChangeLog" WHERE "pos" IS NULL`)).toEqual([]);
  }, 120_000);

  it("positions are unique per tenant and never above its head", async () => {
    const rows = await sql<{ tenantId: string; n: number; distinct: number; max: string; head: string }>(`
      SELECT l."tenantId", count(*)::int AS n, count(DISTINCT l."pos")::int AS "distinct", max(l."pos")::text AS max,
        h."pos"::text AS head
        FROM "ChangeLog" l JOIN "ChangeHead" h ON h."tenantId" = l."tenantId" WHERE l."pos" IS NOT NULL
          GROUP BY l."tenantId", h."pos"`);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const r of rows) {
      expect(r.distinct).toBe(r.n);
      expect(Number(r.max)).toBeLessThanOrEqual(Number(r.head));
    }
  });
});

// ---- scopes and tenants ---------------------------------------------------------------------------------

describe("scopes", () => {
  it("a key with one read scope: only that type by default; asking for another type → 403; a key with no read scope → 403", async () => {
    const full = await fullRead(key("acme"));
    for (const t of TYPES) {
      const k = key("acme", `r_${t}`);
      const boot = await drain(k);
      expect(boot.items.length).toBeGreaterThan(0);
      expect(new Set(boot.items.map((i) => i.type))).toEqual(new Set([t]));
      const mirror = new Map<string, unknown>();
      apply(mirror, boot.items);
      expect(sorted(mirror)).toEqual(sorted(new Map([...full].filter(([id]) => id.startsWith(`${t}:`)))));
      expect((await get(k, { types: t })).status).toBe(200);
      for (const other of TYPES.filter((x) => x !== t)) {
        const denied = expectEnvelope(await get(k, { types: other }), 403, "PERMISSION_DENIED");
        expect(denied.details.requiredScopes).toEqual([READ(other)]);
        expectEnvelope(await get(k, { types: `${t},${other}`, since: boot.since }), 403, "PERMISSION_DENIED");
      }
    }
    for (const ref of ["none", "manage"]) {
      expectEnvelope(await get(key("acme", ref)), 403, "PERMISSION_DENIED");
      expectEnvelope(await get(key("acme", ref), { types: "lead" }), 403, "PERMISSION_DENIED");
    }
  });

  it("types narrows a full key's feed; a narrow token chain skips straight to the head", async () => {
    const k = key("acme");
    for (const t of TYPES) {
      const r = await drain(k, undefined, { types: t });
      expect(r.items.length).toBeGreaterThan(0);
      expect(r.items.every((i) => i.type === t)).toBe(true);
    }
    const both = await drain(k, undefined, { types: "ticket,lead,ticket" });
    expect(new Set(both.items.map((i) => i.type))).toEqual(new Set(["lead", "ticket"]));
    const tickets = await drain(k, undefined, { types: "ticket" });
    await expectOk(
      app.request("PATCH", `/public/v1/leads/${T("acme").leads.l2}`, { key: k, body: { notes: "not a ticket" } }),
    );
    expect((await drain(k, tickets.since, { types: "ticket" })).items).toEqual([]);
    expect((await drain(k, tickets.since, { types: "lead" })).items.map((i) => i.id)).toEqual([T("acme").leads.l2]);
  });
});

describe("tenant isolation", () => {
  it("each tenant's feed holds its own objects only; a change in one never shows in another; tokens do not cross", async () => {
    const other = await drain(key("other"));
    const mirror = new Map<string, unknown>();
    apply(mirror, other.items);
    expect(sorted(mirror)).toEqual(sorted(await fullRead(key("other"))));
    const acmeIds = new Set(
      Object.values(T("acme")).flatMap((v) =>
        v && typeof v === "object" ? Object.values(v as Record<string, unknown>) : [],
      ),
    );
    expect(other.items.filter((i) => acmeIds.has(i.id))).toEqual([]);

    await expectOk(
      app.request("PATCH", `/public/v1/leads/${T("acme").leads.l1}`, {
        key: key("acme"),
        body: { notes: "acme only" },
      }),
    );
    expect((await drain(key("other"), other.since)).items).toEqual([]);

    const acmeToken = (await drain(key("acme"))).since;
    const b = expectInvalid(await get(key("other"), { since: acmeToken }), "since");
    expect(b.details.fields[0].code).toBe("invalid_token");
    expectInvalid(await get(key("acme"), { since: other.since }), "since");
  });
});

// ---- validation -------------------------------------------------------------------------------------------

describe("validation", () => {
  it("limit: 1–500 integers only", async () => {
    const k = key("acme");
    for (const limit of ["0", "501", "1.5", "-1", "1e2", "abc"]) expectInvalid(await get(k, { limit }), "limit");
    expect((await get(k, { limit: "500" })).status).toBe(200);
    expect((await get(k, { limit: "1" })).body.items).toHaveLength(1);
  });

  it("types: unknown values → 422", async () => {
    const k = key("acme");
    for (const types of ["bogus", "lead,bogus", "lead,,contact", "Lead", "leads", "lead ", "x".repeat(201)])
      expectInvalid(await get(k, { types }), "types");
  });

  it("since: malformed or another tenant's → 422 naming since; refused before any work (a pending change stays pending)", async () => {
    const k = key("acme");
    await expectOk(
      app.request("PATCH", `/public/v1/leads/${T("acme").leads.l1}`, {
        key: k,
        body: { notes: "pending while refused" },
      }),
    );
    const bad = [
      "not a token",
      "abc",
      Buffer.from("c1.1.0.1700000000000.zzzzzzzzzzzz").toString("base64url"),
      Buffer.from("c2.1.0.1700000000000.0123456789ab").toString("base64url"),
      "A".repeat(201),
    ];
    for (const since of bad) {
      const b = expectInvalid(await get(k, { since }), "since");
      expect(b.details.code).toBeUndefined();
    }
    const foreign = encodeSince(T("other").id, { pos: 1, skip: 0, at: Date.now() });
    expectInvalid(await get(k, { since: foreign }), "since");
    expectEnvelope(
      await get(key("acme", "r_lead"), { types: "ticket", since: "not a token" }),
      403,
      "PERMISSION_DENIED",
    );
    expect(
      await sql(`SELECT 1 FROM "ChangeLog" WHERE "objectId" = $1 AND "pos" IS NULL`, [T("acme").leads.l1]),
    ).toHaveLength(1);
    await drain(k);
  });

  it("retention: a token issued more than 30 days ago → 422 since_expired; a younger one works and is renewed by every caught-up page", async () => {
    const k = key("acme");
    const now = Date.now();
    try {
      app.setNow(new Date(now));
      const token = (await drain(k)).since;
      app.setNow(new Date(now + CHANGES_RETENTION_MS - DAY));
      const renewed = await get(k, { since: token });
      expect(renewed.status).toBe(200);
      app.setNow(new Date(now + CHANGES_RETENTION_MS + DAY));
      const b = expectInvalid(await get(k, { since: token }), "since");
      expect(b.details.code).toBe("since_expired");
      expect(b.details.fields[0].code).toBe("since_expired");
      // The token renewed 29 days in is still good 31 days in.
      expect((await get(k, { since: renewed.body.nextSince })).status).toBe(200);
      // A position beyond the feed's head (e.g. a restored database) is a restart too.
      const ahead = encodeSince(T("acme").id, { pos: 1_000_000_000, skip: 0, at: now + CHANGES_RETENTION_MS });
      expect(expectInvalid(await get(k, { since: ahead }), "since").details.code).toBe("since_expired");
    } finally {
      app.setNow(undefined);
    }
  });

  it("the purge deletes tombstones older than the retention (+1 day) only; a bootstrap started before a delete still delivers it", async () => {
    const k = key("acme");
    const a = T("acme");
    // A bootstrap in progress (limit 1), then a contact is deleted: the chain delivers the delete.
    const first = await get(k, { limit: 1 });
    await sql(`UPDATE "Contact" SET "deletedAt" = now(), "updatedAt" = now() WHERE "id" = $1`, [a.contacts.carl]);
    const rest = await drain(k, first.body.nextSince, { limit: 50 });
    expect(rest.items.filter((i) => i.id === a.contacts.carl).at(-1)).toMatchObject({ action: "delete", data: null });

    const count = async () =>
      await sql<{ action: string; n: number }>(
        `SELECT "action", count(*)::int AS n FROM "ChangeLog" GROUP BY "action" ORDER BY "action"`,
      );
    const before = await count();
    expect(before.find((r) => r.action === "delete")!.n).toBeGreaterThan(0);
    expect(await purgeTombstones(app.db.prisma, new Date(Date.now() + CHANGES_RETENTION_MS))).toBe(0);
    const purged = await purgeTombstones(app.db.prisma, new Date(Date.now() + TOMBSTONE_KEEP_MS + 60_000));
    expect(purged).toBe(before.find((r) => r.action === "delete")!.n);
    expect(await count()).toEqual(before.filter((r) => r.action === "upsert"));
  });
});

// ---- pagination and bounds ----------------------------------------------------------------------------------

describe("pagination and bounds", () => {
  it("limit 500 over 600 bulk-inserted leads, and limit 1 over 30 changes, give the same items as one big page", async () => {
    const k = key("bulk");
    const b = T("bulk");
    await sql(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId") SELECT $1, 'Bulk ' || i, $2
       FROM generate_series(1, 600) i`,
      [b.id, b.stages.new],
    );
    const first = await get(k, { limit: 500 });
    expect(first.body.items).toHaveLength(500);
    expect(first.body.hasMore).toBe(true);
    const second = await get(k, { limit: 500, since: first.body.nextSince });
    expect(second.body.items).toHaveLength(100);
    expect(second.body.hasMore).toBe(false);
    const all = [...first.body.items, ...second.body.items];
    expect(new Set(all.map((i) => i.id)).size).toBe(600);
    expect(sorted(new Map(all.map((i) => [`lead:${i.id}`, i.data])))).toEqual(sorted(await fullRead(k, ["lead"])));

    const tip = second.body.nextSince;
    await sql(
      `UPDATE "Lead" SET "notes" = 'batch', "updatedAt" = now()
       WHERE "id" IN (SELECT "id" FROM "Lead" WHERE "tenantId" = $1 ORDER BY "id" LIMIT 30)`,
      [b.id],
    );
    const one = await drain(k, tip, { limit: 1 });
    expect(one.pages).toHaveLength(30);
    expect(one.pages.slice(0, 29).every((p) => p.items.length === 1 && p.hasMore)).toBe(true);
    expect(one.pages[29]!.hasMore).toBe(false);
    const big = await drain(k, tip, { limit: 500 });
    expect(big.pages).toHaveLength(1);
    expect(one.items).toEqual(big.items);
    expect(big.items.every((i) => i.data!.notes === "batch")).toBe(true);
  });

  it("a page stops at about 4 MiB (ticket threads can be large: up to ~1 MB each) and always holds at least one item", async () => {
    const k = key("bulk");
    const b = T("bulk");
    const tip = (await drain(k)).since;
    const tickets = await sql<{ id: string }>(
      `WITH l AS (INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1, 'Ticket subject', $3)
       RETURNING "id")
       INSERT INTO "Ticket" ("tenantId", "subject", "createdById", "leadId")
       SELECT $1, 'Big ' || i, $2, l."id" FROM l, generate_series(1, 12) i RETURNING "id"`,
      [b.id, b.users.ana, b.stages.new],
    );
    // Each thread at its bounds (15 × 10,000 = 150,000 characters), of a character JSON escapes to six
    // bytes (\u0001): about 900 KB per ticket, so four fit in a page and the fifth does not.
    await sql(
      `INSERT INTO "TicketComment" ("tenantId", "ticketId", "authorUserId", "body")
       SELECT $1, t.id, $2, repeat(chr(1), 10000) FROM unnest($3::uuid[]) t(id), generate_series(1, 15)`,
      [b.id, b.users.ana, tickets.map((t) => t.id)],
    );
    const r = await drain(k, tip, { limit: 500, types: "ticket" });
    expect(r.pages.length).toBeGreaterThanOrEqual(3);
    for (const page of r.pages) {
      expect(page.items.length).toBeGreaterThanOrEqual(1);
      expect(Buffer.byteLength(JSON.stringify(page))).toBeLessThanOrEqual(4 * 1024 * 1024 + 1024);
    }
    expect(r.pages.map((p) => p.hasMore)).toEqual([...r.pages.slice(1).map(() => true), false]);
    expect(new Set(r.items.map((i) => i.id)).size).toBe(12);
    expect(r.items.every((i) => i.data!.comments.length === 15)).toBe(true);
  }, 60_000);

  it("the byte bound holds for small objects too: 450 leads of 10 KB take two pages of at most 4 MiB", async () => {
    const k = key("bulk");
    const b = T("bulk");
    const tip = (await drain(k)).since;
    await sql(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "notes")
       SELECT $1, 'Wordy ' || i, $2, repeat('y', 10000) FROM generate_series(1, 450) i`,
      [b.id, b.stages.new],
    );
    const r = await drain(k, tip, { limit: 500, types: "lead" });
    expect(r.pages).toHaveLength(2);
    expect(r.pages[0]!.items.length).toBeGreaterThan(300);
    expect(r.pages[0]!.items.length).toBeLessThan(450);
    expect(Buffer.byteLength(JSON.stringify(r.pages[0]))).toBeLessThanOrEqual(4 * 1024 * 1024 + 1024);
    expect(new Set(r.items.map((i) => i.id)).size).toBe(450);
  }, 60_000);
});

describe("internal tRPC API", () => {
  it("serves the same procedure as changes.list", async () => {
    const input = encodeURIComponent(JSON.stringify({ limit: 2, types: "lead" }));
    const res = await fetch(`${app.url}/trpc/changes.list?input=${input}`, { headers: { "X-API-Key": key("acme") } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { data: Page } };
    expect(body.result.data.items).toHaveLength(2);
    expect(body.result.data.items.every((i) => i.type === "lead")).toBe(true);
    expect(body.result.data.hasMore).toBe(true);
    const rest = await drain(key("acme"), body.result.data.nextSince, { types: "lead" });
    expect(rest.items.length).toBeGreaterThan(0);
  });
});
