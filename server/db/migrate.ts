// The project's own migrator for Prisma Migrate's folder layout
// (prisma/migrations/<ts>_<name>/migration.sql): applies pending migrations in order, each in its
// own transaction, under an advisory lock so that concurrent runs are safe, and records them.
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { SqlRunner } from "./client.js";

export const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../prisma/migrations");
const LOCK_ID = 7_245_001; // arbitrary, constant for this application

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = (await readdir(dir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  return Promise.all(
    entries.map(async (name) => {
      const sql = await readFile(path.join(dir, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    }),
  );
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

async function migrateLocked(sql: SqlRunner, dir: string): Promise<string[]> {
  const migrations = await readMigrations(dir);
  return sql.session(async (s) => {
    await s.query("SELECT pg_advisory_lock($1)", [LOCK_ID]);
    try {
      await s.exec(`CREATE TABLE IF NOT EXISTS "_app_migrations" (
        "name" TEXT PRIMARY KEY, "checksum" TEXT NOT NULL, "appliedAt" TIMESTAMPTZ NOT NULL DEFAULT now())`);
      const rows = await s.query<{ name: string; checksum: string }>(`SELECT "name", "checksum" FROM "_app_migrations"`);
      const applied = new Map(rows.map((r) => [r.name, r.checksum]));
      const done: string[] = [];
      for (const m of migrations) {
        const seen = applied.get(m.name);
        if (seen !== undefined) {
          if (seen !== m.checksum) throw new Error(`migration ${m.name} was changed after it was applied`);
          continue;
        }
        await s.exec("BEGIN");
        try {
          await s.exec(m.sql);
          await s.query(`INSERT INTO "_app_migrations" ("name", "checksum") VALUES ($1, $2)`, [m.name, m.checksum]);
          await s.exec("COMMIT");
        } catch (err) {
          await s.exec("ROLLBACK");
          throw new Error(`migration ${m.name} failed: ${(err as Error).message}`);
        }
        done.push(m.name);
      }
      return done;
    } finally {
      await s.query("SELECT pg_advisory_unlock($1)", [LOCK_ID]);
    }
  });
}
