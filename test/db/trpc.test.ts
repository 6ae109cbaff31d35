// The internal tRPC API: the app router at /trpc behind the same guard as /public/v1 (keys,
// plan gate, quotas, scopes), errors carrying the public envelope in error.data.envelope, and the
// platform-admin router at /trpc-admin behind the internal token — all through @trpc/client.
// Calls without input (`me.get.query()`), httpBatchLink batches (each call authenticated,
// scope-checked and counted against the quotas; a cap; answers in order), the error's message.
// @topology redis
import { createTRPCClient, httpBatchLink, httpLink, TRPCClientError } from "@trpc/client";
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from "vitest";
import type { AdminRouter, AppOutputs, AppRouter } from "../../routers/client-types.js";
import { routeTemplates } from "../../rest/routes.js";
import { MAX_BATCH_CALLS } from "../../rest/trpc.js";
import { appRouter } from "../../routers/index.js";
import { randomUuid, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const TOKEN = "test-token";

let app: TestApp & { testDb: Awaited<ReturnType<typeof startApp>>["testDb"] };
type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let acme: Ids;
let other: Ids;
let spare: Ids;
let quota: Ids;
let daily: Ids;

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
  const loaded = await app.load(
    fixture(
      withData("acme"),
      withData("other"),
      withData("spare"),
      { ...withData("quota"), rateLimit: { perMinute: 5, perDay: 1000 } },
      { ...withData("daily"), rateLimit: { perMinute: 100, perDay: 4 } },
    ),
  );
  acme = loaded.tenants.acme!;
  other = loaded.tenants.other!;
  spare = loaded.tenants.spare!;
  quota = loaded.tenants.quota!;
  daily = loaded.tenants.daily!;
});
afterAll(() => app.close());

const client = (key?: string, url = app.url) =>
  createTRPCClient<AppRouter>({
    links: [httpLink({ url: `${url}/trpc`, headers: key === undefined ? {} : { "X-API-Key": key } })],
  });

const admin = (authorization?: string, url = app.url) =>
  createTRPCClient<AdminRouter>({
    links: [
      httpBatchLink({
        url: `${url}/trpc-admin`,
        headers: authorization === undefined ? {} : { Authorization: authorization },
      }),
    ],
  });

/** The TRPCClientError a call fails with. */
async function failure<R extends AppRouter | AdminRouter = AppRouter>(
  p: Promise<unknown>,
): Promise<TRPCClientError<R>> {
  try {
    await p;
  } catch (e) {
    if (e instanceof TRPCClientError) return e as TRPCClientError<R>;
    throw e;
  }
  throw new Error("expected the call to fail");
}

const httpResponse = (err: TRPCClientError<any>) => err.meta?.response as Response;

/**
 * Asserts HTTP status (`batchStatus`: the batch response's, 207 when its calls differ), tRPC data and
 * the public envelope of an app error — once in the error, as `data.envelope` — and the message: the
 * envelope's, or for a VALIDATION_ERROR naming fields, its first field's reason. Returns the envelope.
 */
function expectAppError(err: TRPCClientError<AppRouter>, status: number, code: string, batchStatus = status) {
  const res = httpResponse(err);
  expect(res.status).toBe(batchStatus);
  expect(err.data?.httpStatus).toBe(status);
  expect(Object.keys(err.shape as object).sort()).toEqual(["code", "data", "message"]);
  const env = err.data!.envelope;
  expect(env.error).toBe(code);
  expect(Object.keys(env).sort()).toEqual(["details", "error", "message", "request_id"]);
  const fields = env.details.fields as { field: string; message: string }[] | undefined;
  const more = ((env.details.fieldCount as number | undefined) ?? 1) - 1;
  expect(err.message).toBe(
    code === "VALIDATION_ERROR" && fields?.[0]
      ? `${fields[0].field}: ${fields[0].message}${more > 0 ? ` (+${more} more)` : ""}`
      : env.message,
  );
  expect(env.request_id).toBe(res.headers.get("x-request-id"));
  return env;
}

