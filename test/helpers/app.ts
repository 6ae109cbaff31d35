// One app per test file: a fresh database (freshDatabase below: in-memory PGlite by default; with
// DATABASE_URL a new PostgreSQL database, both started from the run's migrated copy), Redis when REDIS_URL or
// REDIS_CLUSTER_NODES is set (with a namespace of the file's own), the real Express app on an
// ephemeral port, and a small HTTP client.
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readFile } from "node:fs/promises";
import { inject } from "vitest";
import { createApp } from "../../server/app.js";
import { instanceMetrics, type WORKER_POOL, workerRoutes } from "../../server/bootstrap.js";
import { Wakeups } from "../../server/wakeups.js";
import { feedState } from "../../server/changes.js";
import { loadConfig, type Config } from "../../server/config.js";
import { openPglite, openPostgres, type Database, type StatementObserver } from "../../server/db/client.js";
import { migrate } from "../../server/db/migrate.js";
import { loadFixture, type FixtureInput, type LoadResult } from "../../server/admin/fixture.js";
import { lockUserCalendar } from "../../routers/appointments/schemas.js";
import { Quotas } from "../../server/limits/quotas.js";
import { createLogger } from "../../server/logger.js";
import { startMetricsServer } from "../../server/metrics.js";
import { openRedis } from "../../server/redis.js";
import { createProviders } from "../../server/channels/providers.js";
import type { Services } from "../../server/services.js";
import { assertConforms } from "./conformance.js";
import { citusCluster, createClusterDatabase, TEST_SHARD_COUNT } from "./cluster.js";
import { claim, pristineOf, register, release, type Pristine } from "./citus-pool.js";
import { copyTemplate, directBaseUrl, dropDatabase, onServer, withDatabase } from "./template.js";
import { distribute } from "../../server/db/distribute.js";
import { answerClientErrors, HTTP_SERVER_OPTIONS } from "../../server/http-server.js";

export interface TestDb {
  db: Database;
  /** The database's URL as the service uses it (through PgBouncer in the PgBouncer leg). */
  url?: string;
  /**
   * Opens another pool with this one's options (statement timeout,
   * observer) at `url`: a worker's, for DATABASE_ROUTING=workers.
   */
  open?: (url: string, worker: typeof WORKER_POOL) => Promise<Database>;
  /** The same database on PostgreSQL itself (DIRECT_DATABASE_URL's server). */
  directUrl?: string;
  drop(): Promise<void>;
}

export { directBaseUrl, onServer, withDatabase };

/** What the run's global setup provided (test/helpers/global-setup.ts); nothing outside vitest. */
function provided(key: "pgliteSnapshot" | "templateDatabase" | "citusPoolRun"): string | undefined {
  try {
    return inject(key);
  } catch {
    return undefined;
  }
}

let snapshot: Promise<Blob> | undefined;
const migratedSnapshot = (file: string) => (snapshot ??= readFile(file).then((b) => new Blob([b])));

/**
 * An embedded database folder, created and migrated, for a process to start on (the process tests'
 * `npm start`, the admin CLI): the run's migrated snapshot written into it, so that the process pays
 * for no initdb and no migration (~3 s each on this machine). A start that must meet an empty folder
 * (the demo's first start, the migrations themselves) is given none.
 */
export async function seedEmbeddedFolder(folder: string): Promise<void> {
  const file = provided("pgliteSnapshot");
  const db = await openPglite(folder, file ? { loadDataDir: await migratedSnapshot(file) } : {});
  try {
    if (!file) await migrate(db.sql);
  } finally {
    await db.close();
  }
}

/**
 * A fresh, migrated database for one test file (`observe`: see every statement sent to it): an
 * in-memory PGlite started from the run's migrated snapshot by default; with DATABASE_URL a new
 * database copied from the run's migrated template (on a Citus coordinator: one of the run's pool of
 * distributed databases, test/helpers/citus-pool.ts, made on every node when none is free), dropped
 * afterwards (on Citus: emptied and handed back when still pristine) — created, dropped and copied
 * through DIRECT_DATABASE_URL when DATABASE_URL points at PgBouncer
 * (test/helpers/global-setup.ts). Without a snapshot or template
 * (a script outside vitest): created and migrated here.
 */
