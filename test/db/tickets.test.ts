// Tickets through HTTP: GET/POST /public/v1/tickets, PATCH /public/v1/tickets/{ticket_id},
// POST /public/v1/tickets/{ticket_id}/comments.
// @topology pooler citus
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

let app: TestApp;
let ids: LoadResult;

const NOW = new Date("2026-12-01T10:00:00.000Z");
const TICKET_KEYS = [
  "assignedTo",
  "comments",
  "conversationId",
  "createdAt",
  "createdBy",
  "customerId",
  "externalId",
  "id",
  "leadId",
  "status",
  "subject",
  "updatedAt",
  "version",
].sort();
const COMMENT_KEYS = ["authorUserId", "body", "createdAt", "id"];

// Keys of the default fixture tenant plus narrower ones for the scope rules.
const apiKeys = [
  { ref: "full", owner: "ana", scopes: "all" as const },
  { ref: "bobkey", owner: "bob", scopes: "all" as const },
  { ref: "none", owner: "ana", scopes: [] },
  { ref: "readonly", owner: "ana", scopes: ["tenant:tickets.read"] },
  { ref: "manageonly", owner: "ana", scopes: ["tenant:tickets.manage"] },
  { ref: "leadsmanage", owner: "ana", scopes: ["tenant:leads.manage", "tenant:leads.read"] },
];

const links = (ref: string) => ({
  contacts: [
    { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: `bea@${ref}.test` },
    { ref: "carl", fullName: "Carl Diaz", phone: "+34600000002" },
    { ref: "gone", fullName: "Gone", phone: "+34600000003", deleted: true },
  ],
  conversations: [
    {
      ref: "c1",
      channel: "site",
      identity: { externalId: `web-${ref}-1`, name: "Bea", contact: "bea" },
      messages: [{ role: "user" as const, content: "Hi", createdAt: "2026-11-01T09:00:00Z" }],
    },
  ],
  leads: [{ ref: "l1", customerName: "Bea Soto", contact: "bea", createdAt: "2026-11-01T09:00:00Z" }],
});

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(
    fixture(
      tenant("acme", {
        apiKeys,
        ...links("acme"),
        tickets: [
          { ref: "open1", subject: "Leaking tap", createdBy: "ana", contact: "bea", createdAt: "2026-11-10T09:00:00Z" },
          {
            ref: "closed1",
            subject: "Old issue",
            status: "closed",
            createdBy: "ana",
            contact: "bea",
            createdAt: "2026-11-11T09:00:00Z",
            comments: [{ author: "ana", body: "Done", createdAt: "2026-11-11T10:00:00Z" }],
          },
          {
            ref: "resolved1",
            subject: "Keys",
            status: "resolved",
            createdBy: "bob",
            lead: "l1",
            createdAt: "2026-11-12T09:00:00Z",
          },
          {
            ref: "bobbed",
            subject: "Assigned to a non-assignable user",
            createdBy: "ana",
            assignedTo: "bob",
            conversation: "c1",
            createdAt: "2026-11-13T09:00:00Z",
          },
        ],
      }),
      // A tenant whose tickets are never changed: list filters, order and pagination.
      tenant("quiet", {
        ...links("quiet"),
        tickets: [
          {
            ref: "q1",
            subject: "q1",
            createdBy: "ana",
            contact: "bea",
            assignedTo: "ana",
            createdAt: "2026-11-01T09:00:00Z",
            comments: [
              { author: "bob", body: "third", createdAt: "2026-11-01T12:00:00Z" },
              { author: "ana", body: "first", createdAt: "2026-11-01T10:00:00Z" },
              { author: "ana", body: "second", createdAt: "2026-11-01T11:00:00Z" },
            ],
          },
          {
            ref: "q2",
            subject: "q2",
            status: "pending",
            createdBy: "ana",
            contact: "carl",
            createdAt: "2026-11-02T09:00:00Z",
          },
          {
            ref: "q3",
            subject: "q3",
            status: "closed",
            createdBy: "bob",
            lead: "l1",
            assignedTo: "ana",
            createdAt: "2026-11-03T09:00:00Z",
            comments: [
              { author: "ana", body: "tie-a", createdAt: "2026-11-03T10:00:00Z" },
              { author: "bob", body: "tie-b", createdAt: "2026-11-03T10:00:00Z" },
            ],
          },
          {
            ref: "q4",
            subject: "q4",
            status: "resolved",
            createdBy: "ana",
            conversation: "c1",
            createdAt: "2026-11-04T09:00:00Z",
          },
          {
            ref: "q5",
            subject: "q5",
            createdBy: "ana",
            contact: "bea",
            conversation: "c1",
            createdAt: "2026-11-05T09:00:00Z",
            comments: [{ author: "ana", body: "only", createdAt: "2026-11-05T10:00:00Z" }],
          },
          // Same createdAt as q5: newest-first ties are broken by id descending.
          { ref: "q6", subject: "q6", createdBy: "ana", contact: "carl", createdAt: "2026-11-05T09:00:00Z" },
        ],
      }),
      tenant("other", {
        ...links("other"),
        tickets: [
          { ref: "foreign", subject: "Theirs", createdBy: "ana", contact: "bea", createdAt: "2026-11-10T09:00:00Z" },
        ],
      }),
    ),
  );
});
afterAll(() => app.close());
beforeEach(() => app.setNow(NOW));

