// GET /public/v1/leads — the tenant's leads, newest first (scope tenant:leads.read).
//   dateFrom (inclusive) / dateTo (exclusive) bound createdAt; customerId filters (unknown → empty);
//   offset/limit as in common rule 1. The envelope adds `cursor`: the newest createdAt among ALL
//   leads matching the filters (not just this page), or null when none match. It is the dateFrom
//   of the next incremental pull; dateFrom being inclusive, the newest lead comes back once more,
//   so clients dedupe by id.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { validation } from "../../server/errors.js";
import { DateTimeInput, Id, OffsetList, offsetList, PageQuery, Timestamp } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { LeadObject, toLead, type LeadRow } from "./schemas.js";

export const ListLeadsInput = z.object({
  dateFrom: DateTimeInput.optional(),
  dateTo: DateTimeInput.optional(),
  customerId: Id.optional(),
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
        "Newest first (createdAt, then id, descending). `dateFrom` is inclusive and `dateTo` exclusive on createdAt; `customerId` keeps leads linked to that contact (an unknown id matches nothing). `cursor` is the newest createdAt among all matching leads (null when none): pass it as the next `dateFrom` for incremental sync and dedupe by id, since the newest lead comes back once more." } })
  .input(ListLeadsInput)
  .output(LeadList)
  .query(async ({ ctx, input }) => {
    if (input.dateFrom && input.dateTo && input.dateFrom > input.dateTo)
      throw validation("dateFrom must not be after dateTo", {
        fields: [{ field: "dateFrom", code: "invalid_range", message: "must not be after dateTo" }],
      });
    // One statement (one round trip): the page, then the total and the newest createdAt of every
    // lead matching the filters. The page takes its ids from the narrow (tenantId, createdAt, id)
    // index first and reads only those rows, so a deep offset skips index entries, not table rows;
    // the total is an index-only count (Lead_tenantId_idx for the unfiltered list) and the newest
    // createdAt one index probe.
    const conds = [Prisma.sql`"tenantId" = ${ctx.tenantId}::uuid`];
    if (input.dateFrom) conds.push(Prisma.sql`"createdAt" >= ${input.dateFrom.toISOString()}::timestamptz`);
    if (input.dateTo) conds.push(Prisma.sql`"createdAt" < ${input.dateTo.toISOString()}::timestamptz`);
    if (input.customerId) conds.push(Prisma.sql`"customerId" = ${input.customerId}::uuid`);
    const where = Prisma.join(conds, " AND ");
    const rows = await ctx.db.$queryRaw<(Nullable<LeadRow> & { total: number; newest: Date | null })[]>`
      SELECT s."total", s."newest", p.*
        FROM (SELECT (SELECT count(*)::int FROM "Lead" WHERE ${where}) AS "total",
                     (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest") s
        LEFT JOIN LATERAL (
          SELECT l."id", l."customerId", l."conversationId", l."customerName", l."customerEmail", l."customerPhone",
                 l."intent", l."quality", l."stageId", l."budgetMin", l."budgetMax", l."zones", l."rooms",
                 l."assignedOperatorId", l."source", l."notes", l."createdAt", l."updatedAt"
            FROM (SELECT "id" FROM "Lead" WHERE ${where} ORDER BY "createdAt" DESC, "id" DESC
                   LIMIT ${input.limit} OFFSET ${input.offset}) ids
            JOIN "Lead" l ON l."id" = ids."id") p ON true
       ORDER BY p."createdAt" DESC, p."id" DESC`;
    const first = rows[0]!;
    const items = rows.filter((r): r is LeadRow & { total: number; newest: Date | null } => r.id !== null).map(toLead);
    const newest = first.newest === null ? null : new Date(first.newest);
    return { ...offsetList(items, first.total, input), cursor: newest ? newest.toISOString() : null };
  });

type Nullable<T> = { [K in keyof T]: T[K] | null };