const rawTrpc = (path: string, init: RequestInit & { key?: string } = {}) =>
  fetch(`${app.url}${path}`, {
    ...init,
    headers: { ...(init.key ? { "X-API-Key": init.key } : {}), ...(init.headers as Record<string, string>) },
  });

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
    const ticket = await api.tickets.create.mutate({
      customerId: acme.contacts.c1,
      subject: "Printer on fire",
      comment: "Send help",
    });
    expectTypeOf(ticket.status).toEqualTypeOf<"open" | "pending" | "resolved" | "closed">();
    expectTypeOf(ticket.createdAt).toEqualTypeOf<string>();
    expect(ticket).toMatchObject({
      customerId: acme.contacts.c1,
      subject: "Printer on fire",
      status: "open",
      createdBy: acme.users.ana,
    });
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
    expectAppError(
      await failure(api.tickets.create.mutate({ leadId: acme.leads.l1, subject: "Different" })),
      422,
      "IDEMPOTENCY_KEY_REUSE_MISMATCH",
    );
  });
});

/** A client over httpBatchLink (tRPC's default link); `seen` collects every HTTP response it receives. */
function batchClient(
  key: string | undefined,
  opts: { maxItems?: number; headers?: Record<string, string>; seen?: Response[] } = {},
) {
  return createTRPCClient<AppRouter>({
    links: [
      httpBatchLink({
        url: `${app.url}/trpc`,
        maxItems: opts.maxItems,
        headers: { ...(key === undefined ? {} : { "X-API-Key": key }), ...opts.headers },
        fetch: async (input, init) => {
          const res = await fetch(input, init as RequestInit);
          opts.seen?.push(res);
          return res;
        },
      }),
    ],
  });
}

/** The key's quota as a plain request after the calls under test sees it (that request counted too). */
async function remainingAfter(key: string): Promise<number> {
  const res = await rawTrpc("/trpc/me.get", { key });
  expect(res.status).toBe(200);
  return Number(res.headers.get("x-ratelimit-remaining"));
}

describe("/trpc calls without input", () => {
  it("a query whose input has no required field is called with no argument (types and run time)", async () => {
    const api = client(acme.apiKeys.full!.key);
    const me = await api.me.get.query();
    expect(me).toMatchObject({ tenantId: acme.id, plan: "pro" });
    const leads = await api.leads.list.query();
    expect(leads.items.map((l) => l.id)).toEqual([acme.leads.l1]);
    expect(leads.pagination.pageSize).toBe(50); // the schema's default, as for GET /public/v1/leads
    expect((await api.tickets.list.query()).total).toBe((await api.tickets.list.query({})).total);
    expect((await api.changes.list.query()).items.length).toBeGreaterThan(0);
    // The same through the batching link, where a call without input is a missing index of `input`.
    const batched = batchClient(acme.apiKeys.full!.key);
    const [b1, b2] = await Promise.all([batched.me.get.query(), batched.leads.list.query()]);
    expect(b1.tenantId).toBe(acme.id);
    expect(b2.total).toBe(1);
    // A required input still is: the type says so, and the answer names the missing fields.
    // @ts-expect-error leads.get needs its lead_id
    const missing = expectAppError(await failure(api.leads.get.query()), 422, "VALIDATION_ERROR");
    expect((missing.details.fields as { field: string }[]).map((f) => f.field)).toEqual(["lead_id"]);
  });

  it("over plain HTTP: GET without `input`, POST without a body; null is not a missing input", async () => {
    const key = acme.apiKeys.full!.key;
    const get = await rawTrpc("/trpc/leads.list", { key });
    expect(get.status).toBe(200);
    expect((await json(get)).result.data.total).toBe(1);
    const before = await ticketCount(acme.id);
    const post = await rawTrpc("/trpc/tickets.create", { method: "POST", key });
    expect(post.status).toBe(422);
    const env = (await json(post)).error.data.envelope;
    expect(env.error).toBe("VALIDATION_ERROR");
    expect((env.details.fields as { field: string }[]).map((f) => f.field).sort()).toEqual(["subject"]);
    expect(await ticketCount(acme.id)).toBe(before);
    const nul = await rawTrpc(`/trpc/leads.list?input=null`, { key });
    expect(nul.status).toBe(422);
    expect((await json(nul)).error.data.envelope.details.fields[0].field).toBe("(body)");
  });
});

