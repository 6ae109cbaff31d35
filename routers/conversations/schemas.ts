// Conversation and Message: the public objects and their serializers.
import { z } from "zod";
import { iso, Timestamp } from "../_lib/schemas.js";

export const MessageObject = z.object({
  id: z.string(),
  conversationId: z.string(),
  role: z.enum(["user", "assistant", "operator", "system"]),
  content: z.string(),
  deliveryStatus: z.string(),
  createdAt: Timestamp,
});
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
  deliveryStatus: m.deliveryStatus,
  createdAt: iso(m.createdAt),
});