export async function freshDatabase(opts: { observe?: StatementObserver } = {}): Promise<TestDb> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    const file = provided("pgliteSnapshot");
    const db = await openPglite("memory://", { ...opts, loadDataDir: file ? await migratedSnapshot(file) : undefined });
    if (!file) await migrate(db.sql);
    return { db, drop: () => db.close() };
  }
  const cluster = await citusCluster(directBaseUrl()!);
  const template = provided("templateDatabase");
  const poolRun = cluster ? provided("citusPoolRun") : undefined;
  let name: string;
  let migrated = Boolean(template);
  let pristine: Pristine | undefined;
  const claimed = poolRun && cluster ? await claim(directBaseUrl()!, cluster, poolRun) : undefined;
  if (claimed) {
    ({ name, pristine } = claimed);
    migrated = true;
  } else if (template) name = await copyTemplate({ name: template, cluster });
  else {
    name = `test_${randomBytes(6).toString("hex")}`;
    if (cluster) await createClusterDatabase(directBaseUrl()!, cluster, name);
    else await onServer(`CREATE DATABASE ${name}`);
    if (poolRun && cluster) await register(directBaseUrl()!, cluster, poolRun, name);
  }
  const url = withDatabase(base, name);
  const directUrl = withDatabase(directBaseUrl()!, name);
  // The service's pools run with the service's statement_timeout (DATABASE_STATEMENT_TIMEOUT_MS,
  // 5 s by default: server/config.ts), through a PgBouncer that refuses it as a startup parameter
  // with SET LOCAL (server/db/pooler-timeout.ts). Set-up work runs without it: the migrations and
  // db:distribute below and the Citus pool's TRUNCATE (citus-pool.ts) on connections of their own, the
  // fixture loads with SET LOCAL statement_timeout = 0 (server/admin/fixture/load.ts), bulk test data
  // through untimed() below.
  const statementTimeoutMs = loadConfig().databaseStatementTimeoutMs;
  if (!migrated) {
    const direct = await openPostgres(directUrl, { max: 1 });
    try {
      await migrate(direct.sql);
      if (cluster) await distribute(direct.sql, { shardCount: TEST_SHARD_COUNT });
    } finally {
      await direct.close();
    }
    if (cluster && poolRun) pristine = await pristineOf(directUrl);
  }
  const db = await openPostgres(url, { max: 20, observe: opts.observe, statementTimeoutMs });
  return {
    db,
    url,
    directUrl,
    open: (nodeUrl, worker) => openPostgres(nodeUrl, { max: 20, observe: opts.observe, statementTimeoutMs, ...worker }),
    async drop() {
      await db.close();
      if (poolRun && cluster && pristine)
        await release(directBaseUrl()!, cluster, poolRun, name, directUrl, pristine, () => dropDatabase(cluster, name));
      else await dropDatabase(cluster, name);
    },
  };
}

export interface Response<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  key?: string | null;
  body?: unknown;
  /** A raw body string sent as is. */
  raw?: string;
  headers?: Record<string, string>;
  query?: Record<string, string | number | boolean | undefined>;
}

export interface TestApp {
  url: string;
  /** The /metrics listener's base URL (when started with config.metricsPort). */
  metricsUrl?: string;
  services: Services;
  db: Database;
  load(fixture: FixtureInput): Promise<LoadResult>;
  request<T = any>(method: string, path: string, opts?: RequestOptions): Promise<Response<T>>;
  /** Sets the clock the services use ("now"); undefined → real time. */
  setNow(d: Date | undefined): void;
  close(): Promise<void>;
}

export interface StartOptions {
  config?: Partial<Config>;
  db?: TestDb;
  /** Share another app's quota namespace (two instances on one Redis). */
  quotaNamespace?: string;
  /** Validate every response against the OpenAPI document (default true). */
  conformance?: boolean;
  /** How long to wait for Redis to be ready at start (server/redis.ts openRedis; default 3000 ms). */
  redisReadyMs?: number;
  /** Where the service's log lines go (default: standard output). */
  logDestination?: { write(line: string): unknown };
}

/**
 * A runner of test-data statements without the pool's statement_timeout: the pool has the service's
 * (5 s by default, freshDatabase above), meant for API requests, and a bulk fill through the triggers
 * can take longer on a slower machine (CI's pgbouncer leg once cut 15,000 comments of 300 characters
 * at 5 s). Each statement runs in its own transaction with SET LOCAL statement_timeout = 0 (also
 * behind a transaction pooler: the setting ends with the transaction).
 */
export function untimed(db: Database) {
  return <T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> =>
    db.sql.session(async (s) => {
      await s.exec("BEGIN");
      try {
        await s.exec("SET LOCAL statement_timeout = 0");
        const rows = await s.query<T>(text, params);
        await s.exec("COMMIT");
        return rows;
      } catch (err) {
        await s.exec("ROLLBACK").catch(() => {});
        throw err;
      }
    });
}

