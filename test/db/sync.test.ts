// Two-way sync over HTTP: external ids (create, PATCH, 409 with existingId, the lists'
// filter), PUT by external id (create 201 / update 200 / unchanged, create-only fields, races),
// batch upsert (mixed results, atomic items, bounds, idempotency), versions with ETag, If-Match
// (412, atomic), GET one with If-None-Match (304), and the feed and totals afterwards.
// @topology pooler citus
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { sequencePending } from "../../server/changes.js";
import { expectEnvelope, startApp, untimed, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;
const BIG = { perMinute: 100_000, perDay: 1_000_000 };
const key = (t = "acme", ref = "full") => ids.tenants[t]!.apiKeys[ref]!.key;
const sql = <R = Record<string, unknown>>(text: string, params: unknown[] = []) => untimed(app.db)<R>(text, params);
const req = (
  method: string,
  path: string,
  opts: { body?: unknown; headers?: Record<string, string>; key?: string; query?: Record<string, string> } = {},
) =>
  app.request(method, `/public/v1${path}`, {
    key: opts.key ?? key(),
    body: opts.body,
    headers: opts.headers,
    query: opts.query,
  });
let n = 0;
const uniq = (p: string) => `${p}-${Date.now().toString(36)}-${++n}`;
const phone = () => `+3461${String(1_000_000 + ++n).slice(-7)}`;

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: BIG,
        apiKeys: [
          { ref: "full", owner: "ana", scopes: "all" as const },
          {
            ref: "reader",
            owner: "ana",
            scopes: ["tenant:contacts.read", "tenant:leads.read", "tenant:tickets.read", "tenant:appointments.read"],
          },
        ],
        contacts: [
          { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@acme.test", externalId: "crm-bea" },
          { ref: "gone", fullName: "Gone", phone: "+34600000002", deleted: true, externalId: "crm-gone" },
        ],
        leads: [{ ref: "l1", customerName: "Lead One", externalId: "crm-lead-1" }],
        tickets: [
          {
            ref: "t1",
            subject: "Tap",
            createdBy: "ana",
            contact: "bea",
            externalId: "hd-1",
            comments: [{ author: "ana", body: "First" }],
          },
        ],
        appointments: [
          {
            ref: "a1",
            assignedTo: "ana",
            title: "Visit",
            appointmentType: "visit",
            startsAt: "2026-12-10T09:00:00Z",
            endsAt: "2026-12-10T10:00:00Z",
          },
        ],
      }),
      tenant("other", {
        rateLimit: BIG,
        contacts: [{ ref: "oscar", fullName: "Oscar", phone: "+34600000009", externalId: "crm-bea" }],
      }),
    ),
  );
}, 120_000);
afterAll(() => app?.close());

const acme = () => ids.tenants.acme!;

