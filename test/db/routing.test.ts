// DATABASE_ROUTING=workers (server/db/routing.ts; issue 26, "Measured cost"): a tenant's request sends
// its statements to the worker holding the tenant's shards. Everywhere: the setting's validation, and
// the routing table's own rules (a placement that cannot be read sends the tenant to the coordinator,
// told once; an expired entry is used while it is read again). On a Citus cluster: the tenant's
// requests run on its worker's pool, its reads over its shards there (server/db/local-reads.ts), and a
// route made stale by a shard move stays correct (the old node refuses the reads over its old shard
// names and sends the statements on) until it is read again.
// @topology citus
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../server/config.js";
import type { Database } from "../../server/db/client.js";
import { nodeUrl, tenantRoutes } from "../../server/db/routing.js";
import { citusCluster, onSameDatabase } from "../helpers/cluster.js";
import { directBaseUrl, freshDatabase, startApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { until } from "../helpers/processes.js";

const onCitus = Boolean(process.env.DATABASE_URL) && (await citusCluster(directBaseUrl()!)) !== null;

describe("DATABASE_ROUTING", () => {
  it("coordinator by default; workers (inert on the embedded database); anything else refused with its name", () => {
    expect(loadConfig({}).databaseRouting).toBe("coordinator");
    expect(loadConfig({ DATABASE_URL: "postgresql://u@h/d", DATABASE_ROUTING: "workers" }).databaseRouting).toBe("workers");
    expect(() => loadConfig({ DATABASE_ROUTING: "Workers" })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_URL: "postgresql://u@h/d", DATABASE_ROUTING: "worker" })).toThrow(/DATABASE_ROUTING must be "coordinator" or "workers", got "worker"/);
  });

  it("a node's URL keeps everything of the coordinator's but the host and port", () => {
    expect(nodeUrl("postgresql://app:s3cret@coord:5432/crm?sslmode=require", "10.0.0.7", 6432)).toBe("postgresql://app:s3cret@10.0.0.7:6432/crm?sslmode=require");
    expect(nodeUrl("postgresql://app@coord/crm", "fe80::1", 5433)).toBe("postgresql://app@[fe80::1]:5433/crm");
  });
});

/** A coordinator stand-in whose placement lookup answers `rows` (or throws `err`), counting the lookups. */
function fakeCoordinator(answer: () => Promise<unknown[]>) {
  let lookups = 0;
  const db = {
    kind: "postgres",
    sql: {
      query: async () => {
        lookups++;
        return answer();
      },
    },
  } as unknown as Database;
  return { db, lookups: () => lookups };
}

describe("the routing table", () => {
  it("a placement that cannot be read sends the tenant to the coordinator, told once per kind of failure", async () => {
    const c = fakeCoordinator(() => Promise.reject(Object.assign(new Error('relation "pg_dist_placement" does not exist'), { code: "42P01" })));
    const told: string[] = [];
    const opened: string[] = [];
    const routes = tenantRoutes(c.db, "postgresql://u@coord:5432/d", async (url) => (opened.push(url), c.db), { onError: (_e, t) => told.push(t) });
    expect(await routes.forTenant("t1")).toBe(c.db);
    expect(await routes.forTenant("t2")).toBe(c.db);
    expect(told).toEqual(["t1"]);
    expect(opened).toEqual([]);
  });

  it("one pool per node, opened on first use; concurrent first requests read the placement once; an expired entry is used while it is read again", async () => {
    let node = { host: "10.0.0.1", port: 5432, coordinator: false };
    const c = fakeCoordinator(async () => [node]);
    const pools = new Map<string, Database>();
    const routes = tenantRoutes(
      c.db,
      "postgresql://u@coord:5432/d",
      async (url) => {
        const db = { kind: "postgres", url, close: async () => {}, poolStats: () => ({ total: 3, idle: 1, waiting: 2 }) } as unknown as Database;
        pools.set(url, db);
        return db;
      },
      { ttlMs: 50 },
    );
    const [a, b] = await Promise.all([routes.forTenant("t1"), routes.forTenant("t1")]);
    expect(a).toBe(b);
    expect(c.lookups()).toBe(1);
    expect([...pools.keys()]).toEqual(["postgresql://u@10.0.0.1:5432/d"]);
    // The shard moved: until the entry expires the old node is used (and stays correct: it routes on).
    node = { host: "10.0.0.2", port: 5432, coordinator: false };
    expect(await routes.forTenant("t1")).toBe(a);
    await new Promise((r) => setTimeout(r, 60)); // past the 50 ms of ttlMs: at least that long, whatever the load
    expect(await routes.forTenant("t1")).toBe(a); // expired: used once more while it is read again
    // The read again happens in the background: poll for it (bounded), then the new node's pool.
    expect(await until(async () => (await routes.forTenant("t1")) !== a, 10_000, 5)).toBe(true);
    expect(await routes.forTenant("t1")).toBe(pools.get("postgresql://u@10.0.0.2:5432/d"));
    expect(routes.nodes()).toEqual(["10.0.0.1:5432", "10.0.0.2:5432"]);
    // For /metrics: the worker pools summed (server/bootstrap.ts adds the coordinator's).
    expect(routes.poolStats()).toEqual({ total: 6, idle: 2, waiting: 4 });
    // A shard on the coordinator itself (group 0): the coordinator's pool.
    node = { host: "coord", port: 5432, coordinator: true };
    expect(await routes.forTenant("t2")).toBe(c.db);
    await routes.close();
    expect(await routes.forTenant("t3")).toBe(c.db);
  });
});

