// The tenant's reference data — its pipeline stages, users, channels and approved templates: what the
// ids and names in the other objects mean. Each is a small read-only offset list with the envelope of
// every list, answered by ONE statement (routers/_lib/totals.ts listStatement): the exact total and
// the page from one snapshot, the page cut to the byte budget in SQL (routers/_lib/page-budget.ts),
// as every list. The total is a count of the tenant's rows, not a counter (routers/_lib/counters.ts):
// these tables hold tens to hundreds of rows per tenant and change rarely, so a count over the
// primary key's tenant prefix costs about what reading a counter does, with no trigger on their
// writes. The order is total (ties broken by id) and text is compared by code point (COLLATE "C"),
// so a page is the same on every backend whatever its default collation.
import { Prisma } from "../../generated/prisma/client.js";
import { budgetCut, cutToBudget, oversizedAllowed, withheld, type Cut, type ItemSize } from "./page-budget.js";
import { listRows, listStatement, splitList } from "./totals.js";
import type { AuthedContext } from "../trpc.js";

/** One key of the order, ascending: a column of the table, text compared by code point. */
export interface OrderKey {
  column: string;
  /** A text column: compared as COLLATE "C" (code point order, the same on every backend). */
  text?: boolean;
}

export interface ReferenceSpec<R, O> {
  /** The table (aliased `r` in the statement). */
  table: string;
  /** The select list over `r` (the row definition's `select("r")`, plus what the statement computes). */
  select: Prisma.Sql;
  /** The order, ascending; "id" is added last, so ties never depend on the plan. */
  order: OrderKey[];
  /** Conditions every row of the list meets (approved templates only), over `r`. */
  always?: Prisma.Sql[];
  /** An item's JSON size over the page's columns (page-budget.ts). */
  size: ItemSize;
  toPublic: (row: R) => O;
}

export interface ReferenceList<O> {
  read(
    ctx: AuthedContext,
    q: { filters: Prisma.Sql[]; offset: number; limit: number },
  ): Promise<{ total: number; items: O[] }>;
}

export function referenceList<R extends { id: string }, O>(spec: ReferenceSpec<R, O>): ReferenceList<O> {
  const keys = [...spec.order, { column: "id" }];
  const orderOver = (alias: string) =>
    Prisma.raw(keys.map((k) => `${alias}"${k.column}"${k.text ? ` COLLATE "C"` : ""} ASC`).join(", "));
  // The same order three times: over the table (r), over the page's own columns (the budget's walk)
  // and over the page as the outer statement names it (p).
  const tableOrder = orderOver("r.");
  const pageOrder = orderOver("");
  const outerOrder = orderOver("p.");
  const table = Prisma.raw(`"${spec.table}" r`);

  return {
    async read(ctx, q) {
      const where = Prisma.join(
        [Prisma.sql`r."tenantId" = ${ctx.tenantId}::uuid`, ...(spec.always ?? []), ...q.filters],
        " AND ",
      );
      const read = (cut: Cut) =>
        listRows<R>(
          ctx,
          listStatement({
            tenantId: ctx.tenantId,
            offset: q.offset,
            total: Prisma.sql`SELECT count(*) FROM ${table} WHERE ${where}`,
            page: (at) =>
              budgetCut(
                cut,
                Prisma.sql`SELECT ${spec.select} FROM ${table} WHERE ${where} AND ${at.where}
                            ORDER BY ${tableOrder} LIMIT ${q.limit} OFFSET ${at.offset}`,
                spec.size,
                pageOrder,
                { budget: ctx.pageBudget },
              ),
            order: outerOrder,
          }),
        );
      const { total, items } = splitList(await cutToBudget(read, (rows) => withheld(rows, q.offset)));
      const objects = items.map(spec.toPublic);
      // An item larger than this call's share of a /trpc batch: one call of the batch may answer it.
      if (objects.length === 1 && !oversizedAllowed(ctx, objects[0])) return { total, items: [] };
      return { total, items: objects };
    },
  };
}
