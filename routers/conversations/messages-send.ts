// POST /public/v1/conversations/{id}/messages — send a free-text operator message (201).
// 1. foreign/unknown conversation → 404, nothing persisted;
// 2. WhatsApp (model/channel.ts hasSessionWindow, which GET /channels shows as `sessionWindow`): the
//    identity's 24-hour session window must be open (newest `user` message of the
//    conversation's identity on that channel, across its conversations, < 24 h old), else — or
//    without an identity — 409 MESSAGING_SESSION_WINDOW_CLOSED, nothing written, no send attempted
//    (thrown inside idempotent(), so it rolls back and is never cached under an Idempotency-Key);
// 3. other kinds: no window;
// 4. store (role operator, author = key owner) and commit; then send, outside the transaction, and
//    record the outcome: "sent" or "failed" (201 both). A duplicate of an unfinished send waits for it.
import { z } from "zod";
import { abandonDelivery, prepareDelivery } from "../../server/channels/messages.js";
import type { ChannelRef } from "../../server/channels/index.js";
import { AppError } from "../../server/errors.js";
import { hasSessionWindow } from "../../model/channel.js";
import { MessageObject, toMessage } from "../../model/conversation.js";
import { AfterCommit, idempotent } from "../_lib/idempotent.js";
import { Id, Text } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import type { AuthedContext } from "../trpc.js";
import { scoped } from "../trpc.js";
import { MESSAGE_MAX_CHARS } from "./schemas.js";

export const SendMessageInput = z.object({ id: Id, content: Text(MESSAGE_MAX_CHARS) }).strict();

export const WINDOW_MS = 24 * 60 * 60 * 1000;

/** Whether the identity's 24-hour session window on the channel is open at `now`. */
export async function sessionWindowOpen(
  ctx: AuthedContext,
  channelId: string,
  identityId: string,
  now: Date,
): Promise<boolean> {
  const recent = await ctx.db.message.findFirst({
    where: owned(ctx, {
      role: "user" as const,
      createdAt: { gt: new Date(now.getTime() - WINDOW_MS) },
      conversation: { tenantId: ctx.tenantId, identityId, channelId },
    }),
    select: { id: true },
  });
  return recent !== null;
}

export const sendMessage = scoped("tenant:conversations.manage")
  .meta({
    errors: ["NOT_FOUND", "MESSAGING_SESSION_WINDOW_CLOSED"],
    openapi: {
      method: "POST",
      path: "/public/v1/conversations/{id}/messages",
      tags: ["conversations"],
      summary: "Send a free-text message",
      protect: true,
    },
    successStatus: 201,
  })
  .input(SendMessageInput)
  .output(MessageObject)
  .mutation(
    idempotent(
      async ({ ctx, input }: { ctx: AuthedContext; input: z.infer<typeof SendMessageInput> }) => {
        const conversation = await mustExist(
          ctx.db.conversation.findFirst({
            where: owned(ctx, { id: input.id }),
            select: {
              id: true,
              channelId: true,
              identityId: true,
              channel: { select: { kind: true, config: true } },
              identity: { select: { externalId: true } },
            },
          }),
          "Conversation",
        );
        const now = ctx.services.now();
        if (hasSessionWindow(conversation.channel.kind)) {
          const open =
            conversation.identityId !== null &&
            (await sessionWindowOpen(ctx, conversation.channelId, conversation.identityId, now));
          if (!open)
            throw new AppError(
              "MESSAGING_SESSION_WINDOW_CLOSED",
              conversation.identityId === null
                ? "The conversation has no linked channel identity; use POST /public/v1/conversations/start with an approved template"
                : "The 24-hour session window is closed; use POST /public/v1/conversations/start with an approved template",
              { conversationId: conversation.id },
            );
        }
        const { messageId, send } = await prepareDelivery(ctx.db, ctx.services.providers, {
          tenantId: ctx.tenantId,
          conversationId: conversation.id,
          authorUserId: ctx.caller.ownerId,
          content: input.content,
          channel: { kind: conversation.channel.kind as ChannelRef["kind"], config: conversation.channel.config },
          to: conversation.identity?.externalId ?? null,
          payload: { kind: "text", text: input.content },
          at: now,
        });
        return new AfterCommit({ messageId }, async (db) => toMessage(await send(db)));
      },
      {
        recover: async (db, note: { messageId: string }, ctx) =>
          toMessage(await abandonDelivery(db, ctx.tenantId, note.messageId)),
      },
    ),
  );
