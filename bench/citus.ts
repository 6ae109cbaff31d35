// `BENCH_CITUS=1 npm run bench`: the benchmark's scenarios on a local
// Citus cluster AND on a single PostgreSQL in one run, back to back, and the ratio cluster ÷ single-node
// per scenario.
//   1. Servers: a coordinator and two workers (../shared/citus/cluster.sh, under BENCH_CITUS_DIR) and
//      one plain PostgreSQL 15 server of the same binaries and the same settings (the cluster nodes'
//      postgresql.conf less the citus lines: fsync, synchronous_commit, max_connections, …), so that
//      the ratio measures the distribution and nothing else.
//   2. Datasets: the benchmark's dataset (bench/dataset.ts) loaded into both with the same clock. On
//      the cluster it is loaded into the coordinator's still-plain tables (the loader's
//      `session_replication_role = replica` is a session setting of the coordinator: Citus does not
//      pass it to its connections to the workers, so rows inserted into distributed tables would fire
//      the shards' triggers), then distributed by `npm run db:distribute` (server/db/distribute-cli.ts,
//      which turns the tables' triggers off while Citus copies the rows), the coordinator's local
//      copies truncated, VACUUM ANALYZE (Citus passes it to every shard).
//   3. Checks: both datasets hold the same rows, list counters (summed over slots), changes feed and
//      ticket counters, tenant by tenant; on the cluster, "ListCounter_rebuild" and the changes-feed
//      backfill, run on the distributed schema inside a rolled-back transaction, give the counters
//      and the feed that distribution kept; every scenario answers the same on both services.
//   4. Growth (the list scenarios on every sized tenant) and the matrix (every scenario at each
//      connection count): single-node run, then cluster run, back to back. Database CPU is the CPU of
//      every node's client backends of the benchmark database — on the cluster the coordinator's AND
//      the workers' (the coordinator's connections to them) — including backends that exited during
//      the run (their CPU is read off the postmaster's reaped-children time: the servers are the
//      benchmark's own).
//   5. bench/results/<date>-citus.md (+ .json): the targets (reads ≥ 0.6, writes ≥ 0.5 of single-node,
//      list database ms at the largest size ≤ 1.5× the smallest on the cluster), PASS/FAIL.
import { execFile, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { benchConfig as cfg } from "./config.js";
import { CHANGES_REBUILD, createDataset, reuseDataset, type Dataset } from "./dataset.js";
import { cpuSeconds, memory, serviceCommand, startProcess, waitReady, type Proc } from "./proc.js";
import { commandLine, ensureBuild } from "../scripts/ensure-build.js";
import {
  changesTokens,
  commonReportFields,
  comparable,
  countRoundTrips,
  load,
  prepare,
  send,
  versions,
  writeReport,
  type Run,
} from "./run.js";
import { buildScenarios, type Req, type Scenario } from "./scenarios.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const started = Date.now();
const log = (s: string) =>
  process.stdout.write(`[bench citus ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s] ${s}\n`);
const runId = new Date()
  .toISOString()
  .replace(/[-:.TZ]/g, "")
  .slice(0, 14);
const run = promisify(execFile);

// ---- settings (bench/README.md, "Citus") -------------------------------------------------------------

function ports(name: string, fallback: string): number[] {
  const v = (process.env[name] || fallback).split(",").map((x) => Number(x.trim()));
  if (v.length < 2 || v.some((p) => !Number.isInteger(p) || p < 1 || p > 65535))
    throw new Error(`${name} must be COORDINATOR,WORKER[,WORKER…] ports, got "${process.env[name]}"`);
  return v;
}
function port(name: string, fallback: number): number {
  const v = Number(process.env[name] || fallback);
  if (!Number.isInteger(v) || v < 1 || v > 65535) throw new Error(`${name} must be a port, got "${process.env[name]}"`);
  return v;
}

const citusCfg = {
  dir: process.env.BENCH_CITUS_DIR || path.join(os.tmpdir(), "crm-bench-citus"),
  /** Coordinator, then workers. */
  ports: ports("BENCH_CITUS_PORTS", "9760,9761,9762"),
  singlePort: port("BENCH_CITUS_SINGLE_PORT", 9763),
  script: process.env.BENCH_CITUS_SCRIPT || path.resolve(ROOT, "../shared/citus/cluster.sh"),
  pgBin: process.env.BENCH_PG_BIN || "/usr/lib/postgresql/15/bin",
  shardCount: Number(process.env.BENCH_CITUS_SHARDS || 32),
  /** The single-node service listens on BENCH_SERVICE_PORT, the cluster's on this one. */
  clusterServicePort: port("BENCH_CITUS_SERVICE_PORT", 3903),
  /** The loader's rebuilds re-run on the distributed schema (rolled back) as a check; 0 skips them. */
  rebuildCheck: process.env.BENCH_CITUS_REBUILD_CHECK !== "0",
  /** Seconds of both services idle, to measure the databases' background CPU. */
  idleSeconds: 5,
  /** DATABASE_ROUTING of the cluster's service: "workers" (default) or "coordinator". */
  routing: process.env.BENCH_CITUS_ROUTING === "coordinator" ? "coordinator" : "workers",
};

const TARGET = { read: 0.6, write: 0.5, growth: 1.5 };

// ---- servers -------------------------------------------------------------------------------------------

const asPostgres = (cmd: string) =>
  process.getuid?.() === 0 ? ["su", "postgres", "-s", "/bin/sh", "-c", cmd] : ["/bin/sh", "-c", cmd];

async function shell(argv: string[]): Promise<string> {
  try {
    const { stdout } = await run(argv[0]!, argv.slice(1), { maxBuffer: 16 << 20 });
    return stdout;
  } catch (e) {
    const x = e as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${argv.join(" ")} failed: ${(x.stderr || x.stdout || x.message).trim()}`);
  }
}

const base = (p: number, db = "postgres") => `postgresql://postgres@127.0.0.1:${p}/${db}`;

/** The cluster: coordinator and workers started by cluster.sh (initdb on first use). */
async function startCluster(): Promise<void> {
  if (!existsSync(citusCfg.script))
    throw new Error(`${citusCfg.script} not found (BENCH_CITUS_SCRIPT): the Citus cluster script of ../shared/citus`);
  await shell(["bash", citusCfg.script, "start", citusCfg.dir, ...citusCfg.ports.map(String)]);
}

/**
 * The single node: a plain PostgreSQL server of the same binaries, with the settings cluster.sh gives
 * the cluster's nodes (read from the coordinator's postgresql.conf) less Citus's own.
 */
async function startSingle(): Promise<string> {
  const d = path.join(citusCfg.dir, `single-${citusCfg.singlePort}`);
  if (!existsSync(d)) {
    const conf = readFileSync(path.join(citusCfg.dir, `node-${citusCfg.ports[0]}`, "postgresql.conf"), "utf8").split(
      "\n",
    );
    const from = conf.findLastIndex((l) => /^shared_preload_libraries\s*=\s*'citus'/.test(l));
    if (from < 0) throw new Error("the coordinator's postgresql.conf has no settings block of cluster.sh");
    const same = conf
      .slice(from)
      .filter(
        (l) =>
          /^\w/.test(l) && !/^(shared_preload_libraries|port|listen_addresses|unix_socket_directories|citus\.)/.test(l),
      );
    mkdirSync(d, { recursive: true });
    await shell(["chown", "postgres", d]).catch(() => {});
    await shell(asPostgres(`${citusCfg.pgBin}/initdb -D ${d} -A trust -U postgres >/dev/null`));
    const extra = [
      `port = ${citusCfg.singlePort}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${citusCfg.dir}'`,
      ...same,
    ];
    await shell(
      asPostgres(
        `cat >> ${d}/postgresql.conf <<'CONF'\n# bench/citus.ts: the cluster nodes' settings (cluster.sh) less ` +
          `Citus's\n${extra.join("\n")}\nCONF`,
      ),
    );
  }
  await shell(
    asPostgres(
      `${citusCfg.pgBin}/pg_ctl -D ${d} -l ${d}/log -w status >/dev/null 2>&1 || ${citusCfg.pgBin}/pg_ctl -D ` +
        `${d} -l ${d}/log -w start >/dev/null`,
    ),
  );
  return d;
}

async function stopServers(singleDir: string | undefined) {
  if (singleDir)
    await shell(asPostgres(`${citusCfg.pgBin}/pg_ctl -D ${singleDir} -m fast -w stop >/dev/null`)).catch((e) =>
      log(`stop single: ${(e as Error).message}`),
    );
  await shell(["bash", citusCfg.script, "stop", citusCfg.dir]).catch((e) =>
    log(`stop cluster: ${(e as Error).message}`),
  );
}

async function onNode(url: string, sql: string[]): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (const s of sql) await c.query(s);
  } finally {
    await c.end();
  }
}

const dropEverywhere = (name: string) =>
  Promise.all(citusCfg.ports.map((p) => onNode(base(p), [`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`])));

/** The cluster's database: created on every node with the extension, the workers registered (cluster.sh db). */
async function createClusterDatabase(name: string) {
  await dropEverywhere(name);
  await shell(["bash", citusCfg.script, "db", citusCfg.dir, name]);
}

/** `npm run db:distribute -- --shard-count N` on the coordinator: its JSON document. */
async function distributeCli(url: string): Promise<Record<string, unknown>> {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: url };
  delete env.DIRECT_DATABASE_URL;
  await ensureBuild();
  const r = spawnSync(
    process.execPath,
    commandLine("db:distribute", ["--shard-count", String(citusCfg.shardCount)]).args,
    { cwd: ROOT, env, encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`npm run db:distribute failed (${r.status}): ${(r.stderr || r.stdout).trim()}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

/** Settings and versions of a node, for the report (the same on both sides is the point). */
async function nodeFacts(url: string) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const settings = (
      await c.query<{ name: string; setting: string }>(
        `SELECT name, setting FROM pg_settings WHERE name IN ('server_version','shared_buffers','work_mem',
         'max_connections','fsync','synchronous_commit','full_page_writes','wal_level','jit',
           'max_parallel_workers_per_gather') ORDER BY name`,
      )
    ).rows;
    const citus = (await c.query<{ v: string }>(`SELECT extversion AS v FROM pg_extension WHERE extname = 'citus'`))
      .rows[0]?.v;
    return { ...Object.fromEntries(settings.map((s) => [s.name, s.setting])), citus: citus ?? "none" };
  } finally {
    await c.end();
  }
}

// ---- database CPU of every node ------------------------------------------------------------------------

/** Children's CPU seconds the process has reaped (cutime + cstime of /proc/<pid>/stat). */
function reapedSeconds(pid: number): number {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
    return (Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return 0;
  }
}
function parentPid(pid: number): number {
  const s = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(s.slice(s.lastIndexOf(")") + 2).split(" ")[1]);
}

/**
 * The CPU of the benchmark database's client backends on each node (coordinator and workers; one node
 * for the single server), as bench/run.ts's probe measures one server, plus those that exited during
 * the run: a backend's CPU is added to its postmaster's reaped-children time when it exits, so the
 * delta of that time, less what the earlier snapshot had already counted of the exited backends, is
 * their share (Citus opens extra connections to the workers for some statements and closes them).
 * Snapshot keys: backend pids (unique on this machine), and -1-i for node i's reaped time.
 * `last` holds the split by node of the latest delta.
 */
async function nodesProbe(urls: string[]) {
  const nodes = await Promise.all(
    urls.map(async (url) => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      const own = (await c.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      return { c, postmaster: parentPid(own) };
    }),
  );
  /** The node of each backend seen (a backend that exits is no longer in pg_stat_activity). */
  const nodeOf = new Map<number, number>();
  const probe = {
    last: [] as number[],
    async snapshot(): Promise<Map<number, number>> {
      const m = new Map<number, number>();
      await Promise.all(
        nodes.map(async (n, i) => {
          const rows = (
            await n.c.query<{ pid: number }>(
              `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_type = 'client backend'`,
            )
          ).rows;
          for (const r of rows) {
            m.set(r.pid, cpuSeconds(r.pid));
            nodeOf.set(r.pid, i);
          }
          m.set(-1 - i, reapedSeconds(n.postmaster));
        }),
      );
      return m;
    },
    delta(a: Map<number, number>, b: Map<number, number>): number {
      const byNode = nodes.map(() => 0);
      for (const [pid, v] of b) {
        if (pid < 0) byNode[-1 - pid]! += v - (a.get(pid) ?? v);
        else byNode[nodeOf.get(pid) ?? 0]! += v - (a.get(pid) ?? 0);
      }
      // Exited since `a`: their whole life is in their node's reaped time; what `a` counted of it is not new.
      for (const [pid, v] of a) if (pid >= 0 && !b.has(pid)) byNode[nodeOf.get(pid) ?? 0]! -= v;
      probe.last = byNode;
      return byNode.reduce((s, x) => s + x, 0);
    },
    close: async () => {
      await Promise.all(nodes.map((n) => n.c.end().catch(() => {})));
    },
  };
  return probe;
}

// ---- the two datasets: identical? ----------------------------------------------------------------------

interface Check {
  what: string;
  /** undefined: not checked. */
  ok: boolean | undefined;
  detail: string;
}

/** Per tenant: a fingerprint of each table kept by the disabled triggers (order-free: a sum of row hashes). */
const FINGERPRINTS: Record<string, string> = {
  "list counters (per key, summed over slots; the rebuild version 'v' left out)": `
    SELECT "tenantId"::text AS t, count(*)::text || '/' || sum(hashtextextended(concat_ws('|', "entity", "dim", "value", "n"), 0)::numeric)::text AS f
      FROM (SELECT "tenantId", "entity", "dim", "value", sum("n") AS "n" FROM "ListCounter" WHERE "dim" <> 'v' GROUP BY 1, 2, 3, 4) x GROUP BY 1`,
  "changes feed (ChangeLog rows)": `
    SELECT "tenantId"::text AS t, count(*)::text || '/' || sum(hashtextextended(concat_ws('|', "type", "objectId", "pos", "action", "changedAt"), 0)::numeric)::text AS f
      FROM "ChangeLog" GROUP BY 1`,
  "changes feed heads (ChangeHead)": `SELECT "tenantId"::text AS t, "pos"::text AS f FROM "ChangeHead"`,
  "ticket comment counters": `
    SELECT "tenantId"::text AS t, count(*)::text || '/' || sum("commentCount")::text || '/' || sum("commentChars")::text AS f FROM "Ticket" GROUP BY 1`,
};

async function fingerprints(
  c: pg.Client | pg.PoolClient,
  only?: string[],
): Promise<Record<string, Map<string, string>>> {
  const out: Record<string, Map<string, string>> = {};
  for (const [name, sql] of Object.entries(FINGERPRINTS)) {
    if (only && !only.includes(name)) continue;
    out[name] = new Map((await c.query<{ t: string; f: string }>(sql)).rows.map((r) => [r.t, r.f]));
  }
  return out;
}

function sameMaps(a: Map<string, string>, b: Map<string, string>): string | undefined {
  const keys = new Set([...a.keys(), ...b.keys()]);
  const diff = [...keys].filter((k) => a.get(k) !== b.get(k));
  return diff.length
    ? `${diff.length} of ${keys.size} tenants differ (e.g. ${diff[0]}: ${a.get(diff[0]!) ?? "none"} vs ` +
        `${b.get(diff[0]!) ?? "none"})`
    : undefined;
}

/**
 * Both datasets hold the same rows, counters and feed (the cluster's were distributed after the load
 * with the triggers off); on the cluster, the loader's rebuilds run on the distributed schema (each in
 * a transaction rolled back) and find nothing to change.
 */
async function checkDatasets(single: Dataset, cluster: Dataset, rebuilds: boolean): Promise<Check[]> {
  const checks: Check[] = [];
  const rowsDiff = Object.keys({ ...single.rows, ...cluster.rows }).filter((k) => single.rows[k] !== cluster.rows[k]);
  checks.push({
    what: "rows per table",
    ok: rowsDiff.length === 0,
    detail: rowsDiff.length
      ? rowsDiff.map((k) => `${k} ${single.rows[k]} vs ${cluster.rows[k]}`).join(", ")
      : Object.entries(cluster.rows)
          .map(([k, n]) => `${k} ${n}`)
          .join(", "),
  });
  const a = new pg.Client({ connectionString: single.url });
  const b = new pg.Client({ connectionString: cluster.url });
  await Promise.all([a.connect(), b.connect()]);
  try {
    const fa = await fingerprints(a);
    const fb = await fingerprints(b);
    for (const name of Object.keys(FINGERPRINTS)) {
      const d = sameMaps(fa[name]!, fb[name]!);
      checks.push({
        what: `${name}: cluster (distributed after the load) = single node`,
        ok: !d,
        detail: d ?? `${fb[name]!.size} tenants identical`,
      });
    }
    if (!rebuilds) return checks;
    // "ListCounter_rebuild" per tenant on the distributed schema: the smallest sized tenant, the
    // availability one and a small one (every tenant's counters, the largest included, are compared
    // with the single node's above, which the same function rebuilt there).
    const tenants = [cluster.sized[0]!, cluster.availability, cluster.small[0]!].map((t) => t.id);
    const counters = Object.keys(FINGERPRINTS)[0]!;
    const t0 = Date.now();
    let rebuilt: string | undefined;
    await b.query("BEGIN");
    try {
      for (const id of tenants) await b.query(`SELECT "ListCounter_rebuild"($1::uuid)`, [id]);
      const after = (await fingerprints(b, [counters]))[counters]!;
      const before = fb[counters]!;
      const diff = tenants.filter((id) => after.get(id) !== before.get(id));
      rebuilt = diff.length
        ? `${diff.length} tenants change (e.g. ${diff[0]}: ${before.get(diff[0]!)} → ${after.get(diff[0]!)})`
        : undefined;
    } catch (e) {
      rebuilt = `failed: ${(e as Error).message}`;
    } finally {
      await b.query("ROLLBACK");
    }
    checks.push({
      what: `"ListCounter_rebuild"(tenant) on the cluster's distributed schema = the counters distribution kept`,
      ok: !rebuilt,
      detail:
        rebuilt ??
        `${tenants.length} tenants (${cluster.sized[0]!.label}, availability, one small) rebuilt in ${((Date.now() - t0) / 1000).toFixed(1)} s, nothing changed (rolled back)`,
    });
    // The changes-feed backfill on the distributed schema.
    const t1 = Date.now();
    let fed: string | undefined;
    await b.query("BEGIN");
    try {
      for (const s of CHANGES_REBUILD) await b.query(s);
      const after = await fingerprints(b, Object.keys(FINGERPRINTS).slice(1, 3));
      fed =
        Object.entries(after)
          .map(([name, m]) => sameMaps(fb[name]!, m))
          .filter(Boolean)
          .join("; ") || undefined;
    } catch (e) {
      fed = `failed: ${(e as Error).message}`;
    } finally {
      await b.query("ROLLBACK");
    }
    checks.push({
      what: "changes-feed backfill on the cluster's distributed schema = the feed distribution kept",
      ok: !fed,
      detail: fed ?? `every tenant's feed identical, ${((Date.now() - t1) / 1000).toFixed(1)} s (rolled back)`,
    });
    // The rolled-back rebuilds left dead rows behind.
    await b.query(`VACUUM ANALYZE "ListCounter", "ChangeLog", "ChangeHead"`);
  } finally {
    await Promise.all([a.end(), b.end()]);
  }
  return checks;
}

