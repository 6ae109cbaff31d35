// The migrator and schema drift: prisma/schema.prisma and the migrated database must agree
// (tables, columns, types, nullability, unique and plain indexes).
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import wasm from "@prisma/prisma-schema-wasm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPglite, openPostgres } from "../../server/db/client.js";
import { appliedBy, migrate, MIGRATIONS_DIR, readFunctions, readMigrations } from "../../server/db/migrate.js";
import { freshDatabase, onServer, withDatabase, type TestDb } from "../helpers/app.js";

let t: TestDb;
beforeAll(async () => {
  t = await freshDatabase();
});
afterAll(() => t.drop());

interface DmmfField {
  name: string;
  kind: "scalar" | "enum" | "object";
  type: string;
  isList: boolean;
  isRequired: boolean;
  dbName?: string | null;
  nativeType?: [string, string[]] | null;
}
interface DmmfModel {
  name: string;
  dbName: string | null;
  fields: DmmfField[];
}
const dmmf = JSON.parse(wasm.get_dmmf(JSON.stringify({ prismaSchema: readFileSync("prisma/schema.prisma", "utf8") })))
  .datamodel as {
  models: DmmfModel[];
  indexes: {
    model: string;
    type: "id" | "unique" | "normal" | "fulltext";
    fields: { name: string; sortOrder?: "asc" | "desc" }[];
  }[];
};

/** Indexes the migration holds that Prisma's schema language cannot describe (expression / partial). */
const SQL_ONLY_INDEXES = new Set([
  "Contact_tenantId_email_ci_key",
  "PipelineStage_one_default_entry",
  "ChangeLog_pending_idx",
  "ChangeLog_tombstones_idx",
  "Message_pending_operator_idx",
  "Appointment_tenantId_during_idx",
  "Contact_search_walk_idx",
]);

function expectedUdt(f: DmmfField): string {
  if (f.kind === "enum") return f.type;
  const native = f.nativeType?.[0];
  const base =
    f.type === "String"
      ? native === "Uuid"
        ? "uuid"
        : native === "Char"
          ? "bpchar"
          : "text"
      : f.type === "Int"
        ? "int4"
        : f.type === "Boolean"
          ? "bool"
          : f.type === "DateTime"
            ? native === "Timestamp"
              ? "timestamp"
              : "timestamptz"
            : f.type === "Json"
              ? "jsonb"
              : f.type === "BigInt"
                ? "int8"
                : f.type === "Float"
                  ? "float8"
                  : `?${f.type}`;
  return f.isList ? `_${base}` : base;
}

