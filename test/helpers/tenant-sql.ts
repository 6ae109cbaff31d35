// Which tenant does a statement touch? A conservative check of SQL text as PostgreSQL parses it
// (libpg-query: PostgreSQL's own parser compiled to WebAssembly), used by test/db/tenant-queries.test.ts
// on every statement the API sends. What it proves and where it stops: docs/decisions/scale-out.md,
// "Every statement pinned to the caller's tenant".
//
// A relation of a tenant-scoped table (one with "tenantId", and the tenants table by its id) is
// "pinned" when the statement's own conditions fix its tenant column to known values:
//   col = $n | 'literal' | $n::type          col IN (...values) / (col, x) IN ((...), ...)
//   col = ANY($n) (an array parameter)       col IN (SELECT c ...) / (col, x) IN (SELECT ...) with c pinned there
//   col = other.col, where other is pinned   (inner joins and WHERE both ways; a LEFT JOIN's ON clause only
//                                             pins its nullable side), including columns of an enclosing
//                                             query (correlated subqueries) and of derived tables / CTEs
//   unique = value on a reference table whose single-column unique key names one row (the API key's
//   prefix): that row's tenant is pinned as "@Table.col=value".
// Anything else pins nothing, so a statement the analysis does not understand fails (never passes by
// accident). INSERT must give the tenant column a value (VALUES or a pinned SELECT column); UPDATE may
// not set it. Values are the statement's real parameters, so a request's statements can be compared with
// the caller's own tenant.
import { loadModule, parseSync } from "libpg-query";
import type { Catalog } from "./citus.js";

export interface TenantModel {
  /** Every public table. */
  tables: Set<string>;
  /** Each table's Citus role ("reference", "distributed", "local"), where it has one. */
  roles: Map<string, string>;
  /** Tenant-scoped table → the column naming its tenant. */
  tenantColumn: Map<string, string>;
  columns: Map<string, Set<string>>;
  /** Reference tables with tenant data → their single-column unique keys (one row, so one tenant). */
  globalKeys: Map<string, Set<string>>;
}

export interface Analysis {
  /** Every violation found, with the statement's head. */
  problems: string[];
  /** The tenant values the statement's tenant-scoped relations are pinned to ("=value" or "@Table.col=value"). */
  tenants: Set<string>;
  /** The tenant-scoped tables it touches. */
  tables: Set<string>;
}

export const loadSqlParser = () => loadModule();

/** The model of the catalog: tenant columns ("tenantId"; the tenants table's own key) and global keys. */
export function tenantModel(cat: Catalog): TenantModel {
  const columns = new Map(
    [...cat.tables.values()].map((t) => [t.name, new Set([...t.columns.values()].map((c) => c.name))]),
  );
  const tenantColumn = new Map<string, string>();
  for (const [name, cols] of columns) if (cols.has("tenantId")) tenantColumn.set(name, "tenantId");
  // The tenants table: what a single-column "tenantId" foreign key references.
  for (const f of cat.constraints) {
    if (f.type !== "f" || f.keys.length !== 1) continue;
    const from = cat.tables.get(f.table)!;
    if (from.columns.get(f.keys[0]!)?.name !== "tenantId") continue;
    tenantColumn.set(f.refTable!, cat.tables.get(f.refTable!)!.columns.get(f.refKeys![0]!)!.name);
  }
  const globalKeys = new Map<string, Set<string>>();
  for (const i of cat.indexes) {
    const t = cat.tables.get(i.table)!;
    if (
      t.role?.kind !== "reference" ||
      !tenantColumn.has(t.name) ||
      !i.unique ||
      i.keys.length !== 1 ||
      i.keys[0] === 0
    )
      continue;
    const col = t.columns.get(i.keys[0]!)!.name;
    if (col === tenantColumn.get(t.name)) continue;
    if (!globalKeys.has(t.name)) globalKeys.set(t.name, new Set());
    globalKeys.get(t.name)!.add(col);
  }
  const roles = new Map([...cat.tables.values()].filter((t) => t.role).map((t) => [t.name, t.role!.kind]));
  return { tables: new Set(columns.keys()), roles, tenantColumn, columns, globalKeys };
}

