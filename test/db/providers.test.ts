// Messaging providers (shared/contracts/operations.md "Messaging providers"): the exact HTTP request
// each kind makes, and every failed-delivery path (missing credentials, non-2xx, an answer without
// an id, a provider that never answers, a refused connection) → 201 with deliveryStatus "failed".
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createProviders } from "../../server/channels/providers.js";
import { startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { closedPortUrl, startProviderStub, type ProviderStub } from "../helpers/provider-stub.js";

const T0 = new Date("2026-11-21T12:00:00.000Z");
const recent = new Date(T0.getTime() - 3600_000).toISOString();

let app: TestApp;
let stub: ProviderStub;
let refused: string;
type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let acme: Ids;
let key: string;

beforeAll(async () => {
  app = await startApp();
  stub = await startProviderStub();
  refused = await closedPortUrl();
  const channel = (
    ref: string,
    kind: "whatsapp" | "messenger" | "instagram" | "telegram" | "web",
    config: Record<string, unknown> = {},
  ) => ({ ref, kind, name: ref, config });
  const wa = { baseUrl: stub.baseUrl, phoneNumberId: "1001", accessToken: "wa-secret-token" };
  const conversation = (ref: string, ch: string, externalId: string) => ({
    ref,
    channel: ch,
    identity: { externalId, name: null, phone: null, email: null, contact: null },
    messages: [{ role: "user" as const, content: "hi", createdAt: recent }],
  });
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        channels: [
          channel("wa", "whatsapp", wa),
          channel("waNoToken", "whatsapp", { baseUrl: stub.baseUrl, phoneNumberId: "1001" }),
          channel("waNoPhone", "whatsapp", { baseUrl: stub.baseUrl, accessToken: "wa-secret-token" }),
          channel("waRefused", "whatsapp", { ...wa, baseUrl: refused }),
          channel("waSlash", "whatsapp", { ...wa, baseUrl: `${stub.baseUrl}/v21.0/` }),
          channel("fb", "messenger", { baseUrl: stub.baseUrl, accessToken: "fb-secret-token" }),
          channel("fbNoCreds", "messenger", { baseUrl: stub.baseUrl }),
          channel("ig", "instagram", { baseUrl: stub.baseUrl, accessToken: "ig-secret-token" }),
          channel("igNoCreds", "instagram", { baseUrl: stub.baseUrl }),
          channel("tg", "telegram", { baseUrl: stub.baseUrl, token: "123456:tg-secret-token" }),
          channel("tgNoCreds", "telegram", { baseUrl: stub.baseUrl }),
          channel("tgRefused", "telegram", { baseUrl: refused, token: "123456:tg-secret-token" }),
          channel("site", "web"),
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
          { ref: "plain", channel: "wa", name: "ping", language: "en_US", body: "Hi there, any news?", approved: true },
          {
            ref: "helloNoToken",
            channel: "waNoToken",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}",
            approved: true,
          },
          {
            ref: "helloRefused",
            channel: "waRefused",
            name: "welcome",
            language: "en",
            body: "Hello {{1}}",
            approved: true,
          },
        ],
        conversations: [
          conversation("wa", "wa", "34600000001"),
          conversation("waNoToken", "waNoToken", "34600000001"),
          conversation("waNoPhone", "waNoPhone", "34600000001"),
          conversation("waRefused", "waRefused", "34600000001"),
          conversation("waSlash", "waSlash", "34600000001"),
          conversation("fb", "fb", "psid-42"),
          conversation("fbNoCreds", "fbNoCreds", "psid-42"),
          conversation("ig", "ig", "igsid-7"),
          conversation("igNoCreds", "igNoCreds", "igsid-7"),
          conversation("tg", "tg", "98765"),
          conversation("tgNoCreds", "tgNoCreds", "98765"),
          conversation("tgRefused", "tgRefused", "98765"),
          conversation("site", "site", "visitor-1"),
          { ref: "fbAnon", channel: "fb", identity: null, messages: [] },
        ],
      }),
    ),
  );
  acme = loaded.tenants.acme!;
  key = acme.apiKeys.full!.key;
});
afterAll(async () => {
  await app?.close();
  await stub?.close();
});
beforeEach(() => {
  app.setNow(T0);
  stub.reset();
});

const SECRETS = ["wa-secret-token", "fb-secret-token", "ig-secret-token", "tg-secret-token"];