const acme = () => ids.tenants.acme!;
const quiet = () => ids.tenants.quiet!;
const other = () => ids.tenants.other!;
const key = (ref: string, t = acme()) => t.apiKeys[ref]!.key;

const counts = async () => ({
  tickets: await app.db.prisma.ticket.count(),
  comments: await app.db.prisma.ticketComment.count(),
});
async function expectNothingPersisted<T>(fn: () => Promise<T>): Promise<T> {
  const before = await counts();
  const out = await fn();
  expect(await counts()).toEqual(before);
  return out;
}
async function ticketRow(id: string) {
  return app.db.prisma.ticket.findFirstOrThrow({ where: { id }, include: { comments: true } });
}

function expectTicketShape(t: any) {
  expect(Object.keys(t).sort()).toEqual(TICKET_KEYS);
  expect(typeof t.id).toBe("string");
  expect(typeof t.subject).toBe("string");
  expect(["open", "pending", "resolved", "closed"]).toContain(t.status);
  expect(t.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(t.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(Array.isArray(t.comments)).toBe(true);
  for (const c of t.comments) {
    expect(Object.keys(c).sort()).toEqual(COMMENT_KEYS);
    expect(c.createdAt).toMatch(/Z$/);
  }
  const order = t.comments.map((c: any) => `${c.createdAt}|${c.id}`);
  expect(order).toEqual([...order].sort());
}

const post = (body: unknown, k = key("full"), headers: Record<string, string> = {}) =>
  app.request("POST", "/public/v1/tickets", { key: k, body, headers });
const patch = (id: string, body: unknown, k = key("full")) =>
  app.request("PATCH", `/public/v1/tickets/${id}`, { key: k, body });
const comment = (id: string, body: unknown, k = key("full"), headers: Record<string, string> = {}) =>
  app.request("POST", `/public/v1/tickets/${id}/comments`, { key: k, body, headers });
const list = (query: Record<string, string | number | undefined> = {}, k = key("full", quiet())) =>
  app.request("GET", "/public/v1/tickets", { key: k, query });

async function newTicket(extra: Record<string, unknown> = {}) {
  const r = await post({ subject: "Fixture ticket", customerId: acme().contacts.bea, ...extra });
  expect(r.status).toBe(201);
  return r.body;
}

describe("POST /public/v1/tickets", () => {
  it("creates an open ticket linked to a contact, created by the key owner, with an empty thread", async () => {
    const before = await counts();
    const r = await post({ subject: "Broken heater", customerId: acme().contacts.bea });
    expect(r.status).toBe(201);
    expectTicketShape(r.body);
    expect(r.body).toMatchObject({
      customerId: acme().contacts.bea,
      leadId: null,
      conversationId: null,
      subject: "Broken heater",
      status: "open",
      createdBy: acme().users.ana,
      assignedTo: null,
      createdAt: NOW.toISOString(),
      updatedAt: NOW.toISOString(),
      comments: [],
    });
    expect(await counts()).toEqual({ tickets: before.tickets + 1, comments: before.comments });
    const row = await ticketRow(r.body.id);
    expect(row.tenantId).toBe(acme().id);
    expect(row.createdById).toBe(acme().users.ana);
  });

  it("links a lead only, a conversation only, or all three", async () => {
    const a = await post({ subject: "Lead ticket", leadId: acme().leads.l1 });
    expect(a.status).toBe(201);
    expect(a.body).toMatchObject({ leadId: acme().leads.l1, customerId: null, conversationId: null });
    const b = await post({ subject: "Conversation ticket", conversationId: acme().conversations.c1 });
    expect(b.status).toBe(201);
    expect(b.body).toMatchObject({ conversationId: acme().conversations.c1, customerId: null, leadId: null });
    const c = await post({
      subject: "All three",
      customerId: acme().contacts.carl,
      leadId: acme().leads.l1,
      conversationId: acme().conversations.c1,
    });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({
      customerId: acme().contacts.carl,
      leadId: acme().leads.l1,
      conversationId: acme().conversations.c1,
    });
  });

  it("an optional comment becomes the first comment, authored by the key owner, in the same write", async () => {
    const before = await counts();
    const r = await post({
      subject: "With comment",
      customerId: acme().contacts.bea,
      comment: "Customer called twice",
    });
    expect(r.status).toBe(201);
    expectTicketShape(r.body);
    expect(r.body.comments).toHaveLength(1);
    expect(r.body.comments[0]).toMatchObject({
      authorUserId: acme().users.ana,
      body: "Customer called twice",
      createdAt: NOW.toISOString(),
    });
    expect(await counts()).toEqual({ tickets: before.tickets + 1, comments: before.comments + 1 });
  });

  it("createdBy and the first comment's author follow the key: bob's key → bob", async () => {
    const r = await post({ subject: "From bob", leadId: acme().leads.l1, comment: "bob here" }, key("bobkey"));
    expect(r.status).toBe(201);
    expect(r.body.createdBy).toBe(acme().users.bob);
    expect(r.body.comments[0].authorUserId).toBe(acme().users.bob);
  });

  it("assignedTo: an assignable user is accepted; a non-assignable user gives 404 with nothing persisted", async () => {
    const ok = await post({ subject: "Assigned", customerId: acme().contacts.bea, assignedTo: acme().users.ana });
    expect(ok.status).toBe(201);
    expect(ok.body.assignedTo).toBe(acme().users.ana);
    await expectNothingPersisted(async () => {
      expectEnvelope(
        await post({ subject: "To bob", customerId: acme().contacts.bea, assignedTo: acme().users.bob, comment: "x" }),
        404,
        "NOT_FOUND",
      );
    });
  });

  it("assignedTo null means unassigned", async () => {
    const r = await post({ subject: "Unassigned", customerId: acme().contacts.bea, assignedTo: null });
    expect(r.status).toBe(201);
    expect(r.body.assignedTo).toBeNull();
  });

  it("no linked entity → 422 VALIDATION_ERROR, nothing persisted", async () => {
    await expectNothingPersisted(async () => {
      expectEnvelope(await post({ subject: "Orphan" }), 422, "VALIDATION_ERROR");
      expectEnvelope(
        await post({ subject: "Orphan", comment: "hello", assignedTo: acme().users.ana }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(
        await post({ subject: "Orphan", customerId: null, leadId: null, conversationId: null }),
        422,
        "VALIDATION_ERROR",
      );
    });
  });

  it("subject bounds: 0 and 501 characters → 422; 1 and 500 are accepted", async () => {
    await expectNothingPersisted(async () => {
      expectEnvelope(await post({ subject: "", customerId: acme().contacts.bea }), 422, "VALIDATION_ERROR");
      expectEnvelope(
        await post({ subject: "x".repeat(501), customerId: acme().contacts.bea }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(await post({ customerId: acme().contacts.bea }), 422, "VALIDATION_ERROR");
      expectEnvelope(await post({ subject: 42, customerId: acme().contacts.bea }), 422, "VALIDATION_ERROR");
      expectEnvelope(await post({ subject: null, customerId: acme().contacts.bea }), 422, "VALIDATION_ERROR");
    });
    expect((await post({ subject: "x", customerId: acme().contacts.bea })).status).toBe(201);
    const long = await post({ subject: "x".repeat(500), customerId: acme().contacts.bea });
    expect(long.status).toBe(201);
    expect(long.body.subject).toHaveLength(500);
    // Characters, not UTF-16 units: 500 emoji are 500 characters.
    expect((await post({ subject: "🎫".repeat(500), customerId: acme().contacts.bea })).status).toBe(201);
    expectEnvelope(await post({ subject: "🎫".repeat(501), customerId: acme().contacts.bea }), 422, "VALIDATION_ERROR");
  });

  it("comment bounds: empty and 10001 characters → 422; 10000 accepted", async () => {
    await expectNothingPersisted(async () => {
      expectEnvelope(
        await post({ subject: "s", customerId: acme().contacts.bea, comment: "" }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(
        await post({ subject: "s", customerId: acme().contacts.bea, comment: "y".repeat(10_001) }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(
        await post({ subject: "s", customerId: acme().contacts.bea, comment: 7 }),
        422,
        "VALIDATION_ERROR",
      );
    });
    const r = await post({ subject: "s", customerId: acme().contacts.bea, comment: "y".repeat(10_000) });
    expect(r.status).toBe(201);
    expect(r.body.comments[0].body).toHaveLength(10_000);
  });

  it("unknown fields (status, createdBy, comments, anything) → 422, nothing persisted", async () => {
    await expectNothingPersisted(async () => {
      for (const extra of [
        { status: "open" },
        { status: "closed" },
        { createdBy: acme().users.bob },
        { comments: [] },
        { priority: "high" },
      ]) {
        const r = await post({ subject: "s", customerId: acme().contacts.bea, ...extra });
        const env = expectEnvelope(r, 422, "VALIDATION_ERROR");
        expect(JSON.stringify(env.details)).toContain(Object.keys(extra)[0]);
      }
    });
  });

  it("malformed ids → 422, nothing persisted", async () => {
    await expectNothingPersisted(async () => {
      for (const field of ["customerId", "leadId", "conversationId", "assignedTo"]) {
        const body: Record<string, unknown> = { subject: "s", customerId: acme().contacts.bea, [field]: "not-a-uuid" };
        expectEnvelope(await post(body), 422, "VALIDATION_ERROR");
      }
    });
  });

  it("malformed JSON, a non-object body and a wrong Content-Type → 422, nothing persisted", async () => {
    await expectNothingPersisted(async () => {
      const k = key("full");
      expectEnvelope(
        await app.request("POST", "/public/v1/tickets", {
          key: k,
          raw: '{"subject": "x",',
          headers: { "Content-Type": "application/json" },
        }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(
        await app.request("POST", "/public/v1/tickets", {
          key: k,
          raw: "[1,2]",
          headers: { "Content-Type": "application/json" },
        }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(
        await app.request("POST", "/public/v1/tickets", {
          key: k,
          raw: JSON.stringify({ subject: "s", customerId: acme().contacts.bea }),
          headers: { "Content-Type": "text/plain" },
        }),
        422,
        "VALIDATION_ERROR",
      );
    });
  });

  it("tenant isolation: each foreign body id gives 404 exactly like a random one, nothing persisted", async () => {
    const o = other();
    const cases: [string, string][] = [
      ["customerId", o.contacts.bea!],
      ["leadId", o.leads.l1!],
      ["conversationId", o.conversations.c1!],
      ["assignedTo", o.users.ana!],
    ];
    await expectNothingPersisted(async () => {
      for (const [field, foreignId] of cases) {
        const base = field === "assignedTo" ? { customerId: acme().contacts.bea } : {};
        const foreign = await post({ subject: "s", ...base, [field]: foreignId, comment: "c" });
        const random = await post({ subject: "s", ...base, [field]: randomUuid(), comment: "c" });
        const a = expectEnvelope(foreign, 404, "NOT_FOUND");
        const b = expectEnvelope(random, 404, "NOT_FOUND");
        expect(a.message).toBe(b.message);
        expect(a.details).toEqual(b.details);
      }
      // One good id does not excuse a bad one.
      expectEnvelope(
        await post({ subject: "s", customerId: acme().contacts.bea, leadId: o.leads.l1 }),
        404,
        "NOT_FOUND",
      );
      expectEnvelope(
        await post({ subject: "s", leadId: acme().leads.l1, conversationId: randomUuid() }),
        404,
        "NOT_FOUND",
      );
    });
  });

  it("a soft-deleted contact is not a valid customerId (404)", async () => {
    await expectNothingPersisted(async () => {
      expectEnvelope(await post({ subject: "s", customerId: acme().contacts.gone }), 404, "NOT_FOUND");
    });
  });

  it("scopes: no scope, read-only and another resource's manage scope → 403 PERMISSION_DENIED; manage alone suffices", async () => {
    await expectNothingPersisted(async () => {
      for (const ref of ["none", "readonly", "leadsmanage"]) {
        const r = await post({ subject: "s", customerId: acme().contacts.bea }, key(ref));
        expect(expectEnvelope(r, 403, "PERMISSION_DENIED").details).toMatchObject({
          requiredScope: "tenant:tickets.manage",
        });
      }
      // The scope is checked before the body (403 before 422).
      expectEnvelope(
        await app.request("POST", "/public/v1/tickets", {
          key: key("none"),
          raw: "{oops",
          headers: { "Content-Type": "application/json" },
        }),
        403,
        "PERMISSION_DENIED",
      );
    });
    expect((await post({ subject: "s", customerId: acme().contacts.bea }, key("manageonly"))).status).toBe(201);
  });

  it("401 without a key", async () => {
    await expectNothingPersisted(async () => {
      expectEnvelope(
        await app.request("POST", "/public/v1/tickets", { body: { subject: "s", customerId: acme().contacts.bea } }),
        401,
        "INVALID_CREDENTIALS",
      );
    });
  });

  describe("Idempotency-Key", () => {
    it("a repeat with the same key and body replays the original response without a second ticket", async () => {
      const body = { subject: "Idem", customerId: acme().contacts.bea, comment: "first" };
      const headers = { "Idempotency-Key": "tickets-create-1" };
      const before = await counts();
      const first = await post(body, key("full"), headers);
      expect(first.status).toBe(201);
      app.setNow(new Date(NOW.getTime() + 60_000));
      // Same body, keys in another order.
      const again = await post(
        { comment: "first", customerId: acme().contacts.bea, subject: "Idem" },
        key("full"),
        headers,
      );
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await counts()).toEqual({ tickets: before.tickets + 1, comments: before.comments + 1 });
    });

    it("the same key with a different body → 422 IDEMPOTENCY_KEY_REUSE_MISMATCH, nothing persisted", async () => {
      const headers = { "Idempotency-Key": "tickets-create-2" };
      expect((await post({ subject: "A", customerId: acme().contacts.bea }, key("full"), headers)).status).toBe(201);
      await expectNothingPersisted(async () => {
        expectEnvelope(
          await post({ subject: "B", customerId: acme().contacts.bea }, key("full"), headers),
          422,
          "IDEMPOTENCY_KEY_REUSE_MISMATCH",
        );
      });
    });

    it("keys are per API key: another key with the same Idempotency-Key creates its own ticket", async () => {
      const headers = { "Idempotency-Key": "tickets-create-3" };
      const body = { subject: "Per key", customerId: acme().contacts.bea };
      const a = await post(body, key("full"), headers);
      const b = await post(body, key("bobkey"), headers);
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.body.id).not.toBe(a.body.id);
      expect(b.body.createdBy).toBe(acme().users.bob);
    });

    it("a failed create is not stored under its key: a corrected retry with the same key runs", async () => {
      const headers = { "Idempotency-Key": "tickets-create-4" };
      await expectNothingPersisted(async () => {
        expectEnvelope(await post({ subject: "s", customerId: randomUuid() }, key("full"), headers), 404, "NOT_FOUND");
      });
      const ok = await post({ subject: "s", customerId: acme().contacts.bea }, key("full"), headers);
      expect(ok.status).toBe(201);
    });
  });
});

describe("PATCH /public/v1/tickets/{ticket_id}", () => {
  it("sets every status value, advancing updatedAt, keeping the rest", async () => {
    const t = await newTicket({ comment: "note" });
    let at = NOW.getTime();
    for (const status of ["pending", "resolved", "closed", "open", "closed"]) {
      at += 60_000;
      app.setNow(new Date(at));
      const r = await patch(t.id, { status });
      expect(r.status).toBe(200);
      expectTicketShape(r.body);
      expect(r.body).toMatchObject({
        id: t.id,
        status,
        subject: t.subject,
        createdAt: t.createdAt,
        updatedAt: new Date(at).toISOString(),
      });
      expect(r.body.comments).toEqual(t.comments);
    }
    expect((await ticketRow(t.id)).status).toBe("closed");
  });

  it("status outside open/pending/resolved/closed → 422, no change", async () => {
    const t = await newTicket();
    for (const status of ["bogus", "OPEN", "", null, 1])
      expectEnvelope(await patch(t.id, { status }), 422, "VALIDATION_ERROR");
    const row = await ticketRow(t.id);
    expect(row.status).toBe("open");
    expect(row.updatedAt.toISOString()).toBe(t.updatedAt);
  });

  it("subject: changed within 1–500; 0 or 501 characters or null → 422 with no change", async () => {
    const t = await newTicket();
    for (const subject of ["", "x".repeat(501), null])
      expectEnvelope(await patch(t.id, { subject }), 422, "VALIDATION_ERROR");
    expect((await ticketRow(t.id)).subject).toBe(t.subject);
    app.setNow(new Date(NOW.getTime() + 1000));
    const r = await patch(t.id, { subject: "y".repeat(500) });
    expect(r.status).toBe(200);
    expect(r.body.subject).toBe("y".repeat(500));
    expect(r.body.updatedAt).toBe(new Date(NOW.getTime() + 1000).toISOString());
  });

  it("assignedTo: an assignable user, then null unassigns", async () => {
    const t = await newTicket();
    const a = await patch(t.id, { assignedTo: acme().users.ana });
    expect(a.status).toBe(200);
    expect(a.body.assignedTo).toBe(acme().users.ana);
    const b = await patch(t.id, { assignedTo: null });
    expect(b.status).toBe(200);
    expect(b.body.assignedTo).toBeNull();
    expect((await ticketRow(t.id)).assignedToId).toBeNull();
  });

  it("assignedTo a non-assignable, foreign or unknown user → 404 and nothing changes (not even the other fields)", async () => {
    const t = await newTicket({ assignedTo: acme().users.ana });
    app.setNow(new Date(NOW.getTime() + 5000));
    const foreign = expectEnvelope(
      await patch(t.id, { assignedTo: other().users.ana, status: "closed" }),
      404,
      "NOT_FOUND",
    );
    const random = expectEnvelope(await patch(t.id, { assignedTo: randomUuid(), status: "closed" }), 404, "NOT_FOUND");
    expectEnvelope(
      await patch(t.id, { assignedTo: acme().users.bob, status: "closed", subject: "changed" }),
      404,
      "NOT_FOUND",
    );
    expect(foreign.message).toBe(random.message);
    const row = await ticketRow(t.id);
    expect(row.assignedToId).toBe(acme().users.ana);
    expect(row.status).toBe("open");
    expect(row.subject).toBe(t.subject);
    expect(row.updatedAt.toISOString()).toBe(t.updatedAt);
  });

  it("a ticket already assigned to a non-assignable user keeps it on other changes; re-sending that user gives 404", async () => {
    const id = acme().tickets.bobbed!;
    expectEnvelope(await patch(id, { assignedTo: acme().users.bob }), 404, "NOT_FOUND");
    const r = await patch(id, { status: "pending" });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      status: "pending",
      assignedTo: acme().users.bob,
      conversationId: acme().conversations.c1,
    });
  });

  it("several fields at once", async () => {
    const t = await newTicket();
    const r = await patch(t.id, { status: "pending", subject: "Renamed", assignedTo: acme().users.ana });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: "pending", subject: "Renamed", assignedTo: acme().users.ana });
  });

  it("{} returns the ticket unchanged (updatedAt too)", async () => {
    const t = await newTicket({ comment: "x" });
    app.setNow(new Date(NOW.getTime() + 3_600_000));
    const r = await patch(t.id, {});
    expect(r.status).toBe(200);
    expect(r.body).toEqual(t);
    expect((await ticketRow(t.id)).updatedAt.toISOString()).toBe(t.updatedAt);
  });

  it("unknown fields (createdBy, customerId, comments, comment, ...) → 422, no change", async () => {
    const t = await newTicket();
    for (const extra of [
      { createdBy: acme().users.bob },
      { customerId: acme().contacts.carl },
      { comments: [] },
      { comment: "hi" },
      { foo: 1 },
    ]) {
      expectEnvelope(await patch(t.id, { status: "closed", ...extra }), 422, "VALIDATION_ERROR");
    }
    const row = await ticketRow(t.id);
    expect(row.status).toBe("open");
    expect(row.customerId).toBe(acme().contacts.bea);
  });

  it("malformed JSON → 422; malformed assignedTo or ticket_id → 422", async () => {
    const t = await newTicket();
    expectEnvelope(
      await app.request("PATCH", `/public/v1/tickets/${t.id}`, {
        key: key("full"),
        raw: "{status:",
        headers: { "Content-Type": "application/json" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(await patch(t.id, { assignedTo: "nope" }), 422, "VALIDATION_ERROR");
    expectEnvelope(await patch("not-a-uuid", { status: "closed" }), 422, "VALIDATION_ERROR");
    expect((await ticketRow(t.id)).status).toBe("open");
  });

  it("an unknown or foreign ticket → 404 with no change (foreign looks exactly like unknown)", async () => {
    const foreignId = other().tickets.foreign!;
    const before = await ticketRow(foreignId);
    const a = expectEnvelope(await patch(foreignId, { status: "closed", subject: "hijack" }), 404, "NOT_FOUND");
    const b = expectEnvelope(await patch(randomUuid(), { status: "closed", subject: "hijack" }), 404, "NOT_FOUND");
    expect(a.message).toBe(b.message);
    expect(a.details).toEqual(b.details);
    expectEnvelope(await patch(foreignId, {}), 404, "NOT_FOUND");
    expect(await ticketRow(foreignId)).toEqual(before);
  });

  it("scopes: none and read-only → 403 PERMISSION_DENIED, no change", async () => {
    const t = await newTicket();
    for (const ref of ["none", "readonly", "leadsmanage"])
      expectEnvelope(await patch(t.id, { status: "closed" }, key(ref)), 403, "PERMISSION_DENIED");
    expect((await ticketRow(t.id)).status).toBe("open");
  });
});

describe("POST /public/v1/tickets/{ticket_id}/comments", () => {
  it("appends a comment by the key owner, returns the refreshed ticket (201) and advances updatedAt", async () => {
    const t = await newTicket({ comment: "opening note" });
    const later = new Date(NOW.getTime() + 60_000);
    app.setNow(later);
    const before = await counts();
    const r = await comment(t.id, { body: "Follow-up" });
    expect(r.status).toBe(201);
    expectTicketShape(r.body);
    expect(r.body).toMatchObject({ id: t.id, status: "open", createdAt: t.createdAt, updatedAt: later.toISOString() });
    expect(r.body.comments.map((c: any) => c.body)).toEqual(["opening note", "Follow-up"]);
    expect(r.body.comments[1]).toMatchObject({ authorUserId: acme().users.ana, createdAt: later.toISOString() });
    expect(await counts()).toEqual({ tickets: before.tickets, comments: before.comments + 1 });
  });

  it("authorship follows the key: ana's key → ana, bob's key → bob", async () => {
    const t = await newTicket();
    app.setNow(new Date(NOW.getTime() + 1000));
    await comment(t.id, { body: "by ana" }, key("full"));
    app.setNow(new Date(NOW.getTime() + 2000));
    const r = await comment(t.id, { body: "by bob" }, key("bobkey"));
    expect(r.status).toBe(201);
    expect(r.body.comments.map((c: any) => [c.body, c.authorUserId])).toEqual([
      ["by ana", acme().users.ana],
      ["by bob", acme().users.bob],
    ]);
    expect(r.body.createdBy).toBe(acme().users.ana);
  });

  it("a closed ticket stays closed and a resolved ticket stays resolved", async () => {
    for (const ref of ["closed1", "resolved1"]) {
      const id = acme().tickets[ref]!;
      const { status } = await ticketRow(id);
      const r = await comment(id, { body: `still ${status}` });
      expect(r.status).toBe(201);
      expect(r.body.status).toBe(status);
      expect(r.body.comments.at(-1)).toMatchObject({ body: `still ${status}`, authorUserId: acme().users.ana });
      expect((await ticketRow(id)).status).toBe(status);
    }
    const closed = await ticketRow(acme().tickets.closed1!);
    expect(closed.comments).toHaveLength(2);
  });

  it("a pending ticket stays pending", async () => {
    const t = await newTicket();
    await patch(t.id, { status: "pending" });
    const r = await comment(t.id, { body: "hello" });
    expect(r.status).toBe(201);
    expect(r.body.status).toBe("pending");
  });

  it("body bounds: missing, empty, 10001 characters, wrong type → 422 with nothing persisted; 10000 accepted", async () => {
    const t = await newTicket();
    await expectNothingPersisted(async () => {
      for (const b of [{}, { body: "" }, { body: "z".repeat(10_001) }, { body: null }, { body: 5 }])
        expectEnvelope(await comment(t.id, b), 422, "VALIDATION_ERROR");
    });
    const r = await comment(t.id, { body: "z".repeat(10_000) });
    expect(r.status).toBe(201);
    expect(r.body.comments[0].body).toHaveLength(10_000);
  });

  it("unknown fields (authorUserId, status, ...) → 422, nothing persisted", async () => {
    const t = await newTicket();
    await expectNothingPersisted(async () => {
      for (const extra of [
        { authorUserId: acme().users.bob },
        { status: "open" },
        { createdAt: "2026-01-01T00:00:00Z" },
      ])
        expectEnvelope(await comment(t.id, { body: "x", ...extra }), 422, "VALIDATION_ERROR");
    });
  });

  it("malformed JSON → 422; malformed ticket_id → 422; nothing persisted", async () => {
    const t = await newTicket();
    await expectNothingPersisted(async () => {
      expectEnvelope(
        await app.request("POST", `/public/v1/tickets/${t.id}/comments`, {
          key: key("full"),
          raw: '{"body": ',
          headers: { "Content-Type": "application/json" },
        }),
        422,
        "VALIDATION_ERROR",
      );
      expectEnvelope(await comment("123", { body: "x" }), 422, "VALIDATION_ERROR");
    });
  });

  it("an unknown or foreign ticket → 404 with nothing persisted (foreign looks like unknown)", async () => {
    const foreignId = other().tickets.foreign!;
    const before = await ticketRow(foreignId);
    await expectNothingPersisted(async () => {
      const a = expectEnvelope(await comment(foreignId, { body: "sneaky" }), 404, "NOT_FOUND");
      const b = expectEnvelope(await comment(randomUuid(), { body: "sneaky" }), 404, "NOT_FOUND");
      expect(a.message).toBe(b.message);
      expect(a.details).toEqual(b.details);
    });
    expect(await ticketRow(foreignId)).toEqual(before);
  });

  it("scopes: none and read-only → 403 PERMISSION_DENIED, nothing persisted", async () => {
    const t = await newTicket();
    await expectNothingPersisted(async () => {
      for (const ref of ["none", "readonly", "leadsmanage"])
        expectEnvelope(await comment(t.id, { body: "x" }, key(ref)), 403, "PERMISSION_DENIED");
    });
  });

  describe("Idempotency-Key", () => {
    it("a repeat with the same key and body replays without a second comment", async () => {
      const t = await newTicket();
      const headers = { "Idempotency-Key": "ticket-comment-1" };
      const first = await comment(t.id, { body: "once" }, key("full"), headers);
      expect(first.status).toBe(201);
      const before = await counts();
      app.setNow(new Date(NOW.getTime() + 60_000));
      const again = await comment(t.id, { body: "once" }, key("full"), headers);
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      expect(await counts()).toEqual(before);
      expect((await ticketRow(t.id)).comments).toHaveLength(1);
    });

    it("the same key with a different body, or on another ticket → 422 IDEMPOTENCY_KEY_REUSE_MISMATCH, nothing persisted", async () => {
      const t = await newTicket();
      const t2 = await newTicket();
      const headers = { "Idempotency-Key": "ticket-comment-2" };
      expect((await comment(t.id, { body: "one" }, key("full"), headers)).status).toBe(201);
      await expectNothingPersisted(async () => {
        expectEnvelope(
          await comment(t.id, { body: "two" }, key("full"), headers),
          422,
          "IDEMPOTENCY_KEY_REUSE_MISMATCH",
        );
        expectEnvelope(
          await comment(t2.id, { body: "one" }, key("full"), headers),
          422,
          "IDEMPOTENCY_KEY_REUSE_MISMATCH",
        );
      });
    });

    it("a 404 is not stored under its key", async () => {
      const t = await newTicket();
      const headers = { "Idempotency-Key": "ticket-comment-3" };
      expectEnvelope(await comment(other().tickets.foreign!, { body: "x" }, key("full"), headers), 404, "NOT_FOUND");
      expect((await comment(t.id, { body: "x" }, key("full"), headers)).status).toBe(201);
    });
  });
});

describe("GET /public/v1/tickets", () => {
  const q = (ref: string) => quiet().tickets[ref]!;
  // q5 and q6 share createdAt: the larger id comes first.
  const tieOrder = () => [q("q5"), q("q6")].sort().reverse();
  const newestFirst = () => [...tieOrder(), q("q4"), q("q3"), q("q2"), q("q1")];

  it("lists the tenant's tickets newest first with the envelope and embedded threads oldest first", async () => {
    const r = await list();
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["items", "nextCursor", "pagination", "stableBefore", "total"]);
    expect(r.body.total).toBe(6);
    expect(r.body.pagination).toEqual({
      page: 1,
      pageSize: 50,
      totalItems: 6,
      totalPages: 1,
      hasNext: false,
      hasPrev: false,
    });
    expect(r.body.items.map((t: any) => t.id)).toEqual(newestFirst());
    r.body.items.forEach(expectTicketShape);
    const q1 = r.body.items.find((t: any) => t.id === q("q1"));
    expect(q1).toMatchObject({
      subject: "q1",
      status: "open",
      customerId: quiet().contacts.bea,
      leadId: null,
      conversationId: null,
      createdBy: quiet().users.ana,
      assignedTo: quiet().users.ana,
      createdAt: "2026-11-01T09:00:00.000Z",
      // Loaded with its thread, in one transaction: still version 1 (row_version), updatedAt as loaded.
      updatedAt: "2026-11-01T09:00:00.000Z",
      externalId: null,
      version: 1,
    });
    expect(q1.comments.map((c: any) => [c.body, c.authorUserId])).toEqual([
      ["first", quiet().users.ana],
      ["second", quiet().users.ana],
      ["third", quiet().users.bob],
    ]);
    const q3 = r.body.items.find((t: any) => t.id === q("q3"));
    expect(q3.comments.map((c: any) => c.id)).toEqual(q3.comments.map((c: any) => c.id).sort());
    expect(r.body.items.find((t: any) => t.id === q("q2")).comments).toEqual([]);
  });

  it("never shows another tenant's tickets", async () => {
    const r = await list({}, key("full", other()));
    expect(r.status).toBe(200);
    expect(r.body.items.map((t: any) => t.id)).toEqual([other().tickets.foreign]);
  });

  it("filters by status; a value that is not a status matches nothing (200, empty)", async () => {
    const closed = await list({ status: "closed" });
    expect(closed.body.items.map((t: any) => t.id)).toEqual([q("q3")]);
    expect(closed.body.total).toBe(1);
    const open = await list({ status: "open" });
    expect(open.body.items.map((t: any) => t.id)).toEqual([...tieOrder(), q("q1")]);
    expect((await list({ status: "pending" })).body.items.map((t: any) => t.id)).toEqual([q("q2")]);
    expect((await list({ status: "resolved" })).body.items.map((t: any) => t.id)).toEqual([q("q4")]);
    for (const status of ["bogus", "OPEN", "open,closed"]) {
      const r = await list({ status });
      expect(r.status).toBe(200);
      expect(r.body.items).toEqual([]);
      expect(r.body.total).toBe(0);
      expect(r.body.pagination).toMatchObject({ totalItems: 0, totalPages: 0, hasNext: false, hasPrev: false });
    }
    // An empty value is dropped by the REST adapter: the same as no filter.
    expect((await list({ status: "" })).body.total).toBe(6);
  });

  it("filters by assignedTo; unknown, foreign or never-assigned users match nothing; malformed → 422", async () => {
    const r = await list({ assignedTo: quiet().users.ana });
    expect(r.body.items.map((t: any) => t.id)).toEqual([q("q3"), q("q1")]);
    for (const assignedTo of [quiet().users.bob, other().users.ana, randomUuid()]) {
      const e = await list({ assignedTo });
      expect(e.status).toBe(200);
      expect(e.body).toMatchObject({ items: [], total: 0 });
    }
    expectEnvelope(await list({ assignedTo: "ana" }), 422, "VALIDATION_ERROR");
  });

  it("filters by customerId; unknown or foreign contacts match nothing; malformed → 422", async () => {
    const r = await list({ customerId: quiet().contacts.bea });
    expect(r.body.items.map((t: any) => t.id)).toEqual([q("q5"), q("q1")]);
    for (const customerId of [other().contacts.bea, randomUuid(), quiet().contacts.gone]) {
      const e = await list({ customerId });
      expect(e.status).toBe(200);
      expect(e.body).toMatchObject({ items: [], total: 0 });
    }
    expectEnvelope(await list({ customerId: "xyz" }), 422, "VALIDATION_ERROR");
  });

  it("combines filters", async () => {
    expect((await list({ status: "open", customerId: quiet().contacts.bea })).body.items.map((t: any) => t.id)).toEqual(
      [q("q5"), q("q1")],
    );
    expect((await list({ status: "closed", assignedTo: quiet().users.ana })).body.items.map((t: any) => t.id)).toEqual([
      q("q3"),
    ]);
    expect((await list({ status: "pending", customerId: quiet().contacts.bea })).body.total).toBe(0);
  });

  it("ignores unknown query parameters", async () => {
    const r = await list({ foo: "bar" });
    expect(r.status).toBe(200);
    expect(r.body.total).toBe(6);
  });

  it("pagination: limit 1 and offsets walk the list; the page's threads are embedded", async () => {
    const seen: string[] = [];
    for (let offset = 0; offset < 6; offset++) {
      const r = await list({ limit: 1, offset });
      expect(r.status).toBe(200);
      expect(r.body.items).toHaveLength(1);
      expect(r.body.total).toBe(6);
      expect(r.body.pagination).toEqual({
        page: offset + 1,
        pageSize: 1,
        totalItems: 6,
        totalPages: 6,
        hasNext: offset < 5,
        hasPrev: offset > 0,
      });
      seen.push(r.body.items[0].id);
      if (r.body.items[0].id === q("q1"))
        expect(r.body.items[0].comments.map((c: any) => c.body)).toEqual(["first", "second", "third"]);
    }
    expect(seen).toEqual(newestFirst());
    const page2 = await list({ limit: 4, offset: 4 });
    expect(page2.body.items.map((t: any) => t.id)).toEqual([q("q2"), q("q1")]);
    expect(page2.body.pagination).toMatchObject({ page: 2, pageSize: 4, totalPages: 2, hasNext: false, hasPrev: true });
  });

  it("limit 200 is accepted; limit 0 and 201 → 422; non-integers → 422", async () => {
    const max = await list({ limit: 200 });
    expect(max.status).toBe(200);
    expect(max.body.items).toHaveLength(6);
    expect(max.body.pagination.pageSize).toBe(200);
    for (const limit of ["0", "201", "-1", "1.5", "abc", "1e2"])
      expectEnvelope(await list({ limit }), 422, "VALIDATION_ERROR");
    for (const offset of ["-1", "x", "2.5"]) expectEnvelope(await list({ offset }), 422, "VALIDATION_ERROR");
  });

  it("an offset past the end → 200 with no items and the real total", async () => {
    for (const offset of [6, 7, 1000]) {
      const r = await list({ offset });
      expect(r.status).toBe(200);
      expect(r.body.items).toEqual([]);
      expect(r.body.total).toBe(6);
      expect(r.body.pagination).toMatchObject({ totalItems: 6, hasNext: false, hasPrev: true });
    }
  });

  it("scopes: none and manage-only → 403 PERMISSION_DENIED; read-only works", async () => {
    for (const ref of ["none", "manageonly", "leadsmanage"])
      expectEnvelope(await list({}, key(ref)), 403, "PERMISSION_DENIED");
    expect((await list({}, key("readonly"))).status).toBe(200);
  });

  it("reflects writes: a new comment shows in the list's thread", async () => {
    const t = await newTicket({ subject: "Listed", comment: "a" });
    app.setNow(new Date(NOW.getTime() + 1000));
    await comment(t.id, { body: "b" });
    const r = await app.request("GET", "/public/v1/tickets", { key: key("full"), query: { limit: 200 } });
    const found = r.body.items.find((x: any) => x.id === t.id);
    expect(found.comments.map((c: any) => c.body)).toEqual(["a", "b"]);
    expect(found.updatedAt).toBe(new Date(NOW.getTime() + 1000).toISOString());
  });
});
