// `npm run db:distribute`: on a Citus coordinator the migrated schema is distributed as the
// tables' roles say, in one transaction, idempotently, foreign keys and triggers kept; later
// migrations reach every shard. Elsewhere it refuses with one line and changes nothing.
// @topology citus
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuild } from "../../scripts/ensure-build.js";
import { openPostgres, type Database } from "../../server/db/client.js";
import { distribute, parseRole } from "../../server/db/distribute.js";
import { FUNCTIONS_DIR, migrate, MIGRATIONS_DIR } from "../../server/db/migrate.js";
import { directBaseUrl, freshDatabase, withDatabase } from "../helpers/app.js";
import pg from "pg";
import {
  citusCluster,
  createClusterDatabase,
  dropClusterDatabase,
  nodeUrl,
  TEST_SHARD_COUNT,
} from "../helpers/cluster.js";
import { runNpm } from "../helpers/processes.js";

const base = process.env.DATABASE_URL ? directBaseUrl()! : undefined;
const cluster = base ? await citusCluster(base) : null;

beforeAll(() => ensureBuild(), 120_000); // `npm run db:distribute` would rebuild a stale dist/ and say so on stderr

const cli = (args: string[], env: NodeJS.ProcessEnv) =>
  runNpm(["run", "--silent", "db:distribute", "--", ...args], env);

const envWith = (url: string | undefined) => {
  const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "silent" };
  delete env.DIRECT_DATABASE_URL;
  if (url) env.DATABASE_URL = url;
  else delete env.DATABASE_URL;
  return env;
};

/**
 * Foreign keys of the public schema's tables (not of the reference
 * tables' local shards on a coordinator): name → definition.
 */
async function foreignKeys(db: Database): Promise<Map<string, string>> {
  const rows = await db.sql.query<{ name: string; def: string }>(
    `SELECT conrelid::regclass::text || '.' || conname AS name, pg_get_constraintdef(oid) AS def
       FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace
         AND conrelid::regclass::text !~ '_[0-9]{6,}"?$'`,
  );
  return new Map(rows.map((r) => [r.name, r.def]));
}

describe("db:distribute refuses where it cannot run, changing nothing", () => {
  it("without DATABASE_URL (the embedded database): one line, exit 1", async () => {
    const r = await cli([], envWith(undefined));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      "not a Citus coordinator: DATABASE_URL is unset (the embedded database cannot be distributed)\n",
    );
  });

  it("a bad --shard-count: one line, exit 2", async () => {
    const r = await cli(["--shard-count", "0"], envWith(undefined));
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('--shard-count must be an integer from 1 to 64000, got "0"\n');
  });

  it.skipIf(!base || cluster)(
    "on plain PostgreSQL: 'not a Citus coordinator', exit 1, the catalog unchanged",
    async () => {
      const t = await freshDatabase();
      try {
        const before = await foreignKeys(t.db);
        const r = await cli([], envWith(t.directUrl));
        expect(r.code).toBe(1);
        expect(r.stdout).toBe("");
        expect(r.stderr).toBe("not a Citus coordinator: the citus extension is not installed\n");
        expect(await foreignKeys(t.db)).toEqual(before);
        expect(before.size).toBeGreaterThan(30);
      } finally {
        await t.drop();
      }
    },
  );
});

