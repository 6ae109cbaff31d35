// Citus readiness, read from the migrated catalog. Each table's role is its comment:
// 'citus:reference', 'citus:local' or 'citus:distributed(<column>)'. schemaViolations() lists every
// key, index, constraint and foreign key that a Citus cluster sharded by tenant would reject or that
// could let a row point into another tenant; it is generic over whatever tables the catalog holds.
import type { SqlRunner } from "../../server/db/client.js";

export type Role = { kind: "reference" } | { kind: "local" } | { kind: "distributed"; column: string };

export interface Table {
  name: string;
  comment: string | null;
  role: Role | null;
  /** attnum → column */
  columns: Map<number, { name: string; type: string; notNull: boolean }>;
}

export interface Constraint {
  name: string;
  table: string;
  type: "p" | "u" | "x" | "f";
  keys: number[];
  /** foreign keys */
  refTable?: string;
  refKeys?: number[];
  onUpdate?: string;
  onDelete?: string;
  /** exclusion constraints: the operator of each key */
  operators?: string[];
}

export interface Index {
  name: string;
  table: string;
  unique: boolean;
  /** the key columns' attnums (0 = an expression) */
  keys: number[];
}

export interface Catalog {
  tables: Map<string, Table>;
  constraints: Constraint[];
  indexes: Index[];
}

const ROLE = /^citus:(reference|local|distributed\(([A-Za-z_][A-Za-z0-9_]*)\))$/;

export function parseRole(comment: string | null): Role | null {
  const m = comment === null ? null : ROLE.exec(comment.trim());
  if (!m) return null;
  if (m[1] === "reference") return { kind: "reference" };
  if (m[1] === "local") return { kind: "local" };
  return { kind: "distributed", column: m[2]! };
}

const ints = (v: unknown): number[] =>
  v === null || v === undefined
    ? []
    : Array.isArray(v)
      ? v.map(Number)
      : String(v).replace(/[{}]/g, "").split(/[ ,]+/).filter(Boolean).map(Number);

/** The user tables of the public schema with their columns, constraints and indexes. */
export async function readCatalog(sql: Pick<SqlRunner, "query">): Promise<Catalog> {
  const tables = new Map<string, Table>();
  const rels = await sql.query<{ name: string; comment: string | null }>(`
    SELECT c.relname AS name, obj_description(c.oid, 'pg_class') AS comment
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`);
  for (const r of rels)
    tables.set(r.name, { name: r.name, comment: r.comment, role: parseRole(r.comment), columns: new Map() });
  const cols = await sql.query<{ table: string; attnum: number; name: string; type: string; notnull: boolean }>(`
    SELECT c.relname AS "table", a.attnum, a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
      a.attnotnull AS notnull
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped`);
  for (const c of cols)
    tables.get(c.table)?.columns.set(Number(c.attnum), { name: c.name, type: c.type, notNull: c.notnull });
  const cons = await sql.query<{
    name: string;
    table: string;
    type: "p" | "u" | "x" | "f";
    keys: unknown;
    reftable: string | null;
    refkeys: unknown;
    onupdate: string;
    ondelete: string;
    operators: string[] | null;
  }>(`
    SELECT k.conname AS name, c.relname AS "table", k.contype AS type, k.conkey AS keys, r.relname AS reftable,
      k.confkey AS refkeys,
           k.confupdtype AS onupdate, k.confdeltype AS ondelete,
           (SELECT array_agg(o.oprname::text ORDER BY x.ord) FROM unnest(k.conexclop) WITH ORDINALITY x(op, ord)
             JOIN pg_operator o ON o.oid = x.op) AS operators
      FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      LEFT JOIN pg_class r ON r.oid = k.confrelid
     WHERE n.nspname = 'public' AND k.contype IN ('p', 'u', 'x', 'f')`);
  const constraints: Constraint[] = cons.map((k) => ({
    name: k.name,
    table: k.table,
    type: k.type,
    keys: ints(k.keys),
    ...(k.type === "f"
      ? { refTable: k.reftable!, refKeys: ints(k.refkeys), onUpdate: k.onupdate, onDelete: k.ondelete }
      : {}),
    ...(k.type === "x" ? { operators: k.operators ?? [] } : {}),
  }));
  const idx = await sql.query<{ name: string; table: string; unique: boolean; keys: unknown; nkeys: number }>(`
    SELECT i.relname AS name, c.relname AS "table", x.indisunique AS "unique", x.indkey::int2[] AS keys,
      x.indnkeyatts AS nkeys
      FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')`);
  const indexes = idx.map((i) => ({
    name: i.name,
    table: i.table,
    unique: i.unique,
    keys: ints(i.keys).slice(0, Number(i.nkeys)),
  }));
  return { tables, constraints, indexes };
}

const ACTION: Record<string, string> = { a: "NO ACTION", r: "RESTRICT", c: "CASCADE", n: "SET NULL", d: "SET DEFAULT" };
const TENANT = "tenantId";

