// One declaration per list, one executor for all of them. A list states once what it is — its table
// (whose counters routers/_lib/counters.ts registers), its order, how the page's rows become full rows
// (a thread, a channel and customer joined), their JSON size and the mapper — and readList() answers
// any page of it: the exact total (a counter, the buckets of a range of the order column, or an index
// count), the page in that order (a deep offset through the buckets), cut to the page byte budget,
// in ONE statement (routers/_lib/totals.ts listStatement), with /trpc batches' one oversized item.
// Filters come from the declaration too: `eq()` finds a filter's counter in the registry by its column,
// so no procedure restates a counter's name; an operation keeps only its own rules (which inputs
// filter what, which values match nothing).
import { Prisma } from "../../generated/prisma/client.js";
import { budgetCut, cutToBudget, oversizedAllowed, withheld, type Cut, type ItemSize } from "./page-budget.js";
import { LIST_COUNTERS, type CountedList, type ListEntity } from "./counters.js";
import { countedRange, exactTotal, listRows, listStatement, splitList, sqlTime, whereOf, type Filter, type Seek, counter } from "./totals.js";
import type { AuthedContext } from "../trpc.js";

export interface ListSpec<R, O> {
  /** The list's table: its counters, its buckets (the registry's `order`). */
  entity: ListEntity;
  /** The order: a column of the table and its direction; ties by id in the same direction. */
  order: { column: string; desc: boolean };
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
}

export interface ListQuery {
  filters: Filter[];
  offset: number;
  limit: number;
  /** A range of the order column: a filter the buckets count (`lo` inclusive, `hi` exclusive). */
  range?: { lo?: Date; hi?: Date };
  /** Columns computed once beside the total (listStatement's `extra`), over the list's conditions. */
  extra?: (where: Prisma.Sql) => Prisma.Sql;
}

export interface ListSlice<O, M> {
  total: number;
  items: O[];
  /** The extras' values (`extra`), read with the total. */
  extra: M;
}

export interface List<R, O> {
  spec: ListSpec<R, O>;
  /** An equality filter on `column`, counted when the registry has a counter on that column. */
  eq(tenantId: string, column: string, value: string, type: string): Filter;
  read<M = object>(ctx: AuthedContext, q: ListQuery): Promise<ListSlice<O, M>>;
}

const dir = (desc: boolean) => Prisma.raw(desc ? "DESC" : "ASC");

export function defineList<R extends { id: string }, O>(spec: ListSpec<R, O>): List<R, O> {
  const col = Prisma.raw(`"${spec.order.column}"`);
  const order = Prisma.sql`${col} ${dir(spec.order.desc)}, "id" ${dir(spec.order.desc)}`;
  const outerOrder = Prisma.sql`p.${col} ${dir(spec.order.desc)}, p."id" ${dir(spec.order.desc)}`;
  const table = Prisma.raw(`"${spec.entity}"`);
  const counted: CountedList = LIST_COUNTERS[spec.entity];
  // The buckets count the registry's order column: a list in that order can seek through them.
  const bucketed = counted.order === spec.order.column;
  const dimOf = (column: string) => Object.entries(counted.filters).find(([, f]) => f.column === column && !f.via)?.[0];

  return {
    spec,
    eq(tenantId, column, value, type) {
      const dim = dimOf(column);
      return {
        cond: Prisma.sql`${Prisma.raw(`"${column}"`)} = ${value}::${Prisma.raw(`"${type}"`)}`,
        counter: dim ? counter(tenantId, spec.entity, dim, column, value) : undefined,
      };
    },
    async read<M>(ctx: AuthedContext, q: ListQuery): Promise<ListSlice<O, M>> {
      const t = ctx.tenantId;
      const range = q.range && (q.range.lo || q.range.hi) ? q.range : undefined;
      const rangeConds: Filter[] = range
        ? [
            ...(range.lo ? [{ cond: Prisma.sql`${col} >= ${sqlTime(range.lo)}` }] : []),
            ...(range.hi ? [{ cond: Prisma.sql`${col} < ${sqlTime(range.hi)}` }] : []),
          ]
        : [];
      const filters = [...rangeConds, ...q.filters];
      const where = whereOf(t, filters, spec.always);
      // Only the order column filtered (or nothing): the buckets give the total of a range and the
      // position of a deep offset.
      const seek: Seek | undefined =
        bucketed && q.filters.length === 0 ? { entity: spec.entity, column: col, desc: spec.order.desc, lo: range?.lo, hi: range?.hi } : undefined;
      const total = seek && range ? countedRange(t, seek) : exactTotal(t, spec.entity, filters, spec.always);
      const pick = spec.pick ?? Prisma.sql`*`;
      const read = (cut: Cut) =>
        listRows<R, M>(
          ctx,
          listStatement({
            tenantId: t,
            offset: q.offset,
            total,
            seek,
            extra: q.extra?.(where),
            page: (at) => {
              const page = Prisma.sql`SELECT ${pick} FROM ${table} WHERE ${where} AND ${at.where} ORDER BY ${order} LIMIT ${q.limit} OFFSET ${at.offset}`;
              const kept = budgetCut(cut, spec.rows ? spec.rows(t, page) : page, spec.size(t), order, { budget: ctx.pageBudget });
              return spec.finish ? spec.finish(t, kept) : kept;
            },
            order: outerOrder,
          }),
        );
      const { total: count, extra, items } = splitList(await cutToBudget(read, (rows) => withheld(rows, q.offset)));
      const objects = items.map(spec.toPublic);
      // An item larger than this call's share of a /trpc batch: one call of the batch may answer it.
      if (objects.length === 1 && !oversizedAllowed(ctx, objects[0])) return { total: count, items: [], extra: extra as M };
      return { total: count, items: objects, extra: extra as M };
    },
  };
}
