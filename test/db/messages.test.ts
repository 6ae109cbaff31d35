// Messages: GET /conversations/{id}/messages (cursor pagination) and POST /conversations/{id}/messages
// (the WhatsApp 24-hour window, delivery outcome, Idempotency-Key), against a local provider stand-in.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { inboundMessage } from "../../server/admin/operations.js";
import { expectEnvelope, randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { startProviderStub, type ProviderStub } from "../helpers/provider-stub.js";

const T0 = new Date("2026-11-21T12:00:00.000Z");
const ago = (ms: number) => new Date(T0.getTime() - ms).toISOString();
const H = 3600_000;

let app: TestApp;
let stub: ProviderStub;
type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let acme: Ids;
let other: Ids;
let key: string;
let bobKey: string;
let readKey: string;
let noneKey: string;

const MESSAGE_KEYS = ["content", "conversationId", "createdAt", "deliveryStatus", "id", "role", "updatedAt"];

beforeAll(async () => {
  app = await startApp();
  stub = await startProviderStub();
  const base = tenant("acme");
  const wa = (
    ext: string,
    messages: { role: "user" | "operator"; content: string; createdAt: string }[],
    extra: object = {},
  ) => ({
    channel: "wa",
    identity: { externalId: ext, name: null, phone: `+${ext}`, email: null, contact: null },
    messages,
    ...extra,
  });
  const pageMessages = Array.from({ length: 9 }, (_, i) => ({
    role: (i % 2 ? "operator" : "user") as "user" | "operator",
    content: `m${i}`,
    // m3 and m4 share one timestamp: the id breaks the tie.
    createdAt: ago((10 - (i === 4 ? 3 : i)) * 60_000),
  }));
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
            config: { baseUrl: stub.baseUrl, phoneNumberId: "2002", accessToken: "t0k2" },
          },
          { ref: "site", kind: "web", name: "Website chat" },
          { ref: "fb", kind: "messenger", name: "Messenger", config: { baseUrl: stub.baseUrl, accessToken: "fbtok" } },
        ],
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001", email: "bea@example.test" }],
        conversations: [
          {
            ref: "open",
            ...wa("34600000001", [{ role: "user", content: "Hi!", createdAt: ago(2 * H) }]),
            identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", email: null, contact: "bea" },
          },
          {
            ref: "stale",
            ...wa("34600000003", [
              { role: "user", content: "old", createdAt: ago(25 * H) },
              { role: "operator", content: "reply", createdAt: ago(24.5 * H) },
            ]),
          },
          { ref: "stale2", ...wa("34600000007", [{ role: "user", content: "old", createdAt: ago(30 * H) }]) },
          { ref: "exact", ...wa("34600000004", [{ role: "user", content: "edge", createdAt: ago(24 * H) }]) },
          { ref: "justin", ...wa("34600000005", [{ role: "user", content: "edge", createdAt: ago(24 * H - 1) }]) },
          // Same identity (channel + externalId) in two conversations: the window is the identity's.
          {
            ref: "sharedA",
            ...wa("34600000006", [{ role: "user", content: "recent", createdAt: ago(1 * H) }], { status: "resolved" }),
          },
          { ref: "sharedB", ...wa("34600000006", [{ role: "operator", content: "old", createdAt: ago(40 * H) }]) },
          // Recent operator messages do not open the window; only the customer's do.
          { ref: "opOnly", ...wa("34600000008", [{ role: "operator", content: "ping", createdAt: ago(1 * H) }]) },
          // The same number on another WhatsApp channel is another identity: its message does not count.
          {
            ref: "otherChan",
            channel: "wa2",
            identity: { externalId: "34600000003", name: null, phone: null, email: null, contact: null },
            messages: [{ role: "user", content: "hey", createdAt: ago(1 * H) }],
          },
          {
            ref: "anon",
            channel: "wa",
            identity: null,
            messages: [{ role: "user", content: "no identity", createdAt: ago(1 * H) }],
          },
          {
            ref: "web",
            channel: "site",
            identity: { externalId: "visitor-1", name: "Visitor", phone: null, email: null, contact: null },
            messages: [],
            createdAt: ago(50 * H),
          },
          { ref: "webanon", channel: "site", identity: null, messages: [], createdAt: ago(50 * H) },
          {
            ref: "fbconv",
            channel: "fb",
            identity: { externalId: "psid-1", name: null, phone: null, email: null, contact: null },
            messages: [],
            createdAt: ago(50 * H),
          },
          { ref: "pages", channel: "site", identity: null, messages: pageMessages },
          { ref: "empty", channel: "site", identity: null, messages: [], createdAt: ago(50 * H) },
        ],
      }),
      tenant("other", {
        conversations: [
          {
            ref: "theirs",
            channel: "site",
            identity: null,
            messages: [{ role: "user", content: "secret", createdAt: ago(1 * H) }],
          },
        ],
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

const conv = (ref: string) => acme.conversations[ref]!;
const list = (id: string, query: Record<string, string | number | undefined> = {}, k = key) =>
  app.request("GET", `/public/v1/conversations/${id}/messages`, { key: k, query });
const send = (id: string, body: unknown, k = key, headers: Record<string, string> = {}) =>
  app.request("POST", `/public/v1/conversations/${id}/messages`, { key: k, body, headers });
const messageCount = () => app.db.prisma.message.count({ where: { tenantId: acme.id } });
const conversationRow = (id: string) => app.db.prisma.conversation.findFirstOrThrow({ where: { id } });

/** Asserts status, error code, no provider call and no new message row. */
async function expectRejected(p: () => Promise<any>, status: number, code: string) {
  const before = await messageCount();
  const res = await p();
  expectEnvelope(res, status, code);
  expect(stub.requests).toHaveLength(0);
  expect(await messageCount()).toBe(before);
  return res;
}

describe("GET /conversations/{id}/messages", () => {
  it("lists newest first with exactly the message fields", async () => {
    const r = await list(conv("stale"));
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["items", "pagination"]);
    expect(r.body.items.map((m: any) => m.content)).toEqual(["reply", "old"]);
    for (const m of r.body.items) expect(Object.keys(m).sort()).toEqual(MESSAGE_KEYS);
    expect(r.body.items[0]).toMatchObject({
      conversationId: conv("stale"),
      role: "operator",
      deliveryStatus: "sent",
      createdAt: ago(24.5 * H),
    });
    expect(r.body.items[1]).toMatchObject({ role: "user", deliveryStatus: "received", createdAt: ago(25 * H) });
    expect(r.body.pagination).toEqual({ nextCursor: null, prevCursor: null, hasMore: false });
  });

  it("an empty conversation gives an empty page", async () => {
    const r = await list(conv("empty"));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ items: [], pagination: { nextCursor: null, prevCursor: null, hasMore: false } });
  });

  it("pages with nextCursor without gaps or duplicates while new messages arrive between fetches", async () => {
    const all = (await list(conv("pages"), { limit: 200 })).body.items.map((m: any) => m.id);
    expect(all).toHaveLength(9);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    for (;;) {
      const r = await list(conv("pages"), { limit: 2, cursor });
      expect(r.status).toBe(200);
      pages += 1;
      seen.push(...r.body.items.map((m: any) => m.id));
      expect(r.body.pagination.prevCursor).toBeNull();
      // New messages (newer than everything listed) arrive between page fetches.
      await inboundMessage(app.db, conv("pages"), `late ${pages}`, new Date(T0.getTime() + pages * 1000));
      expect((await send(conv("pages"), { content: `op ${pages}` })).status).toBe(201);
      if (!r.body.pagination.nextCursor) {
        expect(r.body.pagination.hasMore).toBe(false);
        break;
      }
      expect(r.body.pagination.hasMore).toBe(true);
      cursor = r.body.pagination.nextCursor;
    }
    expect(pages).toBe(5);
    expect(seen).toEqual(all);
    expect(new Set(seen).size).toBe(9);
    // Ordering: createdAt desc, then id desc for equal timestamps.
    const rows = await app.db.prisma.message.findMany({ where: { id: { in: all } } });
    const byId = new Map(rows.map((m) => [m.id, m]));
    for (let i = 1; i < all.length; i++) {
      const a = byId.get(all[i - 1])!;
      const b = byId.get(all[i])!;
      expect(
        a.createdAt.getTime() > b.createdAt.getTime() ||
          (a.createdAt.getTime() === b.createdAt.getTime() && a.id > b.id),
      ).toBe(true);
    }
    // The new messages come first on a fresh first page.
    const fresh = await list(conv("pages"), { limit: 3 });
    expect(fresh.body.items.map((m: any) => m.content)).toEqual(["late 5", "late 4", "late 3"]);
  });

  it("an exact page boundary ends with hasMore false and nextCursor null", async () => {
    const first = await list(conv("stale"), { limit: 1 });
    expect(first.body.pagination.hasMore).toBe(true);
    const second = await list(conv("stale"), { limit: 1, cursor: first.body.pagination.nextCursor });
    expect(second.body.items.map((m: any) => m.content)).toEqual(["old"]);
    expect(second.body.pagination).toEqual({ nextCursor: null, prevCursor: null, hasMore: false });
  });

  it("limit defaults to 50 and is bounded 1–200", async () => {
    for (let i = 0; i < 55; i++)
      await inboundMessage(app.db, conv("empty"), `n${i}`, new Date(T0.getTime() - i * 1000));
    const r = await list(conv("empty"));
    expect(r.body.items).toHaveLength(50);
    expect(r.body.pagination.hasMore).toBe(true);
    expect((await list(conv("empty"), { limit: 200 })).body.items).toHaveLength(55);
    expect((await list(conv("empty"), { limit: 1 })).body.items).toHaveLength(1);
    for (const limit of ["0", "201", "-1", "1.5", "abc", "1e2"])
      expectEnvelope(await list(conv("empty"), { limit }), 422, "VALIDATION_ERROR");
  });

  it("a malformed cursor is 422", async () => {
    const b64 = (v: unknown) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
    for (const cursor of [
      "!!!",
      "not-a-cursor",
      b64("garbage"),
      b64({ t: "2026-11-21T12:00:00.000Z" }),
      b64({ t: "yesterday", i: randomUuid() }),
      b64({ t: "2026-11-21T12:00:00.000Z", i: "nope" }),
      b64([1, 2]),
    ])
      expectEnvelope(await list(conv("pages"), { cursor }), 422, "VALIDATION_ERROR");
  });

  it("a foreign or unknown conversation is 404, also with a malformed cursor", async () => {
    expectEnvelope(await list(other.conversations.theirs!), 404, "NOT_FOUND");
    expectEnvelope(await list(randomUuid()), 404, "NOT_FOUND");
    expectEnvelope(await list(other.conversations.theirs!, { cursor: "!!!" }), 404, "NOT_FOUND");
    expectEnvelope(await list(randomUuid(), { cursor: "!!!" }), 404, "NOT_FOUND");
  });

  it("a malformed conversation id is 422", async () => {
    expectEnvelope(await list("not-a-uuid"), 422, "VALIDATION_ERROR");
  });

  it("needs tenant:conversations.read", async () => {
    expectEnvelope(await list(conv("stale"), {}, noneKey), 403, "PERMISSION_DENIED");
    expect((await list(conv("stale"), {}, readKey)).status).toBe(200);
  });
});

