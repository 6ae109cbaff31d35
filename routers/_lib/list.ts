// One declaration per list, one executor for all of them. A list states once what it is — its table
// (whose counters routers/_lib/counters.ts registers), its orders, how the page's rows become full
// rows (a thread, a channel and customer joined), their JSON size and the mapper — and `read()`
// answers any page of it: the exact total (a counter, the buckets of a range of the order column, or
// an index count), the page in the order asked (`sort`; a deep offset through the buckets, or a keyset
// cursor), cut to the page byte budget, in ONE statement (routers/_lib/totals.ts listStatement), with
// /trpc batches' one oversized item, `stableBefore` and the next cursor. The query pieces every list
// takes are here too (`sort`, `updatedFrom`/`updatedTo`, `id`/`externalId` lists, `cursor`), so no list
// restates them; an operation keeps only its own rules (which inputs filter what, which values match
// nothing). `eq()` finds a filter's counter in the registry by its column.
import { createHash } from "node:crypto";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { TRANSACTION_TIMEOUT_MS } from "../../server/db/client.js";
import { MAX_LISTED_IDS } from "../../server/http-server.js";
import { validation } from "../../server/errors.js";
import { toIso, type Iso } from "../../model/instants.js";
import { budgetCut, cutToBudget, oversizedAllowed, withheld, type Cut, type ItemSize } from "./page-budget.js";
import { LIST_COUNTERS, type CountedList, type ListEntity } from "./counters.js";
import { DateTimeInput, Id, isStorableInstant, offsetList, Timestamp } from "./schemas.js";
import { ExternalId } from "./sync.js";
import {
  counter,
  countedRange,
  exactTotal,
  listRows,
  listStatement,
  splitList,
  sqlTime,
  whereOf,
  type Filter,
  type Seek,
} from "./totals.js";
import type { AuthedContext } from "../trpc.js";

/** An order of a list: a column of the table and its direction; ties by id in the same direction. */
export interface Order {
  column: string;
  desc: boolean;
}

export interface ListSpec<R, O> {
  /** The list's table: its counters, its buckets (the registry's `order`). */
  entity: ListEntity;
  /** The default order. */
  order: Order;
  /** The columns `sort` may name (each ascending, or descending with "-"). */
  sorts: readonly string[];
  /**
   * What the page selects from the table in order (default `*`): `"id"` when the full rows are read
   * by id afterwards (a narrow index gives the page's ids first).
   */
  pick?: Prisma.Sql;
  /** The page's rows as sized, from that SELECT (its channel and customer joined …); default: the SELECT itself. */
  rows?: (tenantId: string, page: Prisma.Sql) => Prisma.Sql;
  /** What is added to the rows the budget kept, and to them alone (a ticket's thread). */
  finish?: (tenantId: string, kept: Prisma.Sql) => Prisma.Sql;
  /** An item's JSON size over the full row's columns (routers/_lib/page-budget.ts). */
  size: (tenantId: string) => ItemSize;
  toPublic: (row: R) => O;
  /** Conditions every row of the list meets, which its counters respect too (live contacts). */
  always?: Prisma.Sql[];
  /** Whether the table carries the integrator's external id (the `externalId` filter). */
  externalId?: boolean;
}

/** The most `id` or `externalId` values a list request may name (its request line must fit: server/http-server.ts). */
export { MAX_LISTED_IDS };

/** A filter no row meets (a value no object can have: the page is empty, its envelope whole). */
export const MATCHES_NOTHING: Filter = { cond: Prisma.sql`false` };

/** A keyset position: the order column's value and the id of the row it is at. */
export interface Position {
  at: Date;
  id: string;
}

export interface ListQuery {
  filters: Filter[];
  offset: number;
  limit: number;
  /** The order asked for (default: the list's). */
  sort?: Order;
  /** A range of the default order column: a filter the buckets count (`lo` inclusive, `hi` exclusive). */
  range?: { lo?: Date; hi?: Date };
  /** Columns computed once beside the total (listStatement's `extra`), over the list's conditions. */
  extra?: (where: Prisma.Sql) => Prisma.Sql;
  /** Continue strictly after this position (offset is then ignored). */
  after?: Position;
  /** What the next cursor is bound to: the tenant, the list, the sort and the filters (cursorFingerprint). */
  fingerprint?: string;
}

export interface ListSlice<O, M> {
  total: number;
  items: O[];
  /** The extras' values (`extra`), read with the total. */
  extra: M;
  /** The page's offset: the one asked for, or (with a cursor) the number of rows before its position. */
  offset: number;
  /** Whether rows follow this page. */
  more: boolean;
  /** The cursor of the position after the page's last item (null on the last page). */
  nextCursor: string | null;
  /** The database's now less the longest a writing transaction lasts (routers/_lib/list.ts STABLE_LAG_MS). */
  stableBefore: Iso;
}

