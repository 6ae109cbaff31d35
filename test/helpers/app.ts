// One app per test file: a fresh database (in-memory PGlite by default; with DATABASE_URL a new
// PostgreSQL database created for the file and dropped afterwards), Redis when REDIS_URL is set
// (with a namespace of the file's own), the real Express app on an ephemeral port, and a small
// HTTP client.
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { createApp } from "../../server/app.js";
import { loadConfig, type Config } from "../../server/config.js";
import { openPglite, openPostgres, type Database } from "../../server/db/client.js";
import { migrate } from "../../server/db/migrate.js";
import { loadFixture, type FixtureInput, type LoadResult } from "../../server/admin/fixture.js";
import { Quotas } from "../../server/limits/quotas.js";
import { createLogger } from "../../server/logger.js";
import { connectRedis } from "../../server/redis.js";
import { createProviders } from "../../server/channels/providers.js";
import type { Services } from "../../server/services.js";
import { assertConforms } from "./conformance.js";

export interface TestDb {
  db: Database;
  url?: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one test file. */
export async function freshDatabase(): Promise<TestDb> {
  const base = process.env.DATABASE_URL;
  if (!base) {
    const db = await openPglite("memory://");
    await migrate(db.sql);
    return { db, drop: () => db.close() };
  }
  const name = `test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  const db = await openPostgres(url.toString(), { max: 20 });
  await migrate(db.sql);
  return {
    db,
    url: url.toString(),
    async drop() {
      await db.close();
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
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
}

export async function startApp(opts: StartOptions = {}): Promise<TestApp & { quotaNamespace: string; testDb: TestDb }> {
  const testDb = opts.db ?? (await freshDatabase());
  const config: Config = { ...loadConfig(), logLevel: process.env.LOG_LEVEL ?? "silent", providerTimeoutMs: 1500, ...opts.config };
  const logger = createLogger(config.logLevel);
  const redis = config.redisUrl ? connectRedis(config.redisUrl, logger) : undefined;
  const quotaNamespace = opts.quotaNamespace ?? `rl-test-${randomBytes(6).toString("hex")}`;
  let now: Date | undefined;
  const conformance = opts.conformance ?? true;
  const services: Services = {
    config,
    db: testDb.db,
    redis,
    quotas: new Quotas(redis, quotaNamespace),
    logger,
    providers: createProviders({ timeoutMs: config.providerTimeoutMs, logger }),
    now: () => now ?? new Date(),
  };
  const server: Server = createServer(createApp(services));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    services,
    db: testDb.db,
    testDb,
    quotaNamespace,
    load: (fixture) => loadFixture(testDb.db, fixture),
    setNow: (d) => (now = d),
    async request(method, path, o = {}) {
      const qs = o.query
        ? "?" + new URLSearchParams(Object.entries(o.query).filter(([, v]) => v !== undefined).map(([k, v]): [string, string] => [k, String(v)])).toString()
        : "";
      const headers: Record<string, string> = { ...(o.key ? { "X-API-Key": o.key } : {}), ...o.headers };
      let body: string | undefined = o.raw;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers["Content-Type"] ??= "application/json";
      }
      const res = await fetch(url + path + qs, { method, headers, body });
      const text = await res.text();
      let parsed: any = undefined;
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
      await new Promise<void>((r) => server.close(() => r()));
      redis?.disconnect();
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
    if (typeof b.message !== "string" || typeof b.request_id !== "string" || !b.request_id) problems.push("message/request_id not strings");
    if (!b.details || typeof b.details !== "object" || Array.isArray(b.details)) problems.push("details not an object");
    if (b.request_id !== res.headers.get("x-request-id")) problems.push("request_id != X-Request-Id");
  }
  if (!String(res.headers.get("content-type")).startsWith("application/json")) problems.push("content-type not JSON");
  if (problems.length) throw new Error(`${problems.join("; ")}\n${res.text}`);
  return b;
}

export const randomUuid = () => crypto.randomUUID();
