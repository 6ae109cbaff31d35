// changes.subscribe (routers/changes/subscribe.ts): the feed as a tRPC subscription, through /trpc
// with @trpc/client's httpSubscriptionLink over server-sent events (the `eventsource` package, as an
// internal app in Node uses it) and through the in-process core as an async iterable. A write wakes
// it; each event is a page tracked by its nextSince, so a reconnect with lastEventId delivers every
// later change once (none repeated, none skipped); refusals before the stream keep their HTTP status,
// scope errors come as the stream's error with the public envelope; each page counts against the
// quota and a ceiling reached mid-stream ends it with RATE_LIMIT_EXCEEDED; the key is checked again
// before a page after a wait; stopping ends every subscription; a write on another instance wakes it
// through Redis.
// @topology redis
import { createTRPCClient, httpSubscriptionLink, type TRPCClientError } from "@trpc/client";
import { EventSource } from "eventsource";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AppRouter } from "../../client/trpc.js";
import type { LoadResult } from "../../server/admin/fixture.js";
import { openCore, type Core } from "../../server/core.js";
import { deliveries, startApp, untimed, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { until } from "../helpers/processes.js";

let app: TestApp;
let ids: LoadResult;
let core: Core;
const acme = () => ids.tenants.acme!;
const key = (ref = "full") => acme().apiKeys[ref]!.key;
const sql = (text: string, params: unknown[] = []) => untimed(app.db)(text, params);

beforeAll(async () => {
  app = await startApp({ config: { changesRereadMs: 60_000 } });
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 },
        apiKeys: [
          { ref: "full", owner: "ana", scopes: "all" },
          { ref: "leads", owner: "ana", scopes: ["tenant:leads.read"] },
          { ref: "doomed", owner: "ana", scopes: "all" },
        ],
      }),
      tenant("tight", { rateLimit: { perMinute: 2, perDay: 1000 } }),
    ),
  );
  core = await openCore({ services: app.services });
}, 60_000);
afterAll(async () => {
  await core?.close();
  await app?.close();
});

type Page = { items: { type: string; id: string }[]; nextSince: string; hasMore: boolean };

/** A subscription through /trpc with `k`: its events (id + page), its errors, and a way to stop it. */
function subscribe(
  input: { since?: string; types?: ("lead" | "ticket")[]; lastEventId?: string },
  k = key(),
  at: TestApp = app,
) {
  const client = createTRPCClient<AppRouter>({
    links: [
      httpSubscriptionLink({
        url: `${at.url}/trpc`,
        EventSource,
        eventSourceOptions: () => ({
          fetch: (url: string | URL, init?: RequestInit) =>
            fetch(url, { ...init, headers: { ...(init?.headers as Record<string, string>), "X-API-Key": k } }),
        }),
      }),
    ],
  });
  const events: { id: string; data: Page }[] = [];
  const errors: TRPCClientError<AppRouter>[] = [];
  let started = false;
  const sub = client.changes.subscribe.subscribe(input, {
    onStarted: () => (started = true),
    onData: (e) => events.push(e as { id: string; data: Page }),
    onError: (e) => errors.push(e as TRPCClientError<AppRouter>),
  });
  return { events, errors, started: () => started, stop: () => sub.unsubscribe() };
}

const createLead = (name: string, k = key()) =>
  app.request("POST", "/public/v1/leads", { key: k, body: { customerName: name, customerPhone: "+34600000055" } });
const ids_ = (events: { data: Page }[]) => events.flatMap((e) => e.data.items.map((i) => i.id));

