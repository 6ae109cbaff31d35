// Long-polls of the changes feed (GET /public/v1/changes?wait=N, since=now; server/wakeups.ts): the
// parameter's rule, a write that wakes a waiter (through the service, and through Redis from another
// instance: the re-read tick set far beyond the test so only a signal can answer early), a write no
// signal announces (SQL) found by the re-read tick, the bound of the wait and the token it leaves,
// since=now, the caps and `backoff`, the key checked again after a wait (revoked, expired, plan,
// scope), the instance stopping, X-Poll-Interval on every answer. Waits are observed through the
// instance's waiter count (polled), never by sleeping.
// @topology pooler redis
import { spawn } from "node:child_process";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LoadResult } from "../../server/admin/fixture.js";
import { deliveries, expectEnvelope, startApp, untimed, type Response, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { freePort, until } from "../helpers/processes.js";
import { wakeupChannel } from "../../server/wakeups.js";

type App = TestApp & { testDb: Awaited<ReturnType<typeof startApp>>["testDb"]; quotaNamespace: string };
let app: App;
let ids: LoadResult;
const acme = () => ids.tenants.acme!;
const key = (ref = "full") => acme().apiKeys[ref]!.key;
/** A re-read tick no test reaches: a waiter of `app` answers early only on a signal. */
const NEVER_MS = 60_000;

beforeAll(async () => {
  app = await startApp({ config: { changesRereadMs: NEVER_MS } });
  ids = await app.load(
    fixture(
      tenant("acme", {
        rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 },
        apiKeys: [
          { ref: "full", owner: "ana", scopes: "all" },
          { ref: "second", owner: "ana", scopes: "all" },
          { ref: "doomed", owner: "ana", scopes: "all" },
          { ref: "expiring", owner: "ana", scopes: "all" },
          { ref: "narrowed", owner: "ana", scopes: "all" },
          { ref: "leads", owner: "ana", scopes: ["tenant:leads.read", "tenant:leads.manage"] },
        ],
        contacts: [{ ref: "bea", fullName: "Bea Soto", phone: "+34600000001" }],
      }),
      tenant("demoted", { rateLimit: { perMinute: 1_000_000, perDay: 100_000_000 } }),
    ),
  );
}, 60_000);
afterAll(() => app?.close());

const sql = (text: string, params: unknown[] = []) => untimed(app.db)(text, params);

async function head(a: TestApp = app, k = key()): Promise<string> {
  const r = await a.request("GET", "/public/v1/changes", { key: k, query: { since: "now" } });
  expect(r.status, r.text).toBe(200);
  return r.body.nextSince;
}

/** A long-poll in flight, and the moment the instance holds it as a waiter. */
async function waiting(
  a: TestApp,
  query: Record<string, string | number>,
  k = key(),
): Promise<{ answer: Promise<Response>; started: number }> {
  const before = a.services.wakeups!.stats.waiters;
  const started = Date.now();
  const answer = a.request("GET", "/public/v1/changes", { key: k, query });
  expect(await until(() => a.services.wakeups!.stats.waiters > before, 10_000, 10)).toBe(true);
  return { answer, started };
}

const createLead = (name: string, k = key()) =>
  app.request("POST", "/public/v1/leads", {
    key: k,
    body: { customerName: name, customerPhone: "+34600000077" },
  });

describe("the wait parameter", () => {
  it("0–25 whole seconds; anything else is a 422 naming wait, with X-Poll-Interval", async () => {
    for (const wait of ["26", "-1", "1.5", "abc", "1e1", "99999999999"]) {
      const r = await app.request("GET", "/public/v1/changes", { key: key(), query: { wait } });
      expectEnvelope(r, 422, "VALIDATION_ERROR");
      expect(r.body.details.fields[0].field, wait).toBe("wait");
      expect(r.headers.get("x-poll-interval")).toBe("5");
    }
  });

  it("wait=0 (and none) answers at once as before; every answer says X-Poll-Interval, a 403 too", async () => {
    const since = await head();
    for (const query of [{ since }, { since, wait: 0 }]) {
      const r = await app.request("GET", "/public/v1/changes", { key: key(), query });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false });
      expect(r.headers.get("x-poll-interval")).toBe("5");
    }
    const denied = await app.request("GET", "/public/v1/changes", {
      key: key("leads"),
      query: { types: "ticket", wait: 5 },
    });
    expectEnvelope(denied, 403, "PERMISSION_DENIED");
    expect(denied.headers.get("x-poll-interval")).toBe("5");
  });
});

