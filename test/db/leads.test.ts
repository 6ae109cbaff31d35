// Leads over HTTP: GET/POST /public/v1/leads, GET/PATCH /public/v1/leads/{lead_id}.
// @topology pooler citus
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult, TenantIds } from "../../server/admin/fixture.js";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const LEAD_KEYS = [
  "assignedOperatorId",
  "budget",
  "conversationId",
  "createdAt",
  "customerEmail",
  "customerId",
  "customerName",
  "customerPhone",
  "externalId",
  "id",
  "intent",
  "notes",
  "quality",
  "rooms",
  "source",
  "stageId",
  "updatedAt",
  "version",
  "zones",
].sort();
const PAGINATION_KEYS = ["hasNext", "hasPrev", "page", "pageSize", "totalItems", "totalPages"].sort();

let app: TestApp;
let ids: LoadResult;
let acme: TenantIds;
let other: TenantIds;
let list: TenantIds;
let KEY: string;

function acmeTenant() {
  const t = tenant("acme", {
    contacts: [
      { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@example.test", country: "ES" },
      { ref: "carl", fullName: "Carl Ortiz", phone: "+34600000002", email: "carl@example.test" },
      { ref: "ghost", fullName: "Gone", phone: "+34600000009", email: "ghost@example.test", deleted: true },
    ],
    conversations: [
      {
        ref: "c1",
        channel: "wa",
        identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
        messages: [{ role: "user", content: "Hi", createdAt: "2026-01-01T10:00:00Z" }],
      },
      { ref: "anon", channel: "site", identity: null },
      { ref: "unlinked", channel: "site", identity: { externalId: "visitor-7", name: "Visitor" } },
      { ref: "gone", channel: "site", identity: { externalId: "visitor-9", contact: "ghost" } },
    ],
    leads: [
      {
        ref: "l1",
        customerName: "Bea Soto",
        customerEmail: "bea@example.test",
        customerPhone: "+34600000001",
        contact: "bea",
        conversation: "c1",
        stage: "new",
        intent: "buy",
        quality: "hot",
        assignedTo: "ana",
        notes: "first",
        budget: { min: 100, max: 200 },
        zones: ["north"],
        rooms: 2,
        createdAt: "2026-01-01T08:00:00Z",
      },
    ],
  });
  t.apiKeys = [
    ...t.apiKeys!,
    { ref: "reader", owner: "ana", scopes: ["tenant:leads.read"] },
    { ref: "writer", owner: "ana", scopes: ["tenant:leads.manage"] },
    { ref: "contactsManage", owner: "ana", scopes: ["tenant:contacts.manage", "tenant:contacts.read"] },
  ];
  return t;
}

function otherTenant() {
  return tenant("other", {
    contacts: [{ ref: "bea", fullName: "Other Bea", phone: "+34600000001", email: "bea@example.test" }],
    conversations: [{ ref: "oc", channel: "wa", identity: { externalId: "34600000001", contact: "bea" } }],
    leads: [{ ref: "ol", customerName: "Other lead", quality: "cold", createdAt: "2026-01-05T00:00:00Z" }],
  });
}

/** A tenant used only for list tests: fixed leads, nothing created through the API. */
function listTenant() {
  return tenant("list", {
    contacts: [{ ref: "pat", fullName: "Pat", phone: "+34611111111" }],
    leads: [
      { ref: "a", customerName: "A", createdAt: "2026-03-01T00:00:00Z", contact: "pat" },
      { ref: "b", customerName: "B", createdAt: "2026-03-02T00:00:00Z" },
      { ref: "c", customerName: "C", createdAt: "2026-03-03T00:00:00Z", contact: "pat" },
      { ref: "d", customerName: "D", createdAt: "2026-03-04T00:00:00Z" },
      { ref: "e", customerName: "E", createdAt: "2026-03-05T00:00:00.500Z" },
    ],
  });
}

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(fixture(acmeTenant(), otherTenant(), listTenant()));
  acme = ids.tenants.acme!;
  other = ids.tenants.other!;
  list = ids.tenants.list!;
  KEY = acme.apiKeys.full!.key;
});
afterAll(() => app.close());
afterEach(() => app.setNow(undefined));

const post = (body: unknown, o: { key?: string; headers?: Record<string, string> } = {}) =>
  app.request("POST", "/public/v1/leads", { key: o.key ?? KEY, body, headers: o.headers });
const patch = (id: string, body: unknown, key = KEY) => app.request("PATCH", `/public/v1/leads/${id}`, { key, body });
const getLead = (id: string, key = KEY) => app.request("GET", `/public/v1/leads/${id}`, { key });
const listLeads = (query: Record<string, string | number | undefined> = {}, key = list.apiKeys.full!.key) =>
  app.request("GET", "/public/v1/leads", { key, query });
const leadCount = (t: TenantIds = acme) => app.db.prisma.lead.count({ where: { tenantId: t.id } });
const contactCount = (t: TenantIds = acme) => app.db.prisma.contact.count({ where: { tenantId: t.id } });
const leadRow = (id: string) => app.db.prisma.lead.findFirstOrThrow({ where: { id } });