/** A list request's input as every list takes it (the pieces above, offset and limit). */
export interface ListInput {
  offset: number;
  limit: number;
  sort?: string;
  cursor?: string;
  updatedFrom?: Date;
  updatedTo?: Date;
  id?: string | string[];
  externalId?: string | string[];
}

/** A list's answer: the offset envelope with the next cursor and stableBefore. */
export type ListPage<O> = ReturnType<typeof offsetList<O>> & { nextCursor: string | null; stableBefore: Iso };

export interface List<R, O> {
  spec: ListSpec<R, O>;
  /** An equality filter on `column`, counted when the registry has a counter on that column. */
  eq(tenantId: string, column: string, value: string, type: string): Filter;
  read<M = object>(ctx: AuthedContext, q: ListQuery): Promise<ListSlice<O, M>>;
  /**
   * A request's page: its sort, cursor, update-time window and id lists (the pieces every list
   * takes) with the operation's own filters, answered in the list envelope.
   */
  page<M = object>(
    ctx: AuthedContext,
    input: ListInput,
    own: { filters: Filter[]; range?: ListQuery["range"]; extra?: ListQuery["extra"] },
  ): Promise<{ page: ListPage<O>; slice: ListSlice<O, M> }>;
}

/**
 * How far behind the database's clock a list's `stableBefore` is: the longest a writing transaction of
 * the service lasts (server/db/client.ts TRANSACTION_TIMEOUT_MS) plus a margin for what comes before
 * it (a write stamped with the service's clock before its statement got a connection: at most the
 * pool's 3 s checkout) and for the service's and the database's clocks (NTP keeps them within
 * milliseconds). Every object written with an `updatedAt` before it is committed, or never will be: a
 * poller that resumes from it misses no change.
 */
export const STABLE_LAG_MS = TRANSACTION_TIMEOUT_MS + 5_000;

/**
 * The column "stableBefore" of a list statement. Whole seconds (earlier is never wrong): two answers a
 * moment apart mostly say the same.
 */
export const STABLE_BEFORE = Prisma.sql`, date_trunc('second', now() - make_interval(secs => ${STABLE_LAG_MS / 1000})) AS "stableBefore"`;

const later = (a: Date | undefined, b: Date) => (a && a > b ? a : b);
const earlier = (a: Date | undefined, b: Date) => (a && a < b ? a : b);

const dir = (desc: boolean) => Prisma.raw(desc ? "DESC" : "ASC");
const ident = (name: string) => Prisma.raw(`"${name}"`);

/** SQL: the rows strictly after `p` in `order`. */
function afterPosition(order: Order, p: Position): Prisma.Sql {
  const col = ident(order.column);
  const t = sqlTime(p.at);
  const cmp = Prisma.raw(order.desc ? "<" : ">");
  // The first term is the same rows' bound as a range of the order column: the index scan starts at
  // the position instead of filtering every row before it (the OR alone is no index condition).
  return Prisma.sql`(${col} ${cmp}= ${t} AND (${col} ${cmp} ${t} OR (${col} = ${t} AND "id" ${cmp} ${p.id}::uuid)))`;
}