// ---- answers -------------------------------------------------------------------------------------------

/** A body as compared: the changes feed's token carries the clock of the answer (`at`), left out. */
function normalized(text: string, ignore: string[]): string {
  const c = comparable(text, ignore);
  return c.replace(/"nextSince":"([A-Za-z0-9_-]+)"/g, (_m, tok: string) => {
    const plain = Buffer.from(tok, "base64url")
      .toString("utf8")
      .replace(/^(c1\.\d+\.\d+\.)\d+/, "$1<at>");
    return `"nextSince":"${plain}"`;
  });
}

const ignoredFields = (sc: Scenario) =>
  sc.name === "me"
    ? ["keyPrefix"]
    : sc.name === "post-appointments"
      ? ["id", "createdAt", "updatedAt", "startsAt", "endsAt", "title", "assignedUserId"]
      : sc.write
        ? ["id", "createdAt", "updatedAt"]
        : [];

const describe = (r: Req) => `${r.method} ${r.path}${r.body ? ` ${r.body}` : ""}`;

/** Every scenario's first request to both services: status and body must match (reads first, then writes). */
async function sameAnswers(
  single: Proc,
  cluster: Proc,
  keys: { single: string; cluster: string },
  a: Scenario[],
  b: Scenario[],
) {
  const problems: string[] = [];
  const checked: string[] = [];
  const order = [...a.filter((s) => !s.write), ...a.filter((s) => s.write)];
  for (const sa of order) {
    const sb = b.find((x) => x.name === sa.name)!;
    const ra = sa.next();
    const rb = sa.write ? sb.next() : ra;
    const x = await send(single, sa.key ?? keys.single, ra);
    const y = await send(cluster, sb.key ?? keys.cluster, rb);
    checked.push(sa.name);
    if (x.status !== y.status) {
      problems.push(
        `${sa.name}: ${describe(rb)} → single node ${x.status}, cluster ${y.status}: ${y.text.slice(0, 400)}`,
      );
      continue;
    }
    const p = normalized(x.text, ignoredFields(sa));
    const q = normalized(y.text, ignoredFields(sa));
    if (p !== q) {
      let i = 0;
      while (i < p.length && p[i] === q[i]) i++;
      problems.push(
        `${sa.name}: ${describe(rb)} → bodies differ at ${i}: single …${p.slice(Math.max(0, i - 60), i + 80)}… ` +
          `cluster …${q.slice(Math.max(0, i - 60), i + 80)}…`,
      );
    }
    if (x.status >= 500 || y.status >= 500)
      problems.push(`${sa.name}: ${describe(rb)} → ${y.status} on both: ${y.text.slice(0, 300)}`);
  }
  return { checked, problems };
}