describe("/trpc batches (httpBatchLink)", () => {
  it("answers every call of a batch, in order, in one HTTP request", async () => {
    const seen: Response[] = [];
    const api = batchClient(acme.apiKeys.full!.key, { seen });
    const [me, leads, lead, tickets] = await Promise.all([
      api.me.get.query(),
      api.leads.list.query({ limit: 5 }),
      api.leads.get.query({ lead_id: acme.leads.l1! }),
      api.tickets.list.query({ customerId: acme.contacts.c1 }),
    ]);
    expect(seen.map((r) => r.status)).toEqual([200]);
    expect(me.tenantId).toBe(acme.id);
    expect(leads.items[0]!.id).toBe(acme.leads.l1);
    expect(lead.customerName).toBe("Lead of acme");
    expect(tickets.items.every((t) => t.customerId === acme.contacts.c1)).toBe(true);
    // On the wire: an array with one answer per call, in the calls' order.
    const raw = await rawTrpc(
      `/trpc/leads.get,me.get,leads.get?batch=1&input=${encodeURIComponent(JSON.stringify({ 0: { lead_id: randomUuid() }, 2: { lead_id: acme.leads.l1 } }))}`,
      {
        key: acme.apiKeys.full!.key,
      },
    );
    expect(raw.status).toBe(207);
    const body = await json(raw);
    expect(body).toHaveLength(3);
    expect(body[0].error.data.envelope.error).toBe("NOT_FOUND");
    expect(body[1].result.data.tenantId).toBe(acme.id);
    expect(body[2].result.data.id).toBe(acme.leads.l1);
    // The envelope once per error: in data.envelope, not repeated at the top.
    expect(Object.keys(body[0].error).sort()).toEqual(["code", "data", "message"]);
  });

  it("mutations batch too, each with its own outcome; nothing persisted for the refused one", async () => {
    const api = batchClient(acme.apiKeys.full!.key);
    const before = await ticketCount(acme.id);
    const [ok, bad] = await Promise.allSettled([
      api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "Batched" }),
      api.tickets.create.mutate({ customerId: other.contacts.c1, subject: "Foreign" }),
    ]);
    expect(ok.status === "fulfilled" && ok.value.subject).toBe("Batched");
    expectAppError((bad as PromiseRejectedResult).reason, 404, "NOT_FOUND", 207);
    expect(await ticketCount(acme.id)).toBe(before + 1);
  });

  it("checks the scope call by call: a refused call answers its 403 while the others answer", async () => {
    const api = batchClient(acme.apiKeys.leadsonly!.key);
    const before = await ticketCount(acme.id);
    const [leads, tickets, create, me] = await Promise.allSettled([
      api.leads.list.query(),
      api.tickets.list.query(),
      api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "x" }),
      api.me.get.query(),
    ]);
    expect(leads.status === "fulfilled" && leads.value.total).toBe(1);
    expect(me.status === "fulfilled" && me.value.scopes).toEqual(["tenant:leads.read"]);
    expect(expectAppError((tickets as PromiseRejectedResult).reason, 403, "PERMISSION_DENIED", 207).details).toEqual({
      requiredScope: "tenant:tickets.read",
    });
    // (queries and mutations go in separate batches: the mutation's batch holds it alone)
    expectAppError((create as PromiseRejectedResult).reason, 403, "PERMISSION_DENIED");
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("counts every call against the minute window: a batch of N costs N; calls over the ceiling answer their own 429", async () => {
    // quota: 5 per minute. A batch of 3, then one call: 5 - 4 = 1 left.
    const key = quota.apiKeys.full!.key;
    const seen: Response[] = [];
    const api = batchClient(key, { seen });
    await Promise.all([api.me.get.query(), api.leads.list.query(), api.me.get.query()]);
    expect(seen[0]!.headers.get("x-ratelimit-remaining")).toBe("2");
    expect(await remainingAfter(key)).toBe(1);
    // A batch of 3 with one call left: the first answers, the next two are refused in order.
    const results = await Promise.allSettled([api.leads.list.query(), api.me.get.query(), api.leads.list.query()]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    for (const r of results.slice(1)) {
      const env = expectAppError((r as PromiseRejectedResult).reason, 429, "RATE_LIMIT_EXCEEDED", 207);
      expect(env.details.retryAfter).toBeGreaterThanOrEqual(1);
    }
    const last = seen.at(-1)!;
    expect(last.headers.get("x-ratelimit-remaining")).toBe("0");
    expect(Number(last.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Refused whole when the first call is already over the ceiling (the guard's 429 for every call).
    const again = await Promise.allSettled([api.me.get.query(), api.leads.list.query()]);
    for (const r of again) expectAppError((r as PromiseRejectedResult).reason, 429, "RATE_LIMIT_EXCEEDED");
  });

  it("counts every call against the day window", async () => {
    // daily: 100 per minute, 4 per day. A batch of 3 leaves 1; the next batch of 3 answers one call.
    const key = daily.apiKeys.full!.key;
    const api = batchClient(key);
    await Promise.all([api.me.get.query(), api.me.get.query(), api.me.get.query()]);
    const results = await Promise.allSettled([api.me.get.query(), api.leads.list.query(), api.me.get.query()]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "rejected"]);
    expectAppError((results[1] as PromiseRejectedResult).reason, 429, "RATE_LIMIT_EXCEEDED", 207);
  });

  it("counts the calls tRPC runs, however the path spells its commas", async () => {
    const key = spare.apiKeys.full!.key;
    const before = await remainingAfter(key);
    const res = await rawTrpc("/trpc/me.get%2Cme.get%2Cme.get?batch=1", { key });
    expect(res.status).toBe(200);
    expect(await json(res)).toHaveLength(3);
    expect(await remainingAfter(key)).toBe(before - 4);
  });

  it(`caps a batch at ${MAX_BATCH_CALLS} calls: more → one 422 for the request before anything runs, counted once`, async () => {
    const key = spare.apiKeys.full!.key;
    const seen: Response[] = [];
    const api = batchClient(key, { seen });
    const before = await remainingAfter(key);
    const tickets = await ticketCount(spare.id);
    const over = await Promise.allSettled(
      Array.from({ length: MAX_BATCH_CALLS + 1 }, (_, i) =>
        api.tickets.create.mutate({ customerId: spare.contacts.c1, subject: `t${i}` }),
      ),
    );
    expect(seen.map((r) => r.status)).toEqual([422]);
    for (const r of over) {
      const env = expectAppError((r as PromiseRejectedResult).reason, 422, "VALIDATION_ERROR");
      expect(env.details.fields).toEqual([
        {
          field: "(batch)",
          code: "too_many_calls",
          message: `at most ${MAX_BATCH_CALLS} calls per batch, got ${MAX_BATCH_CALLS + 1}`,
        },
      ]);
    }
    expect(await ticketCount(spare.id)).toBe(tickets);
    expect(await remainingAfter(key)).toBe(before - 2);
    // httpBatchLink's maxItems splits the same calls into batches the server takes.
    const split = batchClient(key, { maxItems: MAX_BATCH_CALLS });
    const all = await Promise.all(Array.from({ length: MAX_BATCH_CALLS + 1 }, () => split.me.get.query()));
    expect(all).toHaveLength(MAX_BATCH_CALLS + 1);
    expect(await remainingAfter(key)).toBe(before - 2 - (MAX_BATCH_CALLS + 1) - 1);
  });

  it("refuses an Idempotency-Key on a batch of several calls (422, nothing persisted); a batch of one keeps it", async () => {
    const key = acme.apiKeys.full!.key;
    const headers = { "Idempotency-Key": `batch-${randomUuid()}` };
    const before = await ticketCount(acme.id);
    const api = batchClient(key, { headers });
    const both = await Promise.allSettled([
      api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "one" }),
      api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "two" }),
    ]);
    for (const r of both)
      expect(expectAppError((r as PromiseRejectedResult).reason, 422, "VALIDATION_ERROR").details.fields).toEqual([
        { field: "Idempotency-Key", code: "batched", message: "not allowed on a batch of several calls" },
      ]);
    expect(await ticketCount(acme.id)).toBe(before);
    const first = await api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "one" });
    const replay = await api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "one" });
    expect(replay.id).toBe(first.id);
    expect(await ticketCount(acme.id)).toBe(before + 1);
  });

  it("a batch is one metrics route label, whatever it holds", () => {
    const route = routeTemplates(appRouter);
    expect(route("GET", "/trpc/me.get,leads.list")).toBe("/trpc/batch");
    expect(route("POST", "/trpc/tickets.create%2Ctickets.create")).toBe("/trpc/batch");
    expect(route("GET", "/trpc/me.get")).toBe("/trpc/me.get");
    expect(route("GET", "/trpc/no.such")).toBe("/trpc/unmatched");
  });

  it("a batch without a valid key → 401 for every call, counted nowhere", async () => {
    const results = await Promise.allSettled([
      batchClient(undefined).me.get.query(),
      batchClient(undefined).leads.list.query(),
    ]);
    for (const r of results) expectAppError((r as PromiseRejectedResult).reason, 401, "INVALID_CREDENTIALS");
  });
});