export function defineList<R extends { id: string }, O>(spec: ListSpec<R, O>): List<R, O> {
  const table = Prisma.raw(`"${spec.entity}"`);
  const counted: CountedList = LIST_COUNTERS[spec.entity];
  const dimOf = (column: string) => Object.entries(counted.filters).find(([, f]) => f.column === column && !f.via)?.[0];

  return {
    spec,
    eq(tenantId, column, value, type) {
      const dim = dimOf(column);
      return {
        cond: Prisma.sql`${ident(column)} = ${value}::${Prisma.raw(`"${type}"`)}`,
        counter: dim ? counter(tenantId, spec.entity, dim, column, value) : undefined,
      };
    },
    async read<M>(ctx: AuthedContext, q: ListQuery): Promise<ListSlice<O, M>> {
      const t = ctx.tenantId;
      const sort = q.sort ?? spec.order;
      const col = ident(sort.column);
      const order = Prisma.sql`${col} ${dir(sort.desc)}, "id" ${dir(sort.desc)}`;
      const outerOrder = Prisma.sql`p.${col} ${dir(sort.desc)}, p."id" ${dir(sort.desc)}`;
      // The buckets count the registry's order column: a list in that order can seek through them.
      const bucketed = counted.order === sort.column;
      const rangeCol = ident(spec.order.column);
      const range = q.range && (q.range.lo || q.range.hi) ? q.range : undefined;
      const rangeConds: Filter[] = range
        ? [
            ...(range.lo ? [{ cond: Prisma.sql`${rangeCol} >= ${sqlTime(range.lo)}` }] : []),
            ...(range.hi ? [{ cond: Prisma.sql`${rangeCol} < ${sqlTime(range.hi)}` }] : []),
          ]
        : [];
      const filters = [...rangeConds, ...q.filters];
      const where = whereOf(t, filters, spec.always);
      // Only the order column filtered (or nothing): the buckets give the total of a range and the
      // position of a deep offset.
      const seekable = bucketed && spec.order.column === sort.column && q.filters.length === 0;
      const seek: Seek | undefined = seekable
        ? { entity: spec.entity, column: col, desc: sort.desc, lo: range?.lo, hi: range?.hi }
        : undefined;
      const total = seek && range ? countedRange(t, seek) : exactTotal(t, spec.entity, filters, spec.always);
      // The rows at or before a cursor's position (its page's offset): through the buckets where the
      // order is theirs (the newer or older whole range, plus the rows tied with the position), else
      // counted.
      const rowsBefore = (p: Position): Prisma.Sql => {
        const at = sqlTime(p.at);
        if (!seek) return Prisma.sql`(SELECT count(*) FROM ${table} WHERE ${where} AND NOT ${afterPosition(sort, p)})`;
        const tied = Prisma.sql`(SELECT count(*) FROM ${table} WHERE ${where} AND ${col} = ${at}
          AND "id" ${Prisma.raw(sort.desc ? ">=" : "<=")} ${p.id}::uuid)`;
        // Descending: the rows from 1 ms after the position (millisecond precision); ascending: before it.
        const lo = sort.desc ? later(range?.lo, new Date(p.at.getTime() + 1)) : range?.lo;
        const hi = sort.desc ? range?.hi : earlier(range?.hi, p.at);
        const whole = lo && hi && lo >= hi ? Prisma.sql`0` : countedRange(t, { ...seek, lo, hi });
        return Prisma.sql`(${whole} + ${tied})`;
      };
      // A cursor: the page starts after its position, and its offset is the number of rows before it.
      const after = q.after ? afterPosition(sort, q.after) : Prisma.sql`true`;
      const before = q.after ? Prisma.sql`, (${rowsBefore(q.after)})::int AS "before"` : Prisma.empty;
      const extra = Prisma.sql`${q.extra?.(where) ?? Prisma.empty}${before}${STABLE_BEFORE}`;
      const pick = spec.pick ?? Prisma.sql`*`;
      const read = (cut: Cut) =>
        listRows<R, M & { before?: number; stableBefore: Iso }>(
          ctx,
          listStatement({
            tenantId: t,
            offset: q.after ? 0 : q.offset,
            total,
            seek: q.after ? undefined : seek,
            extra,
            page: (at) => {
              const page = Prisma.sql`SELECT ${pick} FROM ${table} WHERE ${where} AND ${after} AND ${at.where}
                ORDER BY ${order} LIMIT ${q.limit} OFFSET ${at.offset}`;
              const kept = budgetCut(cut, spec.rows ? spec.rows(t, page) : page, spec.size(t), order, {
                budget: ctx.pageBudget,
              });
              return spec.finish ? spec.finish(t, kept) : kept;
            },
            order: outerOrder,
          }),
        );
      const offset = q.after ? undefined : q.offset;
      const {
        total: count,
        extra: x,
        items,
      } = splitList(await cutToBudget(read, (rows) => withheld(rows, offset ?? 0)));
      const at = offset ?? Number(x.before ?? 0);
      let rows = items;
      // An item larger than this call's share of a /trpc batch: one call of the batch may answer it.
      let objects = rows.map(spec.toPublic);
      if (objects.length === 1 && !oversizedAllowed(ctx, objects[0])) {
        rows = [];
        objects = [];
      }
      const more = at + rows.length < count;
      const last = rows[rows.length - 1] as (R & Record<string, unknown>) | undefined;
      const position = last ? { at: new Date(String(last[sort.column])), id: last.id } : q.after;
      const nextCursor = more && position && q.fingerprint ? encodeCursor(sort, position, q.fingerprint) : null;
      return {
        total: count,
        items: objects,
        extra: x,
        offset: at,
        more,
        nextCursor,
        stableBefore: toIso(x.stableBefore) as Iso,
      };
    },
    async page<M>(
      ctx: AuthedContext,
      input: ListInput,
      own: { filters: Filter[]; range?: ListQuery["range"]; extra?: ListQuery["extra"] },
    ) {
      const sort = orderOf(input.sort) ?? spec.order;
      const fingerprint = cursorFingerprint(
        ctx.tenantId,
        spec.entity,
        sort,
        input as unknown as Record<string, unknown>,
      );
      const after = input.cursor === undefined ? undefined : decodeListCursor(input.cursor, sort, fingerprint);
      const filters = [...commonFilters(input), ...own.filters];
      const slice = await this.read<M>(ctx, {
        filters,
        offset: input.offset,
        limit: input.limit,
        sort,
        after,
        fingerprint,
        range: own.range,
        extra: own.extra,
      });
      const page = {
        ...offsetList(slice.items, slice.total, { offset: slice.offset, limit: input.limit }),
        nextCursor: slice.nextCursor,
        stableBefore: slice.stableBefore,
      };
      return { page, slice };
    },
  };
}

