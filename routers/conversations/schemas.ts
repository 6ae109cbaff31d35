// Conversation and Message: the public objects and their serializers.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { iso, Timestamp, type Instant } from "../_lib/schemas.js";

export const MessageObject = z.object({
  id: z.string(),
  conversationId: z.string(),
  role: z.enum(["user", "assistant", "operator", "system"]),
  content: z.string(),
  deliveryStatus: z.enum(["received", "pending", "sent", "delivered", "failed"]),
  createdAt: Timestamp,
}).meta({ id: "Message" });
export type MessageObject = z.infer<typeof MessageObject>;

export interface MessageRow {
  id: string;
  conversationId: string;
  /** The "MessageRole" domain (the database checks the value). */
  role: string;
  content: string;
  deliveryStatus: string;
  createdAt: Date;
}

export const toMessage = (m: MessageRow): MessageObject => ({
  id: m.id,
  conversationId: m.conversationId,
  role: m.role as MessageObject["role"],
  content: m.content,
  deliveryStatus: m.deliveryStatus as MessageObject["deliveryStatus"], // CHECK-constrained to these values in the database
  createdAt: iso(m.createdAt),
});

export const CHANNEL_KINDS = ["web", "whatsapp", "messenger", "instagram", "telegram"] as const;
export const CONVERSATION_STATUSES = ["active", "escalated", "resolved"] as const;

export const ConversationCustomer = z.object({
  id: z.string(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  phone: z.string().nullable(),
  /** The linked Contact's id (public customerId fields always mean a contact). */
  customerId: z.string().nullable(),
});

export const ConversationObject = z.object({
  id: z.string(),
  channel: z.string(),
  channelId: z.string().nullable(),
  status: z.enum(["active", "escalated", "resolved"]),
  subject: z.string().nullable(),
  customer: ConversationCustomer,
  assignedOperatorId: z.string().nullable(),
  lastMessagePreview: z.string(),
  lastMessageAt: Timestamp,
  createdAt: Timestamp,
}).meta({ id: "Conversation" });
export type ConversationObject = z.infer<typeof ConversationObject>;

/** What toConversation needs loaded with a conversation row. */
export const conversationInclude = {
  channel: { select: { kind: true } },
  customer: { select: { id: true, name: true, email: true, phone: true, contactId: true } },
} as const;

export interface ConversationRow {
  id: string;
  channelId: string;
  /** The "ConversationStatus" domain (the database checks the value). */
  status: string;
  subject: string | null;
  assignedOperatorId: string | null;
  lastMessagePreview: string;
  lastMessageAt: Instant;
  createdAt: Instant;
  channel: { kind: string };
  customer: { id: string; name: string | null; email: string | null; phone: string | null; contactId: string | null };
}

/** A conversation loaded by Prisma with conversationInclude → the public conversation. */
export const toConversation = (c: ConversationRow): ConversationObject =>
  fromConversationRow({
    id: c.id,
    channelId: c.channelId,
    status: c.status,
    subject: c.subject,
    assignedOperatorId: c.assignedOperatorId,
    lastMessagePreview: c.lastMessagePreview,
    lastMessageAt: c.lastMessageAt,
    createdAt: c.createdAt,
    channelKind: c.channel.kind,
    customerRowId: c.customer.id,
    customerName: c.customer.name,
    customerEmail: c.customer.email,
    customerPhone: c.customer.phone,
    customerContactId: c.customer.contactId,
  });

/** A selectConversations() row: the conversation with its channel's kind and its customer's fields. */
export type ConversationListRow = Omit<ConversationRow, "channel" | "customer"> & {
  channelKind: string;
  customerRowId: string;
  customerName: string | null;
  customerEmail: string | null;
  customerPhone: string | null;
  customerContactId: string | null;
};

/**
 * The conversations `conversations` selects (a statement giving whole "Conversation" rows) with their
 * channel's kind and their customer, as the list and the changes feed read them.
 */
export const selectConversations = (tenantId: string, conversations: Prisma.Sql) => Prisma.sql`
  SELECT v."id", v."channelId", v."status", v."subject", v."assignedOperatorId", v."lastMessagePreview", v."lastMessageAt",
         v."createdAt", ch."kind" AS "channelKind", cu."id" AS "customerRowId", cu."name" AS "customerName",
         cu."email" AS "customerEmail", cu."phone" AS "customerPhone", cu."contactId" AS "customerContactId"
    FROM (${conversations}) v
    JOIN "Channel" ch ON ch."tenantId" = ${tenantId}::uuid AND ch."id" = v."channelId"
    JOIN "Customer" cu ON cu."tenantId" = ${tenantId}::uuid AND cu."id" = v."customerId"`;

/**
 * A selectConversations() row → the public conversation: the one mapping (toConversation feeds it).
 * Fields are read one by one: spreading the row into a nested one first cost ~4 µs a row.
 */
export const fromConversationRow = (r: ConversationListRow): ConversationObject => ({
  id: r.id,
  channel: r.channelKind,
  channelId: r.channelId,
  status: r.status as ConversationObject["status"],
  subject: r.subject,
  customer: { id: r.customerRowId, name: r.customerName, email: r.customerEmail, phone: r.customerPhone, customerId: r.customerContactId },
  assignedOperatorId: r.assignedOperatorId,
  lastMessagePreview: r.lastMessagePreview,
  lastMessageAt: iso(r.lastMessageAt),
  createdAt: iso(r.createdAt),
});

/** The message list's cursor envelope: newest first, older pages follow nextCursor. */
export const MessageList = z.object({
  items: z.array(MessageObject),
  pagination: z.object({ nextCursor: z.string().nullable(), prevCursor: z.null(), hasMore: z.boolean() }),
});

/** Free text of an outbound message. */
export const MESSAGE_MAX_CHARS = 4096;
