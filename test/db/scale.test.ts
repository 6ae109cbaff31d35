// Scale-out: the Prometheus /metrics listener (separate port, bounded labels, every
// figure it promises), quotas whose Redis keys share one hash slot per API key (no CROSSSLOT on a
// Redis Cluster), the Redis fallback visible in /metrics, configuration of the new variables, and
// migrations through DIRECT_DATABASE_URL.
// @topology pooler redis
import calculateSlot from "cluster-key-slot";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, parseClusterNodes } from "../../server/config.js";
import { openPostgres } from "../../server/db/client.js";
import { appliedBy, migrateDirect, readFunctions, readMigrations } from "../../server/db/migrate.js";
import { redisQuotaKeys } from "../../server/limits/quotas.js";
import {
  directBaseUrl,
  expectEnvelope,
  onServer,
  randomUuid,
  startApp,
  withDatabase,
  type TestApp,
} from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { startProviderStub, type ProviderStub } from "../helpers/provider-stub.js";

type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let app: Awaited<ReturnType<typeof startApp>>;
let stub: ProviderStub;
let acme: Ids;
let tight: Ids;
const redisConfigured = Boolean(process.env.REDIS_URL || process.env.REDIS_CLUSTER_NODES);

/** The samples of a Prometheus text exposition: name, labels, value. */
function parse(text: string) {
  const out: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

async function scrape(a: TestApp = app) {
  const res = await fetch(`${a.metricsUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  const samples = parse(text);
  const value = (name: string, labels: Record<string, string> = {}) =>
    samples
      .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
      .reduce((n, s) => n + s.value, 0);
  return { text, samples, value };
}

beforeAll(async () => {
  app = await startApp({ config: { metricsPort: 0 } });
  stub = await startProviderStub();
  const H = 3_600_000;
  const loaded = await app.load(
    fixture(
      tenant("acme", {
        channels: [
          {
            ref: "wa",
            kind: "whatsapp",
            name: "WhatsApp",
            config: { baseUrl: stub.baseUrl, phoneNumberId: "1001", accessToken: "t0k-scale" },
          },
          { ref: "site", kind: "web", name: "Website chat" },
        ],
        conversations: [
          {
            ref: "cw",
            channel: "site",
            status: "active",
            identity: { externalId: "visitor-1", name: "Visitor" },
            messages: [{ role: "user", content: "Hi from the web", createdAt: new Date(Date.now() - H).toISOString() }],
          },
          {
            ref: "cwa",
            channel: "wa",
            status: "active",
            identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001" },
            messages: [{ role: "user", content: "Hi!", createdAt: new Date(Date.now() - H).toISOString() }],
          },
        ],
      }),
      tenant("tight", { rateLimit: { perMinute: 2, perDay: 1000 } }),
    ),
  );
  acme = loaded.tenants.acme!;
  tight = loaded.tenants.tight!;
});
afterAll(async () => {
  await app.close();
  await stub.close();
});

describe("GET /metrics", () => {
  it("is not served on the public port", async () => {
    for (const path of ["/metrics", "/public/v1/metrics"]) {
      const res = await fetch(`${app.url}${path}`, { headers: { "X-API-Key": acme.apiKeys.full!.key } });
      expect(res.status).toBe(404);
      expect(await res.text()).not.toContain("crm_http_requests_total");
    }
  });

  it("answers only GET /metrics on its own port", async () => {
    expect((await fetch(`${app.metricsUrl}/`)).status).toBe(404);
    expect((await fetch(`${app.metricsUrl}/metrics`, { method: "POST" })).status).toBe(404);
    expect((await fetch(`${app.metricsUrl}/metrics`, { method: "HEAD" })).status).toBe(200);
  });

  it("counts requests and latency by method, route template and status — never the raw path", async () => {
    const key = acme.apiKeys.full!.key;
    const before = await scrape();
    const ids = [randomUuid(), randomUuid()];
    for (const id of ids) expectEnvelope(await app.request("GET", `/public/v1/leads/${id}`, { key }), 404, "NOT_FOUND");
    expect((await app.request("GET", "/public/v1/me", { key })).status).toBe(200);
    expectEnvelope(await app.request("GET", `/public/v1/nothing/${ids[0]}`, { key }), 404, "NOT_FOUND");
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) =>
      after.value(name, labels) - before.value(name, labels);
    expect(
      delta("crm_http_requests_total", { method: "GET", route: "/public/v1/leads/{lead_id}", status: "404" }),
    ).toBe(2);
    expect(delta("crm_http_requests_total", { method: "GET", route: "/public/v1/me", status: "200" })).toBe(1);
    expect(delta("crm_http_requests_total", { method: "GET", route: "/public/v1/unmatched", status: "404" })).toBe(1);
    expect(
      delta("crm_http_request_duration_seconds_count", {
        method: "GET",
        route: "/public/v1/leads/{lead_id}",
        status: "404",
      }),
    ).toBe(2);
    expect(
      after.value("crm_http_request_duration_seconds_bucket", { route: "/public/v1/me", status: "200", le: "+Inf" }),
    ).toBe(after.value("crm_http_requests_total", { route: "/public/v1/me", status: "200" }));
    for (const id of ids) expect(after.text).not.toContain(id);
    // Every route label is a template, a fixed path or "unmatched".
    const routes = new Set(
      after.samples.filter((s) => s.name === "crm_http_requests_total").map((s) => s.labels.route!),
    );
    for (const r of routes)
      expect(r).toMatch(
        /^(\/public\/v1\/[a-z/{}_.]+|\/healthz|\/readyz|\/docs|\/trpc\/[a-zA-Z.]+|\/trpc-admin|unmatched)$/,
      );
  });

  it("shows the requests in flight: one while a response is held open, none once every response closed (an abandoned one too)", async () => {
    const key = acme.apiKeys.full!.key;
    const inFlight = async () => (await scrape()).value("crm_http_requests_in_flight", {});
    expect(await inFlight()).toBe(0);
    // A request whose body never comes is in flight until its client goes away.
    const { request } = await import("node:http");
    const held = request(`${app.url}/public/v1/leads`, {
      method: "POST",
      headers: { "X-API-Key": key, "Content-Type": "application/json", "Content-Length": "100" },
    });
    held.on("error", () => {});
    held.write("{");
    await expect.poll(inFlight).toBe(1);
    expect((await app.request("GET", "/public/v1/me", { key })).status).toBe(200);
    expect(await inFlight()).toBe(1);
    held.destroy();
    await expect.poll(inFlight).toBe(0);
  });

  it("counts /trpc calls by procedure, and unknown procedures as one label", async () => {
    const key = acme.apiKeys.full!.key;
    const before = await scrape();
    const input = `?input=${encodeURIComponent("{}")}`;
    expect((await fetch(`${app.url}/trpc/me.get${input}`, { headers: { "X-API-Key": key } })).status).toBe(200);
    expect(
      (await fetch(`${app.url}/trpc/no.such${randomUuid()}${input}`, { headers: { "X-API-Key": key } })).status,
    ).toBe(404);
    const after = await scrape();
    expect(
      after.value("crm_http_requests_total", { route: "/trpc/me.get", status: "200" }) -
        before.value("crm_http_requests_total", { route: "/trpc/me.get", status: "200" }),
    ).toBe(1);
    expect(
      after.value("crm_http_requests_total", { route: "/trpc/unmatched" }) -
        before.value("crm_http_requests_total", { route: "/trpc/unmatched" }),
    ).toBe(1);
  });

  it("counts rate-limit rejections by window", async () => {
    const key = tight.apiKeys.full!.key;
    const before = await scrape();
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await app.request("GET", "/public/v1/me", { key })).status);
    expect(statuses).toEqual([200, 200, 429, 429]);
    const after = await scrape();
    expect(
      after.value("crm_rate_limit_rejections_total", { window: "minute" }) -
        before.value("crm_rate_limit_rejections_total", { window: "minute" }),
    ).toBe(2);
    expect(
      after.value("crm_http_requests_total", { route: "/public/v1/me", status: "429" }) -
        before.value("crm_http_requests_total", { route: "/public/v1/me", status: "429" }),
    ).toBe(2);
  });

  it("counts idempotent replays by route", async () => {
    const key = acme.apiKeys.full!.key;
    const before = await scrape();
    const body = { customerName: "Metric Lead", customerPhone: "+34600777000" };
    const first = await app.request("POST", "/public/v1/leads", {
      key,
      body,
      headers: { "Idempotency-Key": "metrics-1" },
    });
    const again = await app.request("POST", "/public/v1/leads", {
      key,
      body,
      headers: { "Idempotency-Key": "metrics-1" },
    });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    const after = await scrape();
    expect(
      after.value("crm_idempotent_replays_total", { route: "/public/v1/leads" }) -
        before.value("crm_idempotent_replays_total", { route: "/public/v1/leads" }),
    ).toBe(1);
  });

  it("counts provider sends by channel and outcome", async () => {
    const key = acme.apiKeys.full!.key;
    const before = await scrape();
    stub.respond({ status: 200, body: { messages: [{ id: "wamid.1" }] } });
    const sent = await app.request("POST", `/public/v1/conversations/${acme.conversations.cwa}/messages`, {
      key,
      body: { content: "hello" },
    });
    expect([sent.status, sent.body.deliveryStatus]).toEqual([201, "sent"]);
    stub.respond({ status: 500, body: { error: "down" } });
    const failed = await app.request("POST", `/public/v1/conversations/${acme.conversations.cwa}/messages`, {
      key,
      body: { content: "again" },
    });
    expect([failed.status, failed.body.deliveryStatus]).toEqual([201, "failed"]);
    const web = await app.request("POST", `/public/v1/conversations/${acme.conversations.cw}/messages`, {
      key,
      body: { content: "web" },
    });
    expect([web.status, web.body.deliveryStatus]).toEqual([201, "sent"]);
    const after = await scrape();
    const delta = (labels: Record<string, string>) =>
      after.value("crm_provider_sends_total", labels) - before.value("crm_provider_sends_total", labels);
    expect(delta({ channel: "whatsapp", outcome: "sent" })).toBe(1);
    expect(delta({ channel: "whatsapp", outcome: "failed" })).toBe(1);
    expect(delta({ channel: "web", outcome: "sent" })).toBe(1);
  });

  it("reports the database pool and the Redis fallback state", async () => {
    const m = await scrape();
    for (const state of ["in_use", "idle"])
      expect(m.samples.some((s) => s.name === "crm_db_pool_connections" && s.labels.state === state)).toBe(true);
    expect(m.samples.some((s) => s.name === "crm_db_pool_waiting")).toBe(true);
    if (app.db.kind === "postgres") expect(m.value("crm_db_pool_connections")).toBeGreaterThan(0);
    expect(m.value("crm_redis_configured")).toBe(redisConfigured ? 1 : 0);
    // Every quota so far was counted where it should be: in Redis (a cluster included: both windows
    // of a key in one slot, so no CROSSSLOT), never in the fallback.
    expect(m.value("crm_redis_fallback")).toBe(0);
    expect(m.value("crm_quota_fallback_requests_total")).toBe(0);
  });
});

describe("Redis unreachable", () => {
  it("requests are served, counted in memory, and /metrics says so", async () => {
    const lost = await startApp({
      db: app.testDb,
      redisReadyMs: 300,
      config: { metricsPort: 0, redisUrl: "redis://127.0.0.1:1", redisClusterNodes: undefined },
    });
    try {
      const key = acme.apiKeys.full!.key;
      for (let i = 0; i < 3; i++) expect((await lost.request("GET", "/public/v1/me", { key })).status).toBe(200);
      const m = await scrape(lost);
      expect(m.value("crm_redis_configured")).toBe(1);
      expect(m.value("crm_redis_fallback")).toBe(1);
      expect(m.value("crm_quota_fallback_requests_total")).toBe(3);
      const ready = await fetch(`${lost.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { checks: { redis: string } }).checks.redis).toBe("unavailable");
    } finally {
      await lost.close();
    }
  });
});

