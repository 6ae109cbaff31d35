// One way to write a planned row with raw SQL: `INSERT INTO "<table>" (<columns>) VALUES (<values>)` (or
// `SELECT <values> …` in the one-statement create),
// each value cast to its column's declared type (read once per process from the catalog, so a JS value
// never depends on the driver's guess of a parameter type: uuid, enums, text[], timestamptz(3) …).
// Used by server/idempotency.ts for the one-statement create (claim + row + stored response), by
// the creates' transactional path, so that both write exactly the same row, and (insertBatch) by the
// fixture loader's batched inserts.
import { Prisma } from "../../generated/prisma/client.js";
import type { Database, Db, QueryOptions } from "./client.js";

/**
 * A row to insert: every column it sets, by name (the table's other columns take their defaults).
 * A value is a parameter, or a `Prisma.Sql` expression (parenthesised; e.g. a subquery of a CTE).
 */
export interface PlannedRow {
  table: string;
  row: Record<string, unknown>;
}

export const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** table → column → SQL type (format_type) of every table of the schema, read once per process. */
let typeCache: Promise<Map<string, Map<string, string>>> | undefined;

/**
 * Reads the column types of every table once (one catalog statement). createApp() calls it at start,
 * so no request ever sends the catalog query; a failed read is retried by the next use.
 */
export function loadColumnTypes(db: Db): Promise<Map<string, Map<string, string>>> {
  if (!typeCache) {
    const loading = db.$queryRaw<{ table: string; name: string; type: string }[]>`
        SELECT c."relname" AS "table", a."attname" AS "name", format_type(a."atttypid", a."atttypmod") AS "type"
          FROM pg_attribute a JOIN pg_class c ON c."oid" = a."attrelid"
         WHERE c."relnamespace" = current_schema()::regnamespace AND c."relkind" IN ('r', 'p') AND a."attnum" > 0 AND NOT a."attisdropped"`.then(
      (rows) => {
        const tables = new Map<string, Map<string, string>>();
        for (const r of rows) {
          if (!tables.has(r.table)) tables.set(r.table, new Map());
          tables.get(r.table)!.set(r.name, r.type);
        }
        return tables;
      },
    );
    typeCache = loading;
    loading.catch(() => {
      if (typeCache === loading) typeCache = undefined;
    });
  }
  return typeCache;
}

/**
 * Drops the column types read (the next use reads them again). Tests: the database files share one
 * process, each on a database of its own (test/helpers/module-state.ts resets this between them).
 */
export function forgetColumnTypes(): void {
  typeCache = undefined;
}

async function columnTypes(db: Db, table: string): Promise<Map<string, string>> {
  const types = (await loadColumnTypes(db)).get(table);
  if (!types) throw new Error(`unknown table "${table}"`);
  return types;
}

/** `(<columns>)` and `<values>` of a planned row, for `INSERT INTO t <columns> SELECT <values> …`. */
export async function rowSql(
  db: Db,
  planned: PlannedRow,
): Promise<{ table: Prisma.Sql; columns: Prisma.Sql; values: Prisma.Sql }> {
  if (!IDENT.test(planned.table)) throw new Error(`bad table name ${planned.table}`);
  const types = await columnTypes(db, planned.table);
  const names = Object.keys(planned.row);
  const values = names.map((name) => {
    const type = types.get(name);
    if (!IDENT.test(name) || !type) throw new Error(`unknown column "${planned.table}"."${name}"`);
    return Prisma.sql`${planned.row[name]}::${Prisma.raw(type)}`;
  });
  return {
    table: Prisma.raw(`"${planned.table}"`),
    columns: Prisma.raw(`(${names.map((n) => `"${n}"`).join(", ")})`),
    values: Prisma.join(values),
  };
}

/**
 * Inserts many rows of one table with one statement per `batch` rows (the admin CLI's fixture load):
 * the rows travel as one JSON parameter, read by jsonb_to_recordset with every column typed as the
 * table declares it (the catalog types above, as for a planned row). The columns are every key any
 * row sets; a key a row leaves out (or sets to undefined) is NULL in that row. Rows carry their ids.
 * `written`: told the rows of each statement once it has run (a load's progress).
 */
export async function insertBatch(
  db: Db,
  table: string,
  rows: Record<string, unknown>[],
  batch = 5_000,
  written?: (table: string, rows: number) => void,
): Promise<void> {
  if (rows.length === 0) return;
  if (!IDENT.test(table)) throw new Error(`bad table name ${table}`);
  const types = await columnTypes(db, table);
  const names = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const typed = names.map((name) => {
    const type = types.get(name);
    if (!type || !IDENT.test(name)) throw new Error(`unknown column "${table}"."${name}"`);
    return `"${name}" ${type}`;
  });
  const columns = names.map((n) => `"${n}"`).join(", ");
  const sql = `INSERT INTO "${table}" (${columns}) SELECT ${columns} FROM jsonb_to_recordset($1::jsonb) AS r(${typed.join(", ")})`;
  for (let i = 0; i < rows.length; i += batch) {
    const chunk = rows.slice(i, i + batch);
    await db.$executeRawUnsafe(sql, JSON.stringify(chunk));
    written?.(table, chunk.length);
  }
}

