// Full dumps of a drill's database for before/after comparisons: every row of every application
// table as PostgreSQL's own JSON text, sorted, optionally only one tenant's rows.
import { createHash } from "node:crypto";
import pg from "pg";

export type Dump = Map<string, string[]>;

export async function dump(url: string, tenantId?: string): Promise<Dump> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const tables = (
      await c.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> '_app_migrations' ORDER BY 1`,
      )
    ).rows.map((r) => r.table_name);
    const cols = new Map<string, Set<string>>();
    for (const r of (
      await c.query<{ table_name: string; column_name: string }>(
        `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'`,
      )
    ).rows) {
      if (!cols.has(r.table_name)) cols.set(r.table_name, new Set());
      cols.get(r.table_name)!.add(r.column_name);
    }
    const out: Dump = new Map();
    for (const t of tables) {
      let where = "";
      const params: unknown[] = [];
      if (tenantId) {
        params.push(tenantId);
        if (cols.get(t)?.has("tenantId")) where = `WHERE x."tenantId" = $1`;
        else if (t === "Tenant") where = `WHERE x."id" = $1`;
        else {
          params.pop();
          where = ""; // global table (PlanLimit): dumped whole
        }
      }
      // The changes feed's bookkeeping is not data: the background sequencer places pending changes
      // (ChangeLog."pos", ChangeHead) at any moment. A real change still shows in ChangeLog's other
      // columns (a new row, a new changedAt or action).
      if (t === "ChangeHead") continue;
      const row = t === "ChangeLog" ? `(row_to_json(x)::jsonb - 'pos')` : "row_to_json(x)";
      const rows = (await c.query<{ j: string }>(`SELECT ${row}::text AS j FROM "${t}" x ${where}`, params)).rows.map(
        (r) => r.j,
      );
      out.set(t, rows.sort());
    }
    return out;
  } finally {
    await c.end();
  }
}

export function digest(d: Dump): string {
  const h = createHash("sha256");
  for (const [t, rows] of d) h.update(`${t}\n${rows.join("\n")}\n`);
  return h.digest("hex");
}

/** Human-readable differences (table: +added −removed), empty when identical. */
export function diff(before: Dump, after: Dump): string[] {
  const out: string[] = [];
  for (const t of new Set([...before.keys(), ...after.keys()])) {
    const b = new Set(before.get(t) ?? []);
    const a = new Set(after.get(t) ?? []);
    const added = [...a].filter((r) => !b.has(r));
    const removed = [...b].filter((r) => !a.has(r));
    if (added.length || removed.length)
      out.push(`${t}: +${added.length} −${removed.length}${added[0] ? ` e.g. ${added[0].slice(0, 160)}` : ""}`);
  }
  return out;
}
