// A Citus cluster of the drill's own (issue 26): a coordinator and workers on free ports in a temporary
// folder, run by ../shared/citus/cluster.sh (PostgreSQL 15 with the citus extension installed by
// ../shared/citus/install.sh; trust auth, wal_level=logical, citus.enable_unsafe_triggers=on), so that
// moving shards never touches the machine's shared servers or another cluster. A worker can be added
// later (addWorker: the same script starts one more node in the same folder). Stopped and removed by
// the scope, also when the drill fails.
//
// One setting beyond cluster.sh's: PostgreSQL 15.20 (and the other branches' releases of the same
// date) only load logical-decoding output plugins listed in `output_plugin_libraries` (default
// `pgoutput, test_decoding`). Citus's shard split (isolate_tenant_to_new_shard with logical transfer)
// decodes with its own plugin, `citus`: without it in the list the split fails with *library "citus"
// may not be used as an output plugin*. Every node gets it appended (ALTER SYSTEM, reload) when the
// server has the setting at all.
// And one setting against cluster.sh's: synchronous_commit is on (PostgreSQL's default; cluster.sh
// turns it off for speed). With it off, Citus's logical shard moves drop an acknowledged write now and
// then (the service's requirement, checked by `npm run db:distribute`: server/db/distribute.ts
// asyncCommitNodes; docs/decisions/scale-out.md).
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { freePort, ROOT, runOk } from "./proc.js";
import type { Scope } from "./scope.js";

const HOST = "127.0.0.1";

/** ../shared/citus beside the checkout (as CI finds it), or CITUS_SHARED. */
export function citusShared(): string | null {
  for (const d of [process.env.CITUS_SHARED, path.resolve(ROOT, "../shared/citus")].filter(Boolean) as string[])
    if (existsSync(path.join(d, "cluster.sh"))) return d;
  return null;
}

/** Why a cluster cannot be started here (null: it can). */
export function citusMissing(): string | null {
  const shared = citusShared();
  if (!shared) return "../shared/citus/cluster.sh not found (set CITUS_SHARED)";
  const libs = [
    "/usr/lib/postgresql/15/lib/citus.so",
    process.env.PG_BIN ? path.join(process.env.PG_BIN, "../lib/citus.so") : "",
  ].filter(Boolean);
  if (!libs.some((l) => existsSync(l)))
    return `the citus extension is not installed (run ${path.join(shared, "install.sh")} as root)`;
  return null;
}

export interface Node {
  host: string;
  port: number;
}

export interface CitusCluster {
  dir: string;
  coordinator: Node;
  workers: Node[];
  /** URL of a database on a node (default: the coordinator). */
  url(db: string, node?: Node): string;
  /** Creates `name` on every node with the extension, the coordinator and workers registered; returns its coordinator URL. */
  createDatabase(name: string): Promise<string>;
  /** Starts one more worker on a free port, creates `db` there with the extension, registers it (citus_add_node). */
  addWorker(db: string): Promise<Node>;
}

async function onNode(url: string, statements: string[]): Promise<any[][]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const out: any[][] = [];
    for (const s of statements) out.push((await c.query(s)).rows);
    return out;
  } finally {
    await c.end();
  }
}

/**
 * ALTER SYSTEM SET `name` = `value` on the node, reloads, and waits until a new session shows a value
 * `took` accepts (the reload is asynchronous).
 */
async function alterSystem(node: Node, name: string, value: string, took: (shown: string) => boolean): Promise<void> {
  const url = `postgresql://postgres@${node.host}:${node.port}/postgres`;
  await onNode(url, [`ALTER SYSTEM SET ${name} = ${value}`, "SELECT pg_reload_conf()"]);
  for (let i = 0; i < 50; i++) {
    const [r] = await onNode(url, [`SHOW ${name}`]);
    if (took(String(r![0][name]))) return;
    await new Promise((res) => setTimeout(res, 100));
  }
  throw new Error(`${name} on :${node.port} did not become ${value}`);
}

/** Appends `citus` to output_plugin_libraries on a node that has that setting (see the header). */
async function allowCitusDecoder(node: Node): Promise<void> {
  const [rows] = await onNode(`postgresql://postgres@${node.host}:${node.port}/postgres`, [
    `SELECT setting FROM pg_settings WHERE name = 'output_plugin_libraries'`,
  ]);
  if (!rows!.length) return;
  const list = String(rows![0].setting)
    .split(",")
    .map((s) => s.trim().replace(/^"|"$/g, ""))
    .filter(Boolean);
  if (list.includes("citus")) return;
  // A list setting: the names unquoted, comma-separated (quoting the whole value would make it one name).
  const names = [...list, "citus"]
    .map((n) => (/^[a-z_][a-z0-9_]*$/.test(n) ? n : `"${n.replace(/"/g, '""')}"`))
    .join(", ");
  await alterSystem(
    node,
    "output_plugin_libraries",
    names,
    (shown) => /\bcitus\b/.test(shown) && !shown.startsWith('"'),
  );
}