// ---- report --------------------------------------------------------------------------------------------

const f0 = (n: number) => (Number.isFinite(n) ? n.toFixed(0) : "–");
const f2 = (n: number) => (Number.isFinite(n) ? n.toFixed(2) : "–");
const pf = (ok: boolean | undefined) => (ok === undefined ? "–" : ok ? "**PASS**" : "**FAIL**");

export interface CitusRun extends Omit<Run, "target"> {
  target: "single" | "cluster";
  /** Database CPU ms per request by node: [single] or [coordinator, worker…]. */
  dbCpuMsByNode: number[];
}

type Side = "single" | "cluster";

/** Failed requests and logged errors of one side, by phase. */
interface Failure {
  phase: string;
  what: string;
  n: number;
}

interface Pair {
  name: string;
  title: string;
  write: boolean;
  roundTrips: { single: number; cluster: number };
  runs: CitusRun[];
}

interface GrowthPair {
  name: string;
  title: string;
  bySize: Record<string, { single: CitusRun; cluster: CitusRun }>;
}

function targetRows(meta: Record<string, any>, pairs: Pair[], growth: GrowthPair[]) {
  const rows: {
    scenario: string;
    conns: string;
    single: string;
    cluster: string;
    ratio: string;
    target: string;
    ok: boolean | undefined;
  }[] = [];
  for (const p of pairs) {
    for (const c of meta.connections as number[]) {
      const a = p.runs.find((r) => r.target === "single" && r.connections === c);
      const b = p.runs.find((r) => r.target === "cluster" && r.connections === c);
      if (!a || !b) continue;
      const need = p.write ? TARGET.write : TARGET.read;
      const clean = a.non2xx + a.errors + b.non2xx + b.errors === 0;
      const dirty = clean ? "" : ` (non-2xx/errors: single ${a.non2xx}/${a.errors}, cluster ${b.non2xx}/${b.errors})`;
      rows.push({
        scenario: p.title,
        conns: String(c),
        single: f0(a.rps),
        cluster: f0(b.rps),
        ratio: f2(b.rps / a.rps) + dirty,
        target: `≥ ${need}`,
        ok: clean && b.rps / a.rps >= need,
      });
    }
  }
  const sizes: string[] = meta.sizeLabels;
  const lo = sizes[0];
  const hi = sizes[sizes.length - 1];
  const growthRows: { scenario: string; single: string; cluster: string; ok: boolean | undefined }[] = [];
  if (lo && hi && lo !== hi) {
    for (const g of growth) {
      const ca = g.bySize[lo]?.cluster.dbCpuMsPerReq ?? NaN;
      const cb = g.bySize[hi]?.cluster.dbCpuMsPerReq ?? NaN;
      const sa = g.bySize[lo]?.single.dbCpuMsPerReq ?? NaN;
      const sb = g.bySize[hi]?.single.dbCpuMsPerReq ?? NaN;
      // As bench/run.ts: below 0.05 ms/request the backends' CPU is within the clock's resolution.
      const ok = Number.isFinite(ca) && Number.isFinite(cb) ? cb <= TARGET.growth * ca || cb < 0.05 : undefined;
      growthRows.push({
        scenario: g.title,
        cluster: `${f2(cb)} vs ${f2(ca)} ms (${f2(cb / ca)}×)`,
        single: `${f2(sb)} vs ${f2(sa)} ms (${f2(sb / sa)}×)`,
        ok,
      });
    }
  }
  return { rows, growthRows };
}