/** The sentence every list's OpenAPI description has about the pieces it takes. */
export const LIST_QUERY_DOC =
  "`sort` orders by one of the columns it names (a leading `-` is descending; ties by id). `updatedFrom` (inclusive) and " +
  "`updatedTo` (exclusive) keep objects by `updatedAt` (updatedFrom after updatedTo: 422). `id` (or `externalId`, where " +
  `the resource has one) repeated 1 to ${MAX_LISTED_IDS} times keeps those objects (unknown, deleted and other tenants' ones are ` +
  "simply absent; both together: 422); every filter combines with the others. `cursor`: the `nextCursor` of a previous page " +
  "of the same sort and filters continues strictly after its last item (keyset: no object is skipped or repeated when " +
  "others are added or removed meanwhile; `offset` is then ignored; a cursor of another list, sort or filters, or of " +
  "another tenant: 422). `stableBefore`: poll again from the earlier of your last seen `updatedAt` and it, deduplicating " +
  "by `id` + `version`, and no change is missed.";

/** The list envelope's fields beside the offset ones: the next cursor and stableBefore. */
export const ListEnvelopeExtras = {
  nextCursor: z.string().nullable().meta({
    description:
      "Opaque keyset cursor of the next page (pass it back as `cursor` with the same sort and filters), null on the last page",
  }),
  stableBefore: Timestamp.meta({
    description:
      "The database's clock less the longest a write takes to commit: every object changed before it is in this answer's list, or never will be changed then (poll again from the earlier of your last seen updatedAt and this)",
  }),
};

// ---- the query pieces every list takes --------------------------------------------------------------

/** `sort`: one of the list's columns, ascending, or descending with a leading "-". */
export function SortQuery(sorts: readonly string[], fallback: string) {
  const values = sorts.flatMap((s) => [s, `-${s}`]) as [string, ...string[]];
  return z
    .enum(values, { message: `must be one of ${values.join(", ")}` })
    .optional()
    .meta({
      description: `The order: ${values.join(", ")} (a leading "-" is descending; ties by id in the same direction). Default ${fallback}.`,
    });
}

/** The order a `sort` value names (undefined: the list's default). */
export const orderOf = (sort: string | undefined): Order | undefined =>
  sort === undefined
    ? undefined
    : sort.startsWith("-")
      ? { column: sort.slice(1), desc: true }
      : { column: sort, desc: false };

/** A query parameter given once or repeated: one value or a list of them. */
const repeated = <T extends z.ZodType>(item: T, what: string) =>
  z
    .union([
      item,
      z
        .array(item)
        .min(1)
        .max(MAX_LISTED_IDS, { message: `at most ${MAX_LISTED_IDS} values` }),
    ])
    .optional()
    .meta({
      override: ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
        for (const k of Object.keys(jsonSchema)) delete jsonSchema[k];
        Object.assign(jsonSchema, { type: "array", items: { type: "string" }, minItems: 1, maxItems: MAX_LISTED_IDS });
      },
      description: `${what}: repeat the parameter for several (1 to ${MAX_LISTED_IDS} in all); unknown, deleted and other tenants' values are simply absent`,
    });

/** The parameters of an update-time window, ids and external ids, and a cursor. */
export const ListQueryPieces = {
  updatedFrom: DateTimeInput.optional().meta({
    description: "Only objects whose updatedAt is at or after this instant",
  }),
  updatedTo: DateTimeInput.optional().meta({ description: "Only objects whose updatedAt is before this instant" }),
  id: repeated(Id, "Only these objects, by id"),
  cursor: z.string().max(1000).optional().meta({
    description:
      "Opaque keyset cursor: the `nextCursor` of a previous page of the same list, sort and filters. When given, `offset` is ignored.",
  }),
};

