// Conversation and Message: the public objects and their serializers.
import { z } from "zod";
import { iso, Timestamp } from "../_lib/schemas.js";

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
  role: MessageObject["role"];
  content: string;
  deliveryStatus: string;
  createdAt: Date;
}

export const toMessage = (m: MessageRow): MessageObject => ({
  id: m.id,
  conversationId: m.conversationId,
  role: m.role,
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
  status: ConversationObject["status"];
  subject: string | null;
  assignedOperatorId: string | null;
  lastMessagePreview: string;
  lastMessageAt: Date;
  createdAt: Date;
  channel: { kind: string };
  customer: { id: string; name: string | null; email: string | null; phone: string | null; contactId: string | null };
}

export const toConversation = (c: ConversationRow): ConversationObject => ({
  id: c.id,
  channel: c.channel.kind,
  channelId: c.channelId,
  status: c.status,
  subject: c.subject,
  customer: {
    id: c.customer.id,
    name: c.customer.name,
    email: c.customer.email,
    phone: c.customer.phone,
    customerId: c.customer.contactId,
  },
  assignedOperatorId: c.assignedOperatorId,
  lastMessagePreview: c.lastMessagePreview,
  lastMessageAt: iso(c.lastMessageAt),
  createdAt: iso(c.createdAt),
});

/** The message list's cursor envelope: newest first, older pages follow nextCursor. */
export const MessageList = z.object({
  items: z.array(MessageObject),
  pagination: z.object({ nextCursor: z.string().nullable(), prevCursor: z.null(), hasMore: z.boolean() }),
});

/** Free text of an outbound message. */
export const MESSAGE_MAX_CHARS = 4096;
