// The internal tRPC API (issue 7): the app router at /trpc behind the same guard as /public/v1 (keys,
// plan gate, quotas, scopes), errors carrying the public envelope in error.data.envelope, and the
// platform-admin router at /trpc-admin behind the internal token — all through @trpc/client.
import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import type { AdminRouter, AppOutputs, AppRouter } from "../routers/client-types.js";
import { randomUuid, startApp, type TestApp } from "./helpers/app.js";
import { fixture, tenant } from "./helpers/fixtures.js";

const TOKEN = "test-token";

let app: TestApp & { testDb: Awaited<ReturnType<typeof startApp>>["testDb"] };
type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let acme: Ids;
let other: Ids;
let spare: Ids;

beforeAll(async () => {
  app = await startApp({ config: { internalToken: TOKEN } });
  const withData = (ref: string) =>
    tenant(ref, {
      apiKeys: [
        { ref: "full", owner: "ana", scopes: "all" },
        { ref: "none", owner: "ana", scopes: [] },
        { ref: "leadsonly", owner: "ana", scopes: ["tenant:leads.read"] },
      ],
      contacts: [{ ref: "c1", fullName: "Carla Gómez", phone: "+34600000001" }],
      leads: [{ ref: "l1", customerName: `Lead of ${ref}` }],
      conversations: [{ ref: "conv1", channel: "site", identity: { externalId: `visitor-${ref}`, contact: "c1" } }],
    });
  const loaded = await app.load(fixture(withData("acme"), withData("other"), withData("spare")));
  acme = loaded.tenants.acme!;
  other = loaded.tenants.other!;
  spare = loaded.tenants.spare!;
});
afterAll(() => app.close());

const client = (key?: string, url = app.url) =>
  createTRPCClient<AppRouter>({ links: [httpLink({ url: `${url}/trpc`, headers: key === undefined ? {} : { "X-API-Key": key } })] });

const admin = (authorization?: string, url = app.url) =>
  createTRPCClient<AdminRouter>({
    links: [httpBatchLink({ url: `${url}/trpc-admin`, headers: authorization === undefined ? {} : { Authorization: authorization } })],
  });

/** The TRPCClientError a call fails with. */
async function failure<R extends AppRouter | AdminRouter = AppRouter>(p: Promise<unknown>): Promise<TRPCClientError<R>> {
  try {
    await p;
  } catch (e) {
    if (e instanceof TRPCClientError) return e as TRPCClientError<R>;
    throw e;
  }
  throw new Error("expected the call to fail");
}

const httpResponse = (err: TRPCClientError<any>) => err.meta?.response as Response;

/** Asserts HTTP status, tRPC data and the public envelope of an app error; returns the envelope. */
function expectAppError(err: TRPCClientError<AppRouter>, status: number, code: string) {
  const res = httpResponse(err);
  expect(res.status).toBe(status);
  expect(err.data?.httpStatus).toBe(status);
  const env = err.data!.envelope;
  expect(env.error).toBe(code);
  expect(Object.keys(env).sort()).toEqual(["details", "error", "message", "request_id"]);
  expect(err.message).toBe(env.message);
  expect(env.request_id).toBe(res.headers.get("x-request-id"));
  return env;
}

const rawTrpc = (path: string, init: RequestInit & { key?: string } = {}) =>
  fetch(`${app.url}${path}`, { ...init, headers: { ...(init.key ? { "X-API-Key": init.key } : {}), ...(init.headers as Record<string, string>) } });

const json = (res: Response): Promise<any> => res.json();

const ticketCount = (tenantId: string) => app.db.prisma.ticket.count({ where: { tenantId } });

