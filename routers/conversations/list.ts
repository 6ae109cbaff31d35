// GET /public/v1/conversations — offset list, newest activity first (lastMessageAt desc, id desc).
// Filters: status (raw value), channel (channel kind), customerId (the linked contact). An unknown
// status or channel kind matches nothing (200 empty, never 422); a malformed customerId is 422.
import { z } from "zod";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { CHANNEL_KINDS, conversationInclude, ConversationObject, CONVERSATION_STATUSES, toConversation } from "./schemas.js";

export const ListConversationsQuery = z.object({
  status: z.string().optional(),
  channel: z.string().optional(),
  customerId: Id.optional(),
  ...PageQuery,
});

const isOneOf = <T extends string>(values: readonly T[], v: string): v is T => (values as readonly string[]).includes(v);

export const listConversations = scoped("tenant:conversations.read")
  .meta({ openapi: { method: "GET", path: "/public/v1/conversations", tags: ["conversations"], summary: "List conversations", protect: true } })
  .input(ListConversationsQuery)
  .output(OffsetList(ConversationObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    if (
      (input.status !== undefined && !isOneOf(CONVERSATION_STATUSES, input.status)) ||
      (input.channel !== undefined && !isOneOf(CHANNEL_KINDS, input.channel))
    )
      return offsetList([], 0, page);
    const where = owned(ctx, {
      ...(input.status !== undefined ? { status: input.status as (typeof CONVERSATION_STATUSES)[number] } : {}),
      ...(input.channel !== undefined ? { channel: { kind: input.channel as (typeof CHANNEL_KINDS)[number] } } : {}),
      ...(input.customerId !== undefined ? { customer: { contactId: input.customerId } } : {}),
    });
    const [total, rows] = await Promise.all([
      ctx.db.conversation.count({ where }),
      ctx.db.conversation.findMany({
        where,
        include: conversationInclude,
        orderBy: [{ lastMessageAt: "desc" }, { id: "desc" }],
        skip: input.offset,
        take: input.limit,
      }),
    ]);
    return offsetList(rows.map(toConversation), total, page);
  });