/**
 * Inserts rows of one table with ONE statement, the rows as one JSON parameter read by
 * jsonb_to_recordset with every column typed as the table declares it (as insertBatch): the columns
 * are the rows' own keys — the rows a resource's create builds (`satisfies StoredRow`), so a bulk
 * create writes what the one-row create writes. `conflict: "skip"` leaves out a row a unique index
 * refuses; `returning` names what comes back (e.g. a row definition's select list).
 * The statement runs where `read` runs it (readFor: the raw runner outside a transaction).
 */
export async function insertRows<R>(
  read: Read,
  db: Db,
  table: string,
  tenantId: string,
  rows: Record<string, unknown>[],
  opts: { conflict?: "skip"; returning: Prisma.Sql },
): Promise<R[]> {
  if (rows.length === 0) return [];
  if (!IDENT.test(table)) throw new Error(`bad table name ${table}`);
  if (rows.some((r) => r.tenantId !== tenantId)) throw new Error(`insertRows: every row must be the tenant's`);
  const types = await columnTypes(db, table);
  // The tenant is one constant of the statement (every row is its), never a value of the JSON.
  const names = Object.keys(rows[0]!).filter((n) => n !== "tenantId");
  const typed = names.map((name) => {
    const type = types.get(name);
    if (!type || !IDENT.test(name)) throw new Error(`unknown column "${table}"."${name}"`);
    return `"${name}" ${type}`;
  });
  const columns = Prisma.raw(names.map((n) => `"${n}"`).join(", "));
  const json = JSON.stringify(rows.map((r) => Object.fromEntries(names.map((n) => [n, r[n] ?? null]))));
  return read<R>(Prisma.sql`
    INSERT INTO ${Prisma.raw(`"${table}"`)} ("tenantId", ${columns})
    SELECT ${tenantId}::uuid, ${columns} FROM jsonb_to_recordset(${json}::jsonb) AS r(${Prisma.raw(typed.join(", "))})
    ${opts.conflict === "skip" ? Prisma.sql`ON CONFLICT DO NOTHING` : Prisma.empty}
    RETURNING ${opts.returning}`);
}

/**
 * Inserts the planned row (one statement, on `db`: the root client or a transaction), as
 * `INSERT … VALUES`: on Citus that is a single-shard insert sent to the row's shard, whose errors keep
 * their SQLSTATE and constraint; an `INSERT … SELECT <values>` is pulled to the coordinator and COPied
 * to the shard, and a refusal there comes back as XX000 with the message only (a 500, not the 409/422).
 */
export async function insertRow(db: Db, planned: PlannedRow): Promise<void> {
  const { table, columns, values } = await rowSql(db, planned);
  await db.$executeRaw`INSERT INTO ${table} ${columns} VALUES (${values})`;
}

/**
 * The same INSERT, answering the row as stored (`returning`: e.g. a row definition's select list), for
 * a create whose answer holds what the database set (a trigger's "updatedAt"). Prisma's reading: Dates.
 */
export async function insertRowReturning<R>(db: Db, planned: PlannedRow, returning: Prisma.Sql): Promise<R> {
  const { table, columns, values } = await rowSql(db, planned);
  const [row] = await db.$queryRaw<R[]>`INSERT INTO ${table} ${columns} VALUES (${values}) RETURNING ${returning}`;
  return row!;
}

/**
 * A raw statement and its rows, on whichever connection the caller has: `readOn(tx)` inside a Prisma
 * transaction, `readRaw(database)` outside one — the pool's unnamed statement (or PGlite's query),
 * without Prisma's per-statement work (~0.2 ms of CPU per statement measured; docs/decisions/performance.md,
 * "The raw runner for hot statements and list reads"). With `isoTimes`, both give the instants as ISO
 * text: the raw runner parses them so (times.ts), a transaction's Dates are formatted (isoDates), so a
 * row reads the same inside and outside a transaction (model/row.ts).
 */
export type Read = <R>(q: Prisma.Sql) => Promise<R[]>;
export const readOn = (db: Db, opts?: QueryOptions): Read =>
  opts?.isoTimes
    ? async <R>(q: Prisma.Sql) => isoDates(await db.$queryRaw<R[]>(q))
    : <R>(q: Prisma.Sql) => db.$queryRaw<R[]>(q);
export const readRaw =
  (database: Database, opts?: QueryOptions): Read =>
  (q) =>
    database.sql.query(q.text, q.values, opts);

/** Every Date of the rows (Prisma's timestamptz) → its ISO text, in place: what `isoTimes` gives on the raw runner. */
function isoDates<R>(rows: R[]): R[] {
  for (const row of rows as Record<string, unknown>[])
    for (const k in row) {
      const v = row[k];
      if (v instanceof Date) row[k] = v.toISOString();
    }
  return rows;
}
/**
 * The cheaper of the two for where a procedure's queries run (`db`: the root client → the pool's
 * raw runner; a transaction → that transaction). Reads that only need rows (the list statements)
 * go through it: Prisma's $queryRaw costs ~0.7 ms of CPU more than the driver for a 50-row page and
 * ~0.25 ms for one row (docs/decisions/performance.md, "The raw runner for hot statements and list
 * reads").
 */
export const readFor = (database: Database, db: Db, opts?: QueryOptions): Read =>
  db === database.prisma ? readRaw(database, opts) : readOn(db, opts);