/** Asserts a 4xx/5xx envelope and that the tenant's lead count did not move. */
async function expectRejected(call: () => Promise<any>, status: number, code: string, t: TenantIds = acme) {
  const before = await leadCount(t);
  const res = await call();
  expectEnvelope(res, status, code);
  expect(await leadCount(t)).toBe(before);
  return res;
}

// ---------------------------------------------------------------------------------------------------
describe("POST /leads: defaults and shape", () => {
  it("creates with defaults: source api, intent/quality unknown, zones [], default-entry stage, now", async () => {
    const now = new Date("2030-05-01T12:00:00.000Z");
    app.setNow(now);
    const before = await leadCount();
    const res = await post({ customerName: "Minimal" });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(LEAD_KEYS);
    expect(res.body).toMatchObject({
      customerName: "Minimal",
      customerId: null,
      conversationId: null,
      customerEmail: null,
      customerPhone: null,
      intent: "unknown",
      quality: "unknown",
      stageId: acme.stages.new,
      budget: null,
      zones: [],
      rooms: null,
      assignedOperatorId: null,
      source: "api",
      notes: null,
      createdAt: now.toISOString(),
      updatedAt: now.toISOString(),
    });
    expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(await leadCount()).toBe(before + 1);
    const row = await leadRow(res.body.id);
    expect(row.tenantId).toBe(acme.id);
    expect(row.source).toBe("api");
  });

  it("stores every given field and returns it; GET returns the same object", async () => {
    const res = await post({
      customerName: "Full Lead",
      customerEmail: "full@example.test",
      customerPhone: "+1 555 0100",
      intent: "rent",
      quality: "warm",
      stageId: acme.stages.won,
      budget: { min: 1000, max: 2000 },
      zones: ["centre", "beach"],
      rooms: 3,
      assignedOperatorId: acme.users.ana,
      notes: "call after 6",
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      customerName: "Full Lead",
      customerEmail: "full@example.test",
      customerPhone: "+1 555 0100",
      intent: "rent",
      quality: "warm",
      stageId: acme.stages.won,
      budget: { min: 1000, max: 2000 },
      zones: ["centre", "beach"],
      rooms: 3,
      assignedOperatorId: acme.users.ana,
      notes: "call after 6",
      source: "api",
    });
    const got = await getLead(res.body.id);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  it("accepts boundary values", async () => {
    const res = await post({
      customerName: "x".repeat(255),
      customerPhone: "1".repeat(20),
      customerEmail: `${"e".repeat(307)}@example.test`,
      intent: "i".repeat(50),
      quality: "q".repeat(50),
      budget: { min: 5, max: 5 },
      zones: Array.from({ length: 50 }, (_, i) => `z${i}`),
      rooms: 0,
      notes: "n".repeat(10_000),
    });
    expect(res.status).toBe(201);
    expect(res.body.budget).toEqual({ min: 5, max: 5 });
    expect(res.body.rooms).toBe(0);
    expect(res.body.zones).toHaveLength(50);
  });

  it("budget: either bound may be null or omitted; {} and null give budget null", async () => {
    expect((await post({ customerName: "B1", budget: { min: null, max: 300 } })).body.budget).toEqual({
      min: null,
      max: 300,
    });
    expect((await post({ customerName: "B2", budget: { min: 300 } })).body.budget).toEqual({ min: 300, max: null });
    expect((await post({ customerName: "B3", budget: {} })).body.budget).toBeNull();
    expect((await post({ customerName: "B4", budget: null })).body.budget).toBeNull();
  });

  it("nullable optional fields accept null as absent", async () => {
    const res = await post({
      customerName: "Nulls",
      customerEmail: null,
      customerPhone: null,
      rooms: null,
      notes: null,
      assignedOperatorId: null,
      conversationId: null,
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      customerEmail: null,
      customerPhone: null,
      rooms: null,
      notes: null,
      assignedOperatorId: null,
      conversationId: null,
    });
  });

  it("any user of the tenant can be the operator (assignable or not)", async () => {
    const res = await post({ customerName: "Bob's", assignedOperatorId: acme.users.bob });
    expect(res.status).toBe(201);
    expect(res.body.assignedOperatorId).toBe(acme.users.bob);
  });
});

// ---------------------------------------------------------------------------------------------------
describe("POST /leads: customer linking", () => {
  it("auto-links by phone in another format (tenant country ES) and creates no contact", async () => {
    const contacts = await contactCount();
    for (const phone of ["600 000 001", "+34 600-000-001", "(600) 000 001"]) {
      const res = await post({ customerName: "Phone match", customerPhone: phone });
      expect(res.status).toBe(201);
      expect(res.body.customerId).toBe(acme.contacts.bea);
      expect(res.body.customerPhone).toBe(phone);
    }
    expect(await contactCount()).toBe(contacts);
  });

  it("auto-links by email case-insensitively", async () => {
    const res = await post({ customerName: "Mail match", customerEmail: "BEA@Example.TEST" });
    expect(res.status).toBe(201);
    expect(res.body.customerId).toBe(acme.contacts.bea);
    expect(res.body.customerEmail).toBe("BEA@Example.TEST");
  });

  it("a phone match wins over an email match", async () => {
    const res = await post({ customerName: "Both", customerPhone: "600000002", customerEmail: "bea@example.test" });
    expect(res.body.customerId).toBe(acme.contacts.carl);
  });

  it("falls back to the email when the phone matches nobody", async () => {
    const res = await post({
      customerName: "Email only",
      customerPhone: "699 999 999",
      customerEmail: "carl@EXAMPLE.test",
    });
    expect(res.body.customerId).toBe(acme.contacts.carl);
  });

  it("never links a soft-deleted contact", async () => {
    const byPhone = await post({ customerName: "Ghost", customerPhone: "600000009" });
    expect(byPhone.status).toBe(201);
    expect(byPhone.body.customerId).toBeNull();
    const byMail = await post({ customerName: "Ghost", customerEmail: "GHOST@example.test" });
    expect(byMail.body.customerId).toBeNull();
  });

  it("no match → customerId null and no contact is created", async () => {
    const contacts = await contactCount();
    const res = await post({
      customerName: "Stranger",
      customerPhone: "+44 20 7946 0000",
      customerEmail: "nobody@example.test",
    });
    expect(res.status).toBe(201);
    expect(res.body.customerId).toBeNull();
    expect(await contactCount()).toBe(contacts);
  });

  it("email matching is exact (no wildcard semantics)", async () => {
    expect((await post({ customerName: "W", customerEmail: "b_a@example.test" })).body.customerId).toBeNull();
    expect((await post({ customerName: "W", customerEmail: "%@example.test" })).body.customerId).toBeNull();
  });

  it("never links another tenant's contact", async () => {
    // Only the 'list' tenant has a contact with this phone (+34611111111).
    const res = await post({ customerName: "Pat?", customerPhone: "611 111 111" });
    expect(res.body.customerId).toBeNull();
  });

  it("conversationId → customerId is the contact linked to the conversation's identity", async () => {
    const res = await post({ customerName: "From chat", conversationId: acme.conversations.c1 });
    expect(res.status).toBe(201);
    expect(res.body.conversationId).toBe(acme.conversations.c1);
    expect(res.body.customerId).toBe(acme.contacts.bea);
  });

  it("with conversationId, phone/email are not used for linking", async () => {
    const res = await post({
      customerName: "Chat+phone",
      conversationId: acme.conversations.c1,
      customerPhone: "600000002",
    });
    expect(res.body.customerId).toBe(acme.contacts.bea);
    const anon = await post({
      customerName: "Anon",
      conversationId: acme.conversations.anon,
      customerPhone: "600000002",
    });
    expect(anon.status).toBe(201);
    expect(anon.body.conversationId).toBe(acme.conversations.anon);
    expect(anon.body.customerId).toBeNull();
  });

  it("a conversation whose identity has no contact, or a deleted one, gives customerId null", async () => {
    const unlinked = await post({ customerName: "U", conversationId: acme.conversations.unlinked });
    expect(unlinked.status).toBe(201);
    expect(unlinked.body.customerId).toBeNull();
    const gone = await post({ customerName: "G", conversationId: acme.conversations.gone });
    expect(gone.status).toBe(201);
    expect(gone.body.customerId).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------------
describe("POST /leads: 404 for ids outside the tenant, nothing persisted", () => {
  it.each([
    ["foreign conversationId", () => ({ conversationId: other.conversations.oc })],
    ["unknown conversationId", () => ({ conversationId: randomUuid() })],
    ["foreign stageId", () => ({ stageId: other.stages.new })],
    ["unknown stageId", () => ({ stageId: randomUuid() })],
    ["foreign assignedOperatorId", () => ({ assignedOperatorId: other.users.ana })],
    ["unknown assignedOperatorId", () => ({ assignedOperatorId: randomUuid() })],
  ])("%s → 404", async (_name, extra) => {
    const contacts = await contactCount();
    await expectRejected(
      () => post({ customerName: "Nope", customerPhone: "600000001", ...extra() }),
      404,
      "NOT_FOUND",
    );
    expect(await contactCount()).toBe(contacts);
  });

  it("one bad id among good ones still persists nothing", async () => {
    await expectRejected(
      () =>
        post({
          customerName: "Mixed",
          conversationId: acme.conversations.c1,
          stageId: acme.stages.won,
          assignedOperatorId: other.users.ana,
        }),
      404,
      "NOT_FOUND",
    );
  });
});

// ---------------------------------------------------------------------------------------------------
describe("POST /leads: validation → 422, nothing persisted", () => {
  const long = (n: number) => "x".repeat(n);
  it.each<[string, unknown]>([
    ["missing customerName", { customerPhone: "600000001" }],
    ["empty body", {}],
    ["customerName empty", { customerName: "" }],
    ["customerName too long", { customerName: long(256) }],
    ["customerName number", { customerName: 5 }],
    ["customerName null", { customerName: null }],
    ["customerPhone 21 chars", { customerName: "A", customerPhone: "1".repeat(21) }],
    ["customerPhone empty", { customerName: "A", customerPhone: "" }],
    ["customerPhone number", { customerName: "A", customerPhone: 600000001 }],
    ["customerEmail too long", { customerName: "A", customerEmail: `${long(310)}@example.test` }],
    ["customerEmail object", { customerName: "A", customerEmail: { a: 1 } }],
    ["intent empty", { customerName: "A", intent: "" }],
    ["intent 51 chars", { customerName: "A", intent: long(51) }],
    ["intent null", { customerName: "A", intent: null }],
    ["quality 51 chars", { customerName: "A", quality: long(51) }],
    ["quality number", { customerName: "A", quality: 3 }],
    ["budget min > max", { customerName: "A", budget: { min: 500, max: 100 } }],
    ["budget string bound", { customerName: "A", budget: { min: "100" } }],
    ["budget fractional", { customerName: "A", budget: { min: 1.5 } }],
    ["budget negative", { customerName: "A", budget: { min: -1 } }],
    ["budget unknown key", { customerName: "A", budget: { min: 1, currency: "EUR" } }],
    ["budget as number", { customerName: "A", budget: 100 }],
    ["budget as array", { customerName: "A", budget: [1, 2] }],
    ["zones as string", { customerName: "A", zones: "north" }],
    ["zones with a number", { customerName: "A", zones: [1] }],
    ["zones with an empty string", { customerName: "A", zones: [""] }],
    ["zones too many", { customerName: "A", zones: Array.from({ length: 51 }, (_, i) => `z${i}`) }],
    ["zone too long", { customerName: "A", zones: [long(101)] }],
    ["zones null", { customerName: "A", zones: null }],
    ["rooms 1.5", { customerName: "A", rooms: 1.5 }],
    ["rooms string", { customerName: "A", rooms: "3" }],
    ["rooms empty string", { customerName: "A", rooms: "" }],
    ["rooms boolean", { customerName: "A", rooms: true }],
    ["rooms negative", { customerName: "A", rooms: -1 }],
    ["notes too long", { customerName: "A", notes: long(10_001) }],
    ["notes number", { customerName: "A", notes: 1 }],
    ["stageId malformed", { customerName: "A", stageId: "stage-1" }],
    ["stageId null", { customerName: "A", stageId: null }],
    ["assignedOperatorId malformed", { customerName: "A", assignedOperatorId: "ana" }],
    ["conversationId malformed", { customerName: "A", conversationId: "123" }],
    ["unknown field source", { customerName: "A", source: "api" }],
    ["unknown field stage name", { customerName: "A", stage: "New" }],
    ["unknown field customerId", { customerName: "A", customerId: randomUuid() }],
    ["unknown field foo", { customerName: "A", foo: 1 }],
  ])("%s", async (_name, body) => {
    const res = await expectRejected(() => post(body), 422, "VALIDATION_ERROR");
    expect(Array.isArray(res.body.details.fields)).toBe(true);
  });

  it("unknown fields are named in details", async () => {
    const res = await expectRejected(() => post({ customerName: "A", source: "web" }), 422, "VALIDATION_ERROR");
    expect(res.body.details.fields).toContainEqual(expect.objectContaining({ field: "source", code: "unknown_field" }));
  });

  it("malformed JSON body", async () => {
    await expectRejected(
      () =>
        app.request("POST", "/public/v1/leads", {
          key: KEY,
          raw: '{"customerName": "A",',
          headers: { "Content-Type": "application/json" },
        }),
      422,
      "VALIDATION_ERROR",
    );
  });

  it("a JSON array or scalar body", async () => {
    for (const raw of ['[{"customerName":"A"}]', '"A"', "null"])
      await expectRejected(
        () =>
          app.request("POST", "/public/v1/leads", { key: KEY, raw, headers: { "Content-Type": "application/json" } }),
        422,
        "VALIDATION_ERROR",
      );
  });

  it("wrong or missing Content-Type", async () => {
    for (const headers of [
      { "Content-Type": "text/plain" },
      { "Content-Type": "application/x-www-form-urlencoded" },
      {} as Record<string, string>,
    ])
      await expectRejected(
        () => app.request("POST", "/public/v1/leads", { key: KEY, raw: '{"customerName":"A"}', headers }),
        422,
        "VALIDATION_ERROR",
      );
  });

  it("validation comes before 404 (malformed field + foreign stage → 422)", async () => {
    await expectRejected(
      () => post({ customerName: "A", stageId: other.stages.new, rooms: 1.5 }),
      422,
      "VALIDATION_ERROR",
    );
  });
});

// ---------------------------------------------------------------------------------------------------
describe("scopes", () => {
  it("key without scopes → 403 PERMISSION_DENIED on every operation, nothing persisted", async () => {
    const none = acme.apiKeys.none!.key;
    await expectRejected(() => post({ customerName: "No scope" }, { key: none }), 403, "PERMISSION_DENIED");
    expectEnvelope(await app.request("GET", "/public/v1/leads", { key: none }), 403, "PERMISSION_DENIED");
    expectEnvelope(await getLead(acme.leads.l1!, none), 403, "PERMISSION_DENIED");
    const before = await leadRow(acme.leads.l1!);
    expectEnvelope(await patch(acme.leads.l1!, { quality: "cold" }, none), 403, "PERMISSION_DENIED");
    expect(await leadRow(acme.leads.l1!)).toEqual(before);
  });

  it("the scope check comes before validation and 404", async () => {
    const none = acme.apiKeys.none!.key;
    await expectRejected(() => post({ source: "web" }, { key: none }), 403, "PERMISSION_DENIED");
    await expectRejected(
      () =>
        app.request("POST", "/public/v1/leads", {
          key: none,
          raw: "{bad",
          headers: { "Content-Type": "application/json" },
        }),
      403,
      "PERMISSION_DENIED",
    );
    expectEnvelope(await getLead("not-a-uuid", none), 403, "PERMISSION_DENIED");
    expectEnvelope(await patch(randomUuid(), { quality: "x" }, none), 403, "PERMISSION_DENIED");
  });

  it("read and manage are independent; another resource's manage does not cover leads", async () => {
    const reader = acme.apiKeys.reader!.key;
    const writer = acme.apiKeys.writer!.key;
    const contacts = acme.apiKeys.contactsManage!.key;
    expect((await app.request("GET", "/public/v1/leads", { key: reader })).status).toBe(200);
    expect((await getLead(acme.leads.l1!, reader)).status).toBe(200);
    await expectRejected(() => post({ customerName: "R" }, { key: reader }), 403, "PERMISSION_DENIED");
    expectEnvelope(await patch(acme.leads.l1!, { quality: "x" }, reader), 403, "PERMISSION_DENIED");
    expect((await post({ customerName: "W" }, { key: writer })).status).toBe(201);
    expectEnvelope(await app.request("GET", "/public/v1/leads", { key: writer }), 403, "PERMISSION_DENIED");
    expectEnvelope(await getLead(acme.leads.l1!, writer), 403, "PERMISSION_DENIED");
    await expectRejected(() => post({ customerName: "C" }, { key: contacts }), 403, "PERMISSION_DENIED");
    expectEnvelope(await app.request("GET", "/public/v1/leads", { key: contacts }), 403, "PERMISSION_DENIED");
  });

  it("no key → 401", async () => {
    expectEnvelope(await app.request("GET", "/public/v1/leads"), 401, "INVALID_CREDENTIALS");
  });
});

// ---------------------------------------------------------------------------------------------------
describe("idempotency", () => {
  it("a replay returns the same body and creates no second row", async () => {
    const key = `lead-${randomUuid()}`;
    const body = { customerName: "Idem", customerPhone: "600000001", zones: ["a"] };
    const before = await leadCount();
    const first = await post(body, { headers: { "Idempotency-Key": key } });
    expect(first.status).toBe(201);
    const second = await post(
      { zones: ["a"], customerPhone: "600000001", customerName: "Idem" },
      { headers: { "Idempotency-Key": key } },
    );
    expect(second.status).toBe(201);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(await leadCount()).toBe(before + 1);
  });

  it("the same key with a different body → 422 IDEMPOTENCY_KEY_REUSE_MISMATCH, nothing persisted", async () => {
    const key = `lead-${randomUuid()}`;
    expect((await post({ customerName: "One" }, { headers: { "Idempotency-Key": key } })).status).toBe(201);
    await expectRejected(
      () => post({ customerName: "Two" }, { headers: { "Idempotency-Key": key } }),
      422,
      "IDEMPOTENCY_KEY_REUSE_MISMATCH",
    );
  });

  it("a failed create is not cached: the key stays usable", async () => {
    const key = `lead-${randomUuid()}`;
    await expectRejected(
      () => post({ customerName: "F", stageId: other.stages.new }, { headers: { "Idempotency-Key": key } }),
      404,
      "NOT_FOUND",
    );
    await expectRejected(
      () => post({ customerName: "F", stageId: other.stages.new }, { headers: { "Idempotency-Key": key } }),
      404,
      "NOT_FOUND",
    );
    const ok = await post({ customerName: "F" }, { headers: { "Idempotency-Key": key } });
    expect(ok.status).toBe(201);
  });

  it("10 concurrent duplicates → exactly one row, all 201 with the same id", async () => {
    const key = `lead-${randomUuid()}`;
    const name = `Concurrent ${key}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => post({ customerName: name }, { headers: { "Idempotency-Key": key } })),
    );
    for (const r of results) expect(r.status, r.text).toBe(201);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(await app.db.prisma.lead.count({ where: { tenantId: acme.id, customerName: name } })).toBe(1);
  });

  it("keys are per API key: the same Idempotency-Key on another key creates its own lead", async () => {
    const key = `lead-${randomUuid()}`;
    const a = await post({ customerName: "Per key" }, { headers: { "Idempotency-Key": key } });
    const b = await post(
      { customerName: "Per key" },
      { key: acme.apiKeys.bobkey!.key, headers: { "Idempotency-Key": key } },
    );
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.body.id).not.toBe(a.body.id);
  });
});

// ---------------------------------------------------------------------------------------------------
describe("GET /leads/{lead_id}", () => {
  it("returns the fixture lead with exactly the table's fields", async () => {
    const res = await getLead(acme.leads.l1!);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: acme.leads.l1,
      customerId: acme.contacts.bea,
      conversationId: acme.conversations.c1,
      customerName: "Bea Soto",
      customerEmail: "bea@example.test",
      customerPhone: "+34600000001",
      intent: "buy",
      quality: "hot",
      stageId: acme.stages.new,
      budget: { min: 100, max: 200 },
      zones: ["north"],
      rooms: 2,
      assignedOperatorId: acme.users.ana,
      source: "import",
      notes: "first",
      createdAt: "2026-01-01T08:00:00.000Z",
      updatedAt: "2026-01-01T08:00:00.000Z",
      externalId: null,
      version: 1,
    });
  });

  it("unknown or foreign → 404, malformed → 422", async () => {
    expectEnvelope(await getLead(randomUuid()), 404, "NOT_FOUND");
    expectEnvelope(await getLead(other.leads.ol!), 404, "NOT_FOUND");
    expectEnvelope(await getLead("not-a-uuid"), 422, "VALIDATION_ERROR");
    expectEnvelope(await getLead("12345"), 422, "VALIDATION_ERROR");
  });
});

// ---------------------------------------------------------------------------------------------------
describe("PATCH /leads/{lead_id}", () => {
  async function freshLead(extra: Record<string, unknown> = {}) {
    app.setNow(new Date("2030-01-01T00:00:00.000Z"));
    const res = await post({
      customerName: "Patchable",
      quality: "warm",
      notes: "n",
      assignedOperatorId: acme.users.ana,
      ...extra,
    });
    expect(res.status).toBe(201);
    app.setNow(new Date("2030-01-02T00:00:00.000Z"));
    return res.body;
  }

  it("changes stage, quality, operator and notes; updatedAt advances; the rest is untouched", async () => {
    const lead = await freshLead({ budget: { min: 1, max: 2 }, zones: ["z"], rooms: 1 });
    const res = await patch(lead.id, {
      stageId: acme.stages.won,
      quality: "hot",
      assignedOperatorId: acme.users.bob,
      notes: "updated",
    });
    expect(res.status).toBe(200);
    expect(lead).toMatchObject({ externalId: null, version: 1 });
    expect(res.body).toEqual({
      ...lead,
      stageId: acme.stages.won,
      quality: "hot",
      assignedOperatorId: acme.users.bob,
      notes: "updated",
      updatedAt: "2030-01-02T00:00:00.000Z",
      version: 2,
    });
    expect((await getLead(lead.id)).body).toEqual(res.body);
  });

  it("null unassigns the operator and clears notes", async () => {
    const lead = await freshLead();
    const res = await patch(lead.id, { assignedOperatorId: null, notes: null });
    expect(res.status).toBe(200);
    expect(res.body.assignedOperatorId).toBeNull();
    expect(res.body.notes).toBeNull();
  });

  it("{} returns the lead unchanged (updatedAt too)", async () => {
    const lead = await freshLead();
    const res = await patch(lead.id, {});
    expect(res.status).toBe(200);
    expect(res.body).toEqual(lead);
  });

  it("values equal to the current ones are not a change (updatedAt stays)", async () => {
    const lead = await freshLead();
    const res = await patch(lead.id, {
      quality: "warm",
      notes: "n",
      stageId: lead.stageId,
      assignedOperatorId: lead.assignedOperatorId.toUpperCase(),
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(lead);
  });

  it.each([
    ["foreign stage", () => ({ stageId: other.stages.won })],
    ["unknown stage", () => ({ stageId: randomUuid() })],
    ["foreign operator", () => ({ assignedOperatorId: other.users.ana })],
    ["unknown operator", () => ({ assignedOperatorId: randomUuid() })],
  ])("%s → 404 and none of the fields are applied", async (_n, extra) => {
    const lead = await freshLead();
    const before = await leadRow(lead.id);
    expectEnvelope(await patch(lead.id, { quality: "cold", notes: "changed", ...extra() }), 404, "NOT_FOUND");
    expect(await leadRow(lead.id)).toEqual(before);
  });

  it("unknown or foreign lead → 404 (the other tenant's lead is unchanged); malformed id → 422", async () => {
    expectEnvelope(await patch(randomUuid(), { quality: "cold" }), 404, "NOT_FOUND");
    const before = await leadRow(other.leads.ol!);
    expectEnvelope(await patch(other.leads.ol!, { quality: "hot" }), 404, "NOT_FOUND");
    expectEnvelope(await patch(other.leads.ol!, {}), 404, "NOT_FOUND");
    expect(await leadRow(other.leads.ol!)).toEqual(before);
    expectEnvelope(await patch("nope", { quality: "cold" }), 422, "VALIDATION_ERROR");
  });

  it.each<[string, unknown]>([
    ["customerName", { customerName: "Renamed" }],
    ["intent", { intent: "buy" }],
    ["source", { source: "web" }],
    ["budget", { budget: { min: 1, max: 2 } }],
    ["customerId", { customerId: randomUuid() }],
    ["quality empty", { quality: "" }],
    ["quality 51 chars", { quality: "q".repeat(51) }],
    ["quality null", { quality: null }],
    ["notes too long", { notes: "n".repeat(10_001) }],
    ["notes number", { notes: 7 }],
    ["stageId malformed", { stageId: "won" }],
    ["stageId null", { stageId: null }],
    ["assignedOperatorId malformed", { assignedOperatorId: "bob" }],
  ])("%s → 422, no change", async (_n, body) => {
    const lead = await freshLead();
    const before = await leadRow(lead.id);
    expectEnvelope(await patch(lead.id, { quality: "cold", ...(body as object) }), 422, "VALIDATION_ERROR");
    expect(await leadRow(lead.id)).toEqual(before);
  });

  it("malformed JSON and wrong Content-Type → 422, no change", async () => {
    const id = acme.leads.l1!;
    const before = await leadRow(id);
    expectEnvelope(
      await app.request("PATCH", `/public/v1/leads/${id}`, {
        key: KEY,
        raw: "{",
        headers: { "Content-Type": "application/json" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expectEnvelope(
      await app.request("PATCH", `/public/v1/leads/${id}`, {
        key: KEY,
        raw: '{"quality":"x"}',
        headers: { "Content-Type": "text/plain" },
      }),
      422,
      "VALIDATION_ERROR",
    );
    expect(await leadRow(id)).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------------------
describe("GET /leads", () => {
  const L = () => list.leads;
  const idsOf = (res: any) => res.body.items.map((i: any) => i.id);

  it("newest first, envelope with items, total, cursor, pagination", async () => {
    const res = await listLeads();
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([
      "cursor",
      "items",
      "nextCursor",
      "pagination",
      "stableBefore",
      "total",
    ]);
    expect(idsOf(res)).toEqual([L().e, L().d, L().c, L().b, L().a]);
    expect(res.body.total).toBe(5);
    expect(res.body.cursor).toBe("2026-03-05T00:00:00.500Z");
    expect(Object.keys(res.body.pagination).sort()).toEqual(PAGINATION_KEYS);
    expect(res.body.pagination).toEqual({
      page: 1,
      pageSize: 50,
      totalItems: 5,
      totalPages: 1,
      hasNext: false,
      hasPrev: false,
    });
    for (const item of res.body.items) expect(Object.keys(item).sort()).toEqual(LEAD_KEYS);
  });

  it("only the caller's tenant's leads", async () => {
    const res = await listLeads({}, other.apiKeys.full!.key);
    expect(res.body.items.map((i: any) => i.id)).toEqual([other.leads.ol]);
  });

  it("pages: limit 2 over 5", async () => {
    const p1 = await listLeads({ limit: 2 });
    expect(idsOf(p1)).toEqual([L().e, L().d]);
    expect(p1.body.pagination).toEqual({
      page: 1,
      pageSize: 2,
      totalItems: 5,
      totalPages: 3,
      hasNext: true,
      hasPrev: false,
    });
    const p2 = await listLeads({ limit: 2, offset: 2 });
    expect(idsOf(p2)).toEqual([L().c, L().b]);
    expect(p2.body.pagination).toEqual({
      page: 2,
      pageSize: 2,
      totalItems: 5,
      totalPages: 3,
      hasNext: true,
      hasPrev: true,
    });
    const p3 = await listLeads({ limit: 2, offset: 4 });
    expect(idsOf(p3)).toEqual([L().a]);
    expect(p3.body.pagination).toMatchObject({ page: 3, hasNext: false, hasPrev: true });
    // The cursor describes all matching leads, not the page.
    for (const p of [p1, p2, p3]) expect(p.body.cursor).toBe("2026-03-05T00:00:00.500Z");
  });

  it("limit 1 and 200 are accepted; offset past the end → empty items", async () => {
    const one = await listLeads({ limit: 1 });
    expect(one.status).toBe(200);
    expect(idsOf(one)).toEqual([L().e]);
    expect(one.body.pagination).toMatchObject({ pageSize: 1, totalPages: 5, hasNext: true });
    expect((await listLeads({ limit: 200 })).body.items).toHaveLength(5);
    const past = await listLeads({ offset: 10, limit: 5 });
    expect(past.status).toBe(200);
    expect(past.body.items).toEqual([]);
    expect(past.body.total).toBe(5);
    expect(past.body.pagination).toMatchObject({ page: 3, hasNext: false, hasPrev: true });
  });

  it.each<[string, Record<string, string>]>([
    ["limit 0", { limit: "0" }],
    ["limit 201", { limit: "201" }],
    ["limit -1", { limit: "-1" }],
    ["limit 1.5", { limit: "1.5" }],
    ["limit abc", { limit: "abc" }],
    ["offset -1", { offset: "-1" }],
    ["offset x", { offset: "x" }],
    ["dateFrom malformed", { dateFrom: "yesterday" }],
    ["dateFrom without offset", { dateFrom: "2026-03-01T00:00:00" }],
    ["dateFrom date only", { dateFrom: "2026-03-01" }],
    ["dateTo malformed", { dateTo: "2026-13-01T00:00:00Z" }],
    ["customerId malformed", { customerId: "pat" }],
    ["dateFrom after dateTo", { dateFrom: "2026-03-03T00:00:00Z", dateTo: "2026-03-02T00:00:00Z" }],
  ])("%s → 422", async (_n, query) => {
    expectEnvelope(await listLeads(query), 422, "VALIDATION_ERROR");
  });

  it("an empty query value counts as absent (the adapter drops it)", async () => {
    const res = await listLeads({ limit: "", dateFrom: "" });
    expect(res.status).toBe(200);
    expect(res.body.pagination.pageSize).toBe(50);
    expect(res.body.total).toBe(5);
  });

  it("a repeated query parameter → 422", async () => {
    expectEnvelope(
      await app.request("GET", "/public/v1/leads?limit=1&limit=2", { key: list.apiKeys.full!.key }),
      422,
      "VALIDATION_ERROR",
    );
  });

  it("unknown query parameters are ignored", async () => {
    const res = await listLeads({ stage: "new", foo: "bar" });
    expect(res.status).toBe(200);
    expect(res.body.total).toBe(5);
  });

  it("dateFrom is inclusive, dateTo exclusive", async () => {
    const from = await listLeads({ dateFrom: "2026-03-02T00:00:00Z" });
    expect(idsOf(from)).toEqual([L().e, L().d, L().c, L().b]);
    const to = await listLeads({ dateTo: "2026-03-02T00:00:00Z" });
    expect(idsOf(to)).toEqual([L().a]);
    expect(to.body.cursor).toBe("2026-03-01T00:00:00.000Z");
    const both = await listLeads({ dateFrom: "2026-03-02T00:00:00Z", dateTo: "2026-03-04T00:00:00Z" });
    expect(idsOf(both)).toEqual([L().c, L().b]);
    expect(both.body.total).toBe(2);
    expect(both.body.cursor).toBe("2026-03-03T00:00:00.000Z");
    // Millisecond precision and offsets.
    expect(idsOf(await listLeads({ dateFrom: "2026-03-05T00:00:00.500Z" }))).toEqual([L().e]);
    expect(idsOf(await listLeads({ dateFrom: "2026-03-05T00:00:00.501Z" }))).toEqual([]);
    expect(idsOf(await listLeads({ dateFrom: "2026-03-05T01:00:00.500+01:00" }))).toEqual([L().e]);
    expect(idsOf(await listLeads({ dateTo: "2026-03-05T00:00:00.500Z", dateFrom: "2026-03-04T00:00:00Z" }))).toEqual([
      L().d,
    ]);
  });

  it("the cursor is the next dateFrom: the newest lead comes back once, nothing is lost", async () => {
    const first = await listLeads({ dateTo: "2026-03-04T00:00:00Z" });
    expect(first.body.cursor).toBe("2026-03-03T00:00:00.000Z");
    const next = await listLeads({ dateFrom: first.body.cursor });
    expect(idsOf(next)).toEqual([L().e, L().d, L().c]);
    expect(next.body.cursor).toBe("2026-03-05T00:00:00.500Z");
  });

  it("no match → empty items and cursor null; equal bounds match nothing", async () => {
    const none = await listLeads({ dateFrom: "2027-01-01T00:00:00Z" });
    expect(none.status).toBe(200);
    expect(none.body).toEqual({
      items: [],
      total: 0,
      cursor: null,
      pagination: { page: 1, pageSize: 50, totalItems: 0, totalPages: 0, hasNext: false, hasPrev: false },
      nextCursor: null,
      stableBefore: expect.any(String),
    });
    const equal = await listLeads({ dateFrom: "2026-03-02T00:00:00Z", dateTo: "2026-03-02T00:00:00Z" });
    expect(equal.body.items).toEqual([]);
    expect(equal.body.cursor).toBeNull();
  });

  it("customerId filters; an unknown or foreign contact matches nothing", async () => {
    const res = await listLeads({ customerId: list.contacts.pat! });
    expect(idsOf(res)).toEqual([L().c, L().a]);
    expect(res.body.cursor).toBe("2026-03-03T00:00:00.000Z");
    const unknown = await listLeads({ customerId: randomUuid() });
    expect(unknown.status).toBe(200);
    expect(unknown.body.items).toEqual([]);
    expect(unknown.body.cursor).toBeNull();
    const foreign = await listLeads({ customerId: acme.contacts.bea! });
    expect(foreign.status).toBe(200);
    expect(foreign.body.total).toBe(0);
  });

  it("equal createdAt: ordered by id descending", async () => {
    const t = tenant("ties", {
      leads: ["x", "y", "z"].map((ref) => ({ ref, customerName: ref, createdAt: "2026-06-01T00:00:00Z" })),
    });
    const loaded = (await app.load(fixture(t))).tenants.ties!;
    const res = await listLeads({}, loaded.apiKeys.full!.key);
    expect(idsOf(res)).toEqual(Object.values(loaded.leads).sort().reverse());
    const paged = [
      ...idsOf(await listLeads({ limit: 1, offset: 0 }, loaded.apiKeys.full!.key)),
      ...idsOf(await listLeads({ limit: 1, offset: 1 }, loaded.apiKeys.full!.key)),
      ...idsOf(await listLeads({ limit: 1, offset: 2 }, loaded.apiKeys.full!.key)),
    ];
    expect(paged).toEqual(idsOf(res));
  });

  it("a lead created through the API appears in the list with the right createdAt", async () => {
    app.setNow(new Date("2031-02-03T04:05:06.789Z"));
    const created = await post({ customerName: "Listed", customerPhone: "600 000 001" });
    expect(created.status).toBe(201);
    const res = await listLeads({ dateFrom: "2031-02-03T04:05:06.789Z" }, KEY);
    expect(idsOf(res)).toEqual([created.body.id]);
    expect(res.body.cursor).toBe("2031-02-03T04:05:06.789Z");
    const byCustomer = await listLeads({ customerId: acme.contacts.bea!, dateFrom: "2031-01-01T00:00:00Z" }, KEY);
    expect(idsOf(byCustomer)).toEqual([created.body.id]);
  });
});
