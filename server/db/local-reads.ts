// DATABASE_ROUTING=workers: a tenant's reads over its shards on the worker that holds them (issue 26:
// the reads' cost on Citus; migration 20261130100000_tenant_read says why and what guards it).
//
// A worker pool (server/db/client.ts, PostgresOptions.localReads) keeps, per tenant, the names of the
// tenant's shards on its node ("tenant_shards": {"anchor": "102040", "names": {"Lead": "Lead_102040", …}}),
// read in the background and kept PLACEMENT_TTL_MS like the route itself (server/db/routing.ts), and
// sends a tenant's read (QueryOptions.tenant: reads only) with its tables renamed to them
// (renameTables, the rule of the creates' "tenant_exec_rename"), wrapped so that "tenant_shard_here"
// checks the placement in the read's own snapshot before anything is scanned. PostgreSQL then plans the
// statement as on one server and keeps the plan, instead of Citus planning it, deparsing the shard query
// and planning that again on every execution. Where the names have gone stale (a move: the guard's
// CR001, or 42P01 for a shard already dropped) the read is sent again as written, and the names are read
// again. A read inside a transaction (a session) is never renamed: its error would end the transaction.
import { renameTables } from "./literal.js";
import { PLACEMENT_TTL_MS } from "./routing.js";

export interface LocalShards {
  /** The tenant's "Lead" shard, whose placement the guard checks (every table's shards are co-located). */
  anchor: string;
  /** Each table's name on this node: the tenant's shard, or a reference table's placement. */
  names: Record<string, string>;
}

export const TENANT_SHARDS_SQL = `SELECT "tenant_shards"($1::uuid) AS "shards"`;

/** `text` over the tenant's shards, guarded; undefined where it names none of them or cannot be wrapped. */
export function overLocalShards(text: string, shards: LocalShards): string | undefined {
  if (!/^[0-9]+$/.test(shards.anchor) || /;\s*$/.test(text)) return undefined;
  const renamed = renameTables(text, shards.names);
  if (renamed === text) return undefined;
  // The guard is a pseudo-constant qual: evaluated once, before any scan (the migration says why).
  return `SELECT "r".* FROM (\n${renamed}\n) "r" WHERE "tenant_shard_here"(${shards.anchor}::bigint)`;
}

/** Whether `sql` is a read over local shards (test/db/tenant-queries.test.ts maps it back to the tables). */
export const isLocalRead = (sql: string): boolean => sql.startsWith('SELECT "r".* FROM (\n') && sql.includes('"tenant_shard_here"(');

/** A read sent over names that are no longer this node's: refused by the guard, or the shard is gone. */
export const movedAway = (err: unknown): boolean => ["CR001", "42P01"].includes((err as { code?: string })?.code ?? "");

interface Entry {
  value: LocalShards | null | undefined;
  expires: number;
  reading: boolean;
}

/** The tenants' shard names on one node, never waited for: read in the background, kept `ttlMs`. */
export class ShardNames {
  /** value: undefined until the first read answers, null where the node has none (or they went stale). */
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly read: (tenantId: string) => Promise<LocalShards | null>,
    private readonly ttlMs = PLACEMENT_TTL_MS,
    private readonly max = 100_000,
  ) {}

  /** The names known now (an expired entry while it is read again); undefined until first read. */
  peek(tenantId: string): LocalShards | null | undefined {
    const e = this.entries.get(tenantId);
    if (!e) this.refresh(tenantId, { value: undefined, expires: 0, reading: false }, false);
    else if (e.expires <= Date.now() && !e.reading) this.refresh(tenantId, e, true);
    return e?.value;
  }

  /** Names found stale: not used again until read again. */
  forget(tenantId: string): void {
    const e = this.entries.get(tenantId);
    if (e) e.value = null;
    if (e && !e.reading) this.refresh(tenantId, e, true);
  }

  private refresh(tenantId: string, e: Entry, known: boolean): void {
    e.reading = true;
    if (!known) {
      // A placeholder (nothing to use) until the first read answers; the oldest entry goes first.
      if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(tenantId, e);
    }
    this.read(tenantId).then(
      (value) => Object.assign(e, { value, expires: Date.now() + this.ttlMs, reading: false }),
      () => Object.assign(e, { value: null, expires: Date.now() + this.ttlMs, reading: false }),
    );
  }
}
