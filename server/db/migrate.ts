// The project's own migrator for Prisma Migrate's folder layout
// (prisma/migrations/<ts>_<name>/migration.sql): applies pending migrations in order, each in its
// own transaction, and records them. Concurrent runs are serialized by a transaction-level advisory
// lock taken first in every migration transaction (no session state: it also works through a
// transaction-pooling PgBouncer, although migrations are meant to go through DIRECT_DATABASE_URL).
//
// Database functions have one current source each, prisma/functions/<name>.sql (one CREATE OR
// REPLACE FUNCTION, and its COMMENT): after the migrations, in one more transaction under the same
// lock, every file whose text differs from the one recorded (`functions/<name>.sql` in
// "_app_migrations") is applied and recorded, and the functions named in prisma/functions/retired.txt
// are dropped. The migrations keep the bodies they had when they ran (history); the files are what
// the database runs today (test/db/schema.test.ts compares each function's body with its file).
// A migration that needs a function before its own statements run (a trigger's function) names it in
// a line `-- apply: functions/<name>.sql`: that file's current text is applied (and recorded) first, in
// the migration's transaction, so that no migration holds a copy of a function's body.
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { openPostgres, type Database, type SqlRunner } from "./client.js";
import { fromRoot } from "../root.js";

export const MIGRATIONS_DIR = fromRoot("prisma", "migrations");
export const FUNCTIONS_DIR = fromRoot("prisma", "functions");
const LOCK_ID = 7_245_001; // arbitrary, constant for this application

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();
  return Promise.all(
    entries.map(async (name) => {
      const sql = await readFile(path.join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
}

/** The current source of each database function (prisma/functions/*.sql), by file, and the retired names. */
export async function readFunctions(dir = FUNCTIONS_DIR): Promise<{ files: Migration[]; retired: string[] }> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return { files: [], retired: [] };
    throw e;
  }
  const files = await Promise.all(
    names
      .filter((n) => n.endsWith(".sql"))
      .map(async (n) => {
        const sql = await readFile(path.join(dir, n), "utf8");
        return { name: `functions/${n}`, sql, checksum: createHash("sha256").update(sql).digest("hex") };
      }),
  );
  const retired = names.includes("retired.txt")
    ? (await readFile(path.join(dir, "retired.txt"), "utf8"))
        .split("\n")
        .map((l) => l.replace(/#.*$/, "").trim())
        .filter(Boolean)
    : [];
  return { files, retired };
}

/**
 * The statements of a migration's SQL, split by PostgreSQL's own parser (libpg-query: quotes, dollar
 * quotes, comments and semicolons inside function bodies are what PostgreSQL says they are). Loaded
 * only when a migration is applied.
 */
export async function splitStatements(sql: string): Promise<string[]> {
  const { loadModule, parseSync } = await import("libpg-query");
  await loadModule();
  const bytes = Buffer.from(sql, "utf8");
  const { stmts } = parseSync(sql) as { stmts?: { stmt_location?: number; stmt_len?: number }[] };
  return (stmts ?? [])
    .map((x) => {
      const at = x.stmt_location ?? 0;
      return bytes
        .subarray(at, x.stmt_len ? at + x.stmt_len : bytes.length)
        .toString("utf8")
        .trim();
    })
    .filter(Boolean);
}

// Within one process, runs on one runner are serialized too (the embedded PGlite has a single
// session, on which the advisory lock would be re-entrant).
const inProcess = new WeakMap<SqlRunner, Promise<unknown>>();

/** Applies pending migrations; returns the names applied by this call. */
export async function migrate(sql: SqlRunner, dir = MIGRATIONS_DIR): Promise<string[]> {
  const previous = inProcess.get(sql) ?? Promise.resolve();
  const run = previous.catch(() => {}).then(() => migrateLocked(sql, dir));
  inProcess.set(sql, run);
  return run;
}

/**
 * Applies the migrations through the direct database URL (DIRECT_DATABASE_URL, which defaults to
 * DATABASE_URL) when it differs from the one `db` was opened with: DDL does not belong in a
 * transaction-pooling PgBouncer (its server connections may carry a statement timeout, and a
 * migration may need to run outside a transaction).
 */
export async function migrateDirect(
  cfg: { databaseUrl?: string; directDatabaseUrl?: string },
  db: Database,
): Promise<string[]> {
  if (db.kind !== "postgres" || !cfg.directDatabaseUrl || cfg.directDatabaseUrl === cfg.databaseUrl)
    return migrate(db.sql);
  const direct = await openPostgres(cfg.directDatabaseUrl, { max: 1 });
  try {
    return await migrate(direct.sql);
  } finally {
    await direct.close();
  }
}

/**
 * One transaction per migration, each starting with the lock: BEGIN → pg_advisory_xact_lock →
 * read what is applied → apply the next pending migration and record it → COMMIT, until none is
 * pending. A concurrent run waits on the lock and then sees the migration as applied.
 */
async function migrateLocked(sql: SqlRunner, dir: string): Promise<string[]> {
  const migrations = await readMigrations(dir);
  const functions = await readFunctions(dir === MIGRATIONS_DIR ? FUNCTIONS_DIR : path.join(dir, "..", "functions"));
  const done: string[] = [];
  for (let i = 0; i <= migrations.length; i++) {
    const applied = await inMigration(sql, async (s) => {
      const rows = await s.query<{ name: string; checksum: string }>(
        `SELECT "name", "checksum" FROM "_app_migrations"`,
      );
      const seen = new Map(rows.map((r) => [r.name, r.checksum]));
      for (const m of migrations) {
        const checksum = seen.get(m.name);
        if (checksum !== undefined && checksum !== m.checksum)
          throw new Error(`migration ${m.name} was changed after it was applied`);
      }
      const next = migrations.find((m) => !seen.has(m.name));
      if (next) {
        for (const f of appliedBy(next, functions.files)) {
          await applyStatements(s, f);
          await recordFunction(s, f);
        }
        await applyStatements(s, next);
        await s.query(`INSERT INTO "_app_migrations" ("name", "checksum") VALUES ($1, $2)`, [next.name, next.checksum]);
      }
      return next?.name;
    });
    if (!applied) break;
    done.push(applied);
  }
  // The functions' current sources: those changed since recorded, then the retired ones dropped.
  const changed = await inMigration(sql, async (s) => {
    const rows = await s.query<{ name: string; checksum: string }>(
      `SELECT "name", "checksum" FROM "_app_migrations" WHERE "name" LIKE 'functions/%'`,
    );
    const seen = new Map(rows.map((r) => [r.name, r.checksum]));
    const todo = functions.files.filter((f) => seen.get(f.name) !== f.checksum);
    for (const f of todo) {
      await applyStatements(s, f);
      await recordFunction(s, f);
    }
    const [{ present } = { present: [] as string[] }] = await s.query<{ present: string[] }>(
      `SELECT coalesce(array_agg(p.oid::regprocedure::text), '{}') AS present FROM pg_proc p JOIN pg_namespace n
       ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.proname = ANY($1::text[])`,
      [functions.retired],
    );
    for (const fn of present) await s.exec(`DROP FUNCTION ${fn}`);
    return [...todo.map((f) => f.name), ...present.map((fn) => `dropped ${fn}`)];
  });
  return [...done, ...changed];
}

/** The function files a migration names in `-- apply: functions/<name>.sql` lines (an unknown name is an error). */
export function appliedBy(m: Migration, files: Migration[]): Migration[] {
  return [...m.sql.matchAll(/^-- apply: (functions\/[A-Za-z0-9_]+\.sql)\s*$/gm)].map(([, name]) => {
    const f = files.find((x) => x.name === name);
    if (!f) throw new Error(`migration ${m.name} applies ${name}, which is not in prisma/functions`);
    return f;
  });
}

const recordFunction = (s: SqlRunner, f: Migration) =>
  s.query(
    `INSERT INTO "_app_migrations" ("name", "checksum") VALUES ($1, $2) ON CONFLICT ("name") DO UPDATE
     SET "checksum" = EXCLUDED."checksum", "appliedAt" = now()`,
    [f.name, f.checksum],
  );

/**
 * One transaction of the migrator: BEGIN, no statement timeout, the lock, Citus's settings, the ledger; `fn`; COMMIT.
 */
async function inMigration<T>(sql: SqlRunner, fn: (s: SqlRunner) => Promise<T>): Promise<T> {
  return sql.session(async (s) => {
    await s.exec("BEGIN");
    try {
      // No statement_timeout while migrating (the service's pool has one): waiting for another
      // migrator's lock and building an index on a large table may take longer.
      await s.exec("SET LOCAL statement_timeout = 0");
      await s.query("SELECT pg_advisory_xact_lock($1)", [LOCK_ID]);
      // On a Citus coordinator (after `npm run db:distribute`) a migration's CREATE TRIGGER on a
      // distributed table needs citus.enable_unsafe_triggers: the schema's triggers only write rows
      // of their own tenant, i.e. co-located shards on the same node (docs/scaling.md, "Citus").
      const [citus] = await s.query<{ on: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS "on"`,
      );
      // Sequential shard commands: a migration that alters a distributed table and then creates a
      // function in the same transaction is refused after a parallel DDL ("cannot run function
      // command because there was a parallel operation on a distributed table").
      if (citus?.on)
        await s.exec(
          "SET LOCAL citus.enable_unsafe_triggers = on; SET LOCAL citus.multi_shard_modify_mode = 'sequential'",
        );
      await s.exec(`CREATE TABLE IF NOT EXISTS "_app_migrations" (
        "name" TEXT PRIMARY KEY, "checksum" TEXT NOT NULL, "appliedAt" TIMESTAMPTZ NOT NULL DEFAULT now())`);
      const result = await fn(s);
      await s.exec("COMMIT");
      return result;
    } catch (err) {
      await s.exec("ROLLBACK").catch(() => {});
      throw err;
    }
  });
}

/**
 * A migration's (or a function file's) statements, one at a time in the transaction: Citus refuses
 * some DDL on a distributed table (CREATE TRIGGER) when it arrives inside a multi-statement string.
 */
async function applyStatements(s: SqlRunner, m: Migration): Promise<void> {
  try {
    for (const statement of await splitStatements(m.sql)) await s.exec(statement);
  } catch (err) {
    throw new Error(`migration ${m.name} failed: ${(err as Error).message}`);
  }
}
