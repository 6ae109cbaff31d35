// DATABASE_ROUTING=workers: on a Citus cluster, a tenant's request sends
// its statements straight to the worker that holds the tenant's shards, not through the coordinator.
//
// Why: through the coordinator every statement is planned twice (by Citus on the coordinator, then
// the shard query on the worker) and crosses one more connection. On the worker itself Citus finds
// the shard local and, for a single-table statement of one tenant, plans it directly on the shard
// (citus.enable_local_fast_path_query_optimization): measured with pgbench on this machine's cluster,
// the 50-lead page of one tenant, prepared, 1 / 8 connections: coordinator 6,683 / 12,606 tps, the
// tenant's worker 14,194 / 50,348, one plain PostgreSQL 15,978 / 69,870 (docs/decisions/scale-out.md).
//
// How: the tenant's node is read on the coordinator (the placement of its shard of "Lead": every
// distributed table is co-located, so it is every table's) and kept PLACEMENT_TTL_MS; an expired entry
// is still used while it is read again in the background. A stale entry is never wrong, only slower:
// the workers have Citus's metadata (11.0+), so a statement sent to a node that no longer holds the
// shard is routed on from there, and every guarantee that a statement's routing gives on the
// coordinator (shard locks against a concurrent move, the calendar lock taken where the tenant's rows
// are: routers/appointments/schemas.ts) holds on any node. One pool per node, opened on first use,
// with the coordinator pool's options (statement_timeout, size) and bootstrap.ts WORKER_POOL: the tenant
// written into the text of its statements (server/db/literal.ts), so that Citus plans them directly on
// the local shard. What stays on the coordinator: the
// key lookup (reference tables, before the tenant is known), the sequencer's steps (their lock must
// be taken on one node for every instance: server/changes.ts), the admin verbs and the sweeps.
// A placement that cannot be read (the schema not distributed yet, a node without metadata) sends the
// tenant to the coordinator for PLACEMENT_TTL_MS, and `onError` is told once per failure kind.
import type { Database } from "./client.js";

export const PLACEMENT_TTL_MS = 5_000;
/** Tenants whose placement is kept; the oldest entry goes first. */
const MAX_TENANTS = 100_000;

/**
 * The node that holds the tenant's shard group: its host and port as the coordinator knows it
 * (pg_dist_node), or the coordinator itself (group 0: a coordinator that holds shards).
 */
export const PLACEMENT_SQL = `
  SELECT n.nodename AS "host", n.nodeport AS "port", n.groupid = 0 AS "coordinator"
    FROM pg_dist_placement p JOIN pg_dist_node n ON n.groupid = p.groupid
   WHERE p.shardid = get_shard_id_for_distribution_column('"Lead"'::regclass, $1::uuid)
     AND n.isactive AND n.noderole = 'primary'
   LIMIT 1`;

/**
 * Whether a statement is the placement lookup (test/db/tenant-queries.test.ts: a catalog read of the caller's tenant).
 */
export const isPlacementLookup = (sql: string): boolean => sql === PLACEMENT_SQL;

export interface TenantRoutes {
  /** Where `tenantId`'s statements go: its worker's pool, or the coordinator's. */
  forTenant(tenantId: string): Promise<Database>;
  /** The worker pools opened so far (host:port). */
  nodes(): string[];
  /** The worker pools' connections and waiting queries, summed (for /metrics, beside the coordinator's pool). */
  poolStats(): { total: number; idle: number; waiting: number };
  close(): Promise<void>;
}

interface Entry {
  /** "host:port", or null for the coordinator. */
  node: string | null;
  expires: number;
  refreshing?: Promise<void>;
}

/** The URL of `host`:`port` with everything else of `base` (user, password, database, options). */
export function nodeUrl(base: string, host: string, port: number): string {
  const url = new URL(base);
  url.hostname = host.includes(":") ? `[${host}]` : host;
  url.port = String(port);
  return url.toString();
}

export function tenantRoutes(
  coordinator: Database,
  coordinatorUrl: string,
  open: (url: string) => Promise<Database>,
  opts: { ttlMs?: number; onError?: (err: unknown, tenantId: string) => void } = {},
): TenantRoutes {
  const ttl = opts.ttlMs ?? PLACEMENT_TTL_MS;
  const entries = new Map<string, Entry>();
  const pending = new Map<string, Promise<string | null>>();
  const pools = new Map<string, Promise<Database>>();
  const told = new Set<string>();
  /** The pools that have opened, for poolStats() (a pool's promise may still be pending). */
  const opened = new Set<Database>();
  let closed = false;

  const read = async (tenantId: string): Promise<string | null> => {
    try {
      const [row] = await coordinator.sql.query<{ host: string; port: number; coordinator: boolean }>(
        PLACEMENT_SQL,
        [tenantId],
        { prepare: true },
      );
      return !row || row.coordinator ? null : `${row.host}:${row.port}`;
    } catch (err) {
      const kind = (err as { code?: string }).code ?? (err as Error).message;
      if (!told.has(kind)) {
        told.add(kind);
        opts.onError?.(err, tenantId);
      }
      return null;
    }
  };
  const remember = (tenantId: string, node: string | null) => {
    entries.delete(tenantId);
    if (entries.size >= MAX_TENANTS) entries.delete(entries.keys().next().value!);
    entries.set(tenantId, { node, expires: Date.now() + ttl });
  };
  const lookup = (tenantId: string): Promise<string | null> => {
    let p = pending.get(tenantId);
    if (!p) {
      p = read(tenantId).then((node) => {
        remember(tenantId, node);
        return node;
      });
      pending.set(tenantId, p);
      void p.finally(() => pending.delete(tenantId));
    }
    return p;
  };
  const pool = (node: string | null): Promise<Database> => {
    if (node === null || closed) return Promise.resolve(coordinator);
    let db = pools.get(node);
    if (!db) {
      const i = node.lastIndexOf(":");
      db = open(nodeUrl(coordinatorUrl, node.slice(0, i), Number(node.slice(i + 1))));
      db.then(
        (d) => opened.add(d),
        () => pools.delete(node),
      );
      pools.set(node, db);
    }
    return db;
  };

  return {
    async forTenant(tenantId) {
      const hit = entries.get(tenantId);
      if (hit) {
        if (hit.expires <= Date.now() && !hit.refreshing)
          hit.refreshing = lookup(tenantId).then(
            () => {},
            () => {},
          );
        return pool(hit.node);
      }
      return pool(await lookup(tenantId));
    },
    nodes: () => [...pools.keys()],
    poolStats() {
      const sum = { total: 0, idle: 0, waiting: 0 };
      for (const d of opened) {
        const s = d.poolStats?.();
        if (!s) continue;
        sum.total += s.total;
        sum.idle += s.idle;
        sum.waiting += s.waiting;
      }
      return sum;
    },
    async close() {
      closed = true;
      const all = [...pools.values()];
      pools.clear();
      opened.clear();
      await Promise.all(all.map(async (p) => (await p.catch(() => null))?.close()));
    },
  };
}