describe("external ids", () => {
  it("fixtures carry them; every object has externalId and version, and single answers send the version as ETag", async () => {
    const r = await req("GET", `/contacts/${acme().contacts.bea}`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ externalId: "crm-bea", version: 1 });
    expect(r.headers.get("etag")).toBe('"1"');
    const t = await req("GET", `/tickets/${acme().tickets.t1}`);
    expect(t.body).toMatchObject({ externalId: "hd-1", version: 1 });
    expect(t.body.comments).toHaveLength(1);
  });

  it("POST with an external id another object holds: 409 naming it, nothing written", async () => {
    const before = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "Contact"`);
    const r = await req("POST", "/contacts", { body: { phone: phone(), externalId: "crm-bea" } });
    const b = expectEnvelope(r, 409, "ALREADY_EXISTS");
    expect(b.details).toMatchObject({ field: "externalId", existingId: acme().contacts.bea });
    // The deleted contact still holds its external id.
    expect(
      expectEnvelope(
        await req("POST", "/contacts", { body: { phone: phone(), externalId: "crm-gone" } }),
        409,
        "ALREADY_EXISTS",
      ).details.existingId,
    ).toBe(acme().contacts.gone);
    expect((await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "Contact"`))[0]!.n).toBe(before[0]!.n);
    const l = await req("POST", "/leads", { body: { customerName: "X", externalId: "crm-lead-1" } });
    expect(expectEnvelope(l, 409, "ALREADY_EXISTS").details.existingId).toBe(acme().leads.l1);
    const t = await req("POST", "/tickets", {
      body: { subject: "S", customerId: acme().contacts.bea, externalId: "hd-1" },
    });
    expect(expectEnvelope(t, 409, "ALREADY_EXISTS").details.existingId).toBe(acme().tickets.t1);
  });

  it("a phone or email collision names the contact it collided with", async () => {
    const p = expectEnvelope(
      await req("POST", "/contacts", { body: { phone: "+34600000001" } }),
      409,
      "ALREADY_EXISTS",
    );
    expect(p.details).toMatchObject({ field: "phone", existingId: acme().contacts.bea });
    const e = expectEnvelope(
      await req("POST", "/contacts", { body: { phone: phone(), email: "BEA@acme.test" } }),
      409,
      "ALREADY_EXISTS",
    );
    expect(e.details).toMatchObject({ field: "email", existingId: acme().contacts.bea });
  });

  it("rejects an empty, too long or control-character external id with 422, nothing written", async () => {
    for (const bad of ["", "x".repeat(256), "a\u0001b", "tab\there", "del\u007f"]) {
      const r = await req("POST", "/contacts", { body: { phone: phone(), externalId: bad } });
      expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields[0].field).toBe("externalId");
    }
    const ok = await req("POST", "/contacts", { body: { phone: phone(), externalId: "ü".repeat(255) } });
    expect(ok.status).toBe(201);
    expect(ok.body.externalId).toBe("ü".repeat(255));
  });

  it("is unique per tenant only, set and cleared by PATCH, and filters the lists with exact totals", async () => {
    const c = await req("POST", "/contacts", { body: { phone: phone(), externalId: uniq("x") } });
    expect(c.status).toBe(201);
    const id = c.body.id;
    // Another tenant holds "crm-bea": no conflict across tenants (acme's bea holds it too).
    expect(
      (await req("GET", "/contacts", { query: { externalId: "crm-bea" } })).body.items.map((x: any) => x.id),
    ).toEqual([acme().contacts.bea]);
    const taken = await req("PATCH", `/contacts/${id}`, { body: { externalId: "crm-bea" } });
    expect(expectEnvelope(taken, 409, "ALREADY_EXISTS").details.existingId).toBe(acme().contacts.bea);
    const set = await req("PATCH", `/contacts/${id}`, { body: { externalId: "new-id" } });
    expect(set.body).toMatchObject({ externalId: "new-id", version: 2 });
    const list = await req("GET", "/contacts", { query: { externalId: "new-id" } });
    expect(list.body.pagination.totalItems).toBe(1);
    expect(list.body.items[0].id).toBe(id);
    const cleared = await req("PATCH", `/contacts/${id}`, { body: { externalId: null } });
    expect(cleared.body).toMatchObject({ externalId: null, version: 3 });
    expect((await req("GET", "/contacts", { query: { externalId: "new-id" } })).body.pagination.totalItems).toBe(0);
    expect((await req("GET", "/leads", { query: { externalId: "crm-lead-1" } })).body.pagination.totalItems).toBe(1);
    expect((await req("GET", "/tickets", { query: { externalId: "hd-1" } })).body.pagination.totalItems).toBe(1);
    expect((await req("GET", "/tickets", { query: { externalId: "nope" } })).body.items).toEqual([]);
  });
});