function report(meta: Record<string, any>, pairs: Pair[], growth: GrowthPair[], checks: Check[]): string {
  const L: string[] = [];
  const { rows, growthRows } = targetRows(meta, pairs, growth);
  const all = [...rows.map((r) => r.ok), ...growthRows.map((r) => r.ok), ...checks.map((c) => c.ok)].filter(
    (x) => x !== undefined,
  );
  const failed = all.filter((x) => x === false).length;
  const sizes: string[] = meta.sizeLabels;
  L.push(`# Citus benchmark — ${meta.date}${meta.label ? ` (${meta.label})` : ""}`, "");
  L.push(
    `Generated by \`BENCH_CITUS=1 npm run bench\` (bench/citus.ts) in ${f0(meta.elapsedSeconds)} s. Raw ` +
      `numbers: \`${meta.jsonFile}\`.`,
    "",
  );
  L.push("## Targets (issue 26, point 5)", "");
  L.push(
    `${all.length - failed} of ${all.length} criteria met. The same scenarios on a Citus ${meta.citus} cluster ` +
      `(a coordinator and ${meta.workers} workers, ${meta.shardCount} shards per distributed table; the ` +
      `cluster's service with DATABASE_ROUTING=${meta.routing ?? "coordinator"}) and on one PostgreSQL server of ` +
      `the same settings, back to back in one run; the matrix on the ${meta.matrixLabel} tenant. Ratio = cluster ` +
      `req/s ÷ single-node req/s. Targets: reads ≥ ${TARGET.read}, writes ≥ ${TARGET.write}.`,
    "",
  );
  L.push(
    "| scenario | conns | single-node req/s | cluster req/s | ratio | target | result |",
    "|---|---:|---:|---:|---:|---|---|",
  );
  for (const r of rows)
    L.push(`| ${r.scenario} | ${r.conns} | ${r.single} | ${r.cluster} | ${r.ratio} | ${r.target} | ${pf(r.ok)} |`);
  L.push("");
  if (growthRows.length) {
    L.push(
      `### List growth on the cluster: database ms/request at ${sizes[sizes.length - 1]} ≤ ${TARGET.growth}× ` +
        `at ${sizes[0]}`,
      "",
    );
    L.push(
      `Database ms = CPU of the client backends of the benchmark database on every node (cluster: coordinator + workers), exited ones included, per request; ${meta.sizeConnections} connections.`,
      "",
    );
    L.push(
      `| scenario | cluster: ${sizes[sizes.length - 1]} vs ${sizes[0]} | single node: ` +
        `${sizes[sizes.length - 1]} vs ${sizes[0]} (for reference) | result (cluster) |`,
      "|---|---|---|---|",
    );
    for (const r of growthRows) L.push(`| ${r.scenario} | ${r.cluster} | ${r.single} | ${pf(r.ok)} |`);
    L.push("");
  }
  L.push("### Correctness", "");
  L.push("| check | detail | result |", "|---|---|---|");
  for (const c of checks) L.push(`| ${c.what} | ${c.detail.replace(/\|/g, "\\|")} | ${pf(c.ok)} |`);
  L.push("");

  L.push("## Setup", "");
  const v = meta.versions;
  L.push(
    `- ${v.cores} cores (${v.cpuModel}), ${v.memGiB} GiB, Linux ${v.kernel}; Node ${v.node}; Redis ${v.redis}; ` +
      `load average (1 min) at start ${f2(meta.loadStart)}, at end ${f2(meta.loadEnd)}.`,
  );
  L.push(
    `- Cluster: ../shared/citus/cluster.sh, coordinator :${meta.ports[0]}, workers ` +
      `:${meta.ports.slice(1).join(", :")} (all on this machine: they share its cores with the service, Redis ` +
      `and autocannon). Single node: one PostgreSQL server :${meta.singlePort}, same binaries.`,
  );
  L.push("- Node settings (the same on every server but Citus itself):", "");
  const keys = Object.keys(meta.nodes.single as Record<string, string>);
  L.push(`  | setting | single node | coordinator | workers |`, `  |---|---|---|---|`);
  for (const k of keys)
    L.push(`  | ${k} | ${meta.nodes.single[k]} | ${meta.nodes.coordinator[k]} | ${meta.nodes.worker[k]} |`);
  L.push("");
  L.push(
    meta.loadSeconds.single > 0
      ? `- Datasets (one clock): single node ${f0(meta.loadSeconds.single)} s (${Object.entries(meta.phases.single)
          .map(([k, x]) => `${k} ${f2(x as number)} s`)
          .join(", ")}); cluster ${f0(meta.loadSeconds.cluster)} s (${Object.entries(meta.phases.cluster)
          .map(([k, x]) => `${k} ${f2(x as number)} s`)
          .join(
            ", ",
          )}). The cluster's rows are loaded into the coordinator's plain tables with the triggers off (as on one server), then distributed by \`npm run db:distribute -- --shard-count ${meta.shardCount}\` (its triggers off while Citus copies the rows), the coordinator's local copies truncated (\`truncate_local_data_after_distributing_table\`), then VACUUM ANALYZE.`
      : "- Datasets: kept databases, reused (BENCH_REUSE_DB=1).",
  );
  if (meta.distribute) L.push(`- \`db:distribute\`: \`${JSON.stringify(meta.distribute)}\``);
  for (const t of meta.tenants as { label: string; size: Record<string, number> }[])
    L.push(
      `  - the ${t.label} tenant: ${t.size.leads} leads, ${t.size.contacts} contacts, ${t.size.conversations} ` +
        `conversations × ${t.size.messagesPer} messages, ${t.size.appointments} appointments, ` +
        `${t.size.tickets} tickets`,
    );
  L.push(`  - the availability worst case (issue 12) and 50 small tenants.`);
  L.push(
    `- Service: \`${meta.serviceLabel}\`, one per side (single node :${meta.servicePorts.single}, cluster ` +
      `:${meta.servicePorts.cluster}), NODE_ENV=production, LOG_LEVEL=warn, BENCH_COUNT_QUERIES=1; both idle but for the side being measured (their background steps — the changes sequencer every second, the sweeps — run on both).`,
  );
  if (meta.idle?.cluster?.length)
    L.push(
      `- Background database CPU, both services running and no request (${meta.idleSeconds} s): single node ` +
        `${meta.idle.single.map(f2).join(" + ")} ms/s; cluster ` +
        `${meta.idle.cluster.map(f2).join(" + ")} ms/s (coordinator + workers: the services' sequencer step every second and sweeps, Citus's maintenance). It is part of every run's DB ms/req (over the run's requests).`,
    );
  L.push(
    `- Growth: each list scenario on each sized tenant, ${meta.sizeDuration} s at ` +
      `${meta.sizeConnections} connections after a 1 s warm-up, single node then cluster.`,
  );
  L.push(
    `- Matrix: each (scenario, connections) run ${meta.duration} s after a ` +
      `${meta.warmup} s warm-up per scenario and side; autocannon over loopback, pipelining 1; single node then cluster, back to back. Reads run before writes.`,
  );
  L.push(
    `- Round trips: statements the service sends per request (to the single server / to the coordinator). CPU ` +
      `ms/req: the service process. DB ms/req: client backends of the benchmark database on every node, exited ` +
      `ones included (the postmasters' reaped-children time); cluster = coordinator + workers.`,
  );
  L.push("");

  L.push(`## Matrix (${meta.matrixLabel} tenant)`, "");
  L.push(
    "| scenario | conns | single req/s | cluster req/s | ratio | p50 ms single / cluster | p99 ms single / " +
      "cluster | DB ms/req single / cluster (coordinator + workers) | service CPU ms/req single / cluster | " +
      "round trips single / cluster | non-2xx single / cluster |",
  );
  L.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const p of pairs)
    for (const c of meta.connections as number[]) {
      const a = p.runs.find((r) => r.target === "single" && r.connections === c);
      const b = p.runs.find((r) => r.target === "cluster" && r.connections === c);
      if (!a || !b) continue;
      const split =
        b.dbCpuMsByNode.length > 1
          ? ` (${f2(b.dbCpuMsByNode[0]!)} + ${b.dbCpuMsByNode.slice(1).map(f2).join(" + ")})`
          : "";
      L.push(
        `| ${p.title} | ${c} | ${f0(a.rps)} | ${f0(b.rps)} | **${f2(b.rps / a.rps)}** | ${f2(a.p50)} / ` +
          `${f2(b.p50)} | ${f2(a.p99)} / ${f2(b.p99)} | ${f2(a.dbCpuMsPerReq)} / ${f2(b.dbCpuMsPerReq)}${split} ` +
          `| ${f2(a.cpuMsPerReq)} / ${f2(b.cpuMsPerReq)} | ${f2(p.roundTrips.single)} / ` +
          `${f2(p.roundTrips.cluster)} | ${a.non2xx} / ${b.non2xx} |`,
      );
    }
  L.push("");
  if (growth.length) {
    L.push("## Growth with the tenant's size", "");
    L.push(`${meta.sizeConnections} connections. DB = database ms per request (cluster: coordinator + workers).`, "");
    L.push(
      `| scenario | ${sizes.map((x) => `DB ms ${x} single / cluster`).join(" | ")} | ` +
        `${sizes.map((x) => `req/s ${x} single / cluster (ratio)`).join(" | ")} |`,
    );
    L.push(`|---|${sizes.map(() => "---:").join("|")}|${sizes.map(() => "---:").join("|")}|`);
    for (const g of growth)
      L.push(
        `| ${g.title} | ${sizes.map((x) => `${f2(g.bySize[x]?.single.dbCpuMsPerReq ?? NaN)} / ${f2(g.bySize[x]?.cluster.dbCpuMsPerReq ?? NaN)}`).join(" | ")} | ${sizes
          .map((x) => {
            const s = g.bySize[x];
            return s ? `${f0(s.single.rps)} / ${f0(s.cluster.rps)} (${f2(s.cluster.rps / s.single.rps)})` : "–";
          })
          .join(" | ")} |`,
      );
    L.push("");
  }
  const fl = (["single", "cluster"] as const).filter((x) => meta.failures[x].length);
  if (fl.length) {
    L.push("## Failed requests and logged errors", "");
    L.push("| side | phase | what | count |", "|---|---|---|---:|");
    for (const x of fl)
      for (const f of meta.failures[x] as Failure[])
        L.push(`| ${x} | ${f.phase} | ${f.what.replace(/\|/g, "\\|")} | ${f.n} |`);
    L.push("");
  }
  L.push(
    "> **Noise.** Every node of the cluster, the single server, both services, Redis and autocannon share this " +
      "machine's cores: a coordinator hop costs a round trip AND the coordinator's CPU on the same cores, so the " +
      "ratio is the honest figure, not the absolute req/s.",
    "",
  );
  return L.join("\n");
}