describe("schema drift", () => {
  it("every model is a table with exactly its columns, types and nullability", async () => {
    const cols = await t.db.sql.query<{
      table_name: string;
      column_name: string;
      is_nullable: string;
      udt_name: string;
    }>(
      // Not the relations an extension owns (on a Citus coordinator: its views citus_tables, citus_schemas).
      `SELECT c.table_name, c.column_name, c.is_nullable, c.udt_name FROM information_schema.columns c
        WHERE c.table_schema = 'public'
          AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
                             AND d.objid = format('%I.%I', c.table_schema, c.table_name)::regclass)`,
    );
    const actual = new Map<string, Map<string, { nullable: boolean; udt: string }>>();
    for (const c of cols) {
      if (!actual.has(c.table_name)) actual.set(c.table_name, new Map());
      actual.get(c.table_name)!.set(c.column_name, { nullable: c.is_nullable === "YES", udt: c.udt_name });
    }
    const problems: string[] = [];
    const tables = new Set<string>();
    for (const m of dmmf.models) {
      const table = m.dbName ?? m.name;
      tables.add(table);
      const columns = actual.get(table);
      if (!columns) {
        problems.push(`table ${table} missing`);
        continue;
      }
      const expected = new Set<string>();
      for (const f of m.fields.filter((f) => f.kind !== "object")) {
        const col = f.dbName ?? f.name;
        expected.add(col);
        const a = columns.get(col);
        if (!a) problems.push(`${table}.${col} missing`);
        else {
          if (a.udt !== expectedUdt(f)) problems.push(`${table}.${col} is ${a.udt}, schema says ${expectedUdt(f)}`);
          const nullable = !f.isRequired && !f.isList;
          if (a.nullable !== nullable) problems.push(`${table}.${col} nullable=${a.nullable}, schema says ${nullable}`);
        }
      }
      // Unsupported("…") fields (the DMMF leaves them out): read from the schema's text.
      for (const u of unsupportedFields(m.name)) {
        expected.add(u.name);
        const a = columns.get(u.name);
        if (!a) problems.push(`${table}.${u.name} missing`);
        else {
          if (a.udt !== u.type) problems.push(`${table}.${u.name} is ${a.udt}, schema says ${u.type}`);
          if (a.nullable !== u.optional)
            problems.push(`${table}.${u.name} nullable=${a.nullable}, schema says ${u.optional}`);
        }
      }
      for (const col of columns.keys()) if (!expected.has(col)) problems.push(`${table}.${col} not in schema.prisma`);
    }
    for (const table of actual.keys())
      if (!tables.has(table) && table !== "_app_migrations") problems.push(`table ${table} not in schema.prisma`);
    expect(problems).toEqual([]);
  });

  // Each column with its direction (" desc"): a list reads its index in the index's order only when the
  // directions are the list's ORDER BY (an index ending in "id" ascending under an ORDER BY … "id" DESC
  // sorts every page again: migration 20261202000000_conversation_order).
  it("unique and plain indexes match, column by column and in their sort directions", async () => {
    const rows = await t.db.sql.query<{
      table: string;
      index: string;
      unique: boolean;
      columns: string | null;
      partial: boolean;
    }>(`
      SELECT tc.relname AS "table", ic.relname AS "index", ix.indisunique AS "unique",
        ix.indpred IS NOT NULL AS "partial",
             (SELECT string_agg(a.attname || CASE WHEN ix.indoption[k.ord - 1] & 1 = 1 THEN ' desc' ELSE '' END, ','
               ORDER BY k.ord)
                FROM unnest(ix.indkey) WITH ORDINALITY k(attnum, ord)
                JOIN pg_attribute a ON a.attrelid = tc.oid AND a.attnum = k.attnum) AS "columns"
        FROM pg_index ix JOIN pg_class ic ON ic.oid = ix.indexrelid JOIN pg_class tc ON tc.oid = ix.indrelid
        JOIN pg_namespace n ON n.oid = tc.relnamespace
       WHERE n.nspname = 'public' AND tc.relname <> '_app_migrations' AND ic.relkind = 'i'
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid AND c.contype = 'x')`);
    const actual = rows
      .filter((r) => !SQL_ONLY_INDEXES.has(r.index))
      .map((r) => `${r.table}(${r.columns})${r.unique ? " unique" : ""}`)
      .sort();
    const byModel = new Map(dmmf.models.map((m) => [m.name, m]));
    const col = (model: string, name: string) => {
      const f = byModel.get(model)!.fields.find((x) => x.name === name)!;
      return f.dbName ?? f.name;
    };
    const expected = dmmf.indexes
      .filter((i) => i.type !== "fulltext")
      .map(
        (i) =>
          `${byModel.get(i.model)!.dbName ?? i.model}(${i.fields.map((f) => col(i.model, f.name) + (f.sortOrder === "desc" ? " desc" : "")).join(",")})${i.type === "normal" ? "" : " unique"}`,
      )
      .sort();
    expect(actual).toEqual(expected);
    // The SQL-only ones exist too.
    for (const name of SQL_ONLY_INDEXES) expect(rows.some((r) => r.index === name)).toBe(true);
  });

  it("the overlap exclusion constraint exists", async () => {
    const rows = await t.db.sql.query(`SELECT conname FROM pg_constraint WHERE contype = 'x'`);
    expect(rows.map((r: any) => r.conname)).toEqual(["Appointment_no_overlap"]);
  });
});

