// Behind a PgBouncer whose ignore_startup_parameters does not list statement_timeout
// (e.g. `extra_float_digits,options`), which refuses every connection that sends it (08P01
// "unsupported startup parameter: statement_timeout"). The pool falls back by itself to connections
// without the parameter that set the timeout with SET LOCAL (server/db/pooler-timeout.ts): requests
// succeed, a slow statement is still cut (57014 → 503) on every route — Prisma and the raw runner,
// in a transaction and outside one —, one warning names the better pooler setting, and nothing of
// the timeout stays on a server connection for the next client. On PostgreSQL the file starts its
// own PgBouncer (Debian's 1.18) in front of the test server.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startPgBouncer, type OwnPgBouncer } from "../../drills/lib/pgbouncer.js";
import { Scope } from "../../drills/lib/scope.js";
import type { TenantIds } from "../../server/admin/fixture.js";
import { closeServices, createServices, timeoutFallbackMessage } from "../../server/bootstrap.js";
import { loadConfig } from "../../server/config.js";
import { refusesStartupTimeout, SetLocalClient, TimeoutPool } from "../../server/db/pooler-timeout.js";
import { sqlStates, toAppError } from "../../server/errors.js";
import type { Logger } from "../../server/logger.js";
import type { Services } from "../../server/services.js";
import {
  directBaseUrl,
  expectEnvelope,
  freshDatabase,
  onServer,
  startApp,
  withDatabase,
  type TestApp,
} from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const onPostgres = Boolean(process.env.DATABASE_URL);
/** The service's statement_timeout in this file (ms): far above any statement of the requests here. */
const TIMEOUT_MS = 1000;
/** A statement that the timeout must cut: it would run this long (s) without one. */
const SLOW_S = 20; // far past the timeout: a statement the timeout did not cut would take this long

describe("refusesStartupTimeout", () => {
  it("recognises the pooler's refusal of statement_timeout, and only that", () => {
    const err = (code: string, message: string) => Object.assign(new Error(message), { code, severity: "FATAL" });
    // PgBouncer 1.18
    expect(refusesStartupTimeout(err("08P01", "unsupported startup parameter: statement_timeout"))).toBe(true);
    // Older PgBouncer
    expect(refusesStartupTimeout(err("08P01", "Unsupported startup parameter: statement_timeout"))).toBe(true);
    expect(refusesStartupTimeout(err("08P01", "unsupported startup parameter: search_path"))).toBe(false);
    expect(refusesStartupTimeout(err("08P01", "query_wait_timeout"))).toBe(false);
    expect(refusesStartupTimeout(err("57014", "canceling statement due to statement timeout"))).toBe(false);
    expect(refusesStartupTimeout(null)).toBe(false);
    expect(refusesStartupTimeout(new Error("unsupported startup parameter: statement_timeout"))).toBe(false);
  });

  it("the warning names the pooler's better setting", () => {
    const msg = timeoutFallbackMessage(5000);
    expect(msg).toContain("ignore_startup_parameters = extra_float_digits,statement_timeout");
    expect(msg).toContain("connect_query = 'SET statement_timeout = 5000'");
    expect(msg).not.toContain("\n");
  });
});

describe.runIf(!onPostgres)("the embedded database", () => {
  it("has no statement timeout to set (PGlite is unaffected)", async () => {
    const t = await freshDatabase();
    try {
      expect(t.db.kind).toBe("pglite");
      expect(t.db.statementTimeout).toBeUndefined();
      expect(await t.db.sql.query<{ n: number }>("SELECT 1 AS n")).toEqual([{ n: 1 }]);
    } finally {
      await t.drop();
    }
  });
});