describe.runIf(redisConfigured)("Redis at start", () => {
  it("a new instance serves once Redis is ready: its very first requests count in the shared windows", async () => {
    const fresh = await startApp({ db: app.testDb, quotaNamespace: app.quotaNamespace, config: { metricsPort: 0 } });
    try {
      expect(fresh.services.redis!.status).toBe("ready");
      const loaded = await app.load(fixture(tenant("startup", { rateLimit: { perMinute: 100, perDay: 1000 } })));
      const key = loaded.tenants.startup!.apiKeys.full!.key;
      const before = await app.request("GET", "/public/v1/me", { key });
      const answers = await Promise.all([0, 1, 2].map(() => fresh.request("GET", "/public/v1/me", { key })));
      const m = await scrape(fresh);
      expect(m.value("crm_quota_fallback_requests_total")).toBe(0);
      // Shared with the first instance: each answer's remaining continues from the other's count.
      const remaining = answers.map((r) => Number(r.headers.get("x-ratelimit-remaining"))).sort((a, b) => b - a);
      const prev = Number(before.headers.get("x-ratelimit-remaining"));
      expect(prev).toBe(99);
      expect(remaining).toEqual([prev - 1, prev - 2, prev - 3].map((n) => Math.max(n, 0)));
    } finally {
      await fresh.close();
    }
  });
});

