// Conversations: GET /conversations (filters, order, offset pagination) and POST /conversations/start
// (rule order, find-or-create identity, resume, assignment to the key owner, lead link, idempotency).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { startProviderStub, type ProviderStub } from "../helpers/provider-stub.js";

const T0 = new Date("2026-11-21T12:00:00.000Z");

let app: TestApp;
let stub: ProviderStub;
type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let acme: Ids;
let other: Ids;
let key: string;
let bobKey: string;
let readKey: string;
let noneKey: string;

const CONVERSATION_KEYS = [
  "assignedOperatorId",
  "channel",
  "channelId",
  "createdAt",
  "customer",
  "id",
  "lastMessageAt",
  "lastMessagePreview",
  "status",
  "subject",
  "updatedAt",
  "version",
];

beforeAll(async () => {
  app = await startApp();
  stub = await startProviderStub();
  const base = tenant("acme");
  const ident = (
    externalId: string,
    contact: string | null,
    name: string | null = null,
    phone: string | null = null,
  ) => ({
    externalId,
    name,
    phone,
    email: null,
    contact,
  });
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        apiKeys: [...base.apiKeys!, { ref: "read", owner: "ana", scopes: ["tenant:conversations.read"] }],
        channels: [
          {
            ref: "wa",
            kind: "whatsapp",
            name: "WhatsApp",
            config: { baseUrl: stub.baseUrl, phoneNumberId: "1001", accessToken: "t0k" },
          },
          {
            ref: "wa2",
            kind: "whatsapp",
            name: "WhatsApp 2",
            config: { baseUrl: stub.baseUrl, phoneNumberId: "2002", accessToken: "t0k" },
          },
          {
            ref: "waOff",
            kind: "whatsapp",
            name: "WhatsApp (disconnected)",
            connected: false,
            config: { baseUrl: stub.baseUrl, phoneNumberId: "3003", accessToken: "t0k" },
          },
          { ref: "site", kind: "web", name: "Website chat" },
          { ref: "fb", kind: "messenger", name: "Messenger", config: { baseUrl: stub.baseUrl, accessToken: "fbtok" } },
        ],
        templates: [
          {
            ref: "hello",
            channel: "wa",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}, this is {{2}}",
            approved: true,
          },
          { ref: "plain", channel: "wa", name: "ping", language: "en", body: "Any news?", approved: true },
          { ref: "draft", channel: "wa", name: "draft", language: "en", body: "Draft {{1}}", approved: false },
          { ref: "only2", channel: "wa2", name: "only2", language: "en", body: "Only on wa2", approved: true },
          {
            ref: "off",
            channel: "waOff",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}, this is {{2}}",
            approved: true,
          },
          {
            ref: "webtpl",
            channel: "site",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}, this is {{2}}",
            approved: true,
          },
          {
            ref: "fbtpl",
            channel: "fb",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}, this is {{2}}",
            approved: true,
          },
        ],
        contacts: [
          { ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@example.test" },
          { ref: "carl", fullName: "Carl Diaz", phone: "+34600000003", email: "carl@example.test" },
          { ref: "dana", fullName: "Dana Gil", phone: "+34600000004", email: "dana@example.test" },
          { ref: "gone", fullName: "Gone Person", phone: "+34600000009", email: "gone@example.test", deleted: true },
        ],
        conversations: [
          {
            ref: "c1",
            channel: "wa",
            status: "active",
            subject: "Flat in Gracia",
            identity: ident("34600000001", "bea", "Bea", "+34600000001"),
            messages: [{ role: "user", content: "Hi!", createdAt: "2026-11-21T10:00:00Z" }],
          },
          {
            ref: "c2",
            channel: "site",
            status: "escalated",
            identity: null,
            assignedTo: "bob",
            messages: [{ role: "user", content: "Need help", createdAt: "2026-11-21T11:00:00Z" }],
          },
          {
            ref: "c3",
            channel: "wa",
            status: "resolved",
            identity: ident("34600000003", "carl", "Carl"),
            messages: [{ role: "user", content: "Thanks", createdAt: "2026-11-20T09:00:00Z" }],
          },
          {
            ref: "c4",
            channel: "fb",
            status: "active",
            identity: ident("psid-1", "bea", "Bea S."),
            messages: [{ role: "user", content: "Hola", createdAt: "2026-11-21T11:00:00Z" }],
          },
          {
            ref: "c5",
            channel: "site",
            status: "active",
            identity: ident("visitor-1", null),
            messages: [],
            createdAt: "2026-11-19T00:00:00Z",
          },
        ],
        leads: [
          { ref: "l1", customerName: "Bea Soto", contact: "bea" },
          { ref: "l2", customerName: "Someone", conversation: "c2" },
        ],
      }),
      tenant("other", {
        contacts: [{ ref: "zed", fullName: "Zed", phone: "+34600000001" }],
        conversations: [
          {
            ref: "theirs",
            channel: "wa",
            identity: ident("34600000001", "zed"),
            messages: [{ role: "user", content: "secret", createdAt: "2026-11-21T11:30:00Z" }],
          },
        ],
        leads: [{ ref: "theirLead", customerName: "Zed" }],
      }),
    ),
  );
  acme = loaded.tenants.acme!;
  other = loaded.tenants.other!;
  key = acme.apiKeys.full!.key;
  bobKey = acme.apiKeys.bobkey!.key;
  readKey = acme.apiKeys.read!.key;
  noneKey = acme.apiKeys.none!.key;
});
afterAll(async () => {
  await app?.close();
  await stub?.close();
});
beforeEach(() => {
  app.setNow(T0);
  stub.reset();
});

