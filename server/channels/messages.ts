// Storing a message on a conversation, shared by the public API (operator sends, template starts)
// and the admin inbound-message verb: the message row plus the conversation's
// lastMessagePreview / lastMessageAt / updatedAt, which always describe the latest stored message.
// Outbound sends also go through deliver(): the message is stored, the provider is called, and the
// outcome is recorded on the message (deliveryStatus "sent" + providerMessageId, or "failed").
import type { Db } from "../db/client.js";
import { preview } from "../admin/fixture.js";
import type { ChannelRef, OutboundTemplate, OutboundText, Providers } from "./index.js";

export type MessageRole = "user" | "assistant" | "operator" | "system";

/** Values of Message.deliveryStatus written by the service. */
export const DELIVERY = { received: "received", pending: "pending", sent: "sent", failed: "failed" } as const;

export interface NewMessage {
  tenantId: string;
  conversationId: string;
  role: MessageRole;
  content: string;
  deliveryStatus: string;
  authorUserId?: string | null;
  providerMessageId?: string | null;
  at: Date;
}

/** Inserts the message and brings the conversation's last-message fields up to date. */
export async function storeMessage(db: Db, m: NewMessage) {
  const row = await db.message.create({
    data: {
      tenantId: m.tenantId,
      conversationId: m.conversationId,
      role: m.role,
      content: m.content,
      deliveryStatus: m.deliveryStatus,
      authorUserId: m.authorUserId ?? null,
      providerMessageId: m.providerMessageId ?? null,
      createdAt: m.at,
    },
  });
  await db.conversation.updateMany({
    where: { tenantId: m.tenantId, id: m.conversationId },
    data: { lastMessagePreview: preview(m.content), lastMessageAt: m.at, updatedAt: m.at },
  });
  return row;
}

export interface Delivery {
  tenantId: string;
  conversationId: string;
  authorUserId: string;
  /** The stored text (for a template: its rendered body). */
  content: string;
  channel: ChannelRef;
  /** The customer's address on the channel (identity externalId), null when there is none. */
  to: string | null;
  payload: OutboundText | OutboundTemplate;
  at: Date;
}

/**
 * Stores an operator message, attempts the send, records the outcome. Never throws for a delivery
 * failure: the message stays stored with deliveryStatus "failed".
 */
export async function deliver(db: Db, providers: Providers, d: Delivery) {
  const stored = await storeMessage(db, {
    tenantId: d.tenantId,
    conversationId: d.conversationId,
    role: "operator",
    content: d.content,
    deliveryStatus: DELIVERY.pending,
    authorUserId: d.authorUserId,
    at: d.at,
  });
  const result =
    d.to === null && d.channel.kind !== "web"
      ? { ok: false as const, reason: "conversation has no channel identity to send to" }
      : await providers.send(d.channel, d.to ?? "", d.payload);
  return db.message.update({
    where: { id: stored.id },
    data: {
      deliveryStatus: result.ok ? DELIVERY.sent : DELIVERY.failed,
      providerMessageId: result.ok ? (result.providerMessageId ?? null) : null,
    },
  });
}