describe("/trpc: the app procedures for internal apps", () => {
  it("lists leads with full type inference", async () => {
    const page = await client(acme.apiKeys.full!.key).leads.list.query({ limit: 5 });
    expectTypeOf(page.total).toEqualTypeOf<number>();
    expectTypeOf(page.items).toEqualTypeOf<AppOutputs["leads"]["list"]["items"]>();
    expectTypeOf(page.cursor).toEqualTypeOf<string | null>();
    expect(page.total).toBe(1);
    expect(page.items.map((l) => l.customerName)).toEqual(["Lead of acme"]);
    expect(page.items[0]!.id).toBe(acme.leads.l1);
    expect(page.pagination.pageSize).toBe(5);
  });

  it("creates a ticket through the same procedure and rules as POST /public/v1/tickets", async () => {
    const api = client(acme.apiKeys.full!.key);
    const ticket = await api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "Printer on fire", comment: "Send help" });
    expectTypeOf(ticket.status).toEqualTypeOf<"open" | "pending" | "resolved" | "closed">();
    expectTypeOf(ticket.createdAt).toEqualTypeOf<string>();
    expect(ticket).toMatchObject({ customerId: acme.contacts.c1, subject: "Printer on fire", status: "open", createdBy: acme.users.ana });
    expect(ticket.comments.map((c) => c.body)).toEqual(["Send help"]);
    // Visible through both transports.
    const listed = await api.tickets.list.query({ customerId: acme.contacts.c1 });
    expect(listed.items.map((t) => t.id)).toContain(ticket.id);
    const rest = await app.request("GET", "/public/v1/tickets", { key: acme.apiKeys.full!.key });
    expect(rest.body.items.map((t: { id: string }) => t.id)).toContain(ticket.id);
  });

  it("answers the caller introspection with the key's scopes", async () => {
    const me = await client(acme.apiKeys.leadsonly!.key).me.get.query({});
    expect(me).toMatchObject({ tenantId: acme.id, scopes: ["tenant:leads.read"], plan: "pro" });
  });

  it("sets the X-RateLimit-* headers on /trpc responses too, counting each call", async () => {
    const key = spare.apiKeys.full!.key;
    const a = await rawTrpc(`/trpc/me.get?input=${encodeURIComponent("{}")}`, { key });
    const b = await rawTrpc(`/trpc/me.get?input=${encodeURIComponent("{}")}`, { key });
    expect(a.status).toBe(200);
    const body = await json(a);
    for (const res of [a, b]) {
      expect(res.headers.get("x-ratelimit-limit")).toBe(String(body.result.data.rateLimit.perMinute));
      expect(res.headers.get("x-ratelimit-reset")).toMatch(/^\d+$/);
    }
    expect(Number(b.headers.get("x-ratelimit-remaining"))).toBe(Number(a.headers.get("x-ratelimit-remaining")) - 1);
    const anonymous = await rawTrpc(`/trpc/me.get?input=${encodeURIComponent("{}")}`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("x-ratelimit-limit")).toMatch(/^\d+$/);
  });

  it("does not batch: one call is one request against the quota (422 VALIDATION_ERROR per call)", async () => {
    const batched = createTRPCClient<AppRouter>({
      links: [httpBatchLink({ url: `${app.url}/trpc`, headers: { "X-API-Key": acme.apiKeys.full!.key } })],
    });
    const both = await Promise.allSettled([batched.me.get.query({}), batched.leads.list.query({})]);
    for (const r of both) {
      expect(r.status).toBe("rejected");
      expectAppError((r as PromiseRejectedResult).reason, 422, "VALIDATION_ERROR");
    }
  });

  it("honours Idempotency-Key on mutations, as over REST", async () => {
    const key = `trpc-${randomUuid()}`;
    let replayed: string | null = null;
    const api = createTRPCClient<AppRouter>({
      links: [
        httpLink({
          url: `${app.url}/trpc`,
          headers: { "X-API-Key": acme.apiKeys.full!.key, "Idempotency-Key": key },
          fetch: async (input, init) => {
            const res = await fetch(input, init as RequestInit);
            replayed = res.headers.get("idempotent-replayed");
            return res;
          },
        }),
      ],
    });
    const before = await ticketCount(acme.id);
    const first = await api.tickets.create.mutate({ leadId: acme.leads.l1, subject: "Once" });
    expect(replayed).toBeNull();
    const second = await api.tickets.create.mutate({ leadId: acme.leads.l1, subject: "Once" });
    expect(replayed).toBe("true");
    expect(second.id).toBe(first.id);
    expect(await ticketCount(acme.id)).toBe(before + 1);
    expectAppError(await failure(api.tickets.create.mutate({ leadId: acme.leads.l1, subject: "Different" })), 422, "IDEMPOTENCY_KEY_REUSE_MISMATCH");
  });
});