describe.skipIf(!onCitus)("on a Citus cluster", () => {
  let app: Awaited<ReturnType<typeof startApp>>;
  let tenantId: string;
  let key: string;
  let admin: pg.Client;
  const seen: { sql: string; params: readonly unknown[] }[] = [];
  beforeAll(async () => {
    app = await startApp({ db: await freshDatabase({ observe: (sql, params) => void seen.push({ sql, params }) }), config: { databaseRouting: "workers" } });
    const ids = await app.load(fixture(tenant("acme")));
    tenantId = ids.tenants.acme!.id;
    key = ids.tenants.acme!.apiKeys.full!.key;
    admin = new pg.Client({ connectionString: app.testDb.directUrl });
    await admin.connect();
  }, 120_000);
  afterAll(async () => {
    await admin?.end();
    await app?.close();
  });

  const placement = async () =>
    (
      await admin.query<{ shard: string; host: string; port: number }>(
        `SELECT p.shardid::text AS shard, n.nodename AS host, n.nodeport AS port FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)
          WHERE p.shardid = get_shard_id_for_distribution_column('"Lead"', $1::uuid)`,
        [tenantId],
      )
    ).rows[0]!;
  /** Polls (bounded) until a list read goes over the tenant's shard `name`, read by the pool in the background. */
  const untilLocalRead = async (name: string) => {
    const found = await until(async () => {
      seen.length = 0;
      expect((await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } })).status).toBe(200);
      return seen.some((x) => x.sql.includes('"tenant_shard_here"') && x.sql.includes(name));
    }, 30_000, 50);
    expect(found, `no read over ${name} within 30 s`).toBe(true);
  };
  /** The node a worker pool's connection is on (what the server says of itself). */
  const serverOf = async (db: Database) => (await db.sql.query<{ port: number }>("SELECT current_setting('port')::int AS port"))[0]!.port;

  it("a list read goes to the worker with the tenant written into its text (server/db/literal.ts), and answers as through the coordinator", async () => {
    const created = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "Literal", customerPhone: "+34600111299" } });
    expect(created.status).toBe(201);
    seen.length = 0;
    const list = await app.request("GET", "/public/v1/leads", { key, query: { limit: 1 } });
    expect(list.status).toBe(200);
    expect(list.body.items).toMatchObject([{ id: created.body.id, customerName: "Literal" }]);
    const reads = seen.filter((s) => s.sql.includes('FROM "Lead"'));
    expect(reads).toHaveLength(1);
    expect(reads[0]!.sql).toContain(`'${tenantId}'::uuid`);
    expect(reads[0]!.params).not.toContain(tenantId);
    expect(reads[0]!.params).toContain(1);
  });

  it("the tenant's requests run on its worker's pool; after a shard move they keep answering, then follow the shard", async () => {
    const before = await placement();
    const routed = await app.services.routes!.forTenant(tenantId);
    expect(routed).not.toBe(app.services.db);
    expect(await serverOf(routed)).toBe(before.port);

    const created = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "Routed", customerPhone: "+34600111222" } });
    expect(created.status).toBe(201);
    expect(app.services.routes!.nodes()).toContain(`${before.host}:${before.port}`);
    // The list read's named statement (the tenant a literal of its text: planned on the local shard) is
    // kept by the worker's connection before the move, and read again after it.
    expect((await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } })).status).toBe(200);
    // Once the pool has read the tenant's shard names (in the background), its reads go over them,
    // guarded (server/db/local-reads.ts), and answer as through the coordinator.
    await untilLocalRead(`"Lead_${before.shard}"`);
    seen.length = 0;
    const overShards = await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } });
    expect(overShards.status).toBe(200);
    const localReads = seen.filter((x) => x.sql.includes('"tenant_shard_here"'));
    expect(localReads).toHaveLength(1);
    expect(localReads[0]!.sql).toContain(`"Lead_${before.shard}"`);
    expect(localReads[0]!.sql).not.toContain('"Lead" ');
    expect(seen.filter((x) => x.sql.includes('FROM "Lead"'))).toEqual([]);
    const viaCoordinator = await admin.query<{ id: string }>(`SELECT "id" FROM "Lead" WHERE "tenantId" = $1 ORDER BY "createdAt" DESC, "id" DESC LIMIT 50`, [tenantId]);
    expect(overShards.body.items.map((l: { id: string }) => l.id)).toEqual(viaCoordinator.rows.map((r) => r.id));

    // Move the tenant's shard group to another worker (block_writes: no replication set-up needed).
    const [other] = (await admin.query<{ host: string; port: number }>(`SELECT nodename AS host, nodeport AS port FROM pg_dist_node WHERE groupid <> 0 AND nodeport <> $1 AND noderole = 'primary' ORDER BY nodeid LIMIT 1`, [before.port])).rows;
    await admin.query(`SELECT citus_move_shard_placement($1::bigint, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`, [before.shard, before.host, before.port, other!.host, other!.port]);
    expect((await placement()).port).toBe(other!.port);
    // The creates' delegated statements name the tenant's shards only where they are now
    // (migration 20261129000000_tenant_exec_local): the old node runs them as written, Citus sends them on.
    const namesShards = async (node: { host: string; port: number }) => {
      const c = new pg.Client({ connectionString: onSameDatabase(app.testDb.directUrl!, node) });
      await c.connect();
      try {
        return (await c.query<{ here: boolean }>(`SELECT "tenant_exec_local"($1::uuid) IS NOT NULL AS here`, [tenantId])).rows[0]!.here;
      } finally {
        await c.end();
      }
    };
    expect(await namesShards(before)).toBe(false);
    expect(await namesShards(other!)).toBe(true);
    // A read's guard (migration 20261130100000_tenant_read) refuses the old node, in the read's snapshot.
    const guard = async (node: { host: string; port: number }) => {
      const c = new pg.Client({ connectionString: onSameDatabase(app.testDb.directUrl!, node) });
      await c.connect();
      try {
        return await c.query<{ here: boolean }>(`SELECT "tenant_shard_here"($1::bigint) AS here`, [before.shard]).then((r) => r.rows[0]!.here, (e: { code?: string }) => e.code);
      } finally {
        await c.end();
      }
    };
    expect(await guard(before)).toBe("CR001");
    expect(await guard(other!)).toBe(true);

    // The route is stale now: the old worker sends the statements on. Writes and reads still answer.
    const afterMove = await app.request("POST", "/public/v1/leads", { key, body: { customerName: "After move", customerPhone: "+34600111223" } });
    expect(afterMove.status).toBe(201);
    seen.length = 0;
    const list = await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } });
    expect(list.status).toBe(200);
    // The read went over the old node's names first (still kept), was refused by its guard or found the
    // shard gone, and was sent again as written (Citus routed it): so it sees the write made after the move.
    expect(seen.filter((x) => x.sql.includes("tenant_shard_here") || x.sql.includes('FROM "Lead"')).map((x) => (x.sql.includes("tenant_shard_here") ? "local" : "as written"))).toEqual(["local", "as written"]);
    expect(list.body.items.map((l: { customerName: string }) => l.customerName)).toEqual(expect.arrayContaining(["Routed", "After move"]));
    const stored = (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM "Lead" WHERE "tenantId" = $1 AND "customerName" IN ('Routed', 'After move')`, [tenantId])).rows[0];
    expect(stored?.n).toBe(2);

    // Once the entry has expired (5 s) and been read again in the background, the tenant's pool is
    // the new worker's: polled for, bounded well past the expiry.
    expect(await until(async () => (await serverOf(await app.services.routes!.forTenant(tenantId))) === other!.port, 60_000, 100)).toBe(true);
  }, 60_000);

  it("a first page over the local shards carries its LIMIT and OFFSET in its text, and for a tenant of many rows the worker keeps one plan of it", async () => {
    // 3,000 leads: a parameter LIMIT and OFFSET are costed at 10 % of a tenant's rows each (300 against 50).
    await admin.query(
      `INSERT INTO "Lead" ("tenantId", "customerName", "stageId")
       SELECT $1::uuid, 'Many ' || i, $2::uuid FROM generate_series(1, 3000) i`,
      [tenantId, (await admin.query<{ id: string }>(`SELECT "id" FROM "PipelineStage" WHERE "tenantId" = $1 ORDER BY "position" LIMIT 1`, [tenantId])).rows[0]!.id],
    );
    await admin.query(`ANALYZE "Lead"`);
    // Last in this block: it takes seconds, and the move test above times its names' cache.
    const p = await placement();
    expect(await serverOf(await app.services.routes!.forTenant(tenantId))).toBe(p.port);
    expect((await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } })).status).toBe(200);
    await untilLocalRead(`"Lead_${p.shard}"`); // the shard names, read in the background
    seen.length = 0;
    const first = await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } });
    const second = await app.request("GET", "/public/v1/leads", { key, query: { limit: 50, offset: 50 } });
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(first.body.items).toHaveLength(50);
    const reads = seen.filter((x) => x.sql.includes('"tenant_shard_here"') && x.sql.includes(`"Lead_${p.shard}"`));
    expect(reads).toHaveLength(2);
    expect(reads[0]!.sql).toMatch(/LIMIT 50 OFFSET 0\b/);
    expect(reads[0]!.params).not.toContain(50);
    // A later page keeps its bounds as parameters (one text for every offset).
    const offsetAt = Number(/OFFSET \$(\d+)/.exec(reads[1]!.sql)?.[1]) - 1;
    const limitAt = Number(/LIMIT \$(\d+)/.exec(reads[1]!.sql)?.[1]) - 1;
    expect([reads[1]!.params[limitAt], reads[1]!.params[offsetAt]]).toEqual([50, 50]);
    // On the tenant's worker: the first page's text is planned once (generic plans after the first
    // five), where the same statement with its bounds as parameters is planned on every execution.
    const worker = new pg.Client({ connectionString: onSameDatabase(app.testDb.directUrl!, p) });
    await worker.connect();
    try {
      const plans = async (name: string, text: string, params: readonly unknown[]) => {
        for (let i = 0; i < 8; i++) await worker.query({ name, text, values: params as unknown[] });
        return (await worker.query<{ generic: number; custom: number }>(`SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name = $1`, [name])).rows[0]!;
      };
      const inlined = await plans("t_first_page", reads[0]!.sql, reads[0]!.params);
      expect(inlined.generic).toBeGreaterThan(0);
      // The later page's text at offset 0: the first page with its bounds as parameters.
      const asParams = await plans("t_later_page_at_0", reads[1]!.sql, reads[1]!.params.map((v, i) => (i === offsetAt ? 0 : v)));
      expect(asParams).toEqual({ generic: 0, custom: 8 });
    } finally {
      await worker.end();
    }
  });
});