type Node = any;
type Pins = Set<string>;
interface Output {
  name?: string;
  pins?: Pins;
}
interface Rel {
  alias: string;
  table?: string;
  /** derived tables, CTEs: their columns and what each is pinned to */
  outputs?: Output[];
  /** functions, other schemas: columns unknown */
  opaque?: boolean;
}

const MAX_NODES = 100_000; // a statement is bounded; so is the walk over it
/** A NULL: "col = NULL" / "col IN (NULL)" matches no row, so it touches no tenant (Prisma's empty relation loads). */
const NOTHING = "∅";

class Scope {
  rels: Rel[] = [];
  private parent = new Map<string, string>();
  private pins = new Map<string, Pins>();
  private edges: [string, string][] = [];
  constructor(
    readonly up: Scope | undefined,
    readonly ctes: Map<string, Output[]>,
    readonly model: TenantModel,
  ) {}

  rel(alias: string): Rel | undefined {
    return this.rels.find((r) => r.alias === alias);
  }
  private hasColumn(r: Rel, col: string): boolean | undefined {
    if (r.table) return this.model.columns.get(r.table)?.has(col);
    if (r.outputs) return r.outputs.some((o) => o.name === col);
    return undefined;
  }
  /** Where a column reference points: this scope or an enclosing one (correlation). */
  resolve(fields: string[]): { scope: Scope; key: string } | undefined {
    const col = fields[fields.length - 1]!;
    if (fields.length >= 2) {
      const alias = fields[fields.length - 2]!;
      for (let s: Scope | undefined = this; s; s = s.up) if (s.rel(alias)) return { scope: s, key: `${alias}.${col}` };
      return undefined;
    }
    for (let s: Scope | undefined = this; s; s = s.up) {
      const hits = s.rels.filter((r) => s!.hasColumn(r, col));
      if (hits.length === 1) return { scope: s, key: `${hits[0]!.alias}.${col}` };
      if (hits.length > 1 || s.rels.some((r) => r.opaque)) return undefined;
    }
    return undefined;
  }
  private find(k: string): string {
    let x = k;
    for (let p = this.parent.get(x); p !== undefined && p !== x; p = this.parent.get(x)) x = p;
    return x;
  }
  union(a: string, b: string) {
    const [ra, rb] = [this.find(a), this.find(b)];
    if (ra === rb) return;
    this.parent.set(ra, rb);
    const pa = this.pins.get(ra);
    if (pa) this.pin(rb, pa);
  }
  edge(from: string, to: string) {
    this.edges.push([from, to]);
  }
  pin(key: string, values: Iterable<string>) {
    const r = this.find(key);
    const set = this.pins.get(r) ?? new Set<string>();
    for (const v of values) set.add(v);
    this.pins.set(r, set);
  }
  /** Propagates pins along directed edges (LEFT JOIN conditions) until nothing changes. */
  settle() {
    for (let changed = true, rounds = 0; changed && rounds <= this.edges.length; rounds++) {
      changed = false;
      for (const [from, to] of this.edges) {
        const p = this.pinsOf(from);
        if (p && !this.pinsOf(to)) {
          this.pin(to, p);
          changed = true;
        }
      }
    }
  }
  pinsOf(key: string): Pins | undefined {
    const p = this.pins.get(this.find(key));
    return p?.size ? p : undefined;
  }
}