// ---- main ----------------------------------------------------------------------------------------------

function serviceEnv(url: string, servicePort: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: url,
    REDIS_URL: cfg.redisUrl,
    PORT: String(servicePort),
    HOST: "127.0.0.1",
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL || "warn",
    NODE_ENV: "production",
    NO_DEMO: "1",
    BENCH_COUNT_QUERIES: "1",
  };
  delete env.DIRECT_DATABASE_URL;
  return env;
}

const workerUrls = (db: string) => citusCfg.ports.slice(1).map((p) => base(p, db));

export async function citusMain(): Promise<void> {
  if (!Number.isInteger(citusCfg.shardCount) || citusCfg.shardCount < 1)
    throw new Error(`BENCH_CITUS_SHARDS must be a positive integer, got "${process.env.BENCH_CITUS_SHARDS}"`);
  log(
    `Citus set: cluster under ${citusCfg.dir} (coordinator :${citusCfg.ports[0]}, workers ` +
      `:${citusCfg.ports.slice(1).join(", :")}), single node :${citusCfg.singlePort}`,
  );
  await startCluster();
  let singleDir: string | undefined;
  const singleBase = base(citusCfg.singlePort);
  const coordBase = base(citusCfg.ports[0]!);
  const dbName = cfg.dbName;
  const pairs: Pair[] = [];
  const growth: GrowthPair[] = [];
  let checks: Check[] = [];
  let single: Proc | undefined;
  let cluster: Proc | undefined;
  let probes:
    | { single: Awaited<ReturnType<typeof nodesProbe>>; cluster: Awaited<ReturnType<typeof nodesProbe>> }
    | undefined;
  let dsSingle: Dataset | undefined;
  let dsCluster: Dataset | undefined;
  let distributed: Record<string, unknown> | undefined;
  let v: Awaited<ReturnType<typeof versions>> | undefined;
  let nodes: Record<string, Record<string, string>> = {};
  const serviceHwm = { single: NaN, cluster: NaN };
  const failures: Record<Side, Failure[]> = { single: [], cluster: [] };
  const idle: Record<Side, number[]> = { single: [], cluster: [] };
  const loadStart = os.loadavg()[0]!;
  const svc = await serviceCommand(log, cfg.nodeFlags);
  try {
    singleDir = await startSingle();
    v = await versions(singleBase);
    log(`${v.cores} cores, Node ${v.node}, PostgreSQL ${v.postgres}, Redis ${v.redis}; load ${loadStart.toFixed(2)}`);
    const matrixSize = cfg.matrixSize ?? cfg.sizes[cfg.sizes.length - 1]!;
    const anchor = new Date(Math.floor(Date.now() / 1000) * 1000);
    const common = { dbName, sizes: cfg.sizes, matrixSize, anchor };
    if (cfg.reuseDb) {
      dsSingle = await reuseDataset({ ...common, pgBase: singleBase });
      dsCluster = await reuseDataset({ ...common, pgBase: coordBase });
    } else {
      log("dataset on the single node");
      dsSingle = await createDataset({ ...common, pgBase: singleBase, log: (s) => log(`single: ${s}`) });
      log(`single node ready in ${dsSingle.loadSeconds.toFixed(1)} s: ${JSON.stringify(dsSingle.phases)}`);
      log("dataset on the cluster (loaded into the coordinator's plain tables, then distributed)");
      dsCluster = await createDataset({
        ...common,
        pgBase: coordBase,
        log: (s) => log(`cluster: ${s}`),
        createDatabase: () => createClusterDatabase(dbName),
        afterLoad: async (url, phases) => {
          const t0 = Date.now();
          log("cluster: npm run db:distribute");
          distributed = await distributeCli(url);
          phases["db:distribute"] = (Date.now() - t0) / 1000;
          log(`cluster: distributed in ${phases["db:distribute"].toFixed(1)} s: ${JSON.stringify(distributed)}`);
          const t1 = Date.now();
          // Citus leaves the rows it copied in the coordinator's tables (unused): removed.
          await onNode(url, [
            `SELECT truncate_local_data_after_distributing_table(logicalrelid) FROM pg_dist_partition`,
          ]);
          phases["truncate the coordinator's local copies"] = (Date.now() - t1) / 1000;
        },
      });
      log(`cluster ready in ${dsCluster.loadSeconds.toFixed(1)} s: ${JSON.stringify(dsCluster.phases)}`);
    }
    nodes = {
      single: await nodeFacts(dsSingle.url),
      coordinator: await nodeFacts(dsCluster.url),
      worker: await nodeFacts(workerUrls(dbName)[0]!),
    };
    log("checking the datasets: rows, counters and feed on both; the rebuilds on the distributed schema");
    checks = cfg.reuseDb
      ? [
          {
            what: "datasets identical on both sides",
            ok: undefined,
            detail: "not checked: reused databases (BENCH_REUSE_DB=1) hold each side's writes of earlier runs",
          },
        ]
      : await checkDatasets(dsSingle, dsCluster, citusCfg.rebuildCheck);
    for (const c of checks) log(`  ${c.ok === undefined ? "–   " : c.ok ? "ok  " : "FAIL"} ${c.what}: ${c.detail}`);

    let phase = "start";
    const noteFailure = (target: Side, what: string) => {
      const f = failures[target].find((x) => x.phase === phase && x.what === what);
      if (f) f.n++;
      else if (failures[target].length < 200) failures[target].push({ phase, what, n: 1 });
    };
    single = startProcess({
      name: "service (single node)",
      cwd: ROOT,
      port: cfg.servicePort,
      args: svc.args,
      env: serviceEnv(dsSingle.url, cfg.servicePort),
    });
    // The cluster's service sends each tenant's statements to its worker (DATABASE_ROUTING=workers,
    // server/db/routing.ts) unless BENCH_CITUS_ROUTING=coordinator.
    cluster = startProcess({
      name: "service (cluster)",
      cwd: ROOT,
      port: citusCfg.clusterServicePort,
      args: svc.args,
      env: { ...serviceEnv(dsCluster.url, citusCfg.clusterServicePort), DATABASE_ROUTING: citusCfg.routing },
    });
    // Every error the services log (a 5xx, a failed background step), by the phase it came in.
    for (const [target, p] of [
      ["single", single],
      ["cluster", cluster],
    ] as const) {
      let buf = "";
      p.child.stderr!.on("data", (d: Buffer) => {
        buf += d.toString();
        for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (!line.startsWith("{")) continue;
          try {
            const j = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
            if ((j.level ?? 0) >= 50)
              noteFailure(target, `logged: ${j.msg ?? ""}${j.err?.message ? `: ${j.err.message.split("\n")[0]}` : ""}`);
          } catch {
            /* not a log line */
          }
        }
      });
    }
    await Promise.all([waitReady(single, "/readyz"), waitReady(cluster, "/readyz")]);
    log(`services ready: single node pid ${single.pid}, cluster pid ${cluster.pid}`);
    probes = {
      single: await nodesProbe([dsSingle.url]),
      cluster: await nodesProbe([dsCluster.url, ...workerUrls(dbName)]),
    };
    // Background database CPU: both services running, no request.
    phase = "idle";
    const idle0 = await Promise.all([probes.single.snapshot(), probes.cluster.snapshot()]);
    await new Promise((r) => setTimeout(r, citusCfg.idleSeconds * 1000));
    const idle1 = await Promise.all([probes.single.snapshot(), probes.cluster.snapshot()]);
    probes.single.delta(idle0[0], idle1[0]);
    idle.single = probes.single.last.map((x) => (x * 1000) / citusCfg.idleSeconds);
    probes.cluster.delta(idle0[1], idle1[1]);
    idle.cluster = probes.cluster.last.map((x) => (x * 1000) / citusCfg.idleSeconds);
    log(
      `idle database CPU: single ${idle.single.map((x) => x.toFixed(1)).join(" + ")} ms/s, cluster ` +
        `${idle.cluster.map((x) => x.toFixed(1)).join(" + ")} ms/s`,
    );

    const sides = () => [
      { target: "single" as const, proc: single!, ds: dsSingle!, probe: probes!.single },
      { target: "cluster" as const, proc: cluster!, ds: dsCluster!, probe: probes!.cluster },
    ];
    const prepA = await prepare(single, dsSingle, dsSingle.big);
    const prepB = await prepare(cluster, dsCluster, dsCluster.big);
    // Each side its own scenarios: its own Idempotency-Keys and appointment slots.
    const pick = (xs: Scenario[]) => xs.filter((s) => !cfg.only || cfg.only.has(s.name));
    const scA = pick(buildScenarios(dsSingle, dsSingle.big, prepA, `${runId}-s`));
    const scB = pick(buildScenarios(dsCluster, dsCluster.big, prepB, `${runId}-c`));
    phase = "answer check";
    const answers = await sameAnswers(
      single,
      cluster,
      { single: dsSingle.big.key, cluster: dsCluster.big.key },
      scA,
      scB,
    );
    checks.push({
      what:
        "every scenario answers the same on the cluster as on the single node (status and body; reads byte for " +
        "byte, writes but for ids and clocks)",
      ok: answers.problems.length === 0,
      detail: answers.problems.length ? answers.problems.join("; ") : `${answers.checked.length} scenarios identical`,
    });
    log(
      answers.problems.length
        ? `ANSWERS DIFFER: ${answers.problems.join("; ")}`
        : `answers identical for ${answers.checked.join(", ")}`,
    );
    // The answer check's creates moved both feeds on.
    Object.assign(prepA.changes, await changesTokens(dsSingle, dsSingle.big));
    Object.assign(prepB.changes, await changesTokens(dsCluster, dsCluster.big));

    type S = ReturnType<typeof sides>[number];
    const statuses = (target: Side, st: Record<string, number>) => {
      for (const [code, n] of Object.entries(st))
        if (!/^2/.test(code)) for (let k = 0; k < n; k++) noteFailure(target, `status ${code}`);
    };
    const measure = async (
      side: S,
      key: string,
      sc: Scenario,
      conns: number,
      seconds: number,
      what: string,
    ): Promise<CitusRun> => {
      phase = what;
      const r = await load(side.proc, key, sc, conns, seconds, side.probe);
      statuses(side.target, r.statuses);
      if (r.errors) noteFailure(side.target, `${r.errors} connection errors/timeouts`);
      const total = side.probe.last.reduce((s, x) => s + x, 0);
      return {
        target: side.target,
        ...r,
        dbCpuMsByNode: side.probe.last.map((x) => (total > 0 ? (x / total) * r.dbCpuMsPerReq : NaN)),
      };
    };
    /** A warm-up: not measured, but its failures are recorded. */
    const unmeasured = async (side: S, key: string, sc: Scenario, conns: number, seconds: number, what: string) => {
      phase = what;
      const r = await load(side.proc, key, sc, conns, seconds, undefined);
      statuses(side.target, r.statuses);
      if (r.errors) noteFailure(side.target, `${r.errors} connection errors/timeouts`);
    };
    const counted = async (side: S, key: string, sc: Scenario, n: number, what: string) => {
      phase = what;
      const r = await countRoundTrips(side.proc, key, sc, n);
      statuses(side.target, r.statuses);
      return r.perRequest;
    };

    // 1. Growth: the list scenarios on each sized tenant, single node then cluster.
    for (let i = 0; i < dsSingle.sized.length; i++) {
      const per = await Promise.all(
        sides().map(async (s) => {
          const t = s.ds.sized[i]!;
          const prep = t === s.ds.big ? (s.target === "single" ? prepA : prepB) : await prepare(s.proc, s.ds, t);
          return {
            ...s,
            t,
            scenarios: pick(buildScenarios(s.ds, t, prep, `${runId}-${s.target[0]}`)).filter((x) => x.growth),
          };
        }),
      );
      for (const sc of per[0]!.scenarios) {
        let g = growth.find((x) => x.name === sc.name);
        if (!g) {
          g = { name: sc.name, title: sc.title.replace(/\(half the leads\)/, "(half)"), bySize: {} };
          growth.push(g);
        }
        const got: Partial<Record<"single" | "cluster", CitusRun>> = {};
        for (const s of per) {
          const own = s.scenarios.find((x) => x.name === sc.name)!;
          const what = `growth ${s.t.label} ${sc.name}`;
          await counted(s, s.t.key, own, Math.min(5, cfg.countRequests), `${what} (round-trip count)`);
          await unmeasured(s, s.t.key, own, cfg.sizeConnections, 1, `${what} (warm-up)`);
          got[s.target] = await measure(
            s,
            s.t.key,
            own,
            cfg.sizeConnections,
            cfg.sizeDuration,
            `${what} @${cfg.sizeConnections}`,
          );
        }
        g.bySize[per[0]!.t.label] = { single: got.single!, cluster: got.cluster! };
        log(
          `growth ${per[0]!.t.label} ${sc.name}: single ${got.single!.rps.toFixed(0)} req/s db ` +
            `${got.single!.dbCpuMsPerReq.toFixed(2)} ms | cluster ${got.cluster!.rps.toFixed(0)} req/s db ` +
            `${got.cluster!.dbCpuMsPerReq.toFixed(2)} ms (coordinator ` +
            `${got.cluster!.dbCpuMsByNode[0]!.toFixed(2)}) → ${(got.cluster!.rps / got.single!.rps).toFixed(2)}; ` +
            `non-2xx ${got.single!.non2xx} / ${got.cluster!.non2xx}`,
        );
      }
    }

    // 2. The matrix on the matrix tenant: every scenario at each connection count, single node then cluster.
    const ordered = [...scA.filter((s) => !s.write), ...scA.filter((s) => s.write)];
    for (const sa of ordered) {
      const sb = scB.find((x) => x.name === sa.name)!;
      const own = (t: "single" | "cluster") => (t === "single" ? sa : sb);
      const rt: Record<string, number> = {};
      const keyOf = (s: S) => own(s.target).key ?? s.ds.big.key;
      for (const s of sides())
        rt[s.target] = await counted(s, keyOf(s), own(s.target), cfg.countRequests, `${sa.name} (round-trip count)`);
      const pair: Pair = {
        name: sa.name,
        title: sa.title,
        write: sa.write,
        roundTrips: { single: rt.single!, cluster: rt.cluster! },
        runs: [],
      };
      log(`${sa.title}: ${rt.single!.toFixed(1)} / ${rt.cluster!.toFixed(1)} round trips/request (single / cluster)`);
      if (cfg.warmup > 0)
        for (const s of sides()) await unmeasured(s, keyOf(s), own(s.target), 8, cfg.warmup, `${sa.name} (warm-up @8)`);
      for (const c of cfg.connections) {
        const got: CitusRun[] = [];
        for (const s of sides())
          got.push(await measure(s, keyOf(s), own(s.target), c, cfg.duration, `${sa.name} @${c}`));
        pair.runs.push(...got);
        const [a, b] = got as [CitusRun, CitusRun];
        log(
          `  ${String(c).padStart(2)} conns: single ${a.rps.toFixed(0)} req/s p99 ${a.p99.toFixed(2)} ms db ` +
            `${a.dbCpuMsPerReq.toFixed(2)} | cluster ${b.rps.toFixed(0)} req/s p99 ${b.p99.toFixed(2)} ms db ` +
            `${b.dbCpuMsPerReq.toFixed(2)} (${b.dbCpuMsByNode.map((x) => x.toFixed(2)).join(" + ")}) → ratio ` +
            `${(b.rps / a.rps).toFixed(2)}`,
        );
        for (const r of got)
          if (r.non2xx > 0 || r.errors > 0)
            log(`  ${r.target}: non-2xx ${JSON.stringify(r.statuses)} errors ${r.errors}`);
      }
      pairs.push(pair);
    }
    phase = "end";
    serviceHwm.single = memory(single.pid).hwm;
    serviceHwm.cluster = memory(cluster.pid).hwm;
  } finally {
    await probes?.single.close();
    await probes?.cluster.close();
    await Promise.all([single?.stop(), cluster?.stop()]);
    if (!cfg.keepDb && !cfg.reuseDb) {
      await onNode(singleBase, [`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`]).catch((e) =>
        log(`drop failed: ${e.message}`),
      );
      await dropEverywhere(dbName).catch((e) => log(`drop failed: ${e.message}`));
    }
    await stopServers(singleDir);
    if ((pairs.length || growth.length || checks.length) && v && dsSingle && dsCluster) {
      const date = new Date().toISOString().slice(0, 10);
      const out = cfg.out ?? path.join(ROOT, "bench/results", `${date}-citus.md`);
      const jsonFile = out.replace(/\.md$/, ".json");
      mkdirSync(path.dirname(out), { recursive: true });
      const meta = {
        ...commonReportFields({ date, runId, started, versions: v, loadStart, ds: dsCluster, serviceLabel: svc.label }),
        nodes,
        citus: nodes.coordinator?.citus,
        workers: citusCfg.ports.length - 1,
        ports: citusCfg.ports,
        singlePort: citusCfg.singlePort,
        shardCount: (distributed?.shardCount as number | undefined) ?? citusCfg.shardCount,
        routing: citusCfg.routing,
        distribute: distributed,
        loadSeconds: { single: dsSingle.loadSeconds, cluster: dsCluster.loadSeconds },
        phases: { single: dsSingle.phases, cluster: dsCluster.phases },
        servicePorts: { single: cfg.servicePort, cluster: citusCfg.clusterServicePort },
        serviceHwm,
        targets: TARGET,
        idle,
        idleSeconds: citusCfg.idleSeconds,
        failures,
        jsonFile: path.relative(ROOT, jsonFile),
      };
      for (const side of ["single", "cluster"] as const) {
        const n = failures[side].reduce((a, f) => a + f.n, 0);
        checks.push({
          what: `no failed request and no error logged by the ${side === "single" ? "single node's" : "cluster's"} service (every phase: counts, warm-ups, runs, background)`,
          ok: n === 0,
          detail: n
            ? `${n}: ${failures[side]
                .slice(0, 8)
                .map((f) => `${f.phase}: ${f.what} ×${f.n}`)
                .join("; ")}`
            : "none",
        });
      }
      writeFileSync(jsonFile, `${JSON.stringify({ meta, checks, growth, pairs }, null, 2)}\n`);
      writeReport(out, report(meta, pairs, growth, checks));
      log(`results: ${path.relative(ROOT, out)} (${((Date.now() - started) / 1000).toFixed(0)} s in all)`);
    }
  }
}