describe("quota keys on a Redis Cluster", () => {
  it("both windows of an API key hash to one slot, and different keys spread over slots", () => {
    const slots = new Set<number>();
    for (let i = 0; i < 50; i++) {
      const hash = randomUuid().replace(/-/g, "").repeat(2);
      const [minute, day] = redisQuotaKeys("rl", hash);
      expect(minute).toBe(`rl:m:{${hash}}`);
      expect(calculateSlot(minute)).toBe(calculateSlot(day));
      slots.add(calculateSlot(minute));
    }
    expect(slots.size).toBeGreaterThan(40);
  });
});

describe("configuration", () => {
  it("REDIS_CLUSTER_NODES is a comma list of host:port and excludes REDIS_URL", () => {
    expect(parseClusterNodes("127.0.0.1:7000, redis-b:7001,[::1]:7002")).toEqual([
      { host: "127.0.0.1", port: 7000 },
      { host: "redis-b", port: 7001 },
      { host: "::1", port: 7002 },
    ]);
    for (const bad of ["redis-a", "redis-a:0", "redis-a:70000", "redis://a:1", ","])
      expect(() => parseClusterNodes(bad)).toThrow(/REDIS_CLUSTER_NODES/);
    expect(() => loadConfig({ REDIS_URL: "redis://127.0.0.1:6379", REDIS_CLUSTER_NODES: "127.0.0.1:7000" })).toThrow(
      /not both/,
    );
    expect(loadConfig({ REDIS_CLUSTER_NODES: "127.0.0.1:7000" }).redisClusterNodes).toEqual([
      { host: "127.0.0.1", port: 7000 },
    ]);
  });
  it("DIRECT_DATABASE_URL defaults to DATABASE_URL; METRICS_PORT is off when unset", () => {
    expect(loadConfig({ DATABASE_URL: "postgresql://a/b" }).directDatabaseUrl).toBe("postgresql://a/b");
    expect(
      loadConfig({ DATABASE_URL: "postgresql://a/b", DIRECT_DATABASE_URL: "postgresql://c/b" }).directDatabaseUrl,
    ).toBe("postgresql://c/b");
    expect(loadConfig({}).metricsPort).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: "9464", HOST: "0.0.0.0" })).toMatchObject({
      metricsPort: 9464,
      metricsHost: "0.0.0.0",
    });
    expect(loadConfig({ METRICS_PORT: "9464", METRICS_HOST: "10.0.0.5" }).metricsHost).toBe("10.0.0.5");
    expect(() => loadConfig({ METRICS_PORT: "x" })).toThrow(/METRICS_PORT/);
  });
});

