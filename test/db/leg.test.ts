// @topology pooler redis citus
// Each CI leg runs on the backend it claims (.ci/run sets CI_LEG; test/legs.mjs): a leg whose set-up
// broke — a Citus cluster without its workers, a PgBouncer leg connected straight to PostgreSQL or
// pooling by session, a statement timeout missing or taking another route, a Redis Cluster leg
// answering from in-process windows, worker routing that routes nowhere — fails here instead of
// running its tests on a plain backend and staying green. Without CI_LEG (a developer's `npm test`),
// nothing to assert.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../server/config.js";
import { startApp, untimed, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

type Database = "pglite" | "postgres" | "pgbouncer" | "pgbouncer-refusing" | "citus";
type Redis = "in-process" | "single" | "cluster";
interface Claim {
  database: Database;
  redis: Redis;
  routing?: "coordinator" | "workers";
}
/** What each leg of test/legs.mjs runs on. */
const CLAIMS: Record<string, Claim> = {
  pglite: { database: "pglite", redis: "in-process" },
  postgres: { database: "postgres", redis: "single" },
  pgbouncer: { database: "pgbouncer", redis: "single" },
  "pgbouncer-refusing+redis-cluster": { database: "pgbouncer-refusing", redis: "cluster" },
  citus: { database: "citus", redis: "single", routing: "workers" },
  "citus-coordinator": { database: "citus", redis: "single", routing: "coordinator" },
};

const legName = process.env.CI_LEG;
const claim = legName ? CLAIMS[legName] : undefined;

describe.runIf(legName)(`CI leg ${legName}`, () => {
  let app: TestApp & { testDb: { directUrl?: string; url?: string } };
  let key: string;
  let tenantId: string;
  beforeAll(async () => {
    app = await startApp();
    const ids = await app.load(fixture(tenant("acme")));
    key = ids.tenants.acme!.apiKeys.full!.key;
    tenantId = ids.tenants.acme!.id;
  });
  afterAll(async () => {
    await app?.close();
  });
  const direct = async <T extends pg.QueryResultRow>(sql: string, params: unknown[] = []) => {
    const c = new pg.Client({ connectionString: app.testDb.directUrl });
    await c.connect();
    try {
      return (await c.query<T>(sql, params)).rows;
    } finally {
      await c.end();
    }
  };

  /** A client of DATABASE_URL of its own (no statement_timeout startup parameter unless given). */
  const pooled = async <T>(fn: (c: pg.Client) => Promise<T>, config: pg.ClientConfig = {}) => {
    const c = new pg.Client({ connectionString: app.testDb.url, ...config });
    c.on("error", () => {});
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => {});
    }
  };
  /** Rows of PgBouncer's admin console at DATABASE_URL's address (simple query protocol only). */
  const adminConsole = async (command: string) => {
    const url = new URL(app.testDb.url!);
    url.pathname = "/pgbouncer";
    url.search = "";
    const c = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 3000 });
    await c.connect();
    try {
      return (await c.query(command)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  };

  /** DATABASE_URL is a PgBouncer that pools by transaction (its admin console at the same address). */
  const poolsByTransaction = async () => {
    const database = new URL(app.testDb.url!).pathname.slice(1);
    expect(String((await adminConsole("SHOW VERSION"))[0]?.version)).toMatch(/^PgBouncer /);
    const pool = (await adminConsole("SHOW POOLS")).find((p) => p.database === database);
    expect(pool?.pool_mode, `SHOW POOLS for ${database}`).toBe("transaction");
    // What transaction pooling is: a connected client holds a server connection only inside a
    // transaction (SHOW CLIENTS' link). In session mode it keeps the one it got until it disconnects.
    const link = async (c: pg.Client) => {
      const port = (c as unknown as { connection: { stream: { localPort: number } } }).connection.stream.localPort;
      const clients = await adminConsole("SHOW CLIENTS");
      const row = clients.find((r) => r.database === database && Number(r.port) === port);
      expect(row, `client :${port} in SHOW CLIENTS`).toBeDefined();
      return row!.link || null;
    };
    await pooled(async (c) => {
      await c.query("SELECT pg_backend_pid()");
      expect(await link(c), "between transactions").toBeNull();
      await c.query("BEGIN");
      await c.query("SELECT pg_backend_pid()");
      expect(await link(c), "inside a transaction").not.toBeNull();
      await c.query("COMMIT");
      expect(await link(c), "after COMMIT").toBeNull();
    });
  };

  it("is a leg of test/legs.mjs with a stated backend", () => {
    expect(claim, `CI_LEG=${legName} has no claim here`).toBeDefined();
  });

  it("the database is the leg's", async () => {
    const c = claim!;
    expect(app.db.kind).toBe(c.database === "pglite" ? "pglite" : "postgres");
    if (c.database === "pglite") {
      expect(process.env.DATABASE_URL).toBeUndefined();
      return;
    }
    // The port the server itself listens on, as seen through the service's own pool: behind a pooler
    // it is not the port of DATABASE_URL.
    const [{ port }] = (await app.db.sql.query<{ port: number }>("SELECT inet_server_port() AS port")) as [
      { port: number },
    ];
    const urlPort = Number(new URL(app.testDb.url!).port || 5432);
    if (c.database.startsWith("pgbouncer")) {
      expect(port, "DATABASE_URL must reach PostgreSQL through PgBouncer").not.toBe(urlPort);
      expect(process.env.DIRECT_DATABASE_URL).toBeTruthy();
      await poolsByTransaction();
    } else expect(port).toBe(urlPort);
    const [{ citus }] = (await direct<{ citus: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus`,
    )) as [{ citus: boolean }];
    expect(citus).toBe(c.database === "citus");
  });

  it.runIf(claim?.database === "citus")(
    "Citus: two workers registered, every table of the schema distributed or reference (the migrations' ledger local)",
    async () => {
      const workers = await direct<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive`,
      );
      expect(workers[0]!.n).toBe(2);
      const tables = await direct<{ name: string; method: string | null }>(
        `SELECT t.tablename AS name, p.partmethod::text AS method FROM pg_tables t
         LEFT JOIN pg_dist_partition p ON p.logicalrelid = format('%I.%I', t.schemaname, t.tablename)::regclass
        WHERE t.schemaname = 'public' ORDER BY 1`,
      );
      const by = Object.fromEntries(tables.map((t) => [t.name, t.method]));
      expect(by._app_migrations ?? null).toBeNull();
      for (const t of ["Lead", "Contact", "Conversation", "Message", "Appointment", "Ticket", "ChangeLog"])
        expect(by[t], t).toBe("h");
      expect(by.Tenant).toBe("n");
      expect(tables.filter((t) => t.name !== "_app_migrations" && t.method === null).map((t) => t.name)).toEqual([]);
    },
  );

  it("the statement timeout takes the leg's route, never none (the production default on every backend)", async () => {
    expect((await app.request("GET", "/public/v1/leads", { key })).status).toBe(200);
    const c = claim!;
    if (c.database === "pglite") {
      expect(app.db.statementTimeout).toBeUndefined();
      return;
    }
    const expected = loadConfig().databaseStatementTimeoutMs;
    expect(expected, "DATABASE_STATEMENT_TIMEOUT_MS").toBeGreaterThan(0);
    const route = c.database === "pgbouncer-refusing" ? "SET LOCAL" : "startup parameter";
    expect(app.db.statementTimeout?.()).toEqual({ ms: expected, route });
    // What the service's statements run with: alone, and in a transaction.
    const SETTING = `SELECT setting::int AS ms FROM pg_settings WHERE name = 'statement_timeout'`;
    const seen = async (db: typeof app.db) => [
      (await db.sql.query<{ ms: number }>(SETTING))[0]!.ms,
      (await db.prisma.$transaction((tx) => tx.$queryRawUnsafe<{ ms: number }[]>(SETTING)))[0]!.ms,
    ];
    expect(await seen(app.db)).toEqual([expected, expected]);
    // Test set-up keeps none (test/helpers/app.ts untimed).
    expect((await untimed(app.db)<{ ms: number }>(SETTING))[0]!.ms).toBe(0);
    if (c.routing === "workers") {
      const worker = await app.services.routes!.forTenant(tenantId);
      expect(await seen(worker)).toEqual([expected, expected]);
    }
    if (!c.database.startsWith("pgbouncer")) return;
    // Where it comes from behind PgBouncer. The accepting one drops the startup parameter
    // (ignore_startup_parameters) and sets the timeout on its server connections (connect_query):
    // a client that sends none has it too. The refusing one refuses the parameter, sets nothing:
    // the service's statements have it from their SET LOCAL alone.
    const config = await adminConsole("SHOW CONFIG");
    const ignored = String(config.find((r) => r.key === "ignore_startup_parameters")?.value).split(",");
    expect(ignored.includes("statement_timeout")).toBe(c.database === "pgbouncer");
    const setting = (b: pg.Client) => b.query<{ ms: number }>(SETTING).then((r) => r.rows[0]!.ms);
    expect(await pooled(setting)).toBe(c.database === "pgbouncer" ? expected : 0);
    const withParameter = await pooled(setting, { statement_timeout: expected + 1 }).catch(
      (e: { code?: string }) => e.code,
    );
    expect(withParameter).toBe(c.database === "pgbouncer" ? expected : "08P01");
  });

  it("quotas are answered by the leg's Redis, not by in-process windows", async () => {
    const first = await app.request("GET", "/public/v1/me", { key });
    const second = await app.request("GET", "/public/v1/me", { key });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(Number(second.headers.get("x-ratelimit-remaining"))).toBe(
      Number(first.headers.get("x-ratelimit-remaining")) - 1,
    );
    const redis = app.services.redis;
    const quotas = app.services.quotas;
    if (claim!.redis === "in-process") {
      expect(redis).toBeUndefined();
      return;
    }
    expect(redis, "a Redis is configured").toBeDefined();
    expect(quotas.fallback).toBe(false);
    expect(quotas.fallbackCount).toBe(0);
    const isCluster = "nodes" in redis! && typeof (redis as { nodes?: unknown }).nodes === "function";
    expect(isCluster).toBe(claim!.redis === "cluster");
    if (claim!.redis === "cluster") {
      const info = String(await (redis as unknown as { cluster(s: "INFO"): Promise<string> }).cluster("INFO"));
      expect(info).toMatch(/cluster_state:ok/);
      expect(Number(/cluster_size:(\d+)/.exec(info)?.[1])).toBeGreaterThanOrEqual(3);
    } else {
      expect(String(await (redis as unknown as { info(s: string): Promise<string> }).info("cluster"))).toMatch(
        /cluster_enabled:0/,
      );
    }
  });

  it.runIf(claim?.routing !== undefined)("Citus: the tenant's requests take the leg's routing", async () => {
    const routes = app.services.routes;
    if (claim!.routing === "coordinator") {
      expect(routes).toBeUndefined();
      return;
    }
    expect(routes, "DATABASE_ROUTING=workers builds the routes").toBeDefined();
    expect((await app.request("POST", "/public/v1/leads", { key, body: { customerName: "Routed" } })).status).toBe(201);
    const routed = await routes!.forTenant(tenantId);
    expect(routed).not.toBe(app.db);
    const [{ port }] = (await routed.sql.query<{ port: number }>("SELECT inet_server_port() AS port")) as [
      { port: number },
    ];
    const [placement] = await direct<{ port: number }>(
      `SELECT n.nodeport AS port FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
        WHERE p.shardid = get_shard_id_for_distribution_column('"Lead"', $1::uuid)`,
      [tenantId],
    );
    expect(port).toBe(placement!.port);
    expect(routes!.nodes().some((n) => n.endsWith(`:${port}`))).toBe(true);
  });
});
