// GET /public/v1/leads — the tenant's leads, newest first (scope tenant:leads.read).
//   dateFrom (inclusive) / dateTo (exclusive) bound createdAt; customerId filters (unknown → empty);
//   offset/limit as in common rule 1. The envelope adds `cursor`: the newest createdAt among ALL
//   leads matching the filters (not just this page), or null when none match. It is the dateFrom
//   of the next incremental pull; dateFrom being inclusive, the newest lead comes back once more,
//   so clients dedupe by id.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { validation } from "../../server/errors.js";
import type { Iso } from "../../model/instants.js";
import { LeadObject, toLead, type LeadRow } from "../../model/lead.js";
import { budgetCut, cutToBudget, leadSize, OFFSET_BUDGET_DOC, withheld, type Cut } from "../_lib/page-budget.js";
import { DateTimeInput, Id, OffsetList, offsetList, PageQuery, Timestamp } from "../_lib/schemas.js";
import { countedRange, eq, exactTotal, listStatement, splitList, sqlTime, whereOf, type Filter, type ListRows, type Seek, listRows } from "../_lib/totals.js";
import { ExternalId } from "../_lib/sync.js";
import { scoped } from "../trpc.js";
import { selectLeads } from "./schemas.js";

export const ListLeadsInput = z.object({
  dateFrom: DateTimeInput.optional(),
  dateTo: DateTimeInput.optional(),
  customerId: Id.optional(),
  externalId: ExternalId.describe("Only the object with this external id (exact match; none → empty page)").optional(),
  ...PageQuery,
});

export const LeadList = OffsetList(LeadObject).extend({
  cursor: Timestamp.nullable().describe(
    "The newest createdAt among all leads matching the filters (null when none): the dateFrom of the next incremental pull.",
  ),
});

export const listLeads = scoped("tenant:leads.read")
  .meta({ openapi: { method: "GET", path: "/public/v1/leads", tags: ["leads"], summary: "List leads", protect: true,
      description:
        "Newest first (createdAt, then id, descending). `dateFrom` is inclusive and `dateTo` exclusive on createdAt; `customerId` keeps leads linked to that contact (an unknown id matches nothing). `cursor` is the newest createdAt among all matching leads (null when none): pass it as the next `dateFrom` for incremental sync and dedupe by id, since the newest lead comes back once more. " +
        OFFSET_BUDGET_DOC } })
  .input(ListLeadsInput)
  .output(LeadList)
  .query(async ({ ctx, input }) => {
    if (input.dateFrom && input.dateTo && input.dateFrom > input.dateTo)
      throw validation("dateFrom must not be after dateTo", {
        fields: [{ field: "dateFrom", code: "invalid_range", message: "must not be after dateTo" }],
      });
    // One statement (one round trip, one snapshot): the total, the newest createdAt of every lead
    // matching the filters and the page (routers/_lib/totals.ts). The total is a counter (unfiltered,
    // customerId), the day/month/year buckets plus the two partial days (a date range), or an index
    // count over (tenantId, customerId, createdAt) (customerId with dates: that contact's leads). The
    // page takes its ids from the narrow (tenantId, createdAt, id) index first and reads only those
    // rows; a deep offset without customerId starts at the day bucket that holds it.
    const filters: Filter[] = [];
    if (input.dateFrom) filters.push({ cond: Prisma.sql`"createdAt" >= ${sqlTime(input.dateFrom)}` });
    if (input.dateTo) filters.push({ cond: Prisma.sql`"createdAt" < ${sqlTime(input.dateTo)}` });
    if (input.customerId) filters.push(eq(ctx.tenantId, "Lead", "customerId", "customerId", input.customerId, "uuid"));
    if (input.externalId !== undefined) filters.push({ cond: Prisma.sql`"externalId" = ${input.externalId}` });
    const where = whereOf(ctx.tenantId, filters);
    const seek: Seek | undefined = input.customerId || input.externalId !== undefined
      ? undefined
      : { entity: "Lead", column: Prisma.sql`"createdAt"`, desc: true, lo: input.dateFrom, hi: input.dateTo };
    const dated = input.dateFrom !== undefined || input.dateTo !== undefined;
    const total = seek && dated ? countedRange(ctx.tenantId, seek) : exactTotal(ctx.tenantId, "Lead", filters);
    const firstPage = input.offset === 0;
    const read = (cut: Cut) => listRows<LeadRow, { newest?: Iso | null }>(ctx,
      listStatement({
        tenantId: ctx.tenantId,
        offset: input.offset,
        total,
        seek,
        // The first page's first row is the newest match (same filters, createdAt DESC): no extra read.
        extra: firstPage ? undefined : Prisma.sql`, (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest"`,
        // Cut to the byte budget (routers/_lib/page-budget.ts) over the page's rows, in the same statement.
        page: (at) =>
          budgetCut(
            cut,
            selectLeads(
              ctx.tenantId,
              Prisma.sql`SELECT "id" FROM "Lead" WHERE ${where} AND ${at.where} ORDER BY "createdAt" DESC, "id" DESC
                          LIMIT ${input.limit} OFFSET ${at.offset}`,
            ),
            leadSize(),
            Prisma.sql`"createdAt" DESC, "id" DESC`,
            { budget: ctx.pageBudget },
          ),
        order: Prisma.sql`p."createdAt" DESC, p."id" DESC`,
      }),
    );
    const { total: count, extra, items } = splitList(await cutToBudget(read, (rows) => withheld(rows, input.offset)));
    const newest = firstPage ? (items[0]?.createdAt ?? null) : (extra.newest ?? null);
    return { ...offsetList(items.map(toLead), count, input), cursor: newest };
  });
