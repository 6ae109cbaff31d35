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
import { leadSize, OFFSET_BUDGET_DOC } from "../_lib/page-budget.js";
import {
  defineList,
  ExternalIds,
  LIST_QUERY_DOC,
  ListEnvelopeExtras,
  ListQueryPieces,
  SortQuery,
} from "../_lib/list.js";
import { DateTimeInput, Id, OffsetList, PageQuery, Timestamp } from "../_lib/schemas.js";
import type { Filter } from "../_lib/totals.js";
import { scoped } from "../trpc.js";
import { selectLeads } from "./schemas.js";

const SORTS = ["createdAt", "updatedAt"] as const;

export const ListLeadsInput = z.object({
  dateFrom: DateTimeInput.optional(),
  dateTo: DateTimeInput.optional(),
  customerId: Id.optional(),
  externalId: ExternalIds,
  sort: SortQuery(SORTS, "-createdAt"),
  ...ListQueryPieces,
  ...PageQuery,
});

export const LeadList = OffsetList(LeadObject).extend({
  cursor: Timestamp.nullable().describe(
    "The newest createdAt among all leads matching the filters (null when none): the dateFrom of the next incremental pull. " +
      "Not the `cursor` query parameter: that one takes `nextCursor`.",
  ),
  ...ListEnvelopeExtras,
});

/** The leads list: newest first; the page's ids from the narrow index, then their rows. */
export const leadList = defineList<LeadRow, z.infer<typeof LeadObject>>({
  entity: "Lead",
  order: { column: "createdAt", desc: true },
  sorts: SORTS,
  externalId: true,
  pick: Prisma.sql`"id"`,
  rows: selectLeads,
  size: () => leadSize(),
  toPublic: toLead,
});

export const listLeads = scoped("tenant:leads.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/leads",
      tags: ["leads"],
      summary: "List leads",
      protect: true,
      description:
        "Newest first (createdAt, then id, descending). `dateFrom` is inclusive and `dateTo` exclusive on createdAt; `customerId` keeps leads linked to that contact (an unknown id matches nothing). `cursor` is the newest createdAt among all matching leads (null when none): pass it as the next `dateFrom` for incremental sync and dedupe by id, since the newest lead comes back once more; the keyset cursor of the next page is `nextCursor`, passed back as the `cursor` query parameter. " +
        `${LIST_QUERY_DOC} ${OFFSET_BUDGET_DOC}`,
    },
  })
  .input(ListLeadsInput)
  .output(LeadList)
  .query(async ({ ctx, input }) => {
    if (input.dateFrom && input.dateTo && input.dateFrom > input.dateTo)
      throw validation("dateFrom must not be after dateTo", {
        fields: [{ field: "dateFrom", code: "invalid_range", message: "must not be after dateTo" }],
      });
    // One statement (one round trip, one snapshot; routers/_lib/list.ts): the total, the newest createdAt
    // of every lead matching the filters and the page. The page takes its ids from the narrow
    // (tenantId, createdAt, id) index first and reads only those rows.
    const filters: Filter[] = [];
    if (input.customerId) filters.push(leadList.eq(ctx.tenantId, "customerId", input.customerId, "uuid"));
    // The first page of the default order: its first row is the newest match, no extra read.
    const newestFirst =
      input.offset === 0 && input.cursor === undefined && (input.sort ?? "-createdAt") === "-createdAt";
    const { page, slice } = await leadList.page<{ newest?: Iso | null }>(ctx, input, {
      filters,
      range: { lo: input.dateFrom, hi: input.dateTo },
      extra: newestFirst
        ? undefined
        : (where) => Prisma.sql`, (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest"`,
    });
    const newest = newestFirst ? (slice.items[0]?.createdAt ?? null) : (slice.extra.newest ?? null);
    return { ...page, cursor: newest };
  });