describe("/trpc error messages", () => {
  it("a validation error's message is its first reason; the envelope keeps the stable message", async () => {
    const api = client(acme.apiKeys.full!.key);
    const phone = await failure(api.contacts.create.mutate({ fullName: "Eva", phone: "12" }));
    expect(phone.message).toBe("phone: not a possible phone number for its region");
    expect(phone.data?.envelope.message).toBe(
      "phone is not a valid phone number: not a possible phone number for its region",
    );
    expectAppError(phone, 422, "VALIDATION_ERROR");
    const two = await failure(api.tickets.create.mutate({ customerId: "nope", subject: "" }));
    expect(two.message).toMatch(/^customerId: .+ \(\+1 more\)$/);
    expect(two.data?.envelope.message).toBe("Request validation failed");
    expectAppError(two, 422, "VALIDATION_ERROR");
    // Other errors keep the envelope's message.
    expect((await failure(api.leads.get.query({ lead_id: randomUuid() }))).message).toBe("Lead not found");
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
    const env = expectAppError(
      await failure(client(acme.apiKeys.none!.key).leads.list.query({})),
      403,
      "PERMISSION_DENIED",
    );
    expect(env.details).toEqual({ requiredScope: "tenant:leads.read" });
    expectAppError(
      await failure(
        client(acme.apiKeys.leadsonly!.key).tickets.create.mutate({ customerId: acme.contacts.c1, subject: "x" }),
      ),
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
    expectAppError(
      await failure(api.tickets.create.mutate({ customerId: other.contacts.c1, subject: "x" })),
      404,
      "NOT_FOUND",
    );
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("validation → 422 VALIDATION_ERROR with details.fields", async () => {
    const api = client(acme.apiKeys.full!.key);
    const before = await ticketCount(acme.id);
    const env = expectAppError(
      await failure(api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "" })),
      422,
      "VALIDATION_ERROR",
    );
    expect((env.details.fields as { field: string }[]).map((f) => f.field)).toEqual(["subject"]);
    expectAppError(await failure(api.leads.list.query({ limit: 0 })), 422, "VALIDATION_ERROR");
    expectAppError(await failure(api.leads.get.query({ lead_id: "not-a-uuid" })), 422, "VALIDATION_ERROR");
    const unknown = await failure(
      // @ts-expect-error unknown fields are refused (the body schemas are strict)
      api.tickets.create.mutate({ customerId: acme.contacts.c1, subject: "ok", priority: "high" }),
    );
    expect(expectAppError(unknown, 422, "VALIDATION_ERROR").details.fields).toEqual([
      { field: "priority", code: "unknown_field", message: "Unknown field" },
    ]);
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("a malformed input or a body that is not JSON → 422 VALIDATION_ERROR (after the scope check), with the request id", async () => {
    const key = acme.apiKeys.full!.key;
    for (const res of [
      await rawTrpc("/trpc/leads.list?input=%7Bbroken", { key }),
      await rawTrpc("/trpc/tickets.create", {
        method: "POST",
        key,
        body: "{oops",
        headers: { "Content-Type": "application/json" },
      }),
      await rawTrpc("/trpc/tickets.create", {
        method: "POST",
        key,
        body: "{}",
        headers: { "Content-Type": "text/plain" },
      }),
      await rawTrpc("/trpc/tickets.create", { method: "POST", key }),
    ]) {
      expect(res.status).toBe(422);
      const env = (await json(res)).error.data.envelope;
      expect(env.error).toBe("VALIDATION_ERROR");
      expect(env.request_id).toBe(res.headers.get("x-request-id"));
    }
    const before = await ticketCount(acme.id);
    const denied = await rawTrpc("/trpc/tickets.create", {
      method: "POST",
      key: acme.apiKeys.none!.key,
      body: "{}",
      headers: { "Content-Type": "text/plain" },
    });
    expect(denied.status).toBe(403);
    expect(await ticketCount(acme.id)).toBe(before);
  });

  it("a query sent as POST or a mutation as GET → 404 NOT_FOUND (no such operation)", async () => {
    const key = acme.apiKeys.full!.key;
    const post = await rawTrpc("/trpc/leads.list", {
      method: "POST",
      key,
      body: "{}",
      headers: { "Content-Type": "application/json" },
    });
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
    const k = await ops().createKey.mutate({
      tenantId: acme.id,
      ownerUserId: acme.users.ana!,
      scopes: ["tenant:leads.read"],
    });
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
    expect(await ops().setPlan.mutate({ tenantId: other.id, plan: "starter" })).toEqual({
      id: other.id,
      plan: "starter",
    });
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
    expect(await ops().setTenantLimits.mutate({ tenantId: spare.id, limits: null })).toEqual({
      id: spare.id,
      perMinute: null,
      perDay: null,
    });
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
    expectBadRequest(
      await failure<AdminRouter>(ops().setPlan.mutate({ tenantId: "nope", plan: "pro" })),
      "TENANT_ID must be a UUID",
    );
    expectBadRequest(
      await failure<AdminRouter>(ops().setPlan.mutate({ tenantId: randomUuid(), plan: "pro" })),
      "no such tenant",
    );
    expectBadRequest(
      await failure<AdminRouter>(
        ops().createKey.mutate({ tenantId: acme.id, ownerUserId: other.users.ana!, scopes: "all" }),
      ),
      "no such user in that tenant",
    );
    expectBadRequest(
      await failure<AdminRouter>(
        ops().createKey.mutate({ tenantId: acme.id, ownerUserId: acme.users.ana!, scopes: ["tenant:everything"] }),
      ),
      'unknown scope "tenant:everything"',
    );
    expectBadRequest(await failure<AdminRouter>(ops().revokeKey.mutate({ keyId: randomUuid() })), "no such key");
    expectBadRequest(
      await failure<AdminRouter>(ops().inboundMessage.mutate({ conversationId: acme.conversations.conv1!, text: "" })),
      "TEXT must not be empty",
    );
    const tenants = await app.db.prisma.tenant.count();
    expectBadRequest(
      await failure<AdminRouter>(ops().loadFixture.mutate({ tenants: [] })),
      /^invalid fixture at tenants/,
    );
    expect(await app.db.prisma.tenant.count()).toBe(tenants);
    // zod input errors are BAD_REQUEST too, with a readable message.
    const zod = await failure<AdminRouter>(ops().setPlanLimits.mutate({ plan: "pro", perMinute: -1, perDay: 1 }));
    expectBadRequest(zod, /^perMinute: /);
    expect((await app.db.prisma.planLimit.findUnique({ where: { plan: "pro" } }))?.perMinute).not.toBe(-1);
  });

  it("without the token, or with a wrong one → 401 UNAUTHORIZED, nothing changed", async () => {
    const wrong = [
      undefined,
      "",
      "Bearer",
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(0, -1)}`,
      `Basic ${TOKEN}`,
      TOKEN,
      `Bearer ${acme.apiKeys.full!.key}`,
    ];
    for (const authorization of wrong) {
      const err = await failure<AdminRouter>(
        admin(authorization).setPlan.mutate({ tenantId: acme.id, plan: "starter" }),
      );
      expect(httpResponse(err).status, String(authorization)).toBe(401);
      expect(err.data?.code).toBe("UNAUTHORIZED");
      expect(httpResponse(err).headers.get("www-authenticate")).toMatch(/^Bearer/);
    }
    // A batch of two is refused call by call.
    const c = admin(`Bearer nope`);
    const both = await Promise.allSettled([
      c.revokeKey.mutate({ keyId: randomUuid() }),
      c.setPlan.mutate({ tenantId: acme.id, plan: "starter" }),
    ]);
    expect(
      both.map((r) => r.status === "rejected" && (r.reason as TRPCClientError<AdminRouter>).data?.httpStatus),
    ).toEqual([401, 401]);
    // An API key is not an admin credential either.
    const res = await rawTrpc("/trpc-admin/setPlan", {
      method: "POST",
      key: acme.apiKeys.full!.key,
      body: JSON.stringify({ tenantId: acme.id, plan: "starter" }),
      headers: { "Content-Type": "application/json" },
    });
    expect(res.status).toBe(401);
    expect((await client(acme.apiKeys.full!.key).me.get.query({})).plan).toBe("pro");
  });

  it("the scheme is case-insensitive (RFC 9110)", async () => {
    expect((await admin(`bearer ${TOKEN}`).setPlan.mutate({ tenantId: acme.id, plan: "pro" })).plan).toBe("pro");
  });

  it("the admin procedures are not reachable under /public/v1 nor /trpc", async () => {
    const key = acme.apiKeys.full!.key;
    for (const path of [
      "/public/v1/admin/setPlan",
      "/public/v1/admin.setPlan",
      "/public/v1/setPlan",
      "/public/v1/admin/set-plan",
    ]) {
      const res = await app.request("POST", path, { key, body: { tenantId: acme.id, plan: "starter" } });
      expect(res.status, path).toBe(404);
      expect(res.body.error).toBe("NOT_FOUND");
    }
    for (const path of ["/trpc/admin.setPlan", "/trpc/setPlan", "/trpc/admin.loadFixture"]) {
      const res = await rawTrpc(path, {
        method: "POST",
        key,
        body: JSON.stringify({ tenantId: acme.id, plan: "starter" }),
        headers: { "Content-Type": "application/json" },
      });
      expect(res.status, path).toBe(404);
      expect((await json(res)).error.data.envelope.error).toBe("NOT_FOUND");
    }
    // An admin client pointed at /trpc (with an API key) finds nothing either.
    const misrouted = createTRPCClient<AdminRouter>({
      links: [httpLink({ url: `${app.url}/trpc`, headers: { "X-API-Key": key } })],
    });
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
      const err = await failure<AdminRouter>(
        admin(authorization, disabled.url).setPlan.mutate({ tenantId: acme.id, plan: "starter" }),
      );
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