async function send(ref: string, content: string) {
  const res = await app.request("POST", `/public/v1/conversations/${acme.conversations[ref]}/messages`, {
    key,
    body: { content },
  });
  expect(res.status).toBe(201);
  for (const s of SECRETS) expect(res.text).not.toContain(s);
  const row = await app.db.prisma.message.findFirstOrThrow({ where: { id: res.body.id } });
  expect(res.body.deliveryStatus).toBe(row.deliveryStatus);
  expect(row.content).toBe(content);
  expect(row.role).toBe("operator");
  return { res, row };
}

async function start(body: Record<string, unknown>) {
  const res = await app.request("POST", "/public/v1/conversations/start", { key, body });
  expect(res.status).toBe(201);
  for (const s of SECRETS) expect(res.text).not.toContain(s);
  const row = await app.db.prisma.message.findFirstOrThrow({
    where: { conversationId: res.body.id },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
  });
  return { res, row };
}

describe("text sends: the exact provider request per kind", () => {
  it("whatsapp: Cloud API text message", async () => {
    const { row } = await send("wa", "Hello from the API");
    expect(stub.requests).toHaveLength(1);
    const r = stub.requests[0]!;
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/1001/messages");
    expect(r.query).toEqual({});
    expect(r.headers.authorization).toBe("Bearer wa-secret-token");
    expect(r.headers["content-type"]).toMatch(/^application\/json/);
    expect(r.body).toEqual({
      messaging_product: "whatsapp",
      to: "34600000001",
      type: "text",
      text: { body: "Hello from the API" },
    });
    expect(row.deliveryStatus).toBe("sent");
    expect(row.providerMessageId).toMatch(/^wamid\./);
  });

  it("whatsapp: a baseUrl with a path and a trailing slash", async () => {
    await send("waSlash", "x");
    expect(stub.requests[0]!.path).toBe("/v21.0/1001/messages");
  });

  it("messenger: Graph Send API with access_token in the query", async () => {
    const { row } = await send("fb", "Hi on Messenger");
    expect(stub.requests).toHaveLength(1);
    const r = stub.requests[0]!;
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/me/messages");
    expect(r.query).toEqual({ access_token: "fb-secret-token" });
    expect(r.headers.authorization).toBeUndefined();
    expect(r.body).toEqual({ recipient: { id: "psid-42" }, message: { text: "Hi on Messenger" } });
    expect(row.deliveryStatus).toBe("sent");
    expect(row.providerMessageId).toMatch(/^m_/);
  });

  it("instagram: Graph Send API", async () => {
    const { row } = await send("ig", "Hi on Instagram");
    const r = stub.requests[0]!;
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/me/messages");
    expect(r.query).toEqual({ access_token: "ig-secret-token" });
    expect(r.body).toEqual({ recipient: { id: "igsid-7" }, message: { text: "Hi on Instagram" } });
    expect(row.deliveryStatus).toBe("sent");
  });

  it("telegram: Bot API sendMessage", async () => {
    const { row } = await send("tg", "Hi on Telegram");
    expect(stub.requests).toHaveLength(1);
    const r = stub.requests[0]!;
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/bot123456:tg-secret-token/sendMessage");
    expect(r.body).toEqual({ chat_id: "98765", text: "Hi on Telegram" });
    expect(row.deliveryStatus).toBe("sent");
    expect(row.providerMessageId).toMatch(/^\d+$/);
  });

  it("web: delivered inside the service, no provider call", async () => {
    const { row } = await send("site", "Hi on the website");
    expect(stub.requests).toHaveLength(0);
    expect(row.deliveryStatus).toBe("sent");
  });
});