describe("migrator", () => {
  it("is idempotent: a second run applies nothing", async () => {
    expect(await migrate(t.db.sql)).toEqual([]);
    const rows = await t.db.sql.query<{ name: string }>(`SELECT "name" FROM "_app_migrations" ORDER BY "name"`);
    const { files } = await readFunctions();
    expect(rows.map((r) => r.name)).toEqual(
      [...(await readMigrations()).map((m) => m.name), ...files.map((f) => f.name)].sort(),
    );
  });

  it("concurrent runs on a fresh database apply each migration exactly once", async () => {
    const fresh = await freshDatabaseUnmigrated();
    try {
      const results = await Promise.all([migrate(fresh.a), migrate(fresh.b), migrate(fresh.a)]);
      const applied = results.flat();
      const { files, retired } = await readFunctions();
      const migrations = await readMigrations();
      // A function file a migration names in `-- apply: functions/<name>.sql` is applied (and recorded)
      // in that migration's transaction, so it is reported under the migration's name, not its own.
      const byMigration = new Set(migrations.flatMap((m) => appliedBy(m, files).map((f) => f.name)));
      // Every migration and every function's source once, then the retired functions dropped once.
      expect(applied.filter((a) => !a.startsWith("dropped ")).sort()).toEqual(
        [...migrations.map((m) => m.name), ...files.filter((f) => !byMigration.has(f.name)).map((f) => f.name)].sort(),
      );
      expect(
        applied
          .filter((a) => a.startsWith("dropped "))
          .map((a) => a.replace(/^dropped "?([A-Za-z_]+)"?\(.*$/, "$1"))
          .sort(),
      ).toEqual([...retired].sort());
      const rows = await fresh.a.query(`SELECT count(*)::int AS n FROM "_app_migrations"`);
      expect((rows[0] as any).n).toBe((await readMigrations()).length + files.length);
    } finally {
      await fresh.close();
    }
  });
});

/**
 * Two independent connections (two "processes") to one new, unmigrated database, through
 * DATABASE_URL — PgBouncer in transaction mode in that CI leg, which the migrator must survive too
 * (its lock is transaction-level). The database is created and dropped on the server itself.
 */
async function freshDatabaseUnmigrated() {
  const base = process.env.DATABASE_URL;
  if (!base) {
    const { openPglite } = await import("../../server/db/client.js");
    const db = await openPglite("memory://");
    return { a: db.sql, b: db.sql, close: () => db.close() };
  }
  const name = `mig_${Math.random().toString(16).slice(2, 10)}`;
  await onServer(`CREATE DATABASE ${name}`);
  const url = withDatabase(base, name);
  const one = await openPostgres(url, { max: 2 });
  const two = await openPostgres(url, { max: 2 });
  return {
    a: one.sql,
    b: two.sql,
    async close() {
      await one.close();
      await two.close();
      await onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

describe("database functions: one current source each (prisma/functions/)", () => {
  /** The body (what PostgreSQL keeps as prosrc) and identity of the one function a source file creates. */
  async function parsed(file: { name: string; sql: string }) {
    const { loadModule, parseSync } = await import("libpg-query");
    await loadModule();
    const stmts = (parseSync(file.sql) as { stmts: { stmt: Record<string, any> }[] }).stmts.map((x) => x.stmt);
    const fn = stmts.find((x) => x.CreateFunctionStmt)?.CreateFunctionStmt;
    expect(fn, `${file.name}: one CREATE OR REPLACE FUNCTION`).toBeDefined();
    expect(fn.replace, `${file.name}: CREATE OR REPLACE`).toBe(true);
    expect(stmts.filter((x) => x.CreateFunctionStmt)).toHaveLength(1);
    const name = fn.funcname.at(-1).String.sval as string;
    const body = fn.options.find((o: any) => o.DefElem.defname === "as").DefElem.arg.List.items[0].String
      .sval as string;
    return { name, body };
  }

  it("every function of the schema has a source file, each file's body is what the database runs (no stale copy hides)", async () => {
    const { files, retired } = await readFunctions();
    expect(files.length).toBeGreaterThan(10);
    const rows = await t.db.sql.query<{ name: string; body: string }>(
      `SELECT p.proname AS name, p.prosrc AS body FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        LEFT JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
       WHERE n.nspname = current_schema() AND d.objid IS NULL ORDER BY 1`,
    );
    const sources = await Promise.all(files.map(parsed));
    // Named after its function
    expect(sources.map((s) => `functions/${s.name}.sql`).sort()).toEqual(files.map((f) => f.name).sort());
    expect(rows.map((r) => r.name).sort()).toEqual(sources.map((s) => s.name).sort());
    for (const src of sources) expect(rows.find((r) => r.name === src.name)!.body, src.name).toBe(src.body);
    expect(rows.filter((r) => retired.includes(r.name))).toEqual([]);
  });

  it("a changed source is applied by the next migrate, and only it; a retired name is dropped", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "crm-functions-"));
    try {
      cpSync(MIGRATIONS_DIR, path.join(dir, "migrations"), { recursive: true });
      cpSync(path.join(MIGRATIONS_DIR, "..", "functions"), path.join(dir, "functions"), { recursive: true });
      const db = await openPglite("memory://");
      try {
        await migrate(db.sql, path.join(dir, "migrations"));
        const file = path.join(dir, "functions", "ListCounter_slots.sql");
        writeFileSync(file, readFileSync(file, "utf8").replace(/SELECT 32\b/, "SELECT 32 /* changed */"));
        writeFileSync(
          path.join(dir, "functions", "zz_extra.sql"),
          `CREATE OR REPLACE FUNCTION "zz_extra"() RETURNS int LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;`,
        );
        expect(await migrate(db.sql, path.join(dir, "migrations"))).toEqual([
          "functions/ListCounter_slots.sql",
          "functions/zz_extra.sql",
        ]);
        const [slots] = await db.sql.query<{ body: string }>(
          `SELECT prosrc AS body FROM pg_proc WHERE proname = 'ListCounter_slots'`,
        );
        expect(slots!.body).toContain("changed");
        writeFileSync(
          path.join(dir, "functions", "retired.txt"),
          `${readFileSync(path.join(dir, "functions", "retired.txt"), "utf8")}\nzz_extra\n`,
        );
        rmSync(path.join(dir, "functions", "zz_extra.sql"));
        expect(await migrate(db.sql, path.join(dir, "migrations"))).toEqual(["dropped zz_extra()"]);
        expect(await migrate(db.sql, path.join(dir, "migrations"))).toEqual([]);
      } finally {
        await db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

/** A model's fields of type Unsupported("<type>") in prisma/schema.prisma (name, the database type, optional). */
function unsupportedFields(model: string): { name: string; type: string; optional: boolean }[] {
  const text = readFileSync("prisma/schema.prisma", "utf8");
  const body = new RegExp(`^model ${model} \\{([\\s\\S]*?)^\\}`, "m").exec(text)?.[1] ?? "";
  return [...body.matchAll(/^\s+(\w+)\s+Unsupported\("(\w+)"\)(\?)?/gm)].map((m) => ({
    name: m[1]!,
    type: m[2]!,
    optional: m[3] === "?",
  }));
}