const c = (ref: string) => acme.conversations[ref]!;
const list = (query: Record<string, string | number | undefined> = {}, k = key) =>
  app.request("GET", "/public/v1/conversations", { key: k, query });
const start = (body: unknown, k = key, headers: Record<string, string> = {}) =>
  app.request("POST", "/public/v1/conversations/start", { key: k, body, headers });

async function counts() {
  const tenantId = acme.id;
  const [conversations, identities, customers, messages, linkedLeads] = await Promise.all([
    app.db.prisma.conversation.count({ where: { tenantId } }),
    app.db.prisma.channelIdentity.count({ where: { tenantId } }),
    app.db.prisma.customer.count({ where: { tenantId } }),
    app.db.prisma.message.count({ where: { tenantId } }),
    app.db.prisma.lead.count({ where: { tenantId, conversationId: { not: null } } }),
  ]);
  return { conversations, identities, customers, messages, linkedLeads };
}

/** Asserts status and error code, no provider request, nothing persisted. */
async function expectRejected(p: () => Promise<any>, status: number, code: string) {
  const before = await counts();
  const res = await p();
  expectEnvelope(res, status, code);
  expect(stub.requests).toHaveLength(0);
  expect(await counts()).toEqual(before);
  return res;
}

describe("GET /conversations", () => {
  it("lists the tenant's conversations, newest activity first, with exactly the table's fields", async () => {
    const r = await list();
    expect(r.status).toBe(200);
    expect(r.body.total).toBe(5);
    const ids = r.body.items.map((i: any) => i.id);
    // c2 and c4 share lastMessageAt: id desc breaks the tie.
    const tie = [c("c2"), c("c4")].sort().reverse();
    expect(ids).toEqual([...tie, c("c1"), c("c3"), c("c5")]);
    expect(ids).not.toContain(other.conversations.theirs);
    for (const item of r.body.items) {
      expect(Object.keys(item).sort()).toEqual(CONVERSATION_KEYS);
      expect(Object.keys(item.customer).sort()).toEqual(["customerId", "email", "id", "name", "phone"]);
    }
    const c1 = r.body.items.find((i: any) => i.id === c("c1"));
    const customer1 = await app.db.prisma.conversation.findFirstOrThrow({
      where: { id: c("c1") },
      select: { customerId: true },
    });
    expect(c1).toEqual({
      id: c("c1"),
      channel: "whatsapp",
      channelId: acme.channels.wa,
      status: "active",
      subject: "Flat in Gracia",
      customer: {
        id: customer1.customerId,
        name: "Bea",
        email: null,
        phone: "+34600000001",
        customerId: acme.contacts.bea,
      },
      assignedOperatorId: null,
      lastMessagePreview: "Hi!",
      lastMessageAt: "2026-11-21T10:00:00.000Z",
      version: 1,
      createdAt: "2026-11-21T10:00:00.000Z",
      updatedAt: "2026-11-21T10:00:00.000Z",
    });
    // No identity: the customer object is still there, with empty details.
    const c2 = r.body.items.find((i: any) => i.id === c("c2"));
    expect(c2).toMatchObject({
      channel: "web",
      channelId: acme.channels.site,
      status: "escalated",
      subject: null,
      assignedOperatorId: acme.users.bob,
      lastMessagePreview: "Need help",
    });
    expect(c2.customer).toEqual({ id: expect.any(String), name: null, email: null, phone: null, customerId: null });
    const c5 = r.body.items.find((i: any) => i.id === c("c5"));
    expect(c5).toMatchObject({
      lastMessagePreview: "",
      lastMessageAt: "2026-11-19T00:00:00.000Z",
      createdAt: "2026-11-19T00:00:00.000Z",
    });
    expect(r.body.pagination).toEqual({
      page: 1,
      pageSize: 50,
      totalItems: 5,
      totalPages: 1,
      hasNext: false,
      hasPrev: false,
    });
  });

  const ids = async (query: Record<string, string | number>) => {
    const r = await list(query);
    expect(r.status).toBe(200);
    expect(r.body.total).toBe(r.body.items.length);
    return r.body.items.map((i: any) => i.id).sort();
  };

  it("filters by raw status; an unknown status matches nothing", async () => {
    expect(await ids({ status: "active" })).toEqual([c("c1"), c("c4"), c("c5")].sort());
    expect(await ids({ status: "escalated" })).toEqual([c("c2")]);
    expect(await ids({ status: "resolved" })).toEqual([c("c3")]);
    expect(await ids({ status: "bogus" })).toEqual([]);
    expect(await ids({ status: "ACTIVE" })).toEqual([]);
  });

  it("filters by channel kind; an unknown kind matches nothing", async () => {
    expect(await ids({ channel: "whatsapp" })).toEqual([c("c1"), c("c3")].sort());
    expect(await ids({ channel: "web" })).toEqual([c("c2"), c("c5")].sort());
    expect(await ids({ channel: "messenger" })).toEqual([c("c4")]);
    expect(await ids({ channel: "instagram" })).toEqual([]);
    expect(await ids({ channel: "sms" })).toEqual([]);
    expect(await ids({ channel: acme.channels.wa! })).toEqual([]);
  });

  it("filters by customerId (the linked contact); unknown or foreign matches nothing; malformed is 422", async () => {
    expect(await ids({ customerId: acme.contacts.bea! })).toEqual([c("c1"), c("c4")].sort());
    expect(await ids({ customerId: acme.contacts.carl! })).toEqual([c("c3")]);
    expect(await ids({ customerId: acme.contacts.dana! })).toEqual([]);
    expect(await ids({ customerId: randomUuid() })).toEqual([]);
    expect(await ids({ customerId: other.contacts.zed! })).toEqual([]);
    expectEnvelope(await list({ customerId: "not-a-uuid" }), 422, "VALIDATION_ERROR");
  });

  it("combines filters", async () => {
    expect(await ids({ status: "active", channel: "whatsapp" })).toEqual([c("c1")]);
    expect(await ids({ status: "active", customerId: acme.contacts.bea! })).toEqual([c("c1"), c("c4")].sort());
    expect(await ids({ status: "resolved", channel: "web" })).toEqual([]);
  });

  it("offset pagination", async () => {
    const all = (await list()).body.items.map((i: any) => i.id);
    const p1 = await list({ limit: 2 });
    expect(p1.body.items.map((i: any) => i.id)).toEqual(all.slice(0, 2));
    expect(p1.body).toMatchObject({
      total: 5,
      pagination: { page: 1, pageSize: 2, totalItems: 5, totalPages: 3, hasNext: true, hasPrev: false },
    });
    const p3 = await list({ limit: 2, offset: 4 });
    expect(p3.body.items.map((i: any) => i.id)).toEqual(all.slice(4));
    expect(p3.body.pagination).toEqual({
      page: 3,
      pageSize: 2,
      totalItems: 5,
      totalPages: 3,
      hasNext: false,
      hasPrev: true,
    });
    const beyond = await list({ offset: 10 });
    expect(beyond.body.items).toEqual([]);
    expect(beyond.body.total).toBe(5);
    for (const q of [{ limit: 0 }, { limit: 201 }, { limit: "abc" }, { offset: -1 }, { offset: "1.5" }])
      expectEnvelope(await list(q), 422, "VALIDATION_ERROR");
  });

  it("needs tenant:conversations.read", async () => {
    expectEnvelope(await list({}, noneKey), 403, "PERMISSION_DENIED");
    expect((await list({}, readKey)).status).toBe(200);
  });
});

