// GET /public/v1/conversations/{id} — one conversation (scope tenant:conversations.read), as the list
// shows it (its channel's kind and its customer). Unknown or foreign → 404; a malformed id → 422.
// Sends its version as the ETag; If-None-Match naming it → 304 (rest/facade.ts).
import { z } from "zod";
import { readFor } from "../../server/db/insert.js";
import { ConversationObject, toConversation, type ConversationRow } from "../../model/conversation.js";
import { Id } from "../_lib/schemas.js";
import { mustExist } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { conversationById } from "./schemas.js";

export const GetConversationInput = z.object({ id: Id });

export const getConversation = scoped("tenant:conversations.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/conversations/{id}",
      tags: ["conversations"],
      summary: "Get one conversation",
      description:
        "A conversation of the tenant, as the list shows it; an unknown or foreign conversation gives 404. " +
        "The `ETag` is the conversation's version; `If-None-Match` naming it answers 304 without a body.",
      protect: true,
    },
  })
  .input(GetConversationInput)
  .output(ConversationObject)
  .query(async ({ ctx, input }) => {
    // One statement on the raw runner: the conversation with its channel and customer.
    const read = readFor(ctx.database, ctx.db, { isoTimes: true, prepare: true, tenant: ctx.tenantId });
    const [row] = await read<ConversationRow>(conversationById(ctx.tenantId, input.id));
    return toConversation(await mustExist(row ?? null, "Conversation"));
  });
