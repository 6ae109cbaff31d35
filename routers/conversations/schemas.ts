// Conversation and Message: the conversations' select (the row, model/conversation.ts, with its
// channel and customer), the message list's envelope and the bound of an outbound message. The
// public objects, the rows and the mappers: model/conversation.ts.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { Conversation, MessageObject } from "../../model/conversation.js";

/**
 * The conversations `conversations` selects (a statement giving whole "Conversation" rows) with their
 * channel's kind and their customer, as the list, the changes feed and a started conversation read them.
 */
export const selectConversations = (tenantId: string, conversations: Prisma.Sql) => Prisma.sql`
  SELECT ${Conversation.select("v")}
    FROM (${conversations}) v
    JOIN "Channel" ch ON ch."tenantId" = ${tenantId}::uuid AND ch."id" = v."channelId"
    JOIN "Customer" cu ON cu."tenantId" = ${tenantId}::uuid AND cu."id" = v."customerId"`;

/** One conversation of the tenant, as `selectConversations` reads it (no row: unknown or another tenant's). */
export const conversationById = (tenantId: string, id: string) =>
  selectConversations(
    tenantId,
    Prisma.sql`SELECT * FROM "Conversation" WHERE "tenantId" = ${tenantId}::uuid AND "id" = ${id}::uuid`,
  );

/** The message list's cursor envelope: newest first, older pages follow nextCursor. */
export const MessageList = z.object({
  items: z.array(MessageObject),
  pagination: z.object({ nextCursor: z.string().nullable(), prevCursor: z.null(), hasMore: z.boolean() }),
});

/** Free text of an outbound message. */
export const MESSAGE_MAX_CHARS = 4096;
