// GET /public/v1/conversations — offset list, newest activity first (lastMessageAt desc, id desc).
// Filters: status (raw value), channel (channel kind), customerId (the linked contact). An unknown
// status or channel kind matches nothing (200 empty, never 422); a malformed customerId is 422.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import {
  CHANNEL_KINDS,
  ConversationObject,
  CONVERSATION_STATUSES,
  toConversation,
  type ConversationRow,
} from "../../model/conversation.js";
import {
  defineList,
  LIST_QUERY_DOC,
  ListEnvelopeExtras,
  ListQueryPieces,
  MATCHES_NOTHING,
  SortQuery,
} from "../_lib/list.js";
import { conversationSize, OFFSET_BUDGET_DOC } from "../_lib/page-budget.js";
import { Id, OffsetList, PageQuery } from "../_lib/schemas.js";
import { countedAny, type Filter } from "../_lib/totals.js";
import { scoped } from "../trpc.js";
import { selectConversations } from "./schemas.js";

const SORTS = ["createdAt", "updatedAt", "lastMessageAt"] as const;

export const ListConversationsQuery = z.object({
  status: z.string().optional(),
  channel: z.string().optional(),
  customerId: Id.optional(),
  sort: SortQuery(SORTS, "-lastMessageAt"),
  ...ListQueryPieces,
  ...PageQuery,
});

const isOneOf = <T extends string>(values: readonly T[], v: string): v is T =>
  (values as readonly string[]).includes(v);

/** The conversations list: newest activity first, each with its channel's kind and its customer (a conversation's size counts them). */
export const conversationList = defineList<ConversationRow, z.infer<typeof ConversationObject>>({
  entity: "Conversation",
  order: { column: "lastMessageAt", desc: true },
  sorts: SORTS,
  rows: selectConversations,
  size: () => conversationSize(),
  toPublic: toConversation,
});

export const listConversations = scoped("tenant:conversations.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/conversations",
      tags: ["conversations"],
      summary: "List conversations",
      description: `Newest activity first (lastMessageAt, then id, descending) by default. ${LIST_QUERY_DOC} ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
  })
  .input(ListConversationsQuery)
  .output(OffsetList(ConversationObject).extend(ListEnvelopeExtras))
  .query(async ({ ctx, input }) => {
    // An unknown status or channel kind matches nothing.
    const nothing =
      (input.status !== undefined && !isOneOf(CONVERSATION_STATUSES, input.status)) ||
      (input.channel !== undefined && !isOneOf(CHANNEL_KINDS, input.channel));
    // One statement: the total (a counter for no filter or one filter, else an index count) and the
    // page with each conversation's channel kind and customer; a deep offset of the unfiltered list
    // starts at the lastMessageAt day bucket holding it. The channel filter (a kind) and the customer
    // filter (a contact) are read as the sum of the counters of the tenant's channels of that kind and
    // of the customers linked to that contact.
    const t = ctx.tenantId;
    const filters: Filter[] = nothing ? [MATCHES_NOTHING] : [];
    if (!nothing && input.status !== undefined)
      filters.push(conversationList.eq(t, "status", input.status, "ConversationStatus"));
    if (!nothing && input.channel !== undefined) {
      const ids = Prisma.sql`SELECT ch."id" FROM "Channel" ch WHERE ch."tenantId" = ${t}::uuid AND ch."kind" = ${input.channel}::"ChannelKind"`;
      filters.push({
        cond: Prisma.sql`"channelId" IN (${ids})`,
        counter: countedAny(
          t,
          "Conversation",
          "channelId",
          "channelId",
          Prisma.sql`SELECT x."id"::text FROM (${ids}) x`,
        ),
      });
    }
    if (!nothing && input.customerId !== undefined) {
      const ids = Prisma.sql`SELECT cu."id" FROM "Customer" cu WHERE cu."tenantId" = ${t}::uuid AND cu."contactId" = ${input.customerId}::uuid`;
      filters.push({
        cond: Prisma.sql`"customerId" IN (${ids})`,
        counter: countedAny(
          t,
          "Conversation",
          "customerId",
          "customerId",
          Prisma.sql`SELECT x."id"::text FROM (${ids}) x`,
        ),
      });
    }
    return (await conversationList.page(ctx, input, { filters })).page;
  });
