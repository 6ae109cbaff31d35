// A probe, not a test (docs/decisions/scale-out.md, "Shard moves need synchronous_commit on"):
// does a logical shard move keep every acknowledged write? On a running Citus cluster (cluster.sh),
// in database DB (default `exp`, created by `cluster.sh db DIR exp`):
//   node scripts/citus-move-probe.mjs COORD_PORT WORKER_PORT WORKER_PORT on|off [DB]
// sets synchronous_commit (and, with PROBE_WAL_WRITER_DELAY, wal_writer_delay) on both workers,
// creates a one-shard table, inserts a row every 10 ms through the coordinator (autocommit, each
// INSERT's answer is the acknowledgement), moves the shard to the other worker with
// citus_move_shard_placement(force_logical) meanwhile, and prints how many acknowledged rows are
// missing afterwards. Both settings are reset at the end. Measured (Citus 13.2.2, PostgreSQL 15):
// off: 3 of 6 moves lost one row (wal_writer_delay 10s), 1 of 4 (the default 200ms); on: 0 of 6.
import pg from "pg";

const [coord, src, dst] = process.argv.slice(2, 5).map(Number);
const mode = process.argv[5];
const db = process.argv[6] || "exp";
if (!coord || !src || !dst || !["on", "off"].includes(mode)) {
  process.stderr.write("usage: node scripts/citus-move-probe.mjs COORD_PORT WORKER_PORT WORKER_PORT on|off [DB]\n");
  process.exit(2);
}
const url = (port) => `postgresql://postgres@127.0.0.1:${port}/${db}`;
const q = async (port, sql, params) => {
  const c = new pg.Client({ connectionString: url(port) });
  await c.connect();
  try {
    return (await c.query(sql, params)).rows;
  } finally {
    await c.end();
  }
};
const configure = async (settings) => {
  for (const port of [src, dst]) {
    for (const s of settings) await q(port, s);
    await q(port, "SELECT pg_reload_conf()");
  }
};
const delay = process.env.PROBE_WAL_WRITER_DELAY;
await configure([
  `ALTER SYSTEM SET synchronous_commit = ${mode}`,
  ...(delay ? [`ALTER SYSTEM SET wal_writer_delay = '${delay}'`] : []),
]);
try {
  await q(coord, "DROP TABLE IF EXISTS move_probe");
  await q(coord, "CREATE TABLE move_probe (k int PRIMARY KEY)");
  await q(coord, "SELECT create_distributed_table('move_probe', 'k', colocate_with => 'none', shard_count => 1)");
  const [{ shardid }] = await q(coord, "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'move_probe'::regclass");
  const [{ nodeport: from }] = await q(
    coord,
    "SELECT nodeport FROM pg_dist_placement JOIN pg_dist_node USING (groupid) WHERE shardid = $1",
    [shardid],
  );
  const to = from === src ? dst : src;
  const writer = new pg.Client({ connectionString: url(coord) });
  await writer.connect();
  const acked = [];
  let running = true;
  const writes = (async () => {
    for (let k = 1; running && k < 1_000_000; k++) {
      try {
        await writer.query("INSERT INTO move_probe VALUES ($1)", [k]);
        acked.push(k);
      } catch {
        // refused during the switch-over: not acknowledged, not counted
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  await new Promise((r) => setTimeout(r, 1_500));
  const t0 = Date.now();
  await q(
    coord,
    "SELECT citus_move_shard_placement($1, '127.0.0.1', $2, '127.0.0.1', $3, shard_transfer_mode => 'force_logical')",
    [shardid, from, to],
  );
  const moveMs = Date.now() - t0;
  await new Promise((r) => setTimeout(r, 1_000));
  running = false;
  await writes;
  await writer.end();
  const stored = new Set((await q(coord, "SELECT k FROM move_probe")).map((r) => r.k));
  const lost = acked.filter((k) => !stored.has(k));
  process.stdout.write(
    `synchronous_commit=${mode}${delay ? ` wal_writer_delay=${delay}` : ""}: shard ${shardid} :${from} → ` +
      `:${to} in ${moveMs} ms; acked ${acked.length}, stored ${stored.size}, lost ` +
      `${lost.length}${lost.length ? ` (${lost.slice(0, 10).join(", ")})` : ""}\n`,
  );
  await q(coord, "DROP TABLE move_probe");
} finally {
  await configure(["ALTER SYSTEM RESET synchronous_commit", ...(delay ? ["ALTER SYSTEM RESET wal_writer_delay"] : [])]);
}