describe("template sends (POST /conversations/start)", () => {
  it("with variables: one body component with the variables in order", async () => {
    const { res, row } = await start({
      channelId: acme.channels.wa,
      phone: "+34 611 222 333",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Bea", "Ana from Acme"],
    });
    expect(stub.requests).toHaveLength(1);
    const r = stub.requests[0]!;
    expect(r.method).toBe("POST");
    expect(r.path).toBe("/1001/messages");
    expect(r.headers.authorization).toBe("Bearer wa-secret-token");
    expect(r.body).toEqual({
      messaging_product: "whatsapp",
      to: "34611222333",
      type: "template",
      template: {
        name: "welcome",
        language: { code: "en" },
        components: [
          {
            type: "body",
            parameters: [
              { type: "text", text: "Bea" },
              { type: "text", text: "Ana from Acme" },
            ],
          },
        ],
      },
    });
    expect(row).toMatchObject({
      role: "operator",
      content: "Hello Bea, this is Ana from Acme",
      deliveryStatus: "sent",
    });
    expect(row.providerMessageId).toMatch(/^wamid\./);
    expect(res.body.lastMessagePreview).toBe("Hello Bea, this is Ana from Acme");
  });

  it("without variables: no components", async () => {
    const { row } = await start({
      channelId: acme.channels.wa,
      phone: "+34611222444",
      templateName: "ping",
      templateLanguage: "en_US",
    });
    expect(stub.requests).toHaveLength(1);
    expect(stub.requests[0]!.body).toEqual({
      messaging_product: "whatsapp",
      to: "34611222444",
      type: "template",
      template: { name: "ping", language: { code: "en_US" } },
    });
    expect(row).toMatchObject({ content: "Hi there, any news?", deliveryStatus: "sent" });
  });

  it("a failed template send still starts the conversation: 201, message failed", async () => {
    const { res, row } = await start({
      channelId: acme.channels.waNoToken,
      phone: "+34611222555",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Bea"],
    });
    expect(stub.requests).toHaveLength(0);
    expect(row).toMatchObject({ content: "Hello Bea", deliveryStatus: "failed", providerMessageId: null });
    expect(res.body.lastMessagePreview).toBe("Hello Bea");
  });

  it("a refused connection on a template send: 201, message failed", async () => {
    const { row } = await start({
      channelId: acme.channels.waRefused,
      phone: "+34611222666",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Bea"],
    });
    expect(row.deliveryStatus).toBe("failed");
  });

  it("a provider 401 on a template send: 201, message failed", async () => {
    stub.respond({ status: 401, body: { error: { message: "Invalid OAuth access token", code: 190 } } });
    const { row } = await start({
      channelId: acme.channels.wa,
      phone: "+34611222777",
      templateName: "ping",
      templateLanguage: "en_US",
    });
    expect(stub.requests).toHaveLength(1);
    expect(row.deliveryStatus).toBe("failed");
  });
});

describe("failed delivery: stored with deliveryStatus failed, still 201", () => {
  it("missing credentials: no request at all", async () => {
    for (const ref of ["waNoToken", "waNoPhone", "fbNoCreds", "igNoCreds", "tgNoCreds"]) {
      const { res, row } = await send(ref, `to ${ref}`);
      expect(res.body.deliveryStatus).toBe("failed");
      expect(row.providerMessageId).toBeNull();
    }
    expect(stub.requests).toHaveLength(0);
  });

  it("no channel identity to send to (messenger)", async () => {
    const { row } = await send("fbAnon", "anyone?");
    expect(row.deliveryStatus).toBe("failed");
    expect(stub.requests).toHaveLength(0);
  });

  it("provider answers 401 (rejected credentials) on every kind", async () => {
    stub.respond({ status: 401, body: { error: { message: "Invalid OAuth access token" } } });
    for (const ref of ["wa", "fb", "ig", "tg"]) {
      const { row } = await send(ref, `401 ${ref}`);
      expect(row.deliveryStatus).toBe("failed");
      expect(row.providerMessageId).toBeNull();
    }
    expect(stub.requests).toHaveLength(4);
  });

  it("provider answers 500", async () => {
    stub.respond({ status: 500, body: { error: "boom" } });
    expect((await send("wa", "500")).row.deliveryStatus).toBe("failed");
  });

  it("a 2xx answer without the message id is a failure", async () => {
    stub.respond({ status: 200, body: { messaging_product: "whatsapp" } });
    expect((await send("wa", "no id")).row.deliveryStatus).toBe("failed");
    stub.respond({ status: 200, body: { recipient_id: "psid-42" } });
    expect((await send("fb", "no id")).row.deliveryStatus).toBe("failed");
    stub.respond({ status: 200, body: { ok: true, result: {} } });
    expect((await send("tg", "no id")).row.deliveryStatus).toBe("failed");
    stub.respond({ status: 200, body: "not json" });
    expect((await send("wa", "not json")).row.deliveryStatus).toBe("failed");
  });

  it("a provider that never answers: failed after providerTimeoutMs (1500 ms)", async () => {
    stub.respond("hang");
    const started = Date.now();
    const { row } = await send("wa", "anyone there?");
    const elapsed = Date.now() - started;
    expect(row.deliveryStatus).toBe("failed");
    expect(stub.requests).toHaveLength(1);
    // Not before the timeout; and ended by it (unbounded, the send would hang to the test's 30 s),
    // with room for a busy machine's request and database write around it.
    expect(elapsed).toBeGreaterThanOrEqual(1400);
    expect(elapsed).toBeLessThan(15_000);
  });

  it("a refused connection", async () => {
    expect((await send("waRefused", "refused")).row.deliveryStatus).toBe("failed");
    expect((await send("tgRefused", "refused")).row.deliveryStatus).toBe("failed");
  });

  it("the failed message is listed like any other", async () => {
    app.setNow(new Date(T0.getTime() + 60_000));
    const { res } = await send("waNoToken", "listed");
    const list = await app.request("GET", `/public/v1/conversations/${acme.conversations.waNoToken}/messages`, {
      key,
      query: { limit: 1 },
    });
    expect(list.body.items[0]).toEqual(res.body);
    expect(list.body.items[0].deliveryStatus).toBe("failed");
  });
});