export async function startApp(opts: StartOptions = {}): Promise<TestApp & { quotaNamespace: string; testDb: TestDb }> {
  const testDb = opts.db ?? (await freshDatabase());
  const config: Config = {
    ...loadConfig(),
    logLevel: process.env.LOG_LEVEL ?? "silent",
    providerTimeoutMs: 1500,
    ...opts.config,
  };
  const logger = createLogger(config.logLevel, config.logFormat, opts.logDestination);
  const redis = await openRedis(config, logger, opts.redisReadyMs);
  const quotaNamespace = opts.quotaNamespace ?? `rl-test-${randomBytes(6).toString("hex")}`;
  let now: Date | undefined;
  const conformance = opts.conformance ?? true;
  const quotas = new Quotas(redis, quotaNamespace);
  // DATABASE_ROUTING=workers (a Citus leg): the tenants' requests on their workers, as the service does.
  const routes =
    testDb.url && testDb.open
      ? workerRoutes({ ...config, databaseUrl: testDb.url }, testDb.db, logger, testDb.open)
      : undefined;
  const wakeups = new Wakeups({
    maxWaiters: config.changesMaxWaiters,
    rereadMs: config.changesRereadMs,
    redis,
    logger,
    probe: (tenantId) => feedState(testDb.db.prisma, tenantId),
  });
  const metrics = instanceMetrics(testDb.db, redis, quotas, { routes, wakeups });
  const services: Services = {
    config,
    db: testDb.db,
    routes,
    redis,
    quotas,
    logger,
    metrics,
    providers: createProviders({ timeoutMs: config.providerTimeoutMs, logger, metrics }),
    wakeups,
    now: () => now ?? new Date(),
  };
  const server: Server = createServer(HTTP_SERVER_OPTIONS, createApp(services));
  answerClientErrors(server);
  // PGlite runs in this thread: a long statement blocks the event loop past Node's 5 s keep-alive,
  // and fetch's coarse idle timer could then reuse a socket the server had just closed (ECONNRESET).
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const metricsServer =
    config.metricsPort === undefined ? undefined : await startMetricsServer(metrics, "127.0.0.1", config.metricsPort);

  return {
    url,
    metricsUrl: metricsServer?.url,
    services,
    db: testDb.db,
    testDb,
    quotaNamespace,
    load: (fixture) => loadFixture(testDb.db, fixture),
    setNow: (d) => (now = d),
    async request(method, path, o = {}) {
      const qs = o.query
        ? "?" +
          new URLSearchParams(
            Object.entries(o.query)
              .filter(([, v]) => v !== undefined)
              .map(([k, v]): [string, string] => [k, String(v)]),
          ).toString()
        : "";
      const headers: Record<string, string> = { ...(o.key ? { "X-API-Key": o.key } : {}), ...o.headers };
      let body: string | undefined = o.raw;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers["Content-Type"] ??= "application/json";
      }
      const res = await fetch(url + path + qs, { method, headers, body });
      const text = await res.text();
      let parsed: any;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      // Every response must conform to the OpenAPI document (test/helpers/conformance.ts).
      if (conformance) assertConforms(method, url + path, res.status, res.headers, parsed);
      return { status: res.status, headers: res.headers, body: parsed, text };
    },
    async close() {
      // The suite's requests are over; a client may still hold sockets open (fetch's pool for the
      // long keepAliveTimeout above, a browser's pre-opened connection that never sent a request),
      // and close() alone would wait for them until their timeouts: drop them all.
      services.wakeups?.close();
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await closed;
      if (metricsServer) {
        const metricsClosed = new Promise<void>((r) => metricsServer.close(() => r()));
        metricsServer.closeAllConnections();
        await metricsClosed;
      }
      redis?.disconnect();
      await routes?.close();
      if (!opts.db) await testDb.drop();
    },
  };
}

/** Asserts the exact error envelope and returns it. */
export function expectEnvelope(res: Response, status: number, error: string) {
  const b = res.body;
  const problems: string[] = [];
  if (res.status !== status) problems.push(`status ${res.status} != ${status}`);
  if (!b || typeof b !== "object") problems.push("body is not JSON");
  else {
    if (b.error !== error) problems.push(`error ${b.error} != ${error}`);
    const keys = Object.keys(b).sort().join(",");
    if (keys !== "details,error,message,request_id") problems.push(`envelope keys are ${keys}`);
    if (typeof b.message !== "string" || typeof b.request_id !== "string" || !b.request_id)
      problems.push("message/request_id not strings");
    if (!b.details || typeof b.details !== "object" || Array.isArray(b.details)) problems.push("details not an object");
    if (b.request_id !== res.headers.get("x-request-id")) problems.push("request_id != X-Request-Id");
  }
  if (!String(res.headers.get("content-type")).startsWith("application/json")) problems.push("content-type not JSON");
  if (problems.length) throw new Error(`${problems.join("; ")}\n${res.text}`);
  return b;
}

export const randomUuid = () => crypto.randomUUID();

/**
 * Holds a user's calendar lock (lockUserCalendar) in a transaction of its own, taken when this
 * resolves; the function it resolves to lets the transaction end and waits for it. Needs a second
 * transaction open at once (PostgreSQL, not PGlite).
 */
export async function holdCalendarLock(db: Database, tenantId: string, userId: string): Promise<() => Promise<void>> {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const holder = db.prisma.$transaction(
    async (tx) => {
      await lockUserCalendar(tx, tenantId, userId);
      locked();
      await held;
    },
    { timeout: 20_000 },
  );
  await isLocked;
  return async () => {
    release();
    await holder;
  };
}

/** How many pages a wait ended an instance has put in crm_changes_delivery_seconds, by `via`. */
export async function deliveries(a: TestApp, via: "long-poll" | "subscription"): Promise<number> {
  const text = await a.services.metrics.registry.getSingleMetricAsString("crm_changes_delivery_seconds");
  const line = text.split("\n").find((l) => l.startsWith(`crm_changes_delivery_seconds_count{via="${via}"}`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}
