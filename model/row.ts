// One definition per resource row (issue 27): a resource declares its columns ONCE, in a small typed
// column table, and everything else that names them comes from it:
//   the select list     `def.select(alias)`: the columns as the statements name them (`l."id", …`,
//                       a joined column as `ch."kind" AS "channelKind"`), one text per alias, built
//                       once (prepared statements see the same SQL every time)
//   the row type        `RowOf<typeof Def>`: what a read returns; every instant is `Iso` text
//   the public mapper   `def.toPublic(Object, { composed, internal })`: the public zod object's fields
//                       that are a column of the same name and type are copied (instants made Iso),
//                       the others are written as explicit code (`composed`); a compile-time check
//                       (and the same check at import) that every public field is mapped and every
//                       column is either public or named as read by composed code (`internal`)
//   the byte budget     `def.texts`/`def.arrays` (the text columns a page's JSON size grows with) and
//                       `def.widest()` (the sample of the fixed part): routers/_lib/page-budget.ts
// Why a table of our own rather than Prisma TypedSQL or Kysely: docs/adding-a-resource.md, "The row
// definition" (the statements stay composed Prisma.sql on the raw runner; measured there).
import type { z } from "zod";
import { Prisma } from "../generated/prisma/client.js";
import { toIso, type Iso } from "./instants.js";

type Kind = "uuid" | "text" | "int" | "bool" | "instant" | "textArray" | "enum";

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A column: its kind, whether it may be NULL and, for a column of a joined table, its SQL (`cu."name"`).
 * `R` is its type in a row, `M` what a Prisma model row of the table holds there (a Date for an instant,
 * a plain string for a domain-checked enum).
 */
export class Column<R, M = R> {
  declare readonly _row: R;
  declare readonly _model: M;
  constructor(
    readonly kind: Kind,
    readonly isNullable = false,
    /** The SQL of the value when it is not the row's own table's column (a joined table's, e.g. `ch."kind"`). */
    readonly expr?: string,
    /** An enum's values (a domain the database checks). */
    readonly values?: readonly string[],
  ) {}

  nullable(): Column<R | null, M | null> {
    return new Column(this.kind, true, this.expr, this.values);
  }

  /** Read from another expression than the row table's own column (a joined table's: `cu."name"`). */
  from(expr: string): Column<R, M> {
    return new Column(this.kind, this.isNullable, expr, this.values);
  }
}

/** The column kinds. Every column a row reads is one of these (the raw runner parses each as Prisma does). */
export const col = {
  uuid: () => new Column<string>("uuid"),
  text: () => new Column<string>("text"),
  int: () => new Column<number>("int"),
  bool: () => new Column<boolean>("bool"),
  /** timestamptz: Iso text in a row (model/instants.ts), a Date in a Prisma model row. */
  instant: () => new Column<Iso, Date | Iso>("instant"),
  textArray: () => new Column<string[]>("textArray"),
  /** A text domain of these values (the database checks it). */
  enum: <const V extends readonly string[]>(values: V) =>
    new Column<V[number], string>("enum", false, undefined, values),
};

type Columns = Record<string, Column<unknown, unknown>>;

type RowType<C extends Columns, X> = { [K in keyof C]: C[K]["_row"] } & X;
type ModelType<C extends Columns, X> = { [K in keyof C]: C[K]["_model"] } & X;
/** The row a read returns: every column at its row type (instants as Iso), plus the def's `with` fields. */
export type RowOf<D> = D extends RowDef<infer C, infer X> ? RowType<C, X> : never;
/**
 * What a write stores in a definition's own table: every column of its row and the tenant, plus the
 * table's columns the row does not read (`Extra`), minus fields the row carries besides its columns
 * (`Not`, e.g. a ticket's thread). `row satisfies StoredRow<LeadRow>` (the creates, the fixture
 * loader): a column added to the definition and not written there fails to compile.
 */
export type StoredRow<R, Extra extends string = never, Not extends keyof R = never> = Record<
  Exclude<keyof R, Not> | "tenantId" | Extra,
  unknown
>;
/** What a mapper also accepts: a Prisma model row of the table (its Dates, its plain strings for enums). */
export type ModelOf<D> = D extends RowDef<infer C, infer X> ? ModelType<C, X> : never;

/** The public fields that are a column of the same name whose row type fits the field's type. */
type OneToOne<R, O> = { [K in keyof O & keyof R]: R[K] extends O[K] ? K : never }[keyof O & keyof R];
/** Explicit code for every other public field, over the row as the mapper receives it. */
type Composed<R, M, O> = { [K in Exclude<keyof O, OneToOne<R, O>>]: (r: M) => O[K] };
/** A column that is neither copied to a public field nor named in `internal` makes this a required, unsatisfiable property. */
type AllMapped<K> = [K] extends [never]
  ? unknown
  : { unmappedColumn: `not mapped to the public object, nor listed in internal: ${K & string}` };

/** Widest JSON sample of each kind (routers/_lib/page-budget.ts: the fixed part of an item's size). */
const WIDEST = {
  uuid: "ffffffff-ffff-ffff-ffff-ffffffffffff",
  text: "",
  int: -2_147_483_648,
  bool: false,
  instant: "2026-11-20T08:00:00.000Z",
  textArray: [] as string[],
} as const;

export class RowDef<C extends Columns, X = unknown> {
  /** The columns' names in declaration order. */
  readonly names: (keyof C & string)[];
  /** The text columns, in declaration order: a page's JSON size grows with them (page-budget.ts). */
  readonly texts: (keyof C & string)[];
  /** The text[] columns, in declaration order. */
  readonly arrays: (keyof C & string)[];
  private readonly selects = new Map<string, Prisma.Sql>();

