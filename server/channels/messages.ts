// Storing a message on a conversation, shared by the public API (operator sends, template starts)
// and the admin inbound-message verb: the message row plus the conversation's
// lastMessagePreview / lastMessageAt, which always describe the latest stored message (the database
// moves the conversation's updatedAt and version with them, and a message's own updatedAt with its
// delivery: the "row_touch" trigger).
// Outbound sends go through prepareDelivery(): the message is stored "pending" in the request's
// transaction; after it commits the provider is called and the outcome is recorded on the message
// (deliveryStatus "sent" + providerMessageId, or "failed").
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
    data: { lastMessagePreview: preview(m.content), lastMessageAt: m.at },
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
 * Stores an operator message as "pending" on the caller's transaction and returns `send`, which the
 * caller runs after that transaction commits: it attempts the delivery (holding no connection or
 * lock while the provider is waited for) and records the outcome — "sent" with the provider's id, or
 * "failed". A delivery failure never throws: the message stays stored with deliveryStatus "failed".
 */
export async function prepareDelivery(db: Db, providers: Providers, d: Delivery) {
  const stored = await storeMessage(db, {
    tenantId: d.tenantId,
    conversationId: d.conversationId,
    role: "operator",
    content: d.content,
    deliveryStatus: DELIVERY.pending,
    authorUserId: d.authorUserId,
    at: d.at,
  });
  const send = async (root: Db) => {
    const result =
      d.to === null && d.channel.kind !== "web"
        ? { ok: false as const, reason: "conversation has no channel identity to send to" }
        : await providers.send(d.channel, d.to ?? "", d.payload);
    // Only a still-pending message is updated: one given up meanwhile (abandonDelivery) keeps "failed".
    await root.message.updateMany({
      where: { tenantId: d.tenantId, id: stored.id, deliveryStatus: DELIVERY.pending },
      data: {
        deliveryStatus: result.ok ? DELIVERY.sent : DELIVERY.failed,
        providerMessageId: result.ok ? (result.providerMessageId ?? null) : null,
      },
    });
    return root.message.findUniqueOrThrow({ where: { tenantId_id: { tenantId: d.tenantId, id: stored.id } } });
  };
  return { messageId: stored.id, send };
}

/** Gives up on a delivery whose request never finished (a crash, a lost database): pending → failed. */
export async function abandonDelivery(db: Db, tenantId: string, messageId: string) {
  await db.message.updateMany({
    where: { tenantId, id: messageId, deliveryStatus: DELIVERY.pending },
    data: { deliveryStatus: DELIVERY.failed },
  });
  return db.message.findUniqueOrThrow({ where: { tenantId_id: { tenantId, id: messageId } } });
}

/**
 * The abandoned-send sweep. Its predicate restates, with literals, the one of the partial index
 * "Message_pending_operator_idx" (role = 'operator' AND deliveryStatus = 'pending'), so that the
 * planner can always use that index — however many messages the table holds, the sweep reads only
 * the few pending ones. It spans every tenant on purpose (a maintenance job of each instance).
 */
export const ABANDONED_DELIVERY_SWEEP = `UPDATE "Message" SET "deliveryStatus" = 'failed'
 WHERE "role" = 'operator' AND "deliveryStatus" = 'pending' AND "createdAt" < $1::timestamptz`;

/** Operator messages still pending after olderThanMs (their request died mid-send) → failed. Returns how many. */
export async function failAbandonedDeliveries(db: Db, olderThanMs: number, now = new Date()): Promise<number> {
  return db.$executeRawUnsafe(ABANDONED_DELIVERY_SWEEP, new Date(now.getTime() - olderThanMs).toISOString());
}
