// DATABASE_ROUTING=workers (server/db/routing.ts): a tenant's request sends
// its statements to the worker holding the tenant's shards. Everywhere: the setting's validation, and
// the routing table's own rules (a placement that cannot be read sends the tenant to the coordinator,
// told once; an expired entry is used while it is read again). On a Citus cluster: the tenant's
// requests run on its worker's pool, with the tenant a constant of each statement's text, and a route
// made stale by a shard move stays correct (the old worker's Citus sends the statements on) until it
// is read again.
// @topology citus
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../server/config.js";
import type { Database } from "../../server/db/client.js";
import { nodeUrl, tenantRoutes } from "../../server/db/routing.js";
import { citusCluster } from "../helpers/cluster.js";
import { directBaseUrl, freshDatabase, startApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { until } from "../helpers/processes.js";

const onCitus = Boolean(process.env.DATABASE_URL) && (await citusCluster(directBaseUrl()!)) !== null;

describe("DATABASE_ROUTING", () => {
  it("coordinator by default; workers (inert on the embedded database); anything else refused with its name", () => {
    expect(loadConfig({}).databaseRouting).toBe("coordinator");
    expect(loadConfig({ DATABASE_URL: "postgresql://u@h/d", DATABASE_ROUTING: "workers" }).databaseRouting).toBe(
      "workers",
    );
    expect(() => loadConfig({ DATABASE_ROUTING: "Workers" })).toThrow(ConfigError);
    expect(() => loadConfig({ DATABASE_URL: "postgresql://u@h/d", DATABASE_ROUTING: "worker" })).toThrow(
      /DATABASE_ROUTING must be "coordinator" or "workers", got "worker"/,
    );
  });

  it("a node's URL keeps everything of the coordinator's but the host and port", () => {
    expect(nodeUrl("postgresql://app:s3cret@coord:5432/crm?sslmode=require", "10.0.0.7", 6432)).toBe(
      "postgresql://app:s3cret@10.0.0.7:6432/crm?sslmode=require",
    );
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
    const c = fakeCoordinator(() =>
      Promise.reject(Object.assign(new Error('relation "pg_dist_placement" does not exist'), { code: "42P01" })),
    );
    const told: string[] = [];
    const opened: string[] = [];
    const routes = tenantRoutes(
      c.db,
      "postgresql://u@coord:5432/d",
      async (url) => {
        opened.push(url);
        return c.db;
      },
      {
        onError: (_e, t) => told.push(t),
      },
    );
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
        const db = {
          kind: "postgres",
          url,
          close: async () => {},
          poolStats: () => ({ total: 3, idle: 1, waiting: 2 }),
        } as unknown as Database;
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
    app = await startApp({
      db: await freshDatabase({ observe: (sql, params) => void seen.push({ sql, params }) }),
      config: { databaseRouting: "workers" },
    });
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
        `SELECT p.shardid::text AS shard, n.nodename AS host, n.nodeport AS port FROM pg_dist_placement p
         JOIN pg_dist_node n USING (groupid)
          WHERE p.shardid = get_shard_id_for_distribution_column('"Lead"', $1::uuid)`,
        [tenantId],
      )
    ).rows[0]!;
  /** The node a worker pool's connection is on (what the server says of itself). */
  const serverOf = async (db: Database) =>
    (await db.sql.query<{ port: number }>("SELECT current_setting('port')::int AS port"))[0]!.port;

  it("a list read goes to the worker with the tenant written into its text (server/db/literal.ts), names no shard, and answers as through the coordinator", async () => {
    const created = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "Literal", customerPhone: "+34600111299" },
    });
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
    expect(seen.filter((s) => /"[A-Z][A-Za-z]*_\d{6,}"/.test(s.sql))).toEqual([]);
  });

  it("the tenant's requests run on its worker's pool; after a shard move they keep answering, then follow the shard", async () => {
    const before = await placement();
    const routed = await app.services.routes!.forTenant(tenantId);
    expect(routed).not.toBe(app.services.db);
    expect(await serverOf(routed)).toBe(before.port);
    const created = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "Routed", customerPhone: "+34600111222" },
    });
    expect(created.status).toBe(201);
    expect(app.services.routes!.nodes()).toContain(`${before.host}:${before.port}`);
    expect((await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } })).status).toBe(200);

    // Move the tenant's shard group to another worker (block_writes: no replication set-up needed).
    const [other] = (
      await admin.query<{ host: string; port: number }>(
        `SELECT nodename AS host, nodeport AS port FROM pg_dist_node WHERE groupid <> 0 AND nodeport <> $1
         AND noderole = 'primary' ORDER BY nodeid LIMIT 1`,
        [before.port],
      )
    ).rows;
    await admin.query(
      `SELECT citus_move_shard_placement($1::bigint, $2, $3, $4, $5, shard_transfer_mode => 'block_writes')`,
      [before.shard, before.host, before.port, other!.host, other!.port],
    );
    expect((await placement()).port).toBe(other!.port);

    // The route is stale now: the old worker sends the statements
    // on (Citus routes them). Writes and reads still answer.
    const afterMove = await app.request("POST", "/public/v1/leads", {
      key,
      body: { customerName: "After move", customerPhone: "+34600111223" },
    });
    expect(afterMove.status).toBe(201);
    const list = await app.request("GET", "/public/v1/leads", { key, query: { limit: 50 } });
    expect(list.status).toBe(200);
    expect(list.body.items.map((l: { customerName: string }) => l.customerName)).toEqual(
      expect.arrayContaining(["Routed", "After move"]),
    );
    const stored = (
      await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "Lead" WHERE "tenantId" = $1 AND "customerName" IN ('Routed', 'After move')`,
        [tenantId],
      )
    ).rows[0];
    expect(stored?.n).toBe(2);

    // Once the entry has expired (5 s) and been read again in the background, the tenant's pool is
    // the new worker's: polled for, bounded well past the expiry.
    expect(
      await until(
        async () => (await serverOf(await app.services.routes!.forTenant(tenantId))) === other!.port,
        60_000,
        100,
      ),
    ).toBe(true);
  }, 60_000);
});
