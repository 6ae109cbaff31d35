// The test databases of a run on a Citus cluster, reused. Citus copies no database but
// template1, so a file's fresh database is created on every node, given the extension, the workers
// registered, migrated and distributed: seconds a file. Instead, a file's database goes back to the
// run's pool when the file is done, emptied with TRUNCATE, and the next file takes it — but only when
// it is again exactly what a new one would be: its fingerprint (the schema on the coordinator and on
// every worker, the tables' distribution and shard placements, the registered nodes, the database's
// settings and the rows the migrations wrote) equals the one it had when it was made. Anything else —
// a test that moved a shard, dropped a trigger, altered a table, or left a session holding a lock —
// drops it instead (test/db/citus-pool.test.ts shows both).
//
// The pool is a table in the coordinator's "postgres" database (the test files run in processes of
// their own): one row per database the run made, claimed with FOR UPDATE SKIP LOCKED. The run's
// global setup names the run (test/helpers/global-setup.ts) and drops every database of it at the end,
// in use or not.
import pg from "pg";
import { nodeUrl, onNode, type Cluster } from "./cluster.js";

const POOL = "crm_test_citus_pool";

/** What a database of the pool must be again before another file gets it. */
export interface Pristine {
  /** md5 of the schema, distribution, placements, nodes, settings and kept rows (fingerprint below). */
  fingerprint: string;
  /** The tables the migrations left empty: what TRUNCATE empties (the others' rows are in the fingerprint). */
  truncate: string[];
  /** The tables the migrations wrote rows into (the migrations' ledger, the plans). */
  kept: string[];
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end().catch(() => {});
  }
}

const poolUrl = (base: string, cluster: Cluster) => nodeUrl(base, cluster.coordinator, "postgres");
const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Creates the pool's table (once per cluster; concurrent calls are fine). */
export async function preparePool(base: string, cluster: Cluster): Promise<void> {
  await onNode(poolUrl(base, cluster), [
    `SELECT pg_advisory_lock(7245027)`,
    `CREATE TABLE IF NOT EXISTS ${POOL} (run text NOT NULL, name text PRIMARY KEY, free boolean NOT NULL DEFAULT false, pristine jsonb, at timestamptz NOT NULL DEFAULT now())`,
    `SELECT pg_advisory_unlock(7245027)`,
  ]);
}

/** A free database of the run, now taken, or undefined when none is free. */
export async function claim(
  base: string,
  cluster: Cluster,
  run: string,
): Promise<{ name: string; pristine: Pristine } | undefined> {
  return withClient(poolUrl(base, cluster), async (c) => {
    const r = await c.query<{ name: string; pristine: Pristine }>(
      `UPDATE ${POOL} SET free = false, at = now()
        WHERE name = (SELECT name FROM ${POOL} WHERE run = $1 AND free ORDER BY at LIMIT 1 FOR UPDATE SKIP LOCKED)
        RETURNING name, pristine`,
      [run],
    );
    return r.rows[0];
  });
}

/** Records a database the run made (in use), so that the run's end drops it whatever happens. */
export async function register(base: string, cluster: Cluster, run: string, name: string): Promise<void> {
  await withClient(poolUrl(base, cluster), (c) =>
    c.query(`INSERT INTO ${POOL} (run, name) VALUES ($1, $2)`, [run, name]),
  );
}