describe("/trpc errors carry the public envelope and status", () => {
  it("no key → 401 INVALID_CREDENTIALS", async () => {
    expectAppError(await failure(client().leads.list.query({})), 401, "INVALID_CREDENTIALS");
    expectAppError(await failure(client("not-a-key").me.get.query({})), 401, "INVALID_CREDENTIALS");
  });

  it("no key → 401 before anything else, even for an unknown procedure or a malformed input", async () => {
    const res = await rawTrpc("/trpc/nothing.here?input=%7Bbroken");
    expect(res.status).toBe(401);
    expect((await json(res)).error.data.envelope.error).toBe("INVALID_CREDENTIALS");
    expect((await rawTrpc("/trpc/openapi.json")).status).toBe(401);
  });

  it("missing scope → 403 PERMISSION_DENIED, nothing persisted", async () => {
    const before = await ticketCount(acme.id);
    const env = expectAppError(await failure(client(acme.apiKeys.none!.key).leads.list.query({})), 403, "PERMISSION_DENIED");
    expect(env.details).toEqual({ requiredScope: "tenant:leads.read" });
    expectAppError(
      await failure(client(acme.apiKeys.leadsonly!.key).tickets.create.mutate({ customerId: acme.contacts.c1, subject: "x" })),
      403,
      "PERMISSION_DENIED",
    );
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("a foreign id → 404 NOT_FOUND exactly like a random one, nothing persisted", async () => {
    const api = client(acme.apiKeys.full!.key);
    const foreign = expectAppError(await failure(api.leads.get.query({ lead_id: other.leads.l1! })), 404, "NOT_FOUND");
    const random = expectAppError(await failure(api.leads.get.query({ lead_id: randomUuid() })), 404, "NOT_FOUND");
    expect(foreign.message).toBe(random.message);
    const before = await ticketCount(acme.id);
    expectAppError(await failure(api.tickets.create.mutate({ customerId: other.contacts.c1, subject: "x" })), 404, "NOT_FOUND");
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("validation → 422 VALIDATION_ERROR with details.fields", async () => {
    const api = client(acme.apiKeys.full!.key);
    const before = await ticketCount(acme.id);
    const env = expectAppError(await failure(api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "" })), 422, "VALIDATION_ERROR");
    expect((env.details.fields as { field: string }[]).map((f) => f.field)).toEqual(["subject"]);
    expectAppError(await failure(api.leads.list.query({ limit: 0 })), 422, "VALIDATION_ERROR");
    expectAppError(await failure(api.leads.get.query({ lead_id: "not-a-uuid" })), 422, "VALIDATION_ERROR");
    // @ts-expect-error unknown fields are refused (the body schemas are strict)
    const unknown = await failure(api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "ok", priority: "high" }));
    expect(expectAppError(unknown, 422, "VALIDATION_ERROR").details.fields).toEqual([
      { field: "priority", code: "unknown_field", message: "Unknown field" },
    ]);
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("a malformed input or a body that is not JSON → 422 VALIDATION_ERROR (after the scope check), with the request id", async () => {
    const key = acme.apiKeys.full!.key;
    for (const res of [
      await rawTrpc("/trpc/leads.list?input=%7Bbroken", { key }),
      await rawTrpc("/trpc/tickets.create", { method: "POST", key, body: "{oops", headers: { "Content-Type": "application/json" } }),
      await rawTrpc("/trpc/tickets.create", { method: "POST", key, body: "{}", headers: { "Content-Type": "text/plain" } }),
      await rawTrpc("/trpc/tickets.create", { method: "POST", key }),
    ]) {
      expect(res.status).toBe(422);
      const env = (await json(res)).error.data.envelope;
      expect(env.error).toBe("VALIDATION_ERROR");
      expect(env.request_id).toBe(res.headers.get("x-request-id"));
    }
    const before = await ticketCount(acme.id);
    const denied = await rawTrpc("/trpc/tickets.create", { method: "POST", key: acme.apiKeys.none!.key, body: "{}", headers: { "Content-Type": "text/plain" } });
    expect(denied.status).toBe(403);
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("a query sent as POST or a mutation as GET → 404 NOT_FOUND (no such operation)", async () => {
    const key = acme.apiKeys.full!.key;
    const post = await rawTrpc("/trpc/leads.list", { method: "POST", key, body: "{}", headers: { "Content-Type": "application/json" } });
    const get = await rawTrpc(`/trpc/tickets.create?input=${encodeURIComponent("{}")}`, { key });
    for (const res of [post, get]) {
      expect(res.status).toBe(404);
      expect((await json(res)).error.data.envelope.error).toBe("NOT_FOUND");
    }
  });

  it("an unknown procedure → 404 NOT_FOUND", async () => {
    const res = await rawTrpc(`/trpc/leads.nothing?input=${encodeURIComponent("{}")}`, { key: acme.apiKeys.full!.key });
    expect(res.status).toBe(404);
    expect((await json(res)).error.data.envelope.error).toBe("NOT_FOUND");
  });

  it("the REST facade keeps answering the bare envelope", async () => {
    const res = await app.request("GET", `/public/v1/leads/${other.leads.l1}`, { key: acme.apiKeys.full!.key });
    expect(res.status).toBe(404);
    expect(Object.keys(res.body).sort()).toEqual(["details", "error", "message", "request_id"]);
  });
});

describe("/trpc-admin: the platform-admin procedures", () => {
  const ops = () => admin(`Bearer ${TOKEN}`);

  it("createKey, then the key works on /trpc with exactly its scopes; revokeKey stops it", async () => {
    const k = await ops().createKey.mutate({ tenantId: acme.id, ownerUserId: acme.users.ana!, scopes: ["tenant:leads.read"] });
    expectTypeOf(k.key).toEqualTypeOf<string>();
    expect(k.key.startsWith(k.prefix)).toBe(true);
    const api = client(k.key);
    expect((await api.leads.list.query({})).total).toBe(1);
    expectAppError(await failure(api.tickets.list.query({})), 403, "PERMISSION_DENIED");
    const revoked = await ops().revokeKey.mutate({ keyId: k.id });
    expect(revoked.id).toBe(k.id);
    expectAppError(await failure(api.leads.list.query({})), 401, "INVALID_CREDENTIALS");
  });

  it("setPlan starter → the next app call is 403 PLAN_NOT_ELIGIBLE; back to pro → allowed", async () => {
    const api = client(other.apiKeys.full!.key);
    expect((await api.me.get.query({})).plan).toBe("pro");
    expect(await ops().setPlan.mutate({ tenantId: other.id, plan: "starter" })).toEqual({ id: other.id, plan: "starter" });
    expectAppError(await failure(api.leads.list.query({ limit: 5 })), 403, "PLAN_NOT_ELIGIBLE");
    await ops().setPlan.mutate({ tenantId: other.id, plan: "pro" });
    expect((await api.leads.list.query({ limit: 5 })).total).toBe(1);
  });

  it("setTenantLimits caps the tenant's keys (429 with Retry-After on /trpc); limits: null clears it", async () => {
    const api = client(spare.apiKeys.leadsonly!.key);
    expect(await ops().setTenantLimits.mutate({ tenantId: spare.id, limits: { perMinute: 2, perDay: 100 } })).toEqual({
      id: spare.id,
      perMinute: 2,
      perDay: 100,
    });
    expect((await api.me.get.query({})).rateLimit).toEqual({ perMinute: 2, perDay: 100 });
    await api.me.get.query({});
    const err = await failure(api.me.get.query({}));
    expectAppError(err, 429, "RATE_LIMIT_EXCEEDED");
    expect(httpResponse(err).headers.get("retry-after")).toMatch(/^\d+$/);
    expect(httpResponse(err).headers.get("x-ratelimit-remaining")).toBe("0");
    expect(await ops().setTenantLimits.mutate({ tenantId: spare.id, limits: null })).toEqual({ id: spare.id, perMinute: null, perDay: null });
    expect((await api.me.get.query({})).rateLimit.perMinute).toBeGreaterThan(2);
  });

  it("setPlanLimits sets a plan's default quotas", async () => {
    const set = await ops().setPlanLimits.mutate({ plan: "enterprise", perMinute: 1234, perDay: 99999 });
    expect(set).toEqual({ plan: "enterprise", perMinute: 1234, perDay: 99999 });
    const row = await app.db.prisma.planLimit.findUnique({ where: { plan: "enterprise" } });
    expect(row).toMatchObject({ perMinute: 1234, perDay: 99999 });
  });

  it("inboundMessage records a customer message, visible through /trpc", async () => {
    const conversationId = acme.conversations.conv1!;
    const msg = await ops().inboundMessage.mutate({ conversationId, text: "Hola, ¿seguís abiertos?" });
    expect(msg).toMatchObject({ conversationId, role: "user", content: "Hola, ¿seguís abiertos?" });
    const page = await client(acme.apiKeys.full!.key).conversations.messages.list.query({ id: conversationId });
    expect(page.items.map((m) => m.id)).toContain(msg.id);
  });

  it("loadFixture creates tenants whose keys work on /trpc", async () => {
    const out = await ops().loadFixture.mutate(fixture(tenant("loaded")));
    const loaded = out.tenants.loaded!;
    expect((await client(loaded.apiKeys.full!.key).me.get.query({})).tenantId).toBe(loaded.id);
  });

  it("batches admin calls (httpBatchLink)", async () => {
    const c = ops();
    const [a, b] = await Promise.all([
      c.setPlan.mutate({ tenantId: spare.id, plan: "pro" }),
      c.setPlan.mutate({ tenantId: acme.id, plan: "pro" }),
    ]);
    expect([a.id, b.id]).toEqual([spare.id, acme.id]);
  });

  it("a refused operation (AdminError / FixtureError) → BAD_REQUEST with its message, nothing changed", async () => {
    const expectBadRequest = (err: TRPCClientError<AdminRouter>, message: string | RegExp) => {
      expect(httpResponse(err).status).toBe(400);
      expect(err.data?.code).toBe("BAD_REQUEST");
      expect(err.data?.httpStatus).toBe(400);
      expect(err.message).toMatch(message);
    };
    expectBadRequest(await failure<AdminRouter>(ops().setPlan.mutate({ tenantId: "nope", plan: "pro" })), "TENANT_ID must be a UUID");
    expectBadRequest(await failure<AdminRouter>(ops().setPlan.mutate({ tenantId: randomUuid(), plan: "pro" })), "no such tenant");
    expectBadRequest(
      await failure<AdminRouter>(ops().createKey.mutate({ tenantId: acme.id, ownerUserId: other.users.ana!, scopes: "all" })),
      "no such user in that tenant",
    );
    expectBadRequest(
      await failure<AdminRouter>(ops().createKey.mutate({ tenantId: acme.id, ownerUserId: acme.users.ana!, scopes: ["tenant:everything"] })),
      'unknown scope "tenant:everything"',
    );
    expectBadRequest(await failure<AdminRouter>(ops().revokeKey.mutate({ keyId: randomUuid() })), "no such key");
    expectBadRequest(await failure<AdminRouter>(ops().inboundMessage.mutate({ conversationId: acme.conversations.conv1!, text: "" })), "TEXT must not be empty");
    const tenants = await app.db.prisma.tenant.count();
    expectBadRequest(await failure<AdminRouter>(ops().loadFixture.mutate({ tenants: [] })), /^invalid fixture at tenants/);
    expect(await app.db.prisma.tenant.count()).toBe(tenants);
    // zod input errors are BAD_REQUEST too, with a readable message.
    const zod = await failure<AdminRouter>(ops().setPlanLimits.mutate({ plan: "pro", perMinute: -1, perDay: 1 }));
    expectBadRequest(zod, /^perMinute: /);
    expect((await app.db.prisma.planLimit.findUnique({ where: { plan: "pro" } }))?.perMinute).not.toBe(-1);
  });

  it("without the token, or with a wrong one → 401 UNAUTHORIZED, nothing changed", async () => {
    const wrong = [undefined, "", "Bearer", `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, `Basic ${TOKEN}`, TOKEN, `Bearer ${acme.apiKeys.full!.key}`];
    for (const authorization of wrong) {
      const err = await failure<AdminRouter>(admin(authorization).setPlan.mutate({ tenantId: acme.id, plan: "starter" }));
      expect(httpResponse(err).status, String(authorization)).toBe(401);
      expect(err.data?.code).toBe("UNAUTHORIZED");
      expect(httpResponse(err).headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    // A batch of two is refused call by call.
    const c = admin(`Bearer nope`);
    const both = await Promise.allSettled([c.revokeKey.mutate({ keyId: randomUuid() }), c.setPlan.mutate({ tenantId: acme.id, plan: "starter" })]);
    expect(both.map((r) => r.status === "rejected" && (r.reason as TRPCClientError<AdminRouter>).data?.httpStatus)).toEqual([401, 401]);
    // An API key is not an admin credential either.
    const res = await rawTrpc("/trpc-admin/setPlan", { method: "POST", key: acme.apiKeys.full!.key, body: JSON.stringify({ tenantId: acme.id, plan: "starter" }), headers: { "Content-Type": "application/json" } });
    expect(res.status).toBe(401);
    expect((await client(acme.apiKeys.full!.key).me.get.query({})).plan).toBe("pro");
  });

  it("the scheme is case-insensitive (RFC 9110)", async () => {
    expect((await admin(`bearer ${TOKEN}`).setPlan.mutate({ tenantId: acme.id, plan: "pro" })).plan).toBe("pro");
  });

  it("the admin procedures are not reachable under /public/v1 nor /trpc", async () => {
    const key = acme.apiKeys.full!.key;
    for (const path of ["/public/v1/admin/setPlan", "/public/v1/admin.setPlan", "/public/v1/setPlan", "/public/v1/admin/set-plan"]) {
      const res = await app.request("POST", path, { key, body: { tenantId: acme.id, plan: "starter" } });
      expect(res.status, path).toBe(404);
      expect(res.body.error).toBe("NOT_FOUND");
    }
    for (const path of ["/trpc/admin.setPlan", "/trpc/setPlan", "/trpc/admin.loadFixture"]) {
      const res = await rawTrpc(path, { method: "POST", key, body: JSON.stringify({ tenantId: acme.id, plan: "starter" }), headers: { "Content-Type": "application/json" } });
      expect(res.status, path).toBe(404);
      expect((await json(res)).error.data.envelope.error).toBe("NOT_FOUND");
    }
    // An admin client pointed at /trpc (with an API key) finds nothing either.
    const misrouted = createTRPCClient<AdminRouter>({ links: [httpLink({ url: `${app.url}/trpc`, headers: { "X-API-Key": key } })] });
    const err = await failure<AdminRouter>(misrouted.setPlan.mutate({ tenantId: acme.id, plan: "starter" }));
    expect(httpResponse(err).status).toBe(404);
    expect((await client(key).me.get.query({})).plan).toBe("pro");
  });
});

describe("/trpc-admin disabled (INTERNAL_TOKEN unset)", () => {
  let disabled: Awaited<ReturnType<typeof startApp>>;
  beforeAll(async () => {
    disabled = await startApp({ config: { internalToken: undefined }, db: app.testDb });
  });
  afterAll(() => disabled.close());

  it("answers 404 for everything, with or without a token", async () => {
    for (const authorization of [undefined, `Bearer ${TOKEN}`, "Bearer "]) {
      const err = await failure<AdminRouter>(admin(authorization, disabled.url).setPlan.mutate({ tenantId: acme.id, plan: "starter" }));
      expect(httpResponse(err).status).toBe(404);
      expect(err.data?.code).toBe("NOT_FOUND");
    }
    expect((await fetch(`${disabled.url}/trpc-admin/whatever`)).status).toBe(404);
    expect((await fetch(`${disabled.url}/trpc-admin`, { method: "POST" })).status).toBe(404);
    expect((await client(acme.apiKeys.full!.key).me.get.query({})).plan).toBe("pro");
  });

  it("leaves /trpc working", async () => {
    expect((await client(acme.apiKeys.full!.key, disabled.url).leads.list.query({ limit: 5 })).total).toBe(1);
  });
});