describe.skipIf(!process.env.DATABASE_URL)("migrations through DIRECT_DATABASE_URL", () => {
  it("run on the direct database, not through the pooled URL", async () => {
    const name = `direct_${randomUuid().slice(0, 8)}`;
    await onServer(`CREATE DATABASE ${name}`);
    const directUrl = withDatabase(directBaseUrl()!, name);
    // The pooled side is an existing, already migrated database: had the migrator used it, the
    // direct one would stay empty.
    const pooled = await openPostgres(app.testDb.url!, { max: 1 });
    try {
      const applied = await migrateDirect({ databaseUrl: app.testDb.url, directDatabaseUrl: directUrl }, pooled);
      expect(applied.length).toBeGreaterThan(0);
      const c = new pg.Client({ connectionString: directUrl });
      await c.connect();
      const rows = (await c.query(`SELECT count(*)::int AS n FROM "_app_migrations"`)).rows;
      await c.end();
      // Every migration and function source applied there is recorded there (the retired functions' drops are not),
      // including the function files a migration applies itself (`-- apply: functions/<name>.sql`), which
      // the migrator reports under the migration's name only.
      const { files } = await readFunctions();
      const migrations = (await readMigrations()).filter((m) => applied.includes(m.name));
      const byMigration = new Set(
        migrations.flatMap((m) => appliedBy(m, files).map((f) => f.name)).filter((f) => !applied.includes(f)),
      );
      expect((rows[0] as { n: number }).n).toBe(
        applied.filter((a) => !a.startsWith("dropped ")).length + byMigration.size,
      );
    } finally {
      await pooled.close();
      await onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  });
});