/** What `url`'s database is now: see the top of the file. */
export async function fingerprint(url: string, kept: string[]): Promise<string> {
  return withClient(url, async (c) => {
    // The same catalog query on every worker (run_command_on_workers: the shards' schema, triggers and
    // functions there), then on the coordinator with the Citus metadata.
    const local = `SELECT md5(coalesce(string_agg(x, E'\\n' ORDER BY x), '')) FROM (
        SELECT format('rel %s %s %s', c.oid::regclass, c.relkind, obj_description(c.oid, 'pg_class')) FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'
        UNION ALL SELECT format('att %s.%s %s %s %s', a.attrelid::regclass, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid))
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped
        UNION ALL SELECT format('trg %s %s %s %s', t.tgrelid::regclass, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid)) FROM pg_trigger t
          JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND NOT t.tgisinternal
        UNION ALL SELECT format('con %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) FROM pg_constraint WHERE connamespace = 'public'::regnamespace
        UNION ALL SELECT format('fn %s %s %s', p.oid::regprocedure, md5(p.prosrc), p.proconfig) FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
        UNION ALL SELECT format('set %s', s.setconfig) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()
      ) f(x)`;
    const workers = await c.query<{ result: string }>(
      `SELECT nodename, nodeport, success, result FROM run_command_on_workers($1) ORDER BY nodename, nodeport`,
      [local],
    );
    const citus = await c.query<{ x: string }>(`SELECT md5(coalesce(string_agg(x, E'\\n' ORDER BY x), '')) AS x FROM (
        SELECT format('dist %s %s %s', logicalrelid::regclass, partmethod, colocationid) FROM pg_dist_partition
        UNION ALL SELECT format('shard %s %s %s', s.logicalrelid::regclass, s.shardminvalue, p.groupid)
          FROM pg_dist_shard s JOIN pg_dist_placement p USING (shardid)
        UNION ALL SELECT format('node %s:%s %s %s %s %s', nodename, nodeport, groupid, isactive, shouldhaveshards,
          noderole) FROM pg_dist_node
        UNION ALL SELECT format('obj %s %s %s', pg_identify_object_as_address(classid, objid, objsubid),
          distribution_argument_index, colocationid) FROM pg_catalog.pg_dist_object
        UNION ALL SELECT format('job %s', count(*)) FROM pg_dist_background_job
          WHERE state NOT IN ('finished', 'cancelled', 'failed')
      ) f(x)`);
    const here = await c.query<{ md5: string }>(local);
    const rows: string[] = [];
    for (const t of kept)
      rows.push(
        (
          await c.query<{ h: string }>(
            `SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY r::text), '')) AS h FROM ${ident(t)} r`,
          )
        ).rows[0]!.h,
      );
    const parts = [here.rows[0]!.md5, citus.rows[0]!.x, ...workers.rows.map((w) => JSON.stringify(w)), ...rows];
    return (await c.query<{ h: string }>(`SELECT md5($1) AS h`, [parts.join("|")])).rows[0]!.h;
  });
}

/** The pristine state of a database just made (migrated and distributed): see Pristine. */
export async function pristineOf(url: string): Promise<Pristine> {
  const tables = await withClient(url, async (c) => {
    const names = (
      await c.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
    ).rows.map((r) => r.name);
    const out: { name: string; empty: boolean }[] = [];
    for (const name of names)
      out.push({ name, empty: (await c.query(`SELECT 1 FROM ${ident(name)} LIMIT 1`)).rowCount === 0 });
    return out;
  });
  const kept = tables.filter((t) => !t.empty).map((t) => t.name);
  return {
    fingerprint: await fingerprint(url, kept),
    truncate: tables.filter((t) => t.empty).map((t) => t.name),
    kept,
  };
}

/**
 * Empties the database (its connections closed) and hands it back to the pool, or drops it when it is
 * no longer what a new one would be (or cannot be emptied within a few seconds: a session left open
 * holds a lock). Returns whether it went back.
 */
export async function release(
  base: string,
  cluster: Cluster,
  run: string,
  name: string,
  url: string,
  pristine: Pristine,
  drop: () => Promise<void>,
): Promise<boolean> {
  let reusable = false;
  try {
    await withClient(url, async (c) => {
      await c.query(`SET lock_timeout = '5s'`);
      await c.query(`TRUNCATE ${pristine.truncate.map(ident).join(", ")}`);
    });
    reusable = (await fingerprint(url, pristine.kept)) === pristine.fingerprint;
  } catch {
    reusable = false;
  }
  if (!reusable) {
    await drop();
    await withClient(poolUrl(base, cluster), (c) => c.query(`DELETE FROM ${POOL} WHERE name = $1`, [name]));
    return false;
  }
  await withClient(poolUrl(base, cluster), (c) =>
    c.query(`UPDATE ${POOL} SET free = true, pristine = $3, at = now() WHERE run = $1 AND name = $2`, [
      run,
      name,
      pristine,
    ]),
  );
  return true;
}

/** Every database of the run (the run's end): their names, their rows gone. */
export async function forget(base: string, cluster: Cluster, run: string): Promise<string[]> {
  return withClient(poolUrl(base, cluster), async (c) =>
    (await c.query<{ name: string }>(`DELETE FROM ${POOL} WHERE run = $1 RETURNING name`, [run])).rows.map(
      (r) => r.name,
    ),
  );
}
