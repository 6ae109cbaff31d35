// GET /public/v1/leads — the tenant's leads, newest first (scope tenant:leads.read).
//   dateFrom (inclusive) / dateTo (exclusive) bound createdAt; customerId filters (unknown → empty);
//   offset/limit as in common rule 1. The envelope adds `cursor`: the newest createdAt among ALL
//   leads matching the filters (not just this page), or null when none match. It is the dateFrom
//   of the next incremental pull; dateFrom being inclusive, the newest lead comes back once more,
//   so clients dedupe by id.
import { z } from "zod";
import { validation } from "../../server/errors.js";
import { DateTimeInput, Id, OffsetList, offsetList, PageQuery, Timestamp } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { LeadObject, toLead } from "./schemas.js";

export const ListLeadsInput = z.object({
  dateFrom: DateTimeInput.optional(),
  dateTo: DateTimeInput.optional(),
  customerId: Id.optional(),
  ...PageQuery,
});

export const LeadList = OffsetList(LeadObject).extend({ cursor: Timestamp.nullable() });

export const listLeads = scoped("tenant:leads.read")
  .meta({ openapi: { method: "GET", path: "/public/v1/leads", tags: ["leads"], summary: "List leads", protect: true } })
  .input(ListLeadsInput)
  .output(LeadList)
  .query(async ({ ctx, input }) => {
    if (input.dateFrom && input.dateTo && input.dateFrom > input.dateTo)
      throw validation("dateFrom must not be after dateTo", {
        fields: [{ field: "dateFrom", code: "invalid_range", message: "must not be after dateTo" }],
      });
    const createdAt = input.dateFrom || input.dateTo ? { ...(input.dateFrom && { gte: input.dateFrom }), ...(input.dateTo && { lt: input.dateTo }) } : undefined;
    const where = owned(ctx, { ...(createdAt && { createdAt }), ...(input.customerId && { customerId: input.customerId }) });
    const [rows, stats] = await Promise.all([
      ctx.db.lead.findMany({ where, orderBy: [{ createdAt: "desc" }, { id: "desc" }], skip: input.offset, take: input.limit }),
      ctx.db.lead.aggregate({ where, _count: { _all: true }, _max: { createdAt: true } }),
    ]);
    const newest = stats._max.createdAt;
    return { ...offsetList(rows.map(toLead), stats._count._all, input), cursor: newest ? newest.toISOString() : null };
  });