describe("POST /conversations/{id}/messages", () => {
  it("web: 201, stored as operator message by the key owner, delivered in the service", async () => {
    const before = await messageCount();
    const r = await send(conv("web"), { content: "Hello from the API" });
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(MESSAGE_KEYS);
    expect(r.body).toMatchObject({
      conversationId: conv("web"),
      role: "operator",
      content: "Hello from the API",
      deliveryStatus: "sent",
      createdAt: T0.toISOString(),
    });
    expect(stub.requests).toHaveLength(0);
    expect(await messageCount()).toBe(before + 1);
    const row = await app.db.prisma.message.findFirstOrThrow({ where: { id: r.body.id } });
    expect(row.authorUserId).toBe(acme.users.ana);
    const c = await conversationRow(conv("web"));
    expect(c.lastMessagePreview).toBe("Hello from the API");
    expect(c.lastMessageAt.toISOString()).toBe(T0.toISOString());
    // updatedAt is the database's clock (the "row_touch" trigger), not the service's T0.
    expect(c.updatedAt.getTime()).toBeGreaterThan(T0.getTime());
    // The list shows it first.
    expect((await list(conv("web"))).body.items[0].id).toBe(r.body.id);
  });

  it("the author is the key owner", async () => {
    const r = await send(conv("web"), { content: "from bob" }, bobKey);
    expect(r.status).toBe(201);
    const row = await app.db.prisma.message.findFirstOrThrow({ where: { id: r.body.id } });
    expect(row.authorUserId).toBe(acme.users.bob);
  });

  it("web without an identity still delivers", async () => {
    const r = await send(conv("webanon"), { content: "hi" });
    expect(r.status).toBe(201);
    expect(r.body.deliveryStatus).toBe("sent");
  });

  it("a long message is previewed in 200 characters", async () => {
    const content = "x".repeat(4096);
    const r = await send(conv("webanon"), { content });
    expect(r.status).toBe(201);
    expect(r.body.content).toBe(content);
    const c = await conversationRow(conv("webanon"));
    expect(c.lastMessagePreview).toHaveLength(200);
  });

  it("whatsapp with an open window: 201, sent through the Cloud API", async () => {
    const r = await send(conv("open"), { content: "Your viewing is confirmed" });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ role: "operator", deliveryStatus: "sent", content: "Your viewing is confirmed" });
    expect(stub.requests).toHaveLength(1);
    const req = stub.requests[0]!;
    expect(req.method).toBe("POST");
    expect(req.path).toBe("/1001/messages");
    expect(req.headers.authorization).toBe("Bearer t0k");
    expect(req.body).toEqual({
      messaging_product: "whatsapp",
      to: "34600000001",
      type: "text",
      text: { body: "Your viewing is confirmed" },
    });
    const row = await app.db.prisma.message.findFirstOrThrow({ where: { id: r.body.id } });
    expect(row.providerMessageId).toMatch(/^wamid\./);
    expect(r.text).not.toContain("t0k");
  });

  it("whatsapp with a closed window: 409, nothing written, no send", async () => {
    const before = await conversationRow(conv("stale"));
    await expectRejected(() => send(conv("stale"), { content: "hello?" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
    const after = await conversationRow(conv("stale"));
    expect(after.lastMessagePreview).toBe(before.lastMessagePreview);
    expect(after.lastMessageAt).toEqual(before.lastMessageAt);
  });

  it("the window is exactly 24 hours", async () => {
    await expectRejected(() => send(conv("exact"), { content: "x" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
    const r = await send(conv("justin"), { content: "x" });
    expect(r.status).toBe(201);
    expect(stub.requests).toHaveLength(1);
  });

  it("the window closes as the clock moves on", async () => {
    app.setNow(new Date(T0.getTime() + 21 * H));
    expect((await send(conv("open"), { content: "still open" })).status).toBe(201);
    stub.reset();
    app.setNow(new Date(T0.getTime() + 22 * H + 1));
    // open's newest user message is at T0-2h: at T0+22h+1ms it is more than 24 h old.
    await expectRejected(() => send(conv("open"), { content: "too late" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
  });

  it("the window is the identity's across its conversations on that channel", async () => {
    expect((await send(conv("sharedB"), { content: "x" })).status).toBe(201);
    expect(stub.requests).toHaveLength(1);
  });

  it("operator messages do not open the window, nor the same number on another channel", async () => {
    await expectRejected(() => send(conv("opOnly"), { content: "x" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
    // stale's number (34600000003) wrote 1 h ago on wa2, not on wa.
    await expectRejected(() => send(conv("stale"), { content: "x" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
    expect((await send(conv("otherChan"), { content: "x" })).status).toBe(201);
  });

  it("no linked channel identity: 409 even with a recent user message", async () => {
    await expectRejected(() => send(conv("anon"), { content: "x" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
  });

  it("other kinds have no window: the send is attempted", async () => {
    const r = await send(conv("fbconv"), { content: "hello on messenger" });
    expect(r.status).toBe(201);
    expect(r.body.deliveryStatus).toBe("sent");
    expect(stub.requests).toHaveLength(1);
    expect(stub.requests[0]!.path).toBe("/me/messages");
  });

  it("an inbound message (admin inbound-message) reopens the window", async () => {
    await expectRejected(() => send(conv("stale"), { content: "x" }), 409, "MESSAGING_SESSION_WINDOW_CLOSED");
    const inbound = await inboundMessage(app.db, conv("stale"), "I'm back", app.services.now());
    expect(inbound).toMatchObject({
      conversationId: conv("stale"),
      role: "user",
      content: "I'm back",
      deliveryStatus: "received",
      createdAt: T0.toISOString(),
    });
    expect(Object.keys(inbound).sort()).toEqual(MESSAGE_KEYS);
    const c = await conversationRow(conv("stale"));
    expect(c.lastMessagePreview).toBe("I'm back");
    const r = await send(conv("stale"), { content: "Welcome back" });
    expect(r.status).toBe(201);
    expect(stub.requests).toHaveLength(1);
  });

  it("the 409 is not cached under an Idempotency-Key: a retry re-checks the window", async () => {
    const headers = { "Idempotency-Key": "retry-after-window-1" };
    await expectRejected(
      () => send(conv("stale2"), { content: "hello" }, key, headers),
      409,
      "MESSAGING_SESSION_WINDOW_CLOSED",
    );
    await expectRejected(
      () => send(conv("stale2"), { content: "hello" }, key, headers),
      409,
      "MESSAGING_SESSION_WINDOW_CLOSED",
    );
    await inboundMessage(app.db, conv("stale2"), "hi again", T0);
    const before = await messageCount();
    const r = await send(conv("stale2"), { content: "hello" }, key, headers);
    expect(r.status).toBe(201);
    expect(stub.requests).toHaveLength(1);
    // A repeat replays: same message, no second send, no second row.
    const again = await send(conv("stale2"), { content: "hello" }, key, headers);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(r.body);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(stub.requests).toHaveLength(1);
    expect(await messageCount()).toBe(before + 1);
    // Same key, different body.
    stub.reset();
    await expectRejected(
      () => send(conv("stale2"), { content: "other" }, key, headers),
      422,
      "IDEMPOTENCY_KEY_REUSE_MISMATCH",
    );
  });

  it("without an Idempotency-Key each request sends", async () => {
    expect((await send(conv("open"), { content: "one" })).status).toBe(201);
    expect((await send(conv("open"), { content: "one" })).status).toBe(201);
    expect(stub.requests).toHaveLength(2);
  });

  it("validates the body: content only, 1–4096 characters", async () => {
    for (const body of [
      {},
      { content: "" },
      { content: "x".repeat(4097) },
      { content: 5 },
      { content: null },
      { content: "hi", role: "user" },
      { content: "hi", authorUserId: acme.users.bob },
      { content: "hi", attachments: [] },
      { text: "hi" },
    ])
      await expectRejected(() => send(conv("web"), body), 422, "VALIDATION_ERROR");
    await expectRejected(
      () =>
        app.request("POST", `/public/v1/conversations/${conv("web")}/messages`, {
          key,
          raw: "{oops",
          headers: { "Content-Type": "application/json" },
        }),
      422,
      "VALIDATION_ERROR",
    );
  });

  it("a foreign, unknown or malformed conversation id", async () => {
    const theirsBefore = await app.db.prisma.message.count({ where: { conversationId: other.conversations.theirs! } });
    await expectRejected(() => send(other.conversations.theirs!, { content: "x" }), 404, "NOT_FOUND");
    await expectRejected(() => send(randomUuid(), { content: "x" }), 404, "NOT_FOUND");
    await expectRejected(() => send("nope", { content: "x" }), 422, "VALIDATION_ERROR");
    expect(await app.db.prisma.message.count({ where: { conversationId: other.conversations.theirs! } })).toBe(
      theirsBefore,
    );
  });

  it("needs tenant:conversations.manage", async () => {
    await expectRejected(() => send(conv("web"), { content: "x" }, noneKey), 403, "PERMISSION_DENIED");
    await expectRejected(() => send(conv("web"), { content: "x" }, readKey), 403, "PERMISSION_DENIED");
    // The scope check comes before the body check and before the lookup.
    await expectRejected(() => send(randomUuid(), { bogus: 1 }, readKey), 403, "PERMISSION_DENIED");
  });
});