describe("adapters (unit)", () => {
  function capture() {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    return { lines, logger: pino({ level: "trace" }, stream) as any };
  }

  it("default base URLs: graph.facebook.com/v21.0 and api.telegram.org", async () => {
    const calls: string[] = [];
    const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (url: any) => {
      calls.push(String(url));
      return new Response(
        JSON.stringify({ messages: [{ id: "wamid.1" }], message_id: "m1", result: { message_id: 1 } }),
        { status: 200 },
      );
    });
    try {
      const p = createProviders({ timeoutMs: 1000, logger: capture().logger });
      expect(
        await p.send({ kind: "whatsapp", config: { phoneNumberId: "1001", accessToken: "a" } }, "+34 600", {
          kind: "text",
          text: "x",
        }),
      ).toEqual({ ok: true, providerMessageId: "wamid.1" });
      expect(
        await p.send({ kind: "messenger", config: { accessToken: "b c" } }, "psid", { kind: "text", text: "x" }),
      ).toEqual({ ok: true, providerMessageId: "m1" });
      expect(
        await p.send({ kind: "instagram", config: { accessToken: "d" } }, "igsid", { kind: "text", text: "x" }),
      ).toEqual({ ok: true, providerMessageId: "m1" });
      expect(await p.send({ kind: "telegram", config: { token: "1:t" } }, "42", { kind: "text", text: "x" })).toEqual({
        ok: true,
        providerMessageId: "1",
      });
      expect(await p.send({ kind: "web", config: {} }, "", { kind: "text", text: "x" })).toEqual({ ok: true });
      expect(calls).toEqual([
        "https://graph.facebook.com/v21.0/1001/messages",
        "https://graph.facebook.com/v21.0/me/messages?access_token=b%20c",
        "https://graph.facebook.com/v21.0/me/messages?access_token=d",
        "https://api.telegram.org/bot1:t/sendMessage",
      ]);
    } finally {
      spy.mockRestore();
    }
  });

  it("failures are logged without tokens and return no tokens", async () => {
    const { lines, logger } = capture();
    const p = createProviders({ timeoutMs: 300, logger });
    const results = [
      await p.send(
        { kind: "whatsapp", config: { baseUrl: refused, phoneNumberId: "1", accessToken: "wa-secret-token" } },
        "34600",
        { kind: "text", text: "x" },
      ),
      await p.send({ kind: "messenger", config: { baseUrl: refused, accessToken: "fb-secret-token" } }, "psid", {
        kind: "text",
        text: "x",
      }),
      await p.send({ kind: "telegram", config: { baseUrl: refused, token: "tg-secret-token" } }, "1", {
        kind: "text",
        text: "x",
      }),
    ];
    stub.respond("hang");
    results.push(
      await p.send({ kind: "telegram", config: { baseUrl: stub.baseUrl, token: "tg-secret-token" } }, "1", {
        kind: "text",
        text: "x",
      }),
    );
    stub.respond({ status: 401, body: { error: "tg-secret-token is wrong" } });
    results.push(
      await p.send({ kind: "instagram", config: { baseUrl: stub.baseUrl, accessToken: "ig-secret-token" } }, "1", {
        kind: "text",
        text: "x",
      }),
    );
    for (const r of results) expect(r.ok).toBe(false);
    expect(results.map((r) => r.reason)).toEqual([
      "connection refused",
      "connection refused",
      "connection refused",
      "provider timed out",
      "provider answered HTTP 401",
    ]);
    const text = lines.join("\n") + JSON.stringify(results);
    expect(lines.length).toBe(5);
    for (const s of SECRETS) expect(text).not.toContain(s);
  });

  it("templates are WhatsApp-only", async () => {
    const p = createProviders({ timeoutMs: 300, logger: capture().logger });
    const r = await p.send({ kind: "telegram", config: { baseUrl: stub.baseUrl, token: "t" } }, "1", {
      kind: "template",
      name: "n",
      language: "en",
      variables: [],
    });
    expect(r.ok).toBe(false);
    expect(stub.requests).toHaveLength(0);
  });
});