describe("a waiting long-poll", () => {
  it("answers a write of the service at once, with the change, and holds no database connection meanwhile", async () => {
    const since = await head();
    const pool = () => app.db.poolStats?.();
    const busyBefore = pool() ? pool()!.total - pool()!.idle : 0;
    const { answer } = await waiting(app, { since, wait: 20 });
    if (pool()) expect(pool()!.total - pool()!.idle).toBeLessThanOrEqual(busyBefore);
    const delivered = await deliveries(app, "long-poll");
    const created = await createLead("Woken Up");
    expect(created.status).toBe(201);
    const r = await answer;
    expect(r.status).toBe(200);
    expect(r.body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
    expect(r.body.hasMore).toBe(false);
    expect(r.body.backoff).toBeUndefined();
    // The page a wait ended is in the delivery-latency histogram.
    expect(await deliveries(app, "long-poll")).toBe(delivered + 1);
  });

  it("with nothing new answers empty once the wait passes, with a token that loses nothing", async () => {
    const since = await head();
    const started = Date.now();
    const r = await app.request("GET", "/public/v1/changes", { key: key(), query: { since, wait: 1 } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false });
    const created = await createLead("After The Wait");
    const next = await app.request("GET", "/public/v1/changes", { key: key(), query: { since: r.body.nextSince } });
    expect(next.body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
  });

  it("wakes only for the requested types: a lead does not end a wait for tickets", async () => {
    const since = await head();
    const { answer } = await waiting(app, { since, wait: 20, types: "ticket" });
    await createLead("Not A Ticket");
    // The lead woke the waiter, which read again and went back to waiting.
    expect(await until(() => app.services.wakeups!.stats.waiters >= 1, 10_000, 10)).toBe(true);
    const ticket = await app.request("POST", "/public/v1/tickets", {
      key: key(),
      body: { subject: "Now a ticket", customerId: acme().contacts.bea },
    });
    expect(ticket.status, ticket.text).toBe(201);
    const r = await answer;
    expect(r.body.items.map((i: { type: string; id: string }) => `${i.type}:${i.id}`)).toEqual([
      `ticket:${ticket.body.id}`,
    ]);
  });

  it("finds a change no signal announces (written in SQL) at the re-read tick", async () => {
    const quick = await startApp({ db: app.testDb, config: { changesRereadMs: 100 } });
    try {
      const since = await head(quick);
      const { answer } = await waiting(quick, { since, wait: 20 });
      const [row] = (await sql(
        `INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1::uuid, 'Quiet', $2::uuid) RETURNING "id"`,
        [acme().id, acme().stages.new],
      )) as { id: string }[];
      const r = await answer;
      expect(r.body.items.map((i: { id: string }) => i.id)).toEqual([row!.id]);
    } finally {
      await quick.close();
    }
  });

  it.runIf(process.env.REDIS_URL || process.env.REDIS_CLUSTER_NODES)(
    "is woken by a write on another instance, through Redis",
    async () => {
      const other = await startApp({ db: app.testDb, config: { changesRereadMs: NEVER_MS } });
      try {
        const since = await head();
        const { answer } = await waiting(app, { since, wait: 20 });
        // The waiter's instance has subscribed its tenant's channel (a publish before that is found by the tick only).
        expect(await until(() => app.services.wakeups!.listening(acme().id), 10_000, 10)).toBe(true);
        const created = await other.request("POST", "/public/v1/leads", {
          key: key(),
          body: { customerName: "Elsewhere", customerPhone: "+34600000078" },
        });
        expect(created.status).toBe(201);
        const r = await answer;
        expect(r.body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
      } finally {
        await other.close();
      }
    },
  );
});

describe("since=now", () => {
  it("starts at the head: no items, then only what comes after; with wait it waits for the first change", async () => {
    await createLead("Before Now");
    const r = await app.request("GET", "/public/v1/changes", { key: key(), query: { since: "now" } });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false });
    const again = await app.request("GET", "/public/v1/changes", { key: key(), query: { since: r.body.nextSince } });
    expect(again.body.items).toEqual([]);

    const { answer } = await waiting(app, { since: "now", wait: 20 });
    const created = await createLead("After Now");
    const woken = await answer;
    expect(woken.body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
  });

  it("NOW (or now with a space) is not a token: 422 naming since", async () => {
    for (const since of ["NOW", "now "]) {
      const r = await app.request("GET", "/public/v1/changes", { key: key(), query: { since } });
      expectEnvelope(r, 422, "VALIDATION_ERROR");
      expect(r.body.details.fields[0].field).toBe("since");
    }
  });
});

describe("caps", () => {
  it("two waits per key on an instance: a third answers at once with backoff; another key still waits", async () => {
    const since = await head();
    const a = await waiting(app, { since, wait: 20 });
    const b = await waiting(app, { since, wait: 20 });
    const started = Date.now();
    const third = await app.request("GET", "/public/v1/changes", { key: key(), query: { since, wait: 20 } });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(third.status).toBe(200);
    expect(third.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false, backoff: 5 });
    const c = await waiting(app, { since, wait: 20 }, key("second"));
    const created = await createLead("Wakes Three");
    for (const w of [a, b, c])
      expect((await w.answer).body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
  });

  it("a client that goes away frees its place at once", async () => {
    const since = await head();
    const held = await waiting(app, { since, wait: 20 });
    const before = app.services.wakeups!.stats.waiters;
    const gone = new AbortController();
    const url = `${app.url}/public/v1/changes?since=${encodeURIComponent(since)}&wait=20`;
    const cut = fetch(url, { headers: { "X-API-Key": key() }, signal: gone.signal }).catch(() => "aborted");
    expect(await until(() => app.services.wakeups!.stats.waiters > before, 10_000, 10)).toBe(true);
    gone.abort();
    expect(await cut).toBe("aborted");
    expect(await until(() => app.services.wakeups!.stats.waiters === before, 10_000, 10)).toBe(true);
    // The key's second place is free again: another wait is held, not refused with backoff.
    const again = await waiting(app, { since, wait: 20 });
    const created = await createLead("Frees A Place");
    for (const w of [held, again])
      expect((await w.answer).body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
  });

  it("the instance's cap (CHANGES_MAX_WAITERS): past it, backoff", async () => {
    const small = await startApp({ db: app.testDb, config: { changesMaxWaiters: 1, changesRereadMs: NEVER_MS } });
    try {
      const since = await head(small);
      const held = await waiting(small, { since, wait: 20 });
      const refused = await small.request("GET", "/public/v1/changes", {
        key: key("second"),
        query: { since, wait: 20 },
      });
      expect(refused.body.backoff).toBe(5);
      small.services.wakeups!.close();
      const r = await held.answer;
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false });
    } finally {
      await small.close();
    }
  });
});

describe("the key, checked again after a wait", () => {
  const wake = () => app.services.wakeups!.notify(acme().id);

  it("revoked meanwhile: 401 INVALID_CREDENTIALS", async () => {
    const since = await head(app, key("doomed"));
    const w = await waiting(app, { since, wait: 20 }, key("doomed"));
    await sql(`UPDATE "ApiKey" SET "revokedAt" = now() WHERE "id" = $1::uuid`, [acme().apiKeys.doomed!.id]);
    wake();
    expectEnvelope(await w.answer, 401, "INVALID_CREDENTIALS");
  });

  it("expired meanwhile: 401 TOKEN_EXPIRED", async () => {
    const since = await head(app, key("expiring"));
    const w = await waiting(app, { since, wait: 20 }, key("expiring"));
    await sql(`UPDATE "ApiKey" SET "expiresAt" = now() - interval '1 second' WHERE "id" = $1::uuid`, [
      acme().apiKeys.expiring!.id,
    ]);
    wake();
    expectEnvelope(await w.answer, 401, "TOKEN_EXPIRED");
  });

  it("a requested type's scope removed meanwhile: 403 PERMISSION_DENIED", async () => {
    const since = await head(app, key("narrowed"));
    const w = await waiting(app, { since, wait: 20, types: "lead" }, key("narrowed"));
    await sql(`UPDATE "ApiKey" SET "scopes" = ARRAY['tenant:tickets.read'] WHERE "id" = $1::uuid`, [
      acme().apiKeys.narrowed!.id,
    ]);
    wake();
    expectEnvelope(await w.answer, 403, "PERMISSION_DENIED");
  });

  it("the plan downgraded meanwhile: 403 PLAN_NOT_ELIGIBLE", async () => {
    const demoted = ids.tenants.demoted!;
    const k = demoted.apiKeys.full!.key;
    const since = await head(app, k);
    const w = await waiting(app, { since, wait: 20 }, k);
    await sql(`UPDATE "Tenant" SET "plan" = 'starter' WHERE "id" = $1::uuid`, [demoted.id]);
    app.services.wakeups!.notify(demoted.id);
    expectEnvelope(await w.answer, 403, "PLAN_NOT_ELIGIBLE");
  });
});

describe("stopping", () => {
  it("every waiter answers at once, empty, with a token that loses nothing; later long-polls are not held", async () => {
    const inst = await startApp({ db: app.testDb, config: { changesRereadMs: NEVER_MS } });
    try {
      const since = await head(inst);
      const w = await waiting(inst, { since, wait: 25 });
      inst.services.wakeups!.close();
      const r = await w.answer;
      expect(Date.now() - w.started).toBeLessThan(20_000);
      expect(r.body).toEqual({ items: [], nextSince: expect.any(String), hasMore: false });
      const after = await inst.request("GET", "/public/v1/changes", { key: key(), query: { since, wait: 25 } });
      expect(after.body.backoff).toBe(5);
      const created = await createLead("After The Stop");
      const next = await app.request("GET", "/public/v1/changes", { key: key(), query: { since: r.body.nextSince } });
      expect(next.body.items.map((i: { id: string }) => i.id)).toEqual([created.body.id]);
    } finally {
      await inst.close();
    }
  });
});

// Redis lost while long-polls wait: on its own redis-server (killed and started again on its port).
// Writes keep succeeding; a waiter whose signal cannot come is answered by its instance's probe
// within the re-read tick; once Redis is back, ioredis subscribes the channels again and a signal
// wakes a waiter that has no tick to rely on, with the write made during the outage in its page too.
describe.runIf(process.env.REDIS_URL)("Redis lost during waits", () => {
  it("degrades to the re-read tick, loses nothing, and signals again once Redis is back", async () => {
    const port = await freePort();
    const redisUrl = `redis://127.0.0.1:${port}`;
    const startRedis = () =>
      spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
        stdio: "ignore",
      });
    let server = startRedis();
    const probe = new Redis(redisUrl, { lazyConnect: true, retryStrategy: () => 100, maxRetriesPerRequest: 1 });
    probe.on("error", () => {}); // refused while the server is down: what the test makes happen
    const up = () =>
      probe.ping().then(
        () => true,
        () => false,
      );
    const apps: App[] = [];
    try {
      expect(await until(up, 10_000, 50)).toBe(true);
      const start = async (rereadMs: number) => {
        const a = (await startApp({ db: app.testDb, config: { redisUrl, changesRereadMs: rereadMs } })) as App;
        apps.push(a);
        return a;
      };
      const heard = await start(NEVER_MS);
      const ticking = await start(200);
      const writer = await start(NEVER_MS);
      const heardAt = await head(heard);
      const waitingForSignal = await waiting(heard, { since: heardAt, wait: 25 });
      expect(await until(() => heard.services.wakeups!.listening(acme().id), 10_000, 10)).toBe(true);

      server.kill("SIGKILL");
      expect(await until(async () => !(await up()) && writer.services.redis!.status !== "ready", 10_000, 50)).toBe(
        true,
      );
      const tickedAt = await head(ticking);
      const { answer } = await waiting(ticking, { since: tickedAt, wait: 25 });
      const during = await writer.request("POST", "/public/v1/leads", {
        key: key(),
        body: { customerName: "During The Outage", customerPhone: "+34600000079" },
      });
      expect(during.status).toBe(201);
      const ticked = await answer;
      expect(ticked.status).toBe(200);
      expect(ticked.body.items.map((i: { id: string }) => i.id)).toEqual([during.body.id]);

      server = startRedis();
      const channel = wakeupChannel(acme().id);
      const subscribers = async () => Number(((await probe.pubsub("NUMSUB", channel)) as [string, number])[1]);
      // Back: the writer can publish and the heard instance has subscribed its channel again.
      expect(
        await until(
          async () => (await up()) && writer.services.redis!.status === "ready" && (await subscribers()) >= 1,
          15_000,
          50,
        ),
      ).toBe(true);
      const after = await writer.request("POST", "/public/v1/leads", {
        key: key(),
        body: { customerName: "After The Outage", customerPhone: "+34600000080" },
      });
      expect(after.status).toBe(201);
      const woken = await waitingForSignal.answer;
      expect(woken.status).toBe(200);
      expect(woken.body.items.map((i: { id: string }) => i.id)).toEqual([during.body.id, after.body.id]);
    } finally {
      for (const a of apps) await a.close();
      probe.disconnect();
      server.kill("SIGKILL");
    }
  });
});