describe("PUT by external id", () => {
  it("creates (201, Location, version 1), then updates (200), then answers unchanged without writing", async () => {
    const ext = uniq("crm/lead ä");
    const path = `/leads/by-external-id/${encodeURIComponent(ext)}`;
    const r1 = await req("PUT", path, { body: { customerName: "Ana", customerPhone: "612 345 678", quality: "cold" } });
    expect(r1.status).toBe(201);
    expect(r1.body).toMatchObject({ externalId: ext, version: 1, quality: "cold", source: "api" });
    expect(r1.headers.get("location")).toBe(`/public/v1/leads/${r1.body.id}`);
    expect(r1.headers.get("etag")).toBe('"1"');
    // Same body, phone written differently: nothing changes, nothing written.
    const before = await sql<{ v: number; u: string }>(
      `SELECT "version" AS v, "updatedAt"::text AS u FROM "Lead" WHERE "id" = $1`,
      [r1.body.id],
    );
    const r2 = await req("PUT", path, {
      body: { customerName: "Ana", customerPhone: "+34 612 345 678", quality: "cold" },
    });
    expect(r2.status).toBe(200);
    expect(r2.body.version).toBe(1);
    expect(
      await sql(`SELECT "version" AS v, "updatedAt"::text AS u FROM "Lead" WHERE "id" = $1`, [r1.body.id]),
    ).toEqual(before);
    const r3 = await req("PUT", path, { body: { customerName: "Ana", quality: "hot", notes: "called" } });
    expect(r3.status).toBe(200);
    expect(r3.body).toMatchObject({ id: r1.body.id, quality: "hot", notes: "called", version: 2 });
    expect(r3.headers.get("etag")).toBe('"2"');
  });

  it("a create-only field that differs is 422 naming it, and nothing is written", async () => {
    const r = await req("PUT", "/leads/by-external-id/crm-lead-1", {
      body: { customerName: "Someone else", quality: "hot" },
    });
    expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields.map((f: any) => f.field)).toEqual([
      "customerName",
    ]);
    const lead = await req("GET", `/leads/${acme().leads.l1}`);
    expect(lead.body).toMatchObject({ quality: "unknown", version: 1 });
    const c = await req("PUT", "/contacts/by-external-id/crm-bea", { body: { phone: "+34699999999", fullName: "B" } });
    expect(expectEnvelope(c, 422, "VALIDATION_ERROR").details.fields.map((f: any) => f.field)).toEqual(["phone"]);
    const t = await req("PUT", "/tickets/by-external-id/hd-1", { body: { subject: "Tap", leadId: acme().leads.l1 } });
    expect(expectEnvelope(t, 422, "VALIDATION_ERROR").details.fields.map((f: any) => f.field)).toEqual(["leadId"]);
  });

  it("refuses externalId in the body, a ticket comment, and a deleted contact's external id", async () => {
    expectEnvelope(
      await req("PUT", "/contacts/by-external-id/zz", { body: { phone: phone(), externalId: "other" } }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await req("PUT", "/tickets/by-external-id/zz", {
        body: { subject: "S", customerId: acme().contacts.bea, comment: "hi" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    const gone = expectEnvelope(
      await req("PUT", "/contacts/by-external-id/crm-gone", { body: { phone: "+34600000002" } }),
      409,
      "ALREADY_EXISTS",
    );
    expect(gone.details.existingId).toBe(acme().contacts.gone);
    expect((await sql(`SELECT 1 FROM "Contact" WHERE "externalId" = 'zz'`)).length).toBe(0);
  });

  it("concurrent PUTs of one external id create one object between them", async () => {
    for (const [resource, body] of [
      ["contacts", { phone: "+34611100000", fullName: "Race" }],
      ["leads", { customerName: "Race" }],
      ["tickets", { subject: "Race", customerId: acme().contacts.bea }],
    ] as const) {
      const ext = uniq("race");
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => req("PUT", `/${resource}/by-external-id/${ext}`, { body })),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
      expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
      const table = { contacts: "Contact", leads: "Lead", tickets: "Ticket" }[resource];
      expect(
        (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}" WHERE "externalId" = $1`, [ext]))[0]!.n,
      ).toBe(1);
      const listed = await req("GET", `/${resource}`, { query: { externalId: ext } });
      expect(listed.body.pagination.totalItems).toBe(1);
    }
  });

  it("Idempotency-Key replays the answer with its status", async () => {
    const ext = uniq("idem");
    const headers = { "Idempotency-Key": uniq("k") };
    const a = await req("PUT", `/contacts/by-external-id/${ext}`, { body: { phone: phone() }, headers });
    const b = await req("PUT", `/contacts/by-external-id/${ext}`, { body: { phone: a.body.phone }, headers });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    expect(b.body).toEqual(a.body);
    const c = await req("PUT", `/contacts/by-external-id/${ext}`, { body: { phone: phone() }, headers });
    expectEnvelope(c, 422, "IDEMPOTENCY_KEY_REUSE_MISMATCH");
    const d = await req("PUT", `/contacts/by-external-id/${ext}`, { body: { phone: a.body.phone } });
    expect(d.status).toBe(200);
    expect(d.body.id).toBe(a.body.id);
  });
});

describe("versions and If-Match", () => {
  it("PATCH with a stale If-Match is 412 with the current ETag and nothing written; a current one succeeds", async () => {
    const c = (await req("POST", "/contacts", { body: { phone: phone(), fullName: "V" } })).body;
    const ok = await req("PATCH", `/contacts/${c.id}`, { body: { fullName: "V2" }, headers: { "If-Match": '"1"' } });
    expect(ok.status).toBe(200);
    expect(ok.body.version).toBe(2);
    const stale = await req("PATCH", `/contacts/${c.id}`, { body: { fullName: "V3" }, headers: { "If-Match": '"1"' } });
    expect(expectEnvelope(stale, 412, "PRECONDITION_FAILED").details).toEqual({ currentVersion: 2 });
    expect(stale.headers.get("etag")).toBe('"2"');
    expect((await req("GET", `/contacts/${c.id}`)).body.fullName).toBe("V2");
    expect(
      (await req("PATCH", `/contacts/${c.id}`, { body: { fullName: "V4" }, headers: { "If-Match": '"7", "2"' } }))
        .status,
    ).toBe(200);
    expect(
      (await req("PATCH", `/contacts/${c.id}`, { body: { fullName: "V5" }, headers: { "If-Match": "*" } })).body
        .version,
    ).toBe(4);
    // Weak tags never match If-Match.
    expectEnvelope(
      await req("PATCH", `/contacts/${c.id}`, { body: { fullName: "V6" }, headers: { "If-Match": 'W/"4"' } }),
      412,
      "PRECONDITION_FAILED",
    );
  });

  it("malformed If-Match is 422 naming the header; a foreign id is 404, never 412", async () => {
    const r = await req("PATCH", `/leads/${acme().leads.l1}`, { body: { notes: "x" }, headers: { "If-Match": "1" } });
    expect(expectEnvelope(r, 422, "VALIDATION_ERROR").details.fields[0].field).toBe("If-Match");
    const foreign = ids.tenants.other!.contacts.oscar;
    expectEnvelope(
      await req("PATCH", `/contacts/${foreign}`, { body: { fullName: "x" }, headers: { "If-Match": '"99"' } }),
      404,
      "NOT_FOUND",
    );
    expect((await req("GET", `/leads/${acme().leads.l1}`)).body.notes).toBeNull();
  });

  it("a lost-update race: two PATCHes with the same If-Match give exactly one 200 and one 412", async () => {
    for (const [path, a, b] of [
      [`/tickets/${acme().tickets.t1}`, { subject: "A" }, { subject: "B" }],
      [`/leads/${acme().leads.l1}`, { notes: "A" }, { notes: "B" }],
      [`/appointments/${acme().appointments.a1}`, { notes: "A" }, { notes: "B" }],
    ] as const) {
      const current = await req("GET", path);
      const etag = current.headers.get("etag")!;
      const [x, y] = await Promise.all([
        req("PATCH", path, { body: a, headers: { "If-Match": etag } }),
        req("PATCH", path, { body: b, headers: { "If-Match": etag } }),
      ]);
      expect([x.status, y.status].sort()).toEqual([200, 412]);
      const after = await req("GET", path);
      expect(after.body.version).toBe(current.body.version + 1);
      const winner = x.status === 200 ? x : y;
      expect(after.body).toEqual(winner.body);
    }
  });

  it("a comment adds one version and honours If-Match; PUT with If-Match and no object is 412", async () => {
    const t = await req("GET", `/tickets/${acme().tickets.t1}`);
    const c = await req("POST", `/tickets/${t.body.id}/comments`, {
      body: { body: "More" },
      headers: { "If-Match": t.headers.get("etag")! },
    });
    expect(c.status).toBe(201);
    expect(c.body.version).toBe(t.body.version + 1);
    expect(c.headers.get("etag")).toBe(`"${t.body.version + 1}"`);
    const stale = await req("POST", `/tickets/${t.body.id}/comments`, {
      body: { body: "Stale" },
      headers: { "If-Match": t.headers.get("etag")! },
    });
    expectEnvelope(stale, 412, "PRECONDITION_FAILED");
    expect((await req("GET", `/tickets/${t.body.id}`)).body.comments.map((x: any) => x.body)).not.toContain("Stale");
    const none = await req("PUT", `/contacts/by-external-id/${uniq("nobody")}`, {
      body: { phone: phone() },
      headers: { "If-Match": "*" },
    });
    expect(expectEnvelope(none, 412, "PRECONDITION_FAILED").details.currentVersion).toBeNull();
    // A ticket created with its first comment is at version 1.
    const created = await req("POST", "/tickets", {
      body: { subject: "New", customerId: acme().contacts.bea, comment: "hello" },
    });
    expect(created.body).toMatchObject({ version: 1 });
    expect((await req("GET", `/tickets/${created.body.id}`)).body.version).toBe(1);
  });
});

describe("GET one", () => {
  it("contacts, tickets and appointments by id, with the read scope, 404 for foreign, deleted or unknown", async () => {
    for (const path of [
      `/contacts/${acme().contacts.bea}`,
      `/tickets/${acme().tickets.t1}`,
      `/appointments/${acme().appointments.a1}`,
    ]) {
      const r = await req("GET", path, { key: key("acme", "reader") });
      expect(r.status).toBe(200);
      expect(r.headers.get("etag")).toBe(`"${r.body.version}"`);
    }
    expectEnvelope(await req("GET", `/contacts/${acme().contacts.gone}`), 404, "NOT_FOUND");
    expectEnvelope(await req("GET", `/contacts/${ids.tenants.other!.contacts.oscar}`), 404, "NOT_FOUND");
    expectEnvelope(await req("GET", `/appointments/${crypto.randomUUID()}`), 404, "NOT_FOUND");
    expectEnvelope(await req("GET", `/tickets/not-a-uuid`), 422, "VALIDATION_ERROR");
  });

  it("If-None-Match naming the version answers 304 without a body; another version answers 200", async () => {
    for (const path of [
      `/contacts/${acme().contacts.bea}`,
      `/leads/${acme().leads.l1}`,
      `/tickets/${acme().tickets.t1}`,
      `/appointments/${acme().appointments.a1}`,
    ]) {
      const r = await req("GET", path);
      const etag = r.headers.get("etag")!;
      const nm = await req("GET", path, { headers: { "If-None-Match": etag } });
      expect(nm.status).toBe(304);
      expect(nm.text).toBe("");
      expect(nm.headers.get("etag")).toBe(etag);
      expect((await req("GET", path, { headers: { "If-None-Match": `W/${etag}` } })).status).toBe(304);
      expect((await req("GET", path, { headers: { "If-None-Match": '"999999"' } })).status).toBe(200);
    }
  });
});

describe("batch upsert", () => {
  it("a batch of 100 mixes created, updated, unchanged and failed; a failed item leaves nothing; feed and totals are exact", async () => {
    const base = uniq("b");
    // 10 existing contacts, by a first batch.
    const seed = Array.from({ length: 10 }, (_, i) => ({
      externalId: `${base}-${i}`,
      phone: `+3462${String(base.length * 1000 + i).padStart(7, "0")}`,
      fullName: `S${i}`,
    }));
    const first = await req("POST", "/contacts/batch/upsert", { body: { items: seed } });
    expect(first.status).toBe(200);
    expect(first.body.results.map((r: any) => r.status)).toEqual(Array(10).fill("created"));
    const totalBefore = (await req("GET", "/contacts")).body.pagination.totalItems;
    await sequencePending(app.services.db.prisma);
    const feedBefore = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "ChangeLog" WHERE "type" = 'contact'`);

    const items: unknown[] = [];
    for (let i = 0; i < 100; i++) {
      if (i < 5)
        items.push({ ...seed[i], fullName: `U${i}` }); // updated
      else if (i < 10)
        items.push(seed[i]); // unchanged
      else if (i === 10)
        items.push({ externalId: `${base}-bad`, phone: "not a phone" }); // failed: 422
      else if (i === 11)
        items.push({ externalId: `${base}-dup`, phone: "+34600000001" }); // failed: 409 phone
      else if (i === 12)
        items.push({ externalId: `${base}-0`, phone: seed[0]!.phone }); // failed: duplicate in the batch
      else if (i === 13)
        items.push({ phone: phone() }); // failed: no externalId
      else
        items.push({
          externalId: `${base}-new-${i}`,
          phone: `+3463${String(base.length * 1000 + i).padStart(7, "0")}`,
        }); // created
    }
    const r = await req("POST", "/contacts/batch/upsert", { body: { items } });
    expect(r.status).toBe(200);
    const results = r.body.results;
    expect(results.map((x: any) => x.index)).toEqual([...Array(100).keys()]);
    expect(results.slice(0, 5).map((x: any) => x.status)).toEqual(Array(5).fill("updated"));
    expect(results.slice(5, 10).map((x: any) => x.status)).toEqual(Array(5).fill("unchanged"));
    expect(results[10]).toMatchObject({ status: "failed", id: null, item: null, error: { error: "VALIDATION_ERROR" } });
    expect(results[11]).toMatchObject({
      status: "failed",
      error: { error: "ALREADY_EXISTS", details: { field: "phone", existingId: acme().contacts.bea } },
    });
    expect(results[12]).toMatchObject({ status: "failed", error: { error: "VALIDATION_ERROR" } });
    expect(results[13]).toMatchObject({ status: "failed", error: { error: "VALIDATION_ERROR" } });
    expect(
      results.slice(14).every((x: any) => x.status === "created" && x.item.version === 1 && x.error === null),
    ).toBe(true);
    expect(results[0].item).toMatchObject({ fullName: "U0", version: 2 });
    expect(results[5].item).toMatchObject({ fullName: "S5", version: 1 });
    expect(
      (await sql(`SELECT 1 FROM "Contact" WHERE "externalId" IN ($1, $2)`, [`${base}-bad`, `${base}-dup`])).length,
    ).toBe(0);
    // Totals: exactly the 86 created.
    expect((await req("GET", "/contacts")).body.pagination.totalItems).toBe(totalBefore + 86);
    // The feed: one change per created or updated contact, none for the unchanged.
    await sequencePending(app.services.db.prisma);
    const feedAfter = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "ChangeLog" WHERE "type" = 'contact'`);
    expect(feedAfter[0]!.n - feedBefore[0]!.n).toBe(86);
    const unchanged = await sql<{ v: number }>(`SELECT "version" AS v FROM "Contact" WHERE "externalId" = $1`, [
      `${base}-5`,
    ]);
    expect(unchanged[0]!.v).toBe(1);
  });

  it("more than 100 items, or none, is 422 before anything is written; the batch is one request against the quota", async () => {
    const items = Array.from({ length: 101 }, (_, i) => ({ externalId: uniq(`over-${i}`), customerName: "X" }));
    expectEnvelope(await req("POST", "/leads/batch/upsert", { body: { items } }), 422, "VALIDATION_ERROR");
    expectEnvelope(await req("POST", "/leads/batch/upsert", { body: { items: [] } }), 422, "VALIDATION_ERROR");
    expect((await sql(`SELECT 1 FROM "Lead" WHERE "externalId" LIKE 'over-%'`)).length).toBe(0);
    const r = await req("POST", "/leads/batch/upsert", { body: { items: items.slice(0, 3) } });
    const remaining = Number(r.headers.get("x-ratelimit-remaining"));
    const r2 = await req("POST", "/leads/batch/upsert", { body: { items: items.slice(3, 6) } });
    expect(Number(r2.headers.get("x-ratelimit-remaining"))).toBe(remaining - 1);
  });

  it("concurrent batches sharing external ids in different orders all answer 200 and create each object once", async () => {
    const exts = Array.from({ length: 6 }, (_, i) => uniq(`ov${i}`));
    const items = exts.map((externalId, i) => ({ externalId, customerName: `Overlap ${i}` }));
    const answers = await Promise.all(
      [items, [...items].reverse(), items, [...items].reverse()].map((batch) =>
        req("POST", "/leads/batch/upsert", { body: { items: batch } }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const statuses = answers.flatMap((a) => a.body.results.map((r: any) => r.status));
    expect(statuses.filter((x: string) => x === "created")).toHaveLength(6);
    expect(statuses.every((x: string) => x === "created" || x === "unchanged")).toBe(true);
    expect(
      (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "Lead" WHERE "externalId" = ANY($1)`, [exts]))[0]!.n,
    ).toBe(6);
  });

  it("contacts: concurrent batches sharing external ids (the bulk create, with and without a key) create each contact once", async () => {
    // Without an Idempotency-Key a contact batch's bulk create commits on its own, before any
    // transaction; with one it runs inside the key's transaction. Both race here.
    const exts = Array.from({ length: 6 }, (_, i) => uniq(`cov${i}`));
    const items = exts.map((externalId, i) => ({ externalId, phone: phone(), fullName: `Overlap ${i}` }));
    const batches = [items, [...items].reverse(), items, [...items].reverse()];
    const answers = await Promise.all(
      batches.map((batch, i) =>
        req("POST", "/contacts/batch/upsert", {
          body: { items: batch },
          headers: i % 2 ? { "Idempotency-Key": uniq("cov") } : {},
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    const statuses = answers.flatMap((a) => a.body.results.map((r: any) => r.status));
    expect(statuses.filter((x: string) => x === "created")).toHaveLength(6);
    expect(statuses.every((x: string) => x === "created" || x === "unchanged")).toBe(true);
    expect(
      (await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "Contact" WHERE "externalId" = ANY($1)`, [exts]))[0]!.n,
    ).toBe(6);
    // The feed has each once.
    await sequencePending(app.services.db.prisma);
    const ids = answers[0]!.body.results.map((r: any) => r.id);
    expect(
      (
        await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "ChangeLog" WHERE "type" = 'contact' AND "objectId" = ANY($1::uuid[])`,
          [ids],
        )
      )[0]!.n,
    ).toBe(6);
  });

  it("contacts: Idempotency-Key replays a batch whose bulk create ran in the key's transaction", async () => {
    const headers = { "Idempotency-Key": uniq("cbatch") };
    const items = [
      { externalId: uniq("ck1"), phone: phone() },
      { externalId: uniq("ck2"), phone: "not a phone" },
    ];
    const a = await req("POST", "/contacts/batch/upsert", { body: { items }, headers });
    const b = await req("POST", "/contacts/batch/upsert", { body: { items }, headers });
    expect(a.status).toBe(200);
    expect(a.body.results.map((r: any) => r.status)).toEqual(["created", "failed"]);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    expect((await sql(`SELECT 1 FROM "Contact" WHERE "externalId" = $1`, [items[0]!.externalId])).length).toBe(1);
  });

  it("Idempotency-Key replays the whole answer", async () => {
    const headers = { "Idempotency-Key": uniq("batch") };
    const items = [{ externalId: uniq("tk"), subject: "One", customerId: acme().contacts.bea }];
    const a = await req("POST", "/tickets/batch/upsert", { body: { items }, headers });
    const b = await req("POST", "/tickets/batch/upsert", { body: { items }, headers });
    expect(a.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(b.headers.get("idempotent-replayed")).toBe("true");
    expect(a.body.results[0].status).toBe("created");
  });
});

describe("the changes feed carries versions", () => {
  it("an update appears with its new version", async () => {
    const c = (await req("POST", "/contacts", { body: { phone: phone(), externalId: uniq("feed") } })).body;
    await req("PATCH", `/contacts/${c.id}`, { body: { fullName: "Fed" } });
    await sequencePending(app.services.db.prisma);
    let since: string | undefined;
    let found: any;
    for (let i = 0; i < 100 && !found; i++) {
      const page: Response = await req("GET", "/changes", { query: since ? { since } : {} });
      found = page.body.items.find((it: any) => it.id === c.id);
      if (!page.body.hasMore) break;
      since = page.body.nextSince;
    }
    expect(found?.data).toMatchObject({ version: 2, fullName: "Fed", externalId: c.externalId });
  });
});