/** Every violation of the Citus-ready rules (docs/decisions/scale-out.md, "Citus-ready schema"); [] when ready. */
export function schemaViolations(cat: Catalog): string[] {
  const out: string[] = [];
  const attnum = (t: Table, column: string) => [...t.columns].find(([, c]) => c.name === column)?.[0];
  const names = (t: Table, keys: number[]) =>
    keys.map((k) => (k === 0 ? "<expression>" : (t.columns.get(k)?.name ?? `#${k}`))).join(", ");
  const distColumn = (t: Table) => (t.role?.kind === "distributed" ? t.role.column : undefined);
  const distTypes = new Set<string>();

  for (const t of cat.tables.values()) {
    // Every table has a role.
    if (!t.role) {
      out.push(
        `${t.name}: no Citus role (COMMENT ON TABLE "${t.name}" IS 'citus:reference' | 'citus:local' | ` +
          `'citus:distributed(tenantId)'; found ${JSON.stringify(t.comment)})`,
      );
      continue;
    }
    const tenantOwned = attnum(t, TENANT) !== undefined;
    if (tenantOwned && t.role.kind === "local") out.push(`${t.name}: has "${TENANT}" but is a local table`);
    // A distributed table is sharded by "tenantId", which it has, NOT NULL, of one type across tables (co-location).
    const dist = distColumn(t);
    if (dist !== undefined) {
      if (dist !== TENANT)
        out.push(
          `${t.name}: distributed by "${dist}", not "${TENANT}" (every distributed table is co-located by tenant)`,
        );
      const n = attnum(t, dist);
      if (n === undefined) out.push(`${t.name}: distributed by "${dist}", which it does not have`);
      else {
        if (!t.columns.get(n)!.notNull) out.push(`${t.name}: distribution column "${dist}" is nullable`);
        distTypes.add(t.columns.get(n)!.type);
      }
    }
    // Every tenant-owned table's primary key leads with "tenantId".
    if (tenantOwned) {
      const pk = cat.constraints.find((c) => c.table === t.name && c.type === "p");
      if (!pk) out.push(`${t.name}: no primary key`);
      else if (pk.keys[0] !== attnum(t, TENANT))
        out.push(`${t.name}: primary key (${names(t, pk.keys)}) does not lead with "${TENANT}"`);
    }
  }
  if (distTypes.size > 1)
    out.push(`distribution columns have different types (${[...distTypes].join(", ")}): tables cannot be co-located`);

  // Every unique index (primary keys, unique constraints, partial and expression indexes) and every
  // exclusion constraint of a distributed table includes the distribution column (with = for an exclusion).
  for (const i of cat.indexes) {
    const t = cat.tables.get(i.table);
    const dist = t && distColumn(t);
    if (!t || dist === undefined || !i.unique) continue;
    const n = attnum(t, dist);
    if (n === undefined || !i.keys.includes(n))
      out.push(`${t.name}: unique index "${i.name}" (${names(t, i.keys)}) lacks "${dist}"`);
  }
  for (const c of cat.constraints.filter((c) => c.type === "x")) {
    const t = cat.tables.get(c.table)!;
    const dist = distColumn(t);
    if (dist === undefined) continue;
    const at = c.keys.indexOf(attnum(t, dist) ?? -1);
    if (at < 0 || c.operators?.[at] !== "=")
      out.push(`${t.name}: exclusion constraint "${c.name}" does not include "${dist}" WITH =`);
  }

  // Foreign keys.
  for (const f of cat.constraints.filter((c) => c.type === "f")) {
    const from = cat.tables.get(f.table)!;
    const to = cat.tables.get(f.refTable!);
    if (!from.role || !to?.role) continue; // reported above
    const label = `${from.name}: foreign key "${f.name}" → ${to.name}`;
    if (from.role.kind !== "local" && to.role.kind === "local") out.push(`${label}: references a local table`);
    if (from.role.kind === "reference" && to.role.kind === "distributed")
      out.push(`${label}: a reference table cannot reference a distributed table`);
    const fromDist = distColumn(from);
    const toDist = distColumn(to);
    const fromAt = fromDist === undefined ? -1 : f.keys.indexOf(attnum(from, fromDist) ?? -1);
    if (fromDist !== undefined && toDist !== undefined) {
      const toAt = f.refKeys!.indexOf(attnum(to, toDist) ?? -1);
      if (fromAt < 0 || fromAt !== toAt)
        out.push(`${label}: does not pair "${fromDist}" with "${toDist}" (both distributed)`);
    }
    if (fromAt >= 0) {
      if ("cnd".includes(f.onUpdate!))
        out.push(
          `${label}: ON UPDATE ${ACTION[f.onUpdate!]} on the distribution column (Citus allows NO ACTION / RESTRICT)`,
        );
      if ("nd".includes(f.onDelete!)) out.push(`${label}: ON DELETE ${ACTION[f.onDelete!]} on the distribution column`);
    }
    // Tenant isolation, whatever the roles: a reference between tenant-owned rows pairs tenantId with tenantId.
    const a = attnum(from, TENANT);
    const b = attnum(to, TENANT);
    if (a !== undefined && b !== undefined && (f.keys.indexOf(a) < 0 || f.keys.indexOf(a) !== f.refKeys!.indexOf(b)))
      out.push(`${label}: does not pair "${TENANT}" with "${TENANT}" (a row could point into another tenant)`);
  }
  return out.sort();
}