describe.skipIf(!cluster)("db:distribute on a Citus cluster", () => {
  const names: string[] = [];
  const opened: Database[] = [];
  afterAll(async () => {
    for (const db of opened) await db.close().catch(() => {});
    for (const n of names) await dropClusterDatabase(base!, cluster!, n);
  });

  /** A database on every node with the extension, migrated (from `dir`), not distributed. */
  async function migrated(dir = MIGRATIONS_DIR): Promise<{ db: Database; url: string }> {
    const name = `test_dist_${randomBytes(5).toString("hex")}`;
    names.push(name);
    await createClusterDatabase(base!, cluster!, name);
    const url = withDatabase(base!, name);
    const db = await openPostgres(url, { max: 2 });
    opened.push(db);
    await migrate(db.sql, dir);
    return { db, url };
  }

  it("distributes every table as its role says, with data in it, keeps every foreign key, and a second run changes nothing", async () => {
    const { db, url } = await migrated();
    // Rows before distribution: they are moved to the shards, and the keys are checked again.
    const tenant = "5f0c0000-0000-4000-8000-000000000001";
    await db.sql.exec(`INSERT INTO "PlanLimit" ("plan", "perMinute", "perDay") VALUES ('pro', 180, 50000)
                       ON CONFLICT DO NOTHING;
      INSERT INTO "Tenant" ("id", "name", "plan", "updatedAt") VALUES ('${tenant}', 'd', 'pro', now());
      INSERT INTO "PipelineStage" ("tenantId", "id", "name", "position", "defaultEntry")
        VALUES ('${tenant}', '${tenant}', 'New', 1, true);
      INSERT INTO "Lead" ("tenantId", "id", "customerName", "customerPhone", "stageId", "updatedAt")
        SELECT '${tenant}', gen_random_uuid(), 'L' || i, '+3460000' || lpad(i::text, 4, '0'), '${tenant}', now()
          FROM generate_series(1, 50) i;`);
    const before = await foreignKeys(db);
    const r = await cli(["--shard-count", String(TEST_SHARD_COUNT)], envWith(url));
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({
      changed: true,
      shardCount: TEST_SHARD_COUNT,
      workers: cluster!.workers.length,
      foreignKeys: before.size,
    });
    expect(out.reference.sort()).toEqual(["ApiKey", "PlanLimit", "Tenant", "User"]);
    // Every node commits synchronously (the CI cluster is set so: .ci/run): nothing to warn of.
    expect(out.warnings).toEqual([]);
    // The creates' function, delegated by its tenant argument, co-located with the tables.
    expect(out.delegated).toEqual(["tenant_exec(uuid,text[],text[])"]);
    const [fn] = await db.sql.query<{ arg: number; colocation: number }>(
      `SELECT distribution_argument_index AS arg, colocationid AS colocation FROM pg_dist_object
       WHERE classid = 'pg_proc'::regclass AND objid = '"tenant_exec"(uuid, text[], text[])'::regprocedure`,
    );

    const roles = await db.sql.query<{
      name: string;
      comment: string | null;
      method: string | null;
      column: string | null;
      colocation: number | null;
    }>(`
      SELECT c.relname AS name, obj_description(c.oid, 'pg_class') AS comment, p.partmethod::text AS method,
             CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END AS column,
               p.colocationid AS colocation
        FROM pg_class c LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid
       WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'`);
    const colocations = new Set<number>();
    for (const t of roles) {
      const role = parseRole(t.comment);
      expect(role, t.name).not.toBeNull();
      if (role!.kind === "reference") expect(t.method, t.name).toBe("n");
      if (role!.kind === "local") expect(t.method, t.name).toBeNull();
      if (role!.kind === "distributed") {
        expect([t.method, t.column], t.name).toEqual(["h", "tenantId"]);
        colocations.add(t.colocation!);
      }
    }
    expect(colocations.size).toBe(1);
    expect(fn).toEqual({ arg: 0, colocation: [...colocations][0] });
    expect(out.distributed.length).toBe(roles.filter((t) => parseRole(t.comment)?.kind === "distributed").length);
    expect(await foreignKeys(db)).toEqual(before);
    const [leads] = await db.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM "Lead" WHERE "tenantId" = $1`, [
      tenant,
    ]);
    expect(leads?.n).toBe(50);

    const again = await cli([], envWith(url));
    expect(again.code).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      changed: false,
      reference: [],
      distributed: [],
      delegated: [],
      foreignKeys: 0,
      note: "already distributed: nothing to do",
    });
    expect(await foreignKeys(db)).toEqual(before);
  });

  it("refuses where a node has synchronous_commit off (a shard move could drop acknowledged writes): one line saying how to set it, exit 1, nothing distributed", async () => {
    const { db, url } = await migrated();
    const name = new URL(url).pathname.slice(1);
    const worker = cluster!.workers[0]!;
    const w = new pg.Client({ connectionString: nodeUrl(base!, worker, "postgres") });
    await w.connect();
    try {
      await w.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
    } finally {
      await w.end();
    }
    const r = await cli(["--shard-count", String(TEST_SHARD_COUNT)], envWith(url));
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      `synchronous_commit is off on ${worker.host}:${worker.port}: Citus's shard moves and splits can drop writes already acknowledged. On every such node: ALTER SYSTEM SET synchronous_commit = on; SELECT pg_reload_conf(); (and no role or database setting turning it off), then run db:distribute again\n`,
    );
    const [distributed] = await db.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_dist_partition`);
    expect(distributed?.n).toBe(0);
  });

  it("a migration applied after distribution reaches every shard: a new column, a new trigger, a changed function", async () => {
    // The migrator's layout: migrations/ with functions/ beside it (a migration's `-- apply:` lines).
    const root = mkdtempSync(path.join(tmpdir(), "crm-migrations-"));
    const dir = path.join(root, "migrations");
    try {
      cpSync(MIGRATIONS_DIR, dir, { recursive: true });
      cpSync(FUNCTIONS_DIR, path.join(root, "functions"), { recursive: true });
      const { db } = await migrated(dir);
      await distribute(db.sql, { shardCount: TEST_SHARD_COUNT });
      const add = (name: string, sql: string) => {
        mkdirSync(path.join(dir, name));
        writeFileSync(path.join(dir, name, "migration.sql"), sql);
      };
      add(
        "29990101000000_after_distribution",
        `
        ALTER TABLE "Lead" ADD COLUMN "zzMark" TEXT;
        CREATE FUNCTION "zz_mark"() RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'first' $$;
        CREATE FUNCTION "zz_lead_mark"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW."zzMark" := "zz_mark"(); RETURN NEW; END $$;
        CREATE TRIGGER "zz_lead_mark" BEFORE INSERT ON "Lead" FOR EACH ROW EXECUTE FUNCTION "zz_lead_mark"();`,
      );
      expect(await migrate(db.sql, dir)).toEqual(["29990101000000_after_distribution"]);
      // Tenants whose rows land on different shards (and so on both workers).
      const tenants = Array.from({ length: 8 }, (_, i) => `5f0c0000-0000-4000-8000-00000000001${i}`);
      await db.sql.exec(`INSERT INTO "PlanLimit" ("plan", "perMinute", "perDay") VALUES ('pro', 180, 50000)
                         ON CONFLICT DO NOTHING;
        INSERT INTO "Tenant" ("id", "name", "plan", "updatedAt") SELECT t::uuid, 't', 'pro', now()
          FROM unnest(ARRAY['${tenants.join("','")}']) t;
        INSERT INTO "PipelineStage" ("tenantId", "id", "name", "position", "defaultEntry")
          SELECT t::uuid, t::uuid, 'New', 1, true FROM unnest(ARRAY['${tenants.join("','")}']) t;`);
      const insert = (i: number) =>
        db.sql.exec(`INSERT INTO "Lead" ("tenantId", "id", "customerName", "customerPhone", "stageId", "updatedAt")
          SELECT t::uuid, gen_random_uuid(), 'x', '+34611' || lpad('${i}', 6, '0'), t::uuid, now()
            FROM unnest(ARRAY['${tenants.join("','")}']) t`);
      await insert(1);
      const marks = async () =>
        (
          await db.sql.query<{ mark: string | null; n: number }>(
            `SELECT "zzMark" AS mark, count(*)::int AS n FROM "Lead" GROUP BY 1 ORDER BY 1`,
          )
        ).map((r) => [r.mark, r.n]);
      expect(await marks()).toEqual([["first", 8]]);
      const shards = await db.sql.query<{ nodes: number; shards: number; withColumn: number }>(`
        SELECT count(DISTINCT nodeport)::int AS nodes, count(*)::int AS shards, count(*) FILTER (WHERE result = '1')::int AS "withColumn"
          FROM run_command_on_shards('"Lead"', $$SELECT count(*) FROM pg_attribute WHERE attrelid = '%s'::regclass AND attname = 'zzMark' AND NOT attisdropped$$)
          JOIN pg_dist_shard_placement USING (shardid)`);
      expect(shards[0]).toEqual({
        nodes: cluster!.workers.length,
        shards: TEST_SHARD_COUNT,
        withColumn: TEST_SHARD_COUNT,
      });

      add(
        "29990101000001_changed_function",
        `CREATE OR REPLACE FUNCTION "zz_mark"() RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'second' $$;`,
      );
      expect(await migrate(db.sql, dir)).toEqual(["29990101000001_changed_function"]);
      await insert(2);
      expect(await marks()).toEqual([
        ["first", 8],
        ["second", 8],
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
