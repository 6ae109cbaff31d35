// `npm run db:distribute`: turns a migrated schema on a Citus coordinator into the
// distributed schema its tables' roles describe. Each table's role is its comment, set by the
// migration that creates it: 'citus:reference' (a copy on every node: plans, tenants, users, keys),
// 'citus:distributed(tenantId)' (sharded by tenant, every such table co-located with the others, so
// a tenant's rows of every table live on one node) or 'citus:local' (the migrator's bookkeeping).
//
// How, in one transaction (all or nothing):
//   1. the foreign keys that touch a table still to distribute are dropped (Citus turns tables that
//      reference a new reference table into "Citus local tables", which then cannot be distributed);
//   2. reference tables, then distributed tables (the first one, or the one already distributed,
//      fixes the co-location group), with `citus.enable_unsafe_triggers` on: the counters, the
//      changes capture and the comment admission are triggers on the shards, and they only ever
//      write rows of the same tenant, i.e. co-located shards on the same node (docs/scaling.md);
//   3. the tables' triggers are off while Citus copies their rows into the shards (moving rows is not
//      a write: their counters and changes are copied too), then on again;
//   4. the foreign keys are added back exactly as they were (every key between tenant rows pairs
//      "tenantId" with "tenantId", so Citus checks it shard by shard);
//   5. each function whose comment is 'citus:delegated(<argument>)' becomes a distributed function
//      co-located with the distributed tables, by that argument: a call is sent whole to the worker
//      holding that tenant's shards ("tenant_exec", server/db/delegate.ts).
// A second run finds every role realised and changes nothing. On plain PostgreSQL it refuses.
// Every run first reads each node's synchronous_commit and refuses, changing nothing, where a node has
// it off (or does not answer): Citus's online shard moves and splits (logical replication) can then
// drop a write already acknowledged (measured; docs/decisions/scale-out.md, "Shard moves need
// synchronous_commit on").
import type { SqlRunner } from "./client.js";

export type Role = { kind: "reference" } | { kind: "local" } | { kind: "distributed"; column: string };