/** `externalId`: one or several (the lists of resources that carry one). */
export const ExternalIds = repeated(ExternalId, "Only these objects, by your external id (exact match)");

const asList = <T>(v: T | T[] | undefined): T[] | undefined =>
  v === undefined ? undefined : Array.isArray(v) ? v : [v];

/** The filters and 422s of the pieces every list takes (ListQueryPieces, ExternalIds). */
export function commonFilters(input: {
  updatedFrom?: Date;
  updatedTo?: Date;
  id?: string | string[];
  externalId?: string | string[];
}): Filter[] {
  const ids = asList(input.id);
  const externalIds = asList(input.externalId);
  if (input.updatedFrom && input.updatedTo && input.updatedFrom > input.updatedTo)
    throw validation("updatedFrom must not be after updatedTo", {
      fields: [
        { field: "updatedFrom", code: "invalid_range", message: "must not be after updatedTo" },
        { field: "updatedTo", code: "invalid_range", message: "must not be before updatedFrom" },
      ],
    });
  if (ids && externalIds)
    throw validation("give id or externalId, not both", {
      fields: [
        { field: "id", code: "exclusive", message: "not together with externalId" },
        { field: "externalId", code: "exclusive", message: "not together with id" },
      ],
    });
  const filters: Filter[] = [];
  if (input.updatedFrom) filters.push({ cond: Prisma.sql`"updatedAt" >= ${sqlTime(input.updatedFrom)}` });
  if (input.updatedTo) filters.push({ cond: Prisma.sql`"updatedAt" < ${sqlTime(input.updatedTo)}` });
  if (ids) filters.push({ cond: Prisma.sql`"id" = ANY(${ids.map((i) => i.toLowerCase())}::uuid[])` });
  if (externalIds)
    filters.push({
      cond:
        externalIds.length === 1
          ? Prisma.sql`"externalId" = ${externalIds[0]}`
          : Prisma.sql`"externalId" = ANY(${externalIds}::text[])`,
    });
  return filters;
}

// ---- cursors --------------------------------------------------------------------------------------

/**
 * What a cursor is bound to: the tenant, the list, the order and the filters (every input but the
 * page's own: offset, limit, cursor), hashed. A cursor used with other filters, another order or by
 * another tenant is refused (422 naming `cursor`), never read as a position of another list.
 */
export function cursorFingerprint(
  tenantId: string,
  list: string,
  order: Order,
  input: Record<string, unknown>,
): string {
  const { offset: _o, limit: _l, cursor: _c, sort: _s, ...filters } = input;
  const canonical = JSON.stringify(
    Object.keys(filters)
      .sort()
      .map((k) => [k, filters[k] instanceof Date ? (filters[k] as Date).toISOString() : filters[k]]),
  );
  return createHash("sha256")
    .update(`${tenantId}\u0000${list}\u0000${order.desc ? "-" : ""}${order.column}\u0000${canonical}`)
    .digest("base64url")
    .slice(0, 22);
}

/** A cursor: base64url of "c1", the order, the position and the fingerprint, "|"-separated. */
function encodeCursor(order: Order, p: Position, fingerprint: string): string {
  return Buffer.from(
    `c1|${order.desc ? "-" : ""}${order.column}|${p.at.toISOString()}|${p.id}|${fingerprint}`,
    "utf8",
  ).toString("base64url");
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const cursorProblem = (message: string) =>
  validation(`cursor: ${message}`, { fields: [{ field: "cursor", code: "invalid_cursor", message }] });

/** The position of a cursor of this list's `order` and `fingerprint`; 422 naming `cursor` otherwise. */
export function decodeListCursor(raw: string, order: Order, fingerprint: string): Position {
  const text = /^[A-Za-z0-9_-]{1,1000}$/.test(raw) ? Buffer.from(raw, "base64url").toString("utf8") : "";
  const parts = text.split("|");
  if (parts.length !== 5 || parts[0] !== "c1") throw cursorProblem("not a cursor returned by this list");
  const [, sort, iso, id, fp] = parts as [string, string, string, string, string];
  const at = new Date(iso);
  if (Number.isNaN(at.getTime()) || at.toISOString() !== iso || !isStorableInstant(at) || !UUID.test(id))
    throw cursorProblem("not a cursor returned by this list");
  if (sort !== `${order.desc ? "-" : ""}${order.column}` || fp !== fingerprint)
    throw cursorProblem("it belongs to another list, sort or set of filters: start again without it");
  return { at, id };
}