describe.runIf(onPostgres)("through a PgBouncer that refuses the statement_timeout startup parameter", () => {
  const scope = new Scope("pooler-timeout");
  let bouncer: OwnPgBouncer;
  let url: string;
  let directUrl: string;
  const lines: { level: number; msg: string; [k: string]: unknown }[] = [];
  let services: Services;
  let app: TestApp;
  let acme: TenantIds;
  let KEY: string;

  beforeAll(async () => {
    const server = new URL(directBaseUrl()!);
    // Two server connections: the leak check below holds both at once.
    bouncer = await startPgBouncer(scope, {
      serverHost: server.hostname,
      serverPort: Number(server.port || 5432),
      poolSize: 2,
      ignoreStartupParameters: "extra_float_digits,options",
    });
    const name = `test_${randomBytes(6).toString("hex")}`;
    await onServer(`CREATE DATABASE ${name}`);
    scope.defer(`drop ${name}`, () => onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    url = bouncer.url(name);
    directUrl = withDatabase(directBaseUrl()!, name);
    // The service's own start (server/bootstrap.ts): migrations through DIRECT_DATABASE_URL, then the
    // pooled statement that reports the timeout — the first connection through PgBouncer.
    const logger = pino({ level: "info" }, { write: (s: string) => lines.push(JSON.parse(s)) }) as unknown as Logger;
    const config = {
      ...loadConfig(),
      databaseUrl: url,
      directDatabaseUrl: directUrl,
      databaseStatementTimeoutMs: TIMEOUT_MS,
      logLevel: "info",
      databaseRouting: "coordinator" as const,
    };
    services = await createServices(config, { logger });
    scope.defer("close services", () => closeServices(services));
    app = await startApp({ db: { db: services.db, url, directUrl, drop: async () => {} } });
    scope.defer("close app", () => app.close());
    const ids = await app.load(
      fixture(tenant("acme", { leads: [{ ref: "l1", customerName: "Bea Soto", createdAt: "2026-01-01T08:00:00Z" }] })),
    );
    acme = ids.tenants.acme!;
    KEY = acme.apiKeys.full!.key;
    await services.db.sql.exec(`CREATE TABLE "pt_probe" ("n" int NOT NULL)`);
  });
  afterAll(async () => {
    const problems = await scope.close();
    expect(problems).toEqual([]);
  });

  const timeoutWarnings = () => lines.filter((l) => l.level === 40 && /statement_timeout/.test(l.msg));
  const probeCount = async () =>
    Number((await services.db.sql.query<{ n: string }>(`SELECT count(*) AS n FROM "pt_probe"`))[0]!.n);
  const setting = (rows: { st: string }[]) => rows[0]!.st;
  const CURRENT = `current_setting('statement_timeout') AS st, pg_backend_pid() AS pid`;

  it("falls back at the first refused connection: one warning naming the setting, and the start reports SET LOCAL", async () => {
    expect(services.db.statementTimeout?.()).toEqual({ ms: TIMEOUT_MS, route: "SET LOCAL" });
    const warnings = timeoutWarnings();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toBe(timeoutFallbackMessage(TIMEOUT_MS));
    expect(warnings[0]!.msg).toContain("ignore_startup_parameters = extra_float_digits,statement_timeout");
    expect(String(warnings[0]!.reason)).toBe("08P01: unsupported startup parameter: statement_timeout");
    const report = lines.filter((l) => /statement_timeout of the pooled statements/.test(l.msg));
    expect(report).toEqual([expect.objectContaining({ level: 30, statementTimeout: "1s", route: "SET LOCAL" })]);
    expect(lines.filter((l) => /could not read statement_timeout/.test(l.msg))).toEqual([]);
    // PgBouncer did refuse it (the refusal was met, not avoided).
    expect(await bouncer.log()).toContain("unsupported startup parameter: statement_timeout");
  });

  it("answers requests: reads, a one-statement create, a transactional update, the readiness ping", async () => {
    expect((await app.request("GET", "/readyz")).status).toBe(200);
    const list = await app.request("GET", "/public/v1/leads", { key: KEY });
    expect(list.status).toBe(200);
    expect(list.body.items.map((l: any) => l.customerName)).toEqual(["Bea Soto"]);
    const created = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body: { customerName: "Carl Ortiz" },
      headers: { "Idempotency-Key": "pt-1" },
    });
    expect(created.status).toBe(201);
    const replay = await app.request("POST", "/public/v1/leads", {
      key: KEY,
      body: { customerName: "Carl Ortiz" },
      headers: { "Idempotency-Key": "pt-1" },
    });
    expect(replay.status).toBe(201);
    expect(replay.body.id).toBe(created.body.id);
    const patched = await app.request("PATCH", `/public/v1/leads/${created.body.id}`, {
      key: KEY,
      body: { notes: "called" },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.notes).toBe("called");
    expect(await services.db.prisma.lead.count({ where: { tenantId: acme.id } })).toBe(2);
  });

  it("every route runs with the timeout: raw and Prisma, in a transaction and outside one", async () => {
    const { sql, prisma } = services.db;
    const want = "1s";
    expect(setting(await sql.query(`SELECT ${CURRENT}, $1::int AS x`, [1])), "raw, parameters").toBe(want);
    expect(setting(await sql.query(`SELECT ${CURRENT}`)), "raw, no parameters").toBe(want);
    expect(setting(await sql.query(`SELECT ${CURRENT}, $1::int AS x`, [2], { prepare: true })), "raw, prepare").toBe(
      want,
    );
    expect(
      setting(
        await sql.session(async (s) => {
          await s.exec("BEGIN");
          try {
            return await s.query(`SELECT ${CURRENT}, $1::int AS x`, [3]);
          } finally {
            await s.exec("COMMIT");
          }
        }),
      ),
      "raw session transaction",
    ).toBe(want);
    expect(setting(await prisma.$queryRawUnsafe(`SELECT ${CURRENT}, $1::int AS x`, 4)), "Prisma, one statement").toBe(
      want,
    );
    expect(
      setting(await prisma.$transaction((tx) => tx.$queryRawUnsafe(`SELECT ${CURRENT}, $1::int AS x`, 5))),
      "Prisma interactive transaction",
    ).toBe(want);
    const [batch] = await prisma.$transaction([
      prisma.$queryRawUnsafe<{ st: string; pid: number }[]>(`SELECT ${CURRENT}, $1::int AS x`, 6),
    ]);
    expect(setting(batch), "Prisma batch transaction").toBe(want);
    const iso = await prisma.$transaction(
      (tx) =>
        tx.$queryRawUnsafe<{ st: string; iso: string }[]>(
          `SELECT current_setting('statement_timeout') AS st, current_setting('transaction_isolation') AS iso`,
        ),
      { isolationLevel: "Serializable" },
    );
    expect(iso, "Prisma transaction with an isolation level").toEqual([{ st: want, iso: "serializable" }]);
  });

  it("a slow statement is cut with 57014 → 503 SERVICE_UNAVAILABLE on every route, and its write undone", async () => {
    const { sql, prisma } = services.db;
    const write = `WITH w AS (INSERT INTO "pt_probe" ("n") VALUES (1) RETURNING "n") SELECT pg_sleep(${SLOW_S}) FROM w`;
    const routes: [string, () => Promise<unknown>][] = [
      [
        "raw, parameters",
        () =>
          sql.query(`WITH w AS (INSERT INTO "pt_probe" ("n") VALUES ($1) RETURNING "n") SELECT pg_sleep($2) FROM w`, [
            1,
            SLOW_S,
          ]),
      ],
      ["raw, no parameters", () => sql.query(write)],
      [
        "raw session transaction",
        () =>
          sql.session(async (s) => {
            await s.exec("BEGIN");
            try {
              await s.query(`INSERT INTO "pt_probe" ("n") VALUES ($1)`, [1]);
              await s.query("SELECT pg_sleep($1)", [SLOW_S]);
              await s.exec("COMMIT");
            } catch (err) {
              await s.exec("ROLLBACK");
              throw err;
            }
          }),
      ],
      [
        "Prisma, one statement",
        () =>
          prisma.$executeRawUnsafe(
            `WITH w AS (INSERT INTO "pt_probe" ("n") VALUES ($1) RETURNING "n") SELECT pg_sleep($2) FROM w`,
            1,
            SLOW_S,
          ),
      ],
      [
        "Prisma interactive transaction",
        () =>
          prisma.$transaction(async (tx) => {
            await tx.$executeRawUnsafe(`INSERT INTO "pt_probe" ("n") VALUES ($1)`, 1);
            await tx.$queryRawUnsafe("SELECT pg_sleep($1)", SLOW_S);
          }),
      ],
    ];
    for (const [route, run] of routes) {
      const started = Date.now();
      const err = await run().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, route).toBeDefined();
      expect(sqlStates(err), route).toContain("57014");
      const mapped = toAppError(err);
      expect([mapped.status, mapped.code], route).toEqual([503, "SERVICE_UNAVAILABLE"]);
      // Cut by the timeout (57014 above), not run to its end: bounds for a loaded machine
      expect(Date.now() - started, route).toBeLessThan((SLOW_S * 1000) / 2);
      expect(await probeCount(), route).toBe(0);
    }
  });

  it("over HTTP: statements waiting on a lock past the timeout answer 503 and write nothing", async () => {
    const locker = new pg.Client({ connectionString: directUrl });
    await locker.connect();
    try {
      const before = await services.db.prisma.lead.count({ where: { tenantId: acme.id } });
      const lead = (await app.request("GET", "/public/v1/leads", { key: KEY })).body.items[0];
      await locker.query("BEGIN");
      await locker.query(`LOCK TABLE "Lead" IN ACCESS EXCLUSIVE MODE`);
      // Without a statement timeout the requests would wait for the lock: released after 30 s anyway.
      const release = setTimeout(() => void locker.query("ROLLBACK").catch(() => {}), 30_000);
      const started = Date.now();
      const [list, create, patch] = await Promise.all([
        app.request("GET", "/public/v1/leads", { key: KEY }), // a read outside a transaction
        // The one-statement create
        app.request("POST", "/public/v1/leads", { key: KEY, body: { customerName: "Dee" } }),
        app.request("PATCH", `/public/v1/leads/${lead.id}`, { key: KEY, body: { notes: "never" } }), // a transaction
      ]);
      clearTimeout(release);
      expect(Date.now() - started).toBeLessThan(15_000); // cut by the timeout, well before the lock is released
      await locker.query("ROLLBACK");
      expectEnvelope(list, 503, "SERVICE_UNAVAILABLE");
      expectEnvelope(create, 503, "SERVICE_UNAVAILABLE");
      expectEnvelope(patch, 503, "SERVICE_UNAVAILABLE");
      expect(await services.db.prisma.lead.count({ where: { tenantId: acme.id } })).toBe(before);
      expect((await services.db.prisma.lead.findFirstOrThrow({ where: { id: lead.id } })).notes).toBe(lead.notes);
      expect((await app.request("GET", "/public/v1/leads", { key: KEY })).status).toBe(200);
    } finally {
      await locker.end();
    }
  });

  it("leaves no statement_timeout on the server connections: another client sees the server's default", async () => {
    const { sql, prisma } = services.db;
    // Two at a time, so that both of PgBouncer's server connections run our SET LOCAL: transactions,
    // then statements outside one.
    const pair = <T>(f: () => Promise<T>) => Promise.all([f(), f()]);
    const ours = [
      ...(await pair(() =>
        prisma.$transaction(
          async (tx) =>
            (
              await tx.$queryRawUnsafe<{ st: string; pid: number }[]>(`SELECT ${CURRENT} FROM pg_sleep(0.3)`)
            )[0]!,
        ),
      )),
      ...(await pair(
        async () => (await sql.query<{ st: string; pid: number }>(`SELECT ${CURRENT} FROM pg_sleep($1)`, [0.3]))[0]!,
      )),
    ];
    expect(ours.map((r) => r.st)).toEqual(["1s", "1s", "1s", "1s"]);
    const used = new Set(ours.map((r) => Number(r.pid)));
    expect(used.size).toBe(2);
    // Both server connections held at once by two plain clients (no startup parameter), each in a
    // transaction: the connections our statements ran on.
    const plain = [new pg.Client({ connectionString: url }), new pg.Client({ connectionString: url })];
    await Promise.all(plain.map((c) => c.connect()));
    try {
      const seen = await Promise.all(
        plain.map(async (c) => {
          await c.query("BEGIN");
          return (await c.query<{ st: string; pid: number }>(`SELECT ${CURRENT}`)).rows[0]!;
        }),
      );
      expect(seen.map((r) => r.st)).toEqual(["0", "0"]);
      expect(new Set(seen.map((r) => r.pid)).size).toBe(2);
      for (const r of seen) expect(used, "a server connection our statements used").toContain(Number(r.pid));
      await Promise.all(plain.map((c) => c.query("COMMIT")));
    } finally {
      await Promise.all(plain.map((c) => c.end()));
    }
  });

  it("still exactly one warning after every connection of the file", () => {
    expect(timeoutWarnings()).toHaveLength(1);
  });

  describe("round trips (TimeoutPool)", () => {
    /** A pool whose clients count their ReadyForQuery messages: one per round trip. */
    const counted = (connectionString: string, onFallback?: (r: string) => void) => {
      const pool = new TimeoutPool({ connectionString, max: 1, statement_timeout: TIMEOUT_MS }, onFallback);
      const trips = { n: 0 };
      const clients: pg.Client[] = [];
      pool.on("connect", (c: any) => {
        clients.push(c);
        c.connection.on("readyForQuery", () => trips.n++);
      });
      const measure = async (f: () => Promise<unknown>) => {
        const before = trips.n;
        await f();
        return trips.n - before;
      };
      return { pool, clients, measure };
    };

    it("straight to PostgreSQL: node-postgres's own clients, the timeout a startup parameter, no added round trip", async () => {
      const { pool, clients, measure } = counted(directUrl, () => expect.unreachable("no fallback"));
      try {
        expect(await measure(() => pool.query("SELECT $1::int", [1]))).toBe(1);
        expect(await measure(() => pool.query("SELECT 1"))).toBe(1);
        const c = await pool.connect();
        try {
          expect(await measure(() => c.query("BEGIN"))).toBe(1);
          expect((await c.query("SHOW statement_timeout")).rows[0].statement_timeout).toBe("1s");
          expect(await measure(() => c.query("COMMIT"))).toBe(1);
        } finally {
          c.release();
        }
        expect(pool.statementTimeout()).toEqual({ ms: TIMEOUT_MS, route: "startup parameter" });
        expect(clients.length).toBeGreaterThan(0);
        for (const c of clients) expect(Object.getPrototypeOf(c)).toBe(pg.Client.prototype);
      } finally {
        await pool.end();
      }
    });

    it("after the refusal: BEGIN and a statement without parameters in one round trip, one with parameters in three", async () => {
      const reasons: string[] = [];
      const { pool, clients, measure } = counted(url, (r) => reasons.push(r));
      try {
        // BEGIN; SET LOCAL → the statement → COMMIT
        expect(await measure(() => pool.query("SELECT $1::int", [1]))).toBe(3);
        expect(reasons).toHaveLength(1);
        expect(await measure(() => pool.query("SELECT 1"))).toBe(1); // SET LOCAL …; SELECT 1
        const c = await pool.connect();
        try {
          expect(await measure(() => c.query("BEGIN"))).toBe(1); // BEGIN; SET LOCAL …
          expect(await measure(() => c.query("SELECT $1::int", [1]))).toBe(1);
          expect(await measure(() => c.query("COMMIT"))).toBe(1);
          // Queries issued without waiting still run in order, each deciding on a current transaction state.
          const [begun, inside, , after] = await Promise.all([
            c.query("BEGIN"),
            c.query<{ st: string }>("SELECT current_setting('statement_timeout') AS st, $1::int AS x", [1]),
            c.query("COMMIT"),
            c.query<{ st: string }>("SELECT current_setting('statement_timeout') AS st"),
          ]);
          expect(begun.command).toBe("BEGIN");
          expect([inside.rows[0]!.st, after.rows[0]!.st]).toEqual(["1s", "1s"]);
          expect(c.getTransactionStatus()).toBe("I");
        } finally {
          c.release();
        }
        expect(reasons).toHaveLength(1);
        expect(pool.statementTimeout()).toEqual({ ms: TIMEOUT_MS, route: "SET LOCAL" });
        for (const c of clients) expect(c).toBeInstanceOf(SetLocalClient);
      } finally {
        await pool.end();
      }
    });

    it("many first connections refused at once: every checkout made again, one fallback", async () => {
      const reasons: string[] = [];
      const pool = new TimeoutPool({ connectionString: url, max: 4, statement_timeout: TIMEOUT_MS }, (r) =>
        reasons.push(r),
      );
      try {
        const rows = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            i % 2
              ? pool.query<{ st: string }>("SELECT current_setting('statement_timeout') AS st, $1::int AS i", [i])
              : pool.connect().then(async (c) => {
                  try {
                    return await c.query<{ st: string }>("SELECT current_setting('statement_timeout') AS st");
                  } finally {
                    c.release();
                  }
                }),
          ),
        );
        expect(rows.map((r) => r.rows[0]!.st)).toEqual(Array(8).fill("1s"));
        expect(reasons).toEqual(["08P01: unsupported startup parameter: statement_timeout"]);
      } finally {
        await pool.end();
      }
    });

    it("passes as they are: transaction control outside a transaction, statements refused in a transaction block", async () => {
      const { pool } = counted(url);
      try {
        const c = await pool.connect();
        try {
          // COMMIT outside a transaction: PostgreSQL's warning, no error, nothing of ours around it.
          expect((await c.query("COMMIT")).command).toBe("COMMIT");
          // VACUUM fails inside a transaction block; sent as is, it runs.
          await c.query(`VACUUM "pt_probe"`);
          expect(c.getTransactionStatus()).toBe("I");
        } finally {
          c.release();
        }
      } finally {
        await pool.end();
      }
    });
  });
});