  constructor(
    /** The table the row is read from (its own columns). */
    readonly table: string,
    readonly columns: C,
  ) {
    this.names = Object.keys(columns) as (keyof C & string)[];
    for (const n of this.names) if (!IDENT.test(n)) throw new Error(`${table}: bad column name ${n}`);
    this.texts = this.names.filter((n) => columns[n]!.kind === "text");
    this.arrays = this.names.filter((n) => columns[n]!.kind === "textArray");
  }

  /** The SQL of one column's value: a joined column's expression, else the table's column (under `alias`, if any). */
  sql(name: keyof C & string, alias?: string): string {
    return this.columns[name]!.expr ?? (alias ? `${alias}."${name}"` : `"${name}"`);
  }

  /**
   * The select list: every column, under `alias` (unqualified without one), a joined column as
   * `<expr> AS "<name>"`; built once per alias.
   */
  select(alias?: string): Prisma.Sql {
    const key = alias ?? "";
    let sql = this.selects.get(key);
    if (!sql) {
      if (alias !== undefined && !IDENT.test(alias)) throw new Error(`bad alias ${alias}`);
      const list = this.names.map((n) =>
        this.columns[n]!.expr ? `${this.columns[n]!.expr} AS "${n}"` : this.sql(n, alias),
      );
      sql = Prisma.raw(list.join(", "));
      this.selects.set(key, sql);
    }
    return sql;
  }

  /**
   * The same definition whose rows also carry `Y`: fields the resource's own statement adds beside the
   * columns (a ticket's thread as json_agg), not in the select list.
   */
  with<Y>(): RowDef<C, X & Y> {
    return this as unknown as RowDef<C, X & Y>;
  }

  /** A row whose every field is at its widest in JSON (texts empty: their size is counted apart). */
  widest(): { [K in keyof C]: C[K]["_row"] } {
    const row: Record<string, unknown> = {};
    for (const n of this.names) {
      const c = this.columns[n]!;
      row[n] = c.kind === "enum" ? c.values!.reduce((a, b) => (b.length > a.length ? b : a)) : WIDEST[c.kind];
    }
    return row as { [K in keyof C]: C[K]["_row"] };
  }

  /**
   * A row of this table as read by Prisma's model API (Dates) → the row (Iso instants). The mappers
   * do this themselves; for code that keeps a row (a cursor) rather than mapping it.
   */
  parse(model: ModelType<C, X>): RowType<C, X> {
    const m = model as Record<string, unknown>;
    const row: Record<string, unknown> = { ...m };
    for (const n of this.names) if (this.columns[n]!.kind === "instant") row[n] = toIso(m[n] as Date | string | null);
    return row as RowType<C, X>;
  }

  /**
   * The mapper to the public object `object`: each of its fields that is a column of the same name and
   * type is copied (an instant made Iso), every other field is `composed` code; `internal` names the
   * columns that only composed code reads. It takes a row (RowOf) or a Prisma model row of the table.
   * Built at import as one function whose object literal lists the fields in the public object's order
   * (a literal keeps one hidden class per resource; a generic copy loop cost ~4× more: measured in
   * docs/adding-a-resource.md).
   */
  toPublic<S extends z.ZodRawShape, const I extends readonly (keyof C & string)[] = []>(
    object: z.ZodObject<S>,
    spec: { composed: Composed<RowType<C, X>, ModelType<C, X>, z.output<z.ZodObject<S>>>; internal?: I } & AllMapped<
      Exclude<keyof C, OneToOne<RowType<C, X>, z.output<z.ZodObject<S>>> | I[number]>
    >,
  ): (row: ModelType<C, X>) => z.output<z.ZodObject<S>> {
    const composed = spec.composed as Record<string, (r: unknown) => unknown>;
    const internal = new Set<string>(spec.internal ?? []);
    const fields = Object.keys(object.shape);
    const fromColumn = (f: string) => !(f in composed);
    // The same checks as the types, at import (a cast cannot slip past them).
    for (const f of fields) {
      if (!IDENT.test(f)) throw new Error(`${this.table}: bad public field ${f}`);
      if (fromColumn(f) && !(f in this.columns))
        throw new Error(`${this.table}: public field ${f} is neither a column nor composed`);
    }
    for (const n of this.names)
      if (!internal.has(n) && !(fields.includes(n) && fromColumn(n)))
        throw new Error(`${this.table}: column ${n} is not mapped to the public object, nor listed in internal`);
    for (const k of Object.keys(composed))
      if (!fields.includes(k)) throw new Error(`${this.table}: composed ${k} is not a public field`);
    const literal = fields
      .map((f) =>
        !fromColumn(f) ? `${f}: c.${f}(r)` : this.columns[f]!.kind === "instant" ? `${f}: t(r.${f})` : `${f}: r.${f}`,
      )
      .join(", ");
    const make = new Function("c", "t", `return function to${this.table}(r) { return { ${literal} }; };`) as (
      c: Record<string, (r: unknown) => unknown>,
      t: typeof toIso,
    ) => (row: ModelType<C, X>) => z.output<z.ZodObject<S>>;
    return make(composed, toIso);
  }
}

/** A row definition: the table the row is read from and its columns, in the order the select lists them. */
export function defineRow<C extends Columns>(table: string, columns: C): RowDef<C> {
  if (!IDENT.test(table)) throw new Error(`bad table name ${table}`);
  return new RowDef(table, columns);
}
