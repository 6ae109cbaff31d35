// Conversation and Message: the public objects, their rows and the mappers between them.
import { z } from "zod";
import { Timestamp, UPDATED_AT } from "./instants.js";
import { col, defineRow, type RowOf } from "./row.js";

export const MESSAGE_ROLES = ["user", "assistant", "operator", "system"] as const;
export const DELIVERY_STATUSES = ["received", "pending", "sent", "delivered", "failed"] as const;

export const MessageObject = z
  .object({
    id: z.string(),
    conversationId: z.string(),
    role: z.enum(MESSAGE_ROLES),
    content: z.string(),
    deliveryStatus: z.enum(DELIVERY_STATUSES),
    createdAt: Timestamp,
    updatedAt: Timestamp.meta({
      description:
        "When the message last changed (its delivery recorded), on the database's clock; never before createdAt",
    }),
  })
  .meta({ id: "Message" });
export type MessageObject = z.infer<typeof MessageObject>;

export const Message = defineRow("Message", {
  id: col.uuid(),
  conversationId: col.uuid(),
  /** The "MessageRole" domain. */
  role: col.enum(MESSAGE_ROLES),
  content: col.text(),
  /** CHECK-constrained to these values in the database. */
  deliveryStatus: col.enum(DELIVERY_STATUSES),
  createdAt: col.instant(),
  updatedAt: col.instant(),
});
export type MessageRow = RowOf<typeof Message>;

/** A message row (or Prisma's Message) → the public message. */
export const toMessage = Message.toPublic(MessageObject, { composed: {} });

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

export const ConversationObject = z
  .object({
    id: z.string(),
    channel: z.string(),
    channelId: z.string().nullable(),
    status: z.enum(CONVERSATION_STATUSES),
    subject: z.string().nullable(),
    customer: ConversationCustomer,
    assignedOperatorId: z.string().nullable(),
    lastMessagePreview: z.string(),
    lastMessageAt: Timestamp,
    version: z.number().int().meta({
      description:
        "1 on create, +1 with every write that changes the object (a new message, its customer's details); sent as the ETag",
    }),
    createdAt: Timestamp,
    updatedAt: Timestamp.meta({ description: UPDATED_AT }),
  })
  .meta({ id: "Conversation" });
export type ConversationObject = z.infer<typeof ConversationObject>;

/**
 * A conversation with its channel's kind and its customer's fields: the statement joins "Channel" ch
 * and "Customer" cu (routers/conversations/schemas.ts selectConversations).
 */
export const Conversation = defineRow("Conversation", {
  id: col.uuid(),
  channelId: col.uuid(),
  /** The "ConversationStatus" domain. */
  status: col.enum(CONVERSATION_STATUSES),
  subject: col.text().nullable(),
  assignedOperatorId: col.uuid().nullable(),
  lastMessagePreview: col.text(),
  lastMessageAt: col.instant(),
  version: col.int(),
  createdAt: col.instant(),
  updatedAt: col.instant(),
  channelKind: col.enum(CHANNEL_KINDS).from(`ch."kind"`),
  customerRowId: col.uuid().from(`cu."id"`),
  customerName: col.text().nullable().from(`cu."name"`),
  customerEmail: col.text().nullable().from(`cu."email"`),
  customerPhone: col.text().nullable().from(`cu."phone"`),
  customerContactId: col.uuid().nullable().from(`cu."contactId"`),
});
export type ConversationRow = RowOf<typeof Conversation>;

/** A conversation row → the public conversation. */
export const toConversation = Conversation.toPublic(ConversationObject, {
  composed: {
    channel: (r) => r.channelKind,
    customer: (r) => ({
      id: r.customerRowId,
      name: r.customerName,
      email: r.customerEmail,
      phone: r.customerPhone,
      customerId: r.customerContactId,
    }),
  },
  internal: ["channelKind", "customerRowId", "customerName", "customerEmail", "customerPhone", "customerContactId"],
});