/** Analyses one statement (or a script of several) with its parameter values. */
export function analyzeSql(sql: string, params: readonly unknown[], model: TenantModel): Analysis {
  const out: Analysis = { problems: [], tenants: new Set(), tables: new Set() };
  const flatSql = sql.replace(/\s+/g, " ").trim();
  const where = flatSql.indexOf(" WHERE ");
  const head =
    flatSql.length <= 240
      ? flatSql
      : `${flatSql.slice(0, 80)} …${where > 80 ? flatSql.slice(where, where + 200) : flatSql.slice(80, 240)}`;
  const problem = (p: string) => out.problems.push(`${p} — in: ${head}`);
  let tree: Node;
  try {
    tree = parseSync(sql);
  } catch (e) {
    problem(`unparseable (${(e as Error).message})`);
    return out;
  }
  let budget = MAX_NODES;
  const spend = () => {
    if (--budget < 0) throw new Error("statement too large to analyse");
  };
  const done = new WeakMap<object, Output[]>();

  const str = (n: Node): string | undefined => n?.String?.sval;
  const param = (n: number): unknown => params[n - 1];
  const flat = (v: unknown): string[] | undefined => {
    if (v === null) return [NOTHING];
    if (v === undefined) return undefined;
    if (Array.isArray(v)) return v.flatMap((x) => flat(x) ?? []);
    if (v instanceof Date) return [`=${v.toISOString()}`];
    return [`=${String(v)}`];
  };
  const constant = (c: Node): string[] | undefined => {
    if (c.isnull) return [NOTHING];
    const v =
      c.sval?.sval ?? c.ival?.ival ?? c.fval?.fval ?? c.boolval?.boolval ?? c.bsval?.bsval ?? (c.ival ? 0 : undefined);
    return v === undefined ? undefined : [`=${String(v)}`];
  };
  const unwrap = (n: Node): Node => (n?.TypeCast ? unwrap(n.TypeCast.arg) : n);

  /** A value known to the statement: a parameter, a literal, a column of an enclosing scope that is pinned. */
  const valuesOf = (n: Node, scope: Scope): string[] | undefined => {
    n = unwrap(n);
    if (n?.ParamRef) return flat(param(n.ParamRef.number));
    if (n?.A_Const) return constant(n.A_Const);
    if (n?.ColumnRef) {
      const fields = (n.ColumnRef.fields as Node[]).map(str);
      if (fields.some((f) => f === undefined)) return undefined;
      const r = scope.resolve(fields as string[]);
      if (!r || r.scope === scope) return undefined;
      const p = r.scope.pinsOf(r.key);
      return p ? [...p] : undefined;
    }
    if (n?.SubLink?.subLinkType === "EXPR_SUBLINK") {
      const o = select(n.SubLink.subselect, scope);
      return o[0]?.pins ? [...o[0].pins] : undefined;
    }
    return undefined;
  };
  /** A column of this very scope, as its key. */
  const localColumn = (n: Node, scope: Scope): string | undefined => {
    n = unwrap(n);
    if (!n?.ColumnRef) return undefined;
    const fields = (n.ColumnRef.fields as Node[]).map(str);
    if (fields.some((f) => f === undefined)) return undefined;
    const r = scope.resolve(fields as string[]);
    return r && r.scope === scope ? r.key : undefined;
  };
  const aliasOf = (key: string) => key.slice(0, key.lastIndexOf("."));

  /** col = value, col = col, in a context where only `only` aliases may receive pins (LEFT JOIN ON). */
  const equal = (a: Node, b: Node, scope: Scope, only: Set<string> | undefined) => {
    const ca = localColumn(a, scope);
    const cb = localColumn(b, scope);
    const may = (k: string) => !only || only.has(aliasOf(k));
    if (ca && cb) {
      if (may(ca) && may(cb)) scope.union(ca, cb);
      else if (may(cb)) scope.edge(ca, cb);
      else if (may(ca)) scope.edge(cb, ca);
      return;
    }
    const [col, other] = ca ? [ca, b] : cb ? [cb, a] : [undefined, undefined];
    if (!col || !may(col)) return;
    const v = valuesOf(other, scope);
    if (v) {
      scope.pin(col, v);
      const rel = scope.rel(aliasOf(col));
      const name = col.slice(col.lastIndexOf(".") + 1);
      if (rel?.table && model.globalKeys.get(rel.table)?.has(name))
        scope.pin(
          `${rel.alias}.${model.tenantColumn.get(rel.table)}`,
          v.map((x) => `@${rel.table}.${name}${x}`),
        );
    }
  };
  const isEq = (e: Node) => (e.name as Node[] | undefined)?.map(str).join(".") === "=";
  const rowArgs = (n: Node): Node[] | undefined => unwrap(n)?.RowExpr?.args;

  const conjuncts = (n: Node, acc: Node[] = []): Node[] => {
    if (!n) return acc;
    if (n.BoolExpr?.boolop === "AND_EXPR") for (const a of n.BoolExpr.args) conjuncts(a, acc);
    else acc.push(n);
    return acc;
  };

  /** Pins from one condition; IN (SELECT ...) only in the second pass (it may use the first pass's pins). */
  const condition = (c: Node, scope: Scope, only: Set<string> | undefined, pass: 1 | 2) => {
    const e = c.A_Expr;
    if (pass === 1 && e && isEq(e)) {
      if (e.kind === "AEXPR_OP") {
        const [l, r] = [rowArgs(e.lexpr), rowArgs(e.rexpr)];
        if (l && r && l.length === r.length) for (const [i, x] of l.entries()) equal(x, r[i], scope, only);
        else equal(e.lexpr, e.rexpr, scope, only);
      } else if (e.kind === "AEXPR_IN") {
        const items: Node[] = e.rexpr?.List?.items ?? [];
        const lrow = rowArgs(e.lexpr);
        const positions = lrow ?? [e.lexpr];
        positions.forEach((target, i) => {
          const col = localColumn(target, scope);
          if (!col || (only && !only.has(aliasOf(col)))) return;
          const vals: string[] = [];
          for (const item of items) {
            const v = valuesOf(lrow ? rowArgs(item)?.[i] : item, scope);
            if (!v) return;
            vals.push(...v);
          }
          if (vals.length) scope.pin(col, vals);
        });
      } else if (e.kind === "AEXPR_OP_ANY") {
        const col = localColumn(e.lexpr, scope);
        const v = valuesOf(e.rexpr, scope);
        if (col && v && (!only || only.has(aliasOf(col)))) scope.pin(col, v);
      }
    }
    const s = c.SubLink;
    if (
      pass === 2 &&
      s?.subLinkType === "ANY_SUBLINK" &&
      s.testexpr &&
      ((s.operName as Node[] | undefined)?.map(str).join(".") ?? "=") === "="
    ) {
      const outputs = select(s.subselect, scope);
      const targets = rowArgs(s.testexpr) ?? [s.testexpr];
      targets.forEach((target, i) => {
        const col = localColumn(target, scope);
        const p = outputs[i]?.pins;
        if (col && p && (!only || only.has(aliasOf(col)))) scope.pin(col, p);
      });
    }
  };

  /** Every SubLink under n (not inside another SubLink) is analysed as a scope of its own. */
  const sublinks = (n: Node, scope: Scope) => {
    spend();
    if (!n || typeof n !== "object") return;
    if (Array.isArray(n)) {
      for (const x of n) sublinks(x, scope);
      return;
    }
    if (n.SubLink) {
      select(n.SubLink.subselect, scope);
      sublinks(n.SubLink.testexpr, scope);
      return;
    }
    for (const v of Object.values(n)) sublinks(v, scope);
  };

  const aliasesOf = (item: Node, acc = new Set<string>()): Set<string> => {
    if (item.RangeVar) acc.add(item.RangeVar.alias?.aliasname ?? item.RangeVar.relname);
    else if (item.RangeSubselect || item.RangeFunction)
      acc.add((item.RangeSubselect ?? item.RangeFunction).alias?.aliasname ?? "");
    else if (item.JoinExpr) {
      aliasesOf(item.JoinExpr.larg, acc);
      aliasesOf(item.JoinExpr.rarg, acc);
    }
    return acc;
  };

  interface Pending {
    quals: { node: Node; only: Set<string> | undefined }[];
    lateral: { rel: Rel; node: Node }[];
  }
  /** A derived table's (subquery's, CTE's) columns keep what they are pinned to inside it. */
  const seed = (scope: Scope, rel: Rel, outputs: Output[]) => {
    rel.outputs = outputs;
    for (const o of outputs) if (o.name && o.pins?.size) scope.pin(`${rel.alias}.${o.name}`, o.pins);
  };
  const relation = (rv: Node, scope: Scope): Rel => {
    const alias = rv.alias?.aliasname ?? rv.relname;
    if (rv.schemaname && rv.schemaname !== "public") return { alias, opaque: true };
    if (!rv.schemaname && scope.ctes.has(rv.relname)) return { alias, outputs: scope.ctes.get(rv.relname) };
    if (!model.tables.has(rv.relname)) problem(`unknown table "${rv.relname}"`);
    return { alias, table: rv.relname };
  };
  const from = (item: Node, scope: Scope, pending: Pending) => {
    spend();
    if (item.RangeVar) {
      const rel = relation(item.RangeVar, scope);
      scope.rels.push(rel);
      if (rel.outputs) seed(scope, rel, rel.outputs);
    } else if (item.RangeSubselect) {
      const r = item.RangeSubselect;
      const rel: Rel = { alias: r.alias?.aliasname ?? "", outputs: [] };
      scope.rels.push(rel);
      if (r.lateral) pending.lateral.push({ rel, node: r.subquery });
      else seed(scope, rel, select(r.subquery, new Scope(scope.up, scope.ctes, model)));
    } else if (item.RangeFunction) {
      scope.rels.push({ alias: item.RangeFunction.alias?.aliasname ?? "", opaque: true });
      sublinks(item.RangeFunction, scope);
    } else if (item.JoinExpr) {
      const j = item.JoinExpr;
      from(j.larg, scope, pending);
      from(j.rarg, scope, pending);
      const only =
        j.jointype === "JOIN_LEFT"
          ? aliasesOf(j.rarg)
          : j.jointype === "JOIN_RIGHT"
            ? aliasesOf(j.larg)
            : j.jointype === "JOIN_FULL"
              ? new Set<string>()
              : undefined;
      if (j.quals) pending.quals.push({ node: j.quals, only });
    } else problem(`unsupported FROM item ${Object.keys(item)[0]}`);
  };

  /** Checks the scope's tenant-scoped relations; returns nothing. */
  const check = (scope: Scope) => {
    for (const r of scope.rels) {
      const col = r.table && model.tenantColumn.get(r.table);
      if (!r.table || !col) continue;
      out.tables.add(r.table);
      const p = scope.pinsOf(`${r.alias}.${col}`);
      if (!p) problem(`${r.table}${r.alias !== r.table ? ` (as ${r.alias})` : ""} is not constrained by "${col}"`);
      else for (const v of p) if (v !== NOTHING) out.tenants.add(v);
    }
  };

  /** Conditions → pins (two passes), then directed edges, lateral subqueries and the remaining subqueries. */
  const solve = (scope: Scope, where: Node, pending: Pending, rest: Node[]) => {
    const all = [
      ...conjuncts(where).map((node) => ({ node, only: undefined as Set<string> | undefined })),
      ...pending.quals.flatMap((q) => conjuncts(q.node).map((node) => ({ node, only: q.only }))),
    ];
    for (const pass of [1, 2] as const) {
      for (const c of all) condition(c.node, scope, c.only, pass);
      scope.settle();
    }
    for (const l of pending.lateral) seed(scope, l.rel, select(l.node, scope));
    sublinks([where, ...pending.quals.map((q) => q.node), ...rest], scope);
    check(scope);
  };

  const withClause = (w: Node, up: Scope | undefined, ctes: Map<string, Output[]>): Map<string, Output[]> => {
    const next = new Map(ctes);
    for (const c of w?.ctes ?? []) {
      const cte = c.CommonTableExpr;
      // WITH RECURSIVE: the query names itself (its recursive arm reads the rows found so far).
      if (w.recursive) next.set(cte.ctename, []);
      const outputs = statement(cte.ctequery, new Scope(up, next, model)) ?? [];
      const names = (cte.aliascolnames as Node[] | undefined)?.map(str);
      next.set(cte.ctename, names ? outputs.map((o, i) => ({ ...o, name: names[i] })) : outputs);
    }
    return next;
  };

  const outputsOf = (targets: Node[], scope: Scope): Output[] =>
    (targets ?? []).map((t) => {
      const rt = t.ResTarget;
      const val = unwrap(rt.val);
      const name = rt.name ?? (val?.ColumnRef ? str((val.ColumnRef.fields as Node[]).at(-1)) : undefined);
      const col = localColumn(val, scope);
      const pins = col ? scope.pinsOf(col) : (valuesOf(val, scope) ?? undefined);
      return { name, pins: pins ? new Set(pins) : undefined };
    });

  /** A SELECT (or VALUES, or set operation) → its output columns with their pins. */
  function select(node: Node, up: Scope | undefined): Output[] {
    const s = node?.SelectStmt;
    if (!s) return statement(node, new Scope(up, up?.ctes ?? new Map(), model)) ?? [];
    const cached = done.get(s);
    if (cached) return cached;
    spend();
    const ctes = withClause(s.withClause, up, up?.ctes ?? new Map());
    let outputs: Output[];
    if (s.op && s.op !== "SETOP_NONE") {
      // The arms see the set operation's own WITH (e.g. a recursive CTE's body).
      const arms = s.withClause ? new Scope(up, ctes, model) : up;
      const left = select({ SelectStmt: s.larg }, arms);
      select({ SelectStmt: s.rarg }, arms);
      outputs = left.map((o) => ({ name: o.name }));
    } else if (s.valuesLists) {
      const scope = new Scope(up, ctes, model);
      const rows = (s.valuesLists as Node[]).map((l) => l.List.items as Node[]);
      outputs = (rows[0] ?? []).map((_, i) => {
        const vals: string[] = [];
        for (const row of rows) {
          const v = valuesOf(row[i], scope);
          if (!v) return {};
          vals.push(...v);
        }
        return { pins: new Set(vals) };
      });
      sublinks(rows, scope);
    } else {
      const scope = new Scope(up, ctes, model);
      const pending: Pending = { quals: [], lateral: [] };
      for (const item of s.fromClause ?? []) from(item, scope, pending);
      solve(scope, s.whereClause, pending, [s.targetList, s.havingClause, s.sortClause, s.limitCount, s.limitOffset]);
      outputs = outputsOf(s.targetList, scope);
    }
    done.set(s, outputs);
    return outputs;
  }

  /** Any statement; returns the outputs of a SELECT (for CTEs), undefined otherwise. */
  function statement(stmt: Node, scope: Scope): Output[] | undefined {
    spend();
    // A CTE's SELECT sees the CTEs named before it (scope carries them; it has no relations of its own).
    if (stmt.SelectStmt) return select(stmt, scope);
    if (stmt.InsertStmt) {
      const i = stmt.InsertStmt;
      const ctes = withClause(i.withClause, scope.up, scope.ctes);
      const rel = relation(i.relation, new Scope(scope.up, ctes, model));
      const cols: string[] = (i.cols ?? []).map((c: Node) => c.ResTarget.name);
      const outputs = i.selectStmt ? select(i.selectStmt, new Scope(scope.up, ctes, model)) : [];
      const col = rel.table && model.tenantColumn.get(rel.table);
      if (rel.table && col) {
        out.tables.add(rel.table);
        const at = cols.indexOf(col);
        const pins = at < 0 ? undefined : outputs[at]?.pins;
        if (!pins?.size || pins.has(NOTHING)) problem(`INSERT INTO ${rel.table} without a known "${col}"`);
        else for (const v of pins) out.tenants.add(v);
      }
      sublinks([i.onConflictClause, i.returningList], new Scope(scope.up, ctes, model));
      return undefined;
    }
    if (stmt.UpdateStmt || stmt.DeleteStmt) {
      const u = stmt.UpdateStmt ?? stmt.DeleteStmt;
      const ctes = withClause(u.withClause, scope.up, scope.ctes);
      const inner = new Scope(scope.up, ctes, model);
      const target = relation(u.relation, inner);
      inner.rels.push(target);
      const pending: Pending = { quals: [], lateral: [] };
      for (const item of u.fromClause ?? u.usingClause ?? []) from(item, inner, pending);
      const col = target.table && model.tenantColumn.get(target.table);
      if (stmt.UpdateStmt && col && (u.targetList as Node[]).some((t) => t.ResTarget.name === col))
        problem(
          `UPDATE ${target.table} sets ` +
            `"${col}" (rows never move between tenants; Citus cannot update the distribution column)`,
        );
      solve(inner, u.whereClause, pending, [u.targetList, u.returningList]);
      return undefined;
    }
    return undefined; // BEGIN, COMMIT, SET LOCAL, ...: no table
  }

  try {
    for (const raw of tree.stmts ?? []) statement(raw.stmt, new Scope(undefined, new Map(), model));
  } catch (e) {
    problem(String((e as Error).message));
  }
  return out;
}