describe("POST /conversations/start", () => {
  const valid = () => ({
    channelId: acme.channels.wa!,
    phone: "+34 611 222 333",
    templateName: "welcome",
    templateLanguage: "en",
    variables: ["Bea", "Ana"],
  });

  it("validates the body (unknown fields included) before anything else", async () => {
    const v = valid();
    const { channelId: _c, ...noChannel } = v;
    const { phone: _p, ...noPhone } = v;
    const { templateName: _n, ...noName } = v;
    const { templateLanguage: _l, ...noLang } = v;
    for (const body of [
      {},
      noChannel,
      noPhone,
      noName,
      noLang,
      { ...v, assignedOperatorId: acme.users.bob },
      { ...v, status: "escalated" },
      { ...v, channelId: "nope" },
      { ...v, leadId: "nope" },
      { ...v, variables: "Bea" },
      { ...v, variables: [1, 2] },
      { ...v, phone: "" },
      { ...v, phone: 600000001 },
      { ...v, templateName: "" },
      { ...v, templateLanguage: "" },
      // Validation comes before the 404 lookups.
      { ...v, channelId: randomUuid(), extra: true },
    ])
      await expectRejected(() => start(body), 422, "VALIDATION_ERROR");
  });

  it("an unknown or foreign channelId is 404", async () => {
    await expectRejected(() => start({ ...valid(), channelId: randomUuid() }), 404, "NOT_FOUND");
    await expectRejected(() => start({ ...valid(), channelId: other.channels.wa! }), 404, "NOT_FOUND");
    // 404 before the template/phone checks.
    await expectRejected(
      () => start({ ...valid(), channelId: other.channels.wa!, templateName: "nope", phone: "abc" }),
      404,
      "NOT_FOUND",
    );
  });

  it("an unknown or foreign leadId is 404, before any write or send and before the channel checks", async () => {
    await expectRejected(() => start({ ...valid(), leadId: randomUuid() }), 404, "NOT_FOUND");
    await expectRejected(() => start({ ...valid(), leadId: other.leads.theirLead! }), 404, "NOT_FOUND");
    await expectRejected(
      () => start({ ...valid(), channelId: acme.channels.site!, leadId: other.leads.theirLead! }),
      404,
      "NOT_FOUND",
    );
  });

  it("a channel that is not a connected WhatsApp channel is 422", async () => {
    await expectRejected(() => start({ ...valid(), channelId: acme.channels.site! }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), channelId: acme.channels.fb! }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), channelId: acme.channels.waOff! }), 422, "VALIDATION_ERROR");
  });

  it("a template that is not an approved template of the channel is 422", async () => {
    await expectRejected(() => start({ ...valid(), templateName: "nope" }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), templateLanguage: "es" }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), templateName: "draft", variables: ["x"] }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), templateName: "only2", variables: [] }), 422, "VALIDATION_ERROR");
  });

  it("a phone that is not a number is 422", async () => {
    for (const phone of ["abc", "123", "+999 1", "x".repeat(30)])
      await expectRejected(() => start({ ...valid(), phone }), 422, "VALIDATION_ERROR");
  });

  it("the number of variables must match the template's placeholders", async () => {
    await expectRejected(() => start({ ...valid(), variables: ["Bea"] }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), variables: ["Bea", "Ana", "extra"] }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), variables: undefined }), 422, "VALIDATION_ERROR");
    await expectRejected(() => start({ ...valid(), templateName: "ping", variables: ["x"] }), 422, "VALIDATION_ERROR");
  });

  it("a new number: creates identity, customer and conversation, assigned to the key owner, and sends the template", async () => {
    const before = await counts();
    const r = await start({ ...valid(), phone: "611 222 333" });
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(CONVERSATION_KEYS);
    expect(r.body).toEqual({
      id: expect.any(String),
      channel: "whatsapp",
      channelId: acme.channels.wa,
      status: "active",
      subject: null,
      customer: { id: expect.any(String), name: null, email: null, phone: "+34611222333", customerId: null },
      assignedOperatorId: acme.users.ana,
      lastMessagePreview: "Hello Bea, this is Ana",
      lastMessageAt: T0.toISOString(),
      // Created with its first message in one transaction: one version; updatedAt on the database's clock.
      version: 1,
      createdAt: T0.toISOString(),
      updatedAt: expect.any(String),
    });
    expect(await counts()).toEqual({
      ...before,
      conversations: before.conversations + 1,
      identities: before.identities + 1,
      customers: before.customers + 1,
      messages: before.messages + 1,
    });
    expect(stub.requests).toHaveLength(1);
    expect(stub.requests[0]!.body.to).toBe("34611222333");
    const identity = await app.db.prisma.channelIdentity.findFirstOrThrow({
      where: { tenantId: acme.id, channelId: acme.channels.wa, externalId: "34611222333" },
    });
    const conv = await app.db.prisma.conversation.findFirstOrThrow({ where: { id: r.body.id } });
    expect(conv.identityId).toBe(identity.id);
    expect(conv.customerId).toBe(r.body.customer.id);
    const msgs = await app.request("GET", `/public/v1/conversations/${r.body.id}/messages`, { key });
    expect(msgs.body.items).toEqual([
      {
        id: expect.any(String),
        conversationId: r.body.id,
        role: "operator",
        content: "Hello Bea, this is Ana",
        deliveryStatus: "sent",
        createdAt: T0.toISOString(),
        updatedAt: expect.any(String),
      },
    ]);
    // It leads the conversation list now.
    expect((await list()).body.items[0].id).toBe(r.body.id);
    // Starting again resumes it.
    stub.reset();
    const again = await start({ ...valid(), phone: "+34611222333" });
    expect(again.body.id).toBe(r.body.id);
    expect(stub.requests).toHaveLength(1);
  });

  it("a new identity is linked to a live contact with the same phone, never to a deleted one", async () => {
    const dana = await start({ ...valid(), phone: "+34 600 000 004" });
    expect(dana.status).toBe(201);
    expect(dana.body.customer).toEqual({
      id: expect.any(String),
      name: "Dana Gil",
      email: "dana@example.test",
      phone: "+34600000004",
      customerId: acme.contacts.dana,
    });
    expect((await list({ customerId: acme.contacts.dana! })).body.items.map((i: any) => i.id)).toEqual([dana.body.id]);
    const gone = await start({ ...valid(), phone: "+34600000009" });
    expect(gone.status).toBe(201);
    expect(gone.body.customer.customerId).toBeNull();
  });

  it("resumes the open conversation of an existing identity, assigned to each caller's key owner", async () => {
    const before = await counts();
    const r = await start({ ...valid(), phone: "+34600000001" });
    expect(r.status).toBe(201);
    expect(r.body.id).toBe(c("c1"));
    expect(r.body.assignedOperatorId).toBe(acme.users.ana);
    expect(r.body.status).toBe("active");
    expect(r.body.subject).toBe("Flat in Gracia");
    expect(r.body.customer.customerId).toBe(acme.contacts.bea);
    expect(r.body.lastMessagePreview).toBe("Hello Bea, this is Ana");
    expect(r.body.lastMessageAt).toBe(T0.toISOString());
    expect(r.body.createdAt).toBe("2026-11-21T10:00:00.000Z");
    const byBob = await start({ ...valid(), phone: "600 000 001", variables: ["Bea", "Bob"] }, bobKey);
    expect(byBob.status).toBe(201);
    expect(byBob.body.id).toBe(c("c1"));
    expect(byBob.body.assignedOperatorId).toBe(acme.users.bob);
    expect(stub.requests).toHaveLength(2);
    expect(await counts()).toEqual({ ...before, messages: before.messages + 2 });
  });

  it("a resolved conversation is not resumed: a new one is opened for the same identity", async () => {
    const before = await counts();
    const r = await start({ ...valid(), phone: "+34600000003" });
    expect(r.status).toBe(201);
    expect(r.body.id).not.toBe(c("c3"));
    expect(r.body.status).toBe("active");
    const [c3, fresh] = await Promise.all([
      app.db.prisma.conversation.findFirstOrThrow({ where: { id: c("c3") } }),
      app.db.prisma.conversation.findFirstOrThrow({ where: { id: r.body.id } }),
    ]);
    expect(fresh.identityId).toBe(c3.identityId);
    expect(fresh.customerId).toBe(c3.customerId);
    expect(c3.status).toBe("resolved");
    expect(r.body.customer.customerId).toBe(acme.contacts.carl);
    expect(await counts()).toEqual({
      ...before,
      conversations: before.conversations + 1,
      messages: before.messages + 1,
    });
    // The next start resumes the new one.
    const again = await start({ ...valid(), phone: "+34600000003" });
    expect(again.body.id).toBe(r.body.id);
  });

  it("links the lead when it has no conversation yet, and leaves a linked lead alone", async () => {
    const r = await start({ ...valid(), phone: "+34611000001", leadId: acme.leads.l1 });
    expect(r.status).toBe(201);
    expect((await app.db.prisma.lead.findFirstOrThrow({ where: { id: acme.leads.l1 } })).conversationId).toBe(
      r.body.id,
    );
    const r2 = await start({ ...valid(), phone: "+34611000002", leadId: acme.leads.l2 });
    expect(r2.status).toBe(201);
    expect((await app.db.prisma.lead.findFirstOrThrow({ where: { id: acme.leads.l2 } })).conversationId).toBe(c("c2"));
  });

  it("a template without placeholders takes no variables", async () => {
    const r = await start({ ...valid(), phone: "+34611000003", templateName: "ping", variables: [] });
    expect(r.status).toBe(201);
    expect(r.body.lastMessagePreview).toBe("Any news?");
    const { variables: _v, ...noVariables } = { ...valid(), phone: "+34611000003", templateName: "ping" };
    expect((await start(noVariables)).status).toBe(201);
  });

  it("a repeat with the same Idempotency-Key and body sends no second template", async () => {
    const headers = { "Idempotency-Key": "start-once-1" };
    const body = { ...valid(), phone: "+34611000010" };
    const before = await counts();
    const first = await start(body, key, headers);
    expect(first.status).toBe(201);
    const second = await start(body, key, headers);
    expect(second.status).toBe(201);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    expect(stub.requests).toHaveLength(1);
    expect(await counts()).toEqual({
      ...before,
      conversations: before.conversations + 1,
      identities: before.identities + 1,
      customers: before.customers + 1,
      messages: before.messages + 1,
    });
    stub.reset();
    await expectRejected(
      () => start({ ...body, variables: ["Other", "Body"] }, key, headers),
      422,
      "IDEMPOTENCY_KEY_REUSE_MISMATCH",
    );
  });

  it("concurrent duplicates with one Idempotency-Key: exactly one template request", async () => {
    const headers = { "Idempotency-Key": "start-concurrent-1" };
    const body = { ...valid(), phone: "+34611000020" };
    const before = await counts();
    const results = await Promise.all([
      start(body, key, headers),
      start(body, key, headers),
      start(body, key, headers),
    ]);
    for (const r of results) {
      expect(r.status).toBe(201);
      expect(r.body).toEqual(results[0]!.body);
    }
    expect(stub.requests).toHaveLength(1);
    expect(await counts()).toEqual({
      ...before,
      conversations: before.conversations + 1,
      identities: before.identities + 1,
      customers: before.customers + 1,
      messages: before.messages + 1,
    });
  });

  it("concurrent starts to one new number without a key open one conversation", async () => {
    const body = { ...valid(), phone: "+34611000030" };
    const before = await counts();
    const results = await Promise.all([start(body), start(body, bobKey)]);
    for (const r of results) expect(r.status).toBe(201);
    expect(results[0]!.body.id).toBe(results[1]!.body.id);
    expect(stub.requests).toHaveLength(2);
    expect(await counts()).toEqual({
      ...before,
      conversations: before.conversations + 1,
      identities: before.identities + 1,
      customers: before.customers + 1,
      messages: before.messages + 2,
    });
  });

  it("needs tenant:conversations.manage", async () => {
    await expectRejected(() => start(valid(), noneKey), 403, "PERMISSION_DENIED");
    await expectRejected(() => start(valid(), readKey), 403, "PERMISSION_DENIED");
    await expectRejected(() => start({ bogus: true }, readKey), 403, "PERMISSION_DENIED");
  });
});