describe("over /trpc (server-sent events, httpSubscriptionLink)", () => {
  it("a write wakes it; each event is a page whose id is its nextSince; lastEventId resumes with nothing repeated or lost", async () => {
    const s = subscribe({ since: "now" });
    try {
      expect(await until(() => app.services.wakeups!.stats.waiters >= 1, 10_000, 10)).toBe(true);
      const delivered = await deliveries(app, "subscription");
      const first = await createLead("Streamed One");
      expect(await until(() => s.events.length >= 1, 10_000, 10)).toBe(true);
      expect(ids_(s.events)).toEqual([first.body.id]);
      expect(s.events[0]!.id).toBe(s.events[0]!.data.nextSince);
      expect(s.errors).toEqual([]);
      expect(await deliveries(app, "subscription")).toBe(delivered + 1);
    } finally {
      s.stop();
    }
    // While no one listens: two more writes. A reconnect from the last event delivers exactly those.
    const second = await createLead("While Away 1");
    const third = await createLead("While Away 2");
    const again = subscribe({ since: "now", lastEventId: s.events.at(-1)!.id });
    try {
      expect(await until(() => ids_(again.events).length >= 2, 10_000, 10)).toBe(true);
      expect(ids_(again.events)).toEqual([second.body.id, third.body.id]);
    } finally {
      again.stop();
    }
  });

  it.runIf(process.env.REDIS_URL || process.env.REDIS_CLUSTER_NODES)(
    "a write on another instance wakes it, through Redis",
    async () => {
      const other = await startApp({
        db: (app as TestApp & { testDb: never }).testDb,
        config: { changesRereadMs: 60_000 },
      });
      const s = subscribe({ since: "now" }, key(), other);
      try {
        // Waiting, and its tenant's channel subscribed (a publish before that is found by the tick only).
        expect(await until(() => other.services.wakeups!.listening(acme().id), 10_000, 10)).toBe(true);
        const created = await createLead("From The Other One");
        expect(created.status).toBe(201);
        expect(await until(() => s.events.length >= 1, 10_000, 10)).toBe(true);
        expect(ids_(s.events)).toEqual([created.body.id]);
        expect(s.errors).toEqual([]);
      } finally {
        s.stop();
        await other.close();
      }
    },
  );

  it("a key that cannot read a requested type: the stream's error carries the envelope (403 PERMISSION_DENIED)", async () => {
    const s = subscribe({ types: ["ticket"] }, key("leads"));
    try {
      expect(await until(() => s.errors.length > 0, 10_000, 10)).toBe(true);
      const data = s.errors[0]!.data as { httpStatus: number; envelope: { error: string; request_id: string } };
      expect(data.envelope.error).toBe("PERMISSION_DENIED");
      expect(data.httpStatus).toBe(403);
      expect(s.events).toEqual([]);
    } finally {
      s.stop();
    }
  });

  it("refused before the stream (no key, an unknown key): the HTTP status and the envelope", async () => {
    const url = `${app.url}/trpc/changes.subscribe?input=${encodeURIComponent(JSON.stringify({ since: "now" }))}`;
    for (const headers of [{}, { "X-API-Key": "crm_live_nosuchkey0000000000000000" }] as Record<string, string>[]) {
      const r = await fetch(url, { headers: { Accept: "text/event-stream", ...headers } });
      expect(r.status).toBe(401);
      const body = (await r.json()) as { error: { data: { envelope: { error: string } } } };
      expect(body.error.data.envelope.error).toBe("INVALID_CREDENTIALS");
      expect(r.headers.get("ratelimit-policy")).toMatch(/^"minute";q=\d+;w=60$/);
    }
  });
});

describe("in process (server/core.ts): an async iterable", () => {
  it("delivers the same pages; the caller's loop ends it", async () => {
    const iterable = await core.as(key()).api.changes.subscribe({ since: "now" });
    const created = createLead("In Process");
    for await (const event of iterable) {
      expect(event.data.items.map((i) => i.id)).toEqual([(await created).body.id]);
      expect(event.id).toBe(event.data.nextSince);
      break;
    }
  });

  it("each page counts against the quota: over the ceiling mid-stream, RATE_LIMIT_EXCEEDED with retryAfter", async () => {
    const tight = ids.tenants.tight!;
    // The subscription is one request, its first page the second: the third is over 2 a minute.
    await sql(`INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1::uuid, 'First', $2::uuid)`, [
      tight.id,
      tight.stages.new,
    ]);
    const iterable = await core.as(tight.apiKeys.full!.key).api.changes.subscribe({});
    const it = iterable[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.done).toBe(false);
    await sql(`INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1::uuid, 'Over', $2::uuid)`, [
      tight.id,
      tight.stages.new,
    ]);
    app.services.wakeups!.notify(tight.id);
    const refused = await it.next().then(
      () => undefined,
      (e: { cause?: { envelope?: { error: string; details: { retryAfter?: number } } } }) => e.cause,
    );
    expect(refused?.envelope?.error).toBe("RATE_LIMIT_EXCEEDED");
    expect(refused?.envelope?.details.retryAfter).toBeGreaterThan(0);
  });

  it("the key revoked while it waits: the next page is refused with 401", async () => {
    const iterable = await core.as(key("doomed")).api.changes.subscribe({ since: "now" });
    const it = iterable[Symbol.asyncIterator]();
    const next = it.next().then(
      () => undefined,
      (e: { cause?: { envelope?: { error: string } } }) => e.cause,
    );
    expect(await until(() => app.services.wakeups!.stats.waiters >= 1, 10_000, 10)).toBe(true);
    await sql(`UPDATE "ApiKey" SET "revokedAt" = now() WHERE "id" = $1::uuid`, [acme().apiKeys.doomed!.id]);
    app.services.wakeups!.notify(acme().id);
    expect((await next)?.envelope?.error).toBe("INVALID_CREDENTIALS");
  });

  it("stopping the instance ends a waiting subscription cleanly", async () => {
    const inst = await startApp({
      db: (app as TestApp & { testDb: never }).testDb,
      config: { changesRereadMs: 60_000 },
    });
    const instCore = await openCore({ services: inst.services });
    try {
      const iterable = await instCore.as(key()).api.changes.subscribe({ since: "now" });
      const it = iterable[Symbol.asyncIterator]();
      const next = it.next();
      expect(await until(() => inst.services.wakeups!.stats.waiters >= 1, 10_000, 10)).toBe(true);
      inst.services.wakeups!.close();
      expect(await next).toEqual({ done: true, value: undefined });
    } finally {
      await instCore.close();
      await inst.close();
    }
  });
});