/** synchronous_commit = on for the node (see the header). */
const synchronousCommit = (node: Node) => alterSystem(node, "synchronous_commit", "on", (shown) => shown === "on");

/** Distinct free ports (freePort() twice in a row can answer the same one). */
async function freePorts(n: number, taken: number[] = []): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    const p = await freePort();
    if (!out.includes(p) && !taken.includes(p)) out.push(p);
  }
  return out;
}

export async function startCitus(scope: Scope, opts: { workers?: number } = {}): Promise<CitusCluster> {
  const missing = citusMissing();
  if (missing) throw new Error(`cannot start a Citus cluster: ${missing}`);
  const script = path.join(citusShared()!, "cluster.sh");
  const dir = await mkdtemp(path.join(tmpdir(), "crm-drill-citus-"));
  // DRILL_CITUS_KEEP=1 keeps the folder (the nodes' data and server logs) for a post-mortem.
  if (!process.env.DRILL_CITUS_KEEP) scope.defer(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
  const [coordPort, ...workerPorts] = await freePorts(1 + (opts.workers ?? 2));
  const coordinator: Node = { host: HOST, port: coordPort! };
  const workers: Node[] = workerPorts.map((port) => ({ host: HOST, port }));
  const sh = (...args: string[]) => runOk("bash", [script, ...args], { cwd: ROOT, timeoutMs: 120_000 });
  const start = () => sh("start", dir, String(coordinator.port), ...workers.map((w) => String(w.port)));
  // Registered before the start: a half-started cluster is stopped too.
  scope.defer(`stop citus cluster ${dir}`, async () => {
    await sh("stop", dir);
  });
  await start();
  for (const n of [coordinator, ...workers]) {
    await allowCitusDecoder(n);
    await synchronousCommit(n);
  }
  const databases: string[] = [];
  const url = (db: string, node: Node = coordinator) => `postgresql://postgres@${node.host}:${node.port}/${db}`;
  return {
    dir,
    coordinator,
    workers,
    url,
    async createDatabase(name) {
      await sh("db", dir, name);
      databases.push(name);
      return url(name);
    },
    async addWorker(db) {
      const [port] = await freePorts(1, [coordinator.port, ...workers.map((w) => w.port)]);
      const node: Node = { host: HOST, port: port! };
      workers.push(node);
      // cluster.sh start with one more worker port: it rewrites the ports file, initdb's and starts
      // the new node only (the running ones are left as they are).
      await start();
      await allowCitusDecoder(node);
      await synchronousCommit(node);
      await onNode(url("postgres", node), [`CREATE DATABASE "${db}"`]);
      await onNode(url(db, node), ["CREATE EXTENSION IF NOT EXISTS citus"]);
      await onNode(url(db), [`SELECT citus_add_node('${node.host}', ${node.port})`]);
      return node;
    },
  };
}

/** Where a tenant's rows of `table` live: the shard and its (single) placement. */
export async function shardOf(
  db: pg.ClientBase,
  table: string,
  tenantId: string,
): Promise<{ shardId: string; node: Node }> {
  const r = await db.query(
    `SELECT s.shardid::text AS "shardId", p.nodename AS host, p.nodeport AS port
       FROM (SELECT get_shard_id_for_distribution_column($1::regclass, $2::uuid) AS shardid) s
       JOIN pg_dist_shard_placement p USING (shardid)`,
    [`"${table}"`, tenantId],
  );
  if (r.rowCount !== 1) throw new Error(`tenant ${tenantId}: ${r.rowCount} placements of its "${table}" shard`);
  return { shardId: r.rows[0].shardId, node: { host: r.rows[0].host, port: Number(r.rows[0].port) } };
}

/** Moves a shard (with its co-located group) online: logical replication, writes blocked only for the switch. */
export async function moveShard(db: pg.ClientBase, shardId: string, from: Node, to: Node): Promise<void> {
  await db.query(
    `SELECT citus_move_shard_placement($1::bigint, $2, $3, $4, $5, shard_transfer_mode => 'force_logical')`,
    [shardId, from.host, from.port, to.host, to.port],
  );
}

export type TransferMode = "force_logical" | "block_writes" | "auto";

/**
 * Splits a tenant's rows (every co-located table: CASCADE) into a shard of its own, on the node it
 * is on; returns the new shard of `table`. Mode block_writes by default: with logical replication
 * (force_logical) Citus 13.2's split stalls for good when a co-located table with a primary key gets
 * an UPDATE or DELETE in the moment between the split's replication slot and the children's replica
 * identities (the split children on the source node have no primary key yet in the decoder's
 * historic catalog: the subscriber's apply worker fails with *publisher did not send replica identity
 * column expected by the logical replication target relation* over and over, until
 * citus.logical_replication_timeout, 2 h). The service's counters are updated by every create, so
 * under load that moment is always hit (upstream citusdata/citus#6790, open).
 */
/**
 * Isolates a tenant into shards of its own; run again (up to 3 times) when Citus's distributed deadlock
 * detector made it the victim (40P01): under write load the service's transactions take the shard
 * group's locks statement by statement, and the isolation's lock acquisition can close a cycle with
 * one — Citus cancels one side, and an operator runs the isolation again. `retries` counts how often.
 */
export async function isolateTenant(
  db: pg.ClientBase,
  table: string,
  tenantId: string,
  mode: TransferMode = "block_writes",
  retries = { n: 0 },
): Promise<string> {
  for (let attempt = 1; ; attempt++) {
    try {
      const r = await db.query(
        `SELECT isolate_tenant_to_new_shard($1::regclass, $2::uuid, cascade_option => 'CASCADE', shard_transfer_mode => $3::citus.shard_transfer_mode)::text AS id`,
        [`"${table}"`, tenantId, mode],
      );
      return r.rows[0].id;
    } catch (err) {
      if ((err as { code?: string }).code !== "40P01" || attempt >= 3) throw err;
      retries.n += 1;
    }
  }
}

/**
 * Starts the rebalancer (a background job) with `mode` and follows it until it ends or `deadlineMs`
 * passes; returns how many shard moves it ran. Polled rather than citus_rebalance_wait(): the wait is
 * one statement, so the caller's statement_timeout (there for a stalled operation) would cut a
 * rebalance that is merely slow (three logical moves under load took 171 s on CI's machine).
 */
export async function rebalance(
  db: pg.ClientBase,
  mode: TransferMode = "auto",
  deadlineMs = 600_000,
): Promise<{ jobId: string | null; moves: number; state: string }> {
  const started = await db.query(
    `SELECT citus_rebalance_start(shard_transfer_mode => $1::citus.shard_transfer_mode)::text AS job`,
    [mode],
  );
  const jobId: string | null = started.rows[0]?.job ?? null;
  if (jobId === null) return { jobId, moves: 0, state: "nothing to move" };
  const until = Date.now() + deadlineMs;
  let state = "?";
  for (;;) {
    const job = await db.query(`SELECT state::text AS state FROM pg_dist_background_job WHERE job_id = $1::bigint`, [
      jobId,
    ]);
    state = job.rows[0]?.state ?? "?";
    if (["finished", "failed", "cancelled"].includes(state)) break;
    if (Date.now() > until) throw new Error(`rebalance job ${jobId} still ${state} after ${deadlineMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
  const tasks = await db.query(
    `SELECT count(*)::int AS n FROM pg_dist_background_task WHERE job_id = $1::bigint AND status = 'done'`,
    [jobId],
  );
  if (state !== "finished") throw new Error(`rebalance job ${jobId} ended ${state} after ${tasks.rows[0].n} moves`);
  return { jobId, moves: tasks.rows[0].n, state };
}

/** Shard placements per worker port (distributed tables only). */
export async function placements(db: pg.ClientBase): Promise<Map<number, number>> {
  const r = await db.query(
    `SELECT nodeport AS port, count(DISTINCT shardid)::int AS n FROM citus_shards WHERE citus_table_type = 'distributed' GROUP BY 1 ORDER BY 1`,
  );
  return new Map(r.rows.map((x: any) => [Number(x.port), x.n]));
}

/**
 * What the cluster's nodes logged at WARNING or above (each node's server log under the cluster's
 * folder), as distinct messages with their counts and the first line of each. A coordinator that
 * cannot COMMIT on a worker in a one-phase commit only WARNs (*failed to commit transaction on
 * host:port*, citusdata/citus remote_transaction.c) and answers COMMIT as a success: the client has
 * an acknowledgement for a write the worker never committed. The drill reads these lines so such a
 * loss is named by the database's own words, not only by a missing row.
 */
export async function nodeWarnings(
  dir: string,
): Promise<{ node: string; message: string; count: number; first: string }[]> {
  const out = new Map<string, { node: string; message: string; count: number; first: string }>();
  for (const d of (await readdir(dir).catch(() => [] as string[])).filter((n) => n.startsWith("node-")).sort()) {
    const text = await readFile(path.join(dir, d, "log"), "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      const m = /\b(WARNING|ERROR|FATAL|PANIC):\s+(.*)$/.exec(line);
      if (!m) continue;
      // Numbers (pids, ports, shard ids, xids) vary: one message per shape.
      const message = `${m[1]}: ${m[2]!.replace(/\d+/g, "N").slice(0, 200)}`;
      const key = `${d} ${message}`;
      const seen = out.get(key);
      if (seen) seen.count += 1;
      else out.set(key, { node: d.replace("node-", ":"), message, count: 1, first: line.slice(0, 300) });
    }
  }
  return [...out.values()];
}