/** The role a table's comment declares, or null when the comment is not one. */
export function parseRole(comment: string | null | undefined): Role | null {
  if (comment === "citus:reference") return { kind: "reference" };
  if (comment === "citus:local") return { kind: "local" };
  const m = /^citus:distributed\(([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(comment ?? "");
  return m ? { kind: "distributed", column: m[1]! } : null;
}

export class DistributeError extends Error {}

export interface DistributeResult {
  /** Tables made reference tables by this run. */
  reference: string[];
  /** Tables distributed by this run (by their column). */
  distributed: string[];
  /** Tables whose role was realised already. */
  unchanged: number;
  /** Functions made distributed (delegated by their tenant argument) by this run. */
  delegated: string[];
  /** Foreign keys dropped and added back. */
  foreignKeys: number;
  /** Shards per distributed table (the co-location group's). */
  shardCount: number | null;
  workers: number;
  citus: string;
  /** What the operator should know (none today: what would lose data refuses the run instead). */
  warnings: string[];
}

interface TableState {
  name: string;
  role: Role | null;
  comment: string | null;
  /** What Citus has made of it: 'n' reference, 'h' hash-distributed (with its column), undefined plain. */
  method?: string;
  column?: string;
  colocation?: number;
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** What the coordinator's catalog says of the public tables. */
async function readTables(sql: SqlRunner): Promise<TableState[]> {
  const rows = await sql.query<{
    name: string;
    comment: string | null;
    method: string | null;
    column: string | null;
    colocation: number | null;
  }>(`
    SELECT c.relname AS name, obj_description(c.oid, 'pg_class') AS comment, p.partmethod::text AS method,
           CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END AS column,
           p.colocationid AS colocation
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
     ORDER BY c.relname`);
  return rows.map((r) => ({
    name: r.name,
    comment: r.comment,
    role: parseRole(r.comment),
    method: r.method ?? undefined,
    column: r.column ?? undefined,
    colocation: r.colocation ?? undefined,
  }));
}

/** The functions whose comment is 'citus:delegated(<argument>)', and whether Citus has them distributed. */
async function readFunctions(sql: SqlRunner): Promise<{ signature: string; argument: string; distributed: boolean }[]> {
  const rows = await sql.query<{ signature: string; comment: string; distributed: boolean }>(`
    SELECT p.oid::regprocedure::text AS signature, obj_description(p.oid, 'pg_proc') AS comment,
           EXISTS (SELECT 1 FROM pg_dist_object o WHERE o.classid = 'pg_proc'::regclass AND o.objid = p.oid
             AND o.distribution_argument_index IS NOT NULL) AS distributed
      FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
        AND obj_description(p.oid, 'pg_proc') LIKE 'citus:delegated(%'
     ORDER BY 1`);
  return rows.map((r) => {
    const m = /^citus:delegated\(([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(r.comment);
    if (!m)
      throw new DistributeError(`function ${r.signature}: comment "${r.comment}" is not citus:delegated(<argument>)`);
    return { signature: r.signature, argument: m[1]!, distributed: r.distributed };
  });
}

/** Whether Citus already holds the table as its role says; throws when it holds it otherwise. */
function realised(t: TableState): boolean {
  const role = t.role!;
  if (role.kind === "local") {
    // A local table stays plain; a Citus local table (method 'n' without replication) is fine too.
    return true;
  }
  if (t.method === undefined) return false;
  if (role.kind === "reference" && t.method === "n") return true;
  if (role.kind === "distributed" && t.method === "h" && t.column === role.column) return true;
  throw new DistributeError(
    `table "${t.name}" is already distributed otherwise than its role (${t.comment}): method ` +
      `${t.method}${t.column ? ` by "${t.column}"` : ""}; undistribute it first (undistribute_table)`,
  );
}

/** The Citus version, or a DistributeError when this database is no Citus coordinator with workers. */
export async function citusCoordinator(sql: SqlRunner): Promise<{ version: string; workers: number }> {
  const [ext] = await sql.query<{ version: string }>(
    `SELECT extversion AS version FROM pg_extension WHERE extname = 'citus'`,
  );
  if (!ext) throw new DistributeError("not a Citus coordinator: the citus extension is not installed");
  const [node] = await sql.query<{ coordinator: boolean; workers: number }>(
    `SELECT citus_is_coordinator() AS coordinator,
            (SELECT count(*)::int FROM pg_dist_node WHERE noderole = 'primary' AND isactive AND shouldhaveshards
              AND groupid <> 0) AS workers`,
  );
  if (!node?.coordinator)
    throw new DistributeError("not a Citus coordinator: this node is a worker (run it against the coordinator)");
  if (!node.workers)
    throw new DistributeError(
      "no Citus worker nodes: add them on the coordinator first (SELECT citus_add_node(host, port))",
    );
  return { version: ext.version, workers: node.workers };
}

/**
 * A problem per node of the cluster (the coordinator too) whose synchronous_commit is off, or that
 * did not answer (distribute() refuses then). With asynchronous commit a transaction is visible, and its
 * COMMIT answered, before its WAL is written, and Citus's logical shard transfer (citus_move_shard_placement,
 * citus_rebalance_start, isolate_tenant_to_new_shard with force_logical) can switch a shard over without that
 * transaction: the write is acknowledged to the client and gone from the cluster
 * (reproduced: 3 of 6 moves under a stream of single-row inserts lost one acknowledged row with it off,
 * none of 6 with it on; drill 10 lost one acknowledged create in 8 runs with it off). Read in each
 * node's own session for this database, as Citus's connections get it (a role's or database's
 * setting included).
 */
export async function asyncCommitNodes(sql: SqlRunner): Promise<string[]> {
  const rows = await sql.query<{ node: string; ok: boolean; setting: string }>(`
    SELECT n.nodename || ':' || n.nodeport AS node, r.success AS ok, r.result AS setting
      FROM run_command_on_all_nodes('SHOW synchronous_commit') r JOIN pg_dist_node n ON n.nodeid = r.nodeid
     ORDER BY n.nodeid`);
  return rows.flatMap((r) =>
    !r.ok
      ? [`could not read synchronous_commit on ${r.node} (${r.setting})`]
      : r.setting === "off"
        ? [`synchronous_commit is off on ${r.node}`]
        : [],
  );
}

/** Whether `sql` is a Citus coordinator's database (the extension is installed). */
export async function isCitus(sql: SqlRunner): Promise<boolean> {
  const rows = await sql.query(`SELECT 1 FROM pg_extension WHERE extname = 'citus'`);
  return rows.length > 0;
}

/**
 * Distributes the schema as its roles say. `shardCount` applies to a co-location group created by
 * this run (Citus's citus.shard_count, 32 by default, otherwise).
 */
export async function distribute(sql: SqlRunner, opts: { shardCount?: number } = {}): Promise<DistributeResult> {
  return sql.session(async (s) => {
    const { version, workers } = await citusCoordinator(s);
    const unsafe = await asyncCommitNodes(s);
    if (unsafe.length)
      throw new DistributeError(
        `${unsafe.join("; ")}: Citus's shard moves and splits can drop writes already acknowledged. ` +
          "On every such node: ALTER SYSTEM SET synchronous_commit = on; SELECT pg_reload_conf(); " +
          "(and no role or database setting turning it off), then run db:distribute again",
      );
    const warnings: string[] = [];
    await s.exec("BEGIN");
    try {
      await s.exec(
        "SET LOCAL statement_timeout = 0; SET LOCAL citus.enable_unsafe_triggers = on; SET LOCAL " +
          "citus.multi_shard_modify_mode = 'sequential'",
      );
      if (opts.shardCount) await s.exec(`SET LOCAL citus.shard_count = ${Math.trunc(opts.shardCount)}`);
      // One distribute at a time (a second waits, then finds nothing to do).
      await s.query("SELECT pg_advisory_xact_lock($1)", [7_245_002]);
      const tables = await readTables(s);
      const unmarked = tables.filter((t) => !t.role);
      if (unmarked.length)
        throw new DistributeError(
          `table${unmarked.length > 1 ? "s" : ""} without a Citus role: ${unmarked.map((t) => t.name).join(", ")} ` +
            "(COMMENT ON TABLE … IS 'citus:reference' | 'citus:distributed(tenantId)' | 'citus:local')",
        );
      const pending = tables.filter((t) => !realised(t));
      const pendingNames = new Set(pending.map((t) => t.name));
      const anchor = tables.find((t) => t.role!.kind === "distributed" && t.method === "h");
      const result: DistributeResult = {
        reference: [],
        distributed: [],
        delegated: [],
        unchanged: tables.length - pending.length,
        foreignKeys: 0,
        shardCount: null,
        workers,
        citus: version,
        warnings,
      };
      if (pending.length) {
        const fks = await s.query<{ table: string; name: string; def: string }>(
          `
          SELECT c.relname AS "table", k.conname AS name, pg_get_constraintdef(k.oid) AS def
            FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
           WHERE k.contype = 'f' AND k.connamespace = 'public'::regnamespace
             AND (c.relname = ANY($1::text[]) OR r.relname = ANY($1::text[]))
           ORDER BY c.relname, k.conname`,
          [[...pendingNames]],
        );
        for (const f of fks) await s.exec(`ALTER TABLE ${ident(f.table)} DROP CONSTRAINT ${ident(f.name)}`);
        // Moving rows into the shards is not a write: the shards' triggers must not count or feed the
        // rows Citus copies there (their counters and changes are copied too). The enabled user
        // triggers of the tables to distribute are off while they are distributed, then on again.
        const triggers = await s.query<{ table: string; name: string }>(
          `
          SELECT c.relname AS "table", t.tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
           WHERE NOT t.tgisinternal AND t.tgenabled <> 'D' AND c.relnamespace = 'public'::regnamespace
             AND c.relname = ANY($1::text[])
           ORDER BY 1, 2`,
          [[...pendingNames]],
        );
        for (const t of triggers) await s.exec(`ALTER TABLE ${ident(t.table)} DISABLE TRIGGER ${ident(t.name)}`);
        for (const t of pending.filter((t) => t.role!.kind === "reference")) {
          await s.query(`SELECT create_reference_table($1)`, [ident(t.name)]);
          result.reference.push(t.name);
        }
        let colocateWith = anchor ? ident(anchor.name) : "none";
        for (const t of pending.filter((t) => t.role!.kind === "distributed")) {
          const column = (t.role as { column: string }).column;
          await s.query(`SELECT create_distributed_table($1, $2, colocate_with => $3)`, [
            ident(t.name),
            column,
            colocateWith,
          ]);
          colocateWith = ident(t.name);
          result.distributed.push(t.name);
        }
        for (const t of triggers) await s.exec(`ALTER TABLE ${ident(t.table)} ENABLE TRIGGER ${ident(t.name)}`);
        for (const f of fks) await s.exec(`ALTER TABLE ${ident(f.table)} ADD CONSTRAINT ${ident(f.name)} ${f.def}`);
        result.foreignKeys = fks.length;
      }
      const anchorNow = anchor ?? tables.find((t) => result.distributed.includes(t.name));
      const functions = await readFunctions(s);
      for (const f of functions) {
        if (f.distributed) continue;
        if (!anchorNow)
          throw new DistributeError(`function ${f.signature} is delegated by tenant, but no table is distributed`);
        await s.query(`SELECT create_distributed_function($1::regprocedure, $2::text, colocate_with => $3::text)`, [
          f.signature,
          f.argument,
          ident(anchorNow.name),
        ]);
        result.delegated.push(f.signature);
      }
      result.unchanged += functions.length - result.delegated.length;
      const [group] = await s.query<{ shards: number | null }>(
        `
        SELECT max(g.shardcount)::int AS shards FROM pg_dist_partition p JOIN pg_dist_colocation g
          ON g.colocationid = p.colocationid
         WHERE p.partmethod = 'h' AND p.logicalrelid::regclass::text = ANY($1::text[])`,
        [tables.filter((t) => t.role!.kind === "distributed").map((t) => ident(t.name))],
      );
      result.shardCount = group?.shards ?? null;
      await s.exec("COMMIT");
      return result;
    } catch (err) {
      await s.exec("ROLLBACK").catch(() => {});
      throw err;
    }
  });
}
