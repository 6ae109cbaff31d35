// GET /public/v1/conversations/{id}/messages — cursor list, newest first (createdAt desc, id desc).
// The conversation is resolved first (foreign/unknown → 404) and only then is the cursor parsed
// (malformed → 422). The cursor is an opaque base64url keyset of the last item's (createdAt, id),
// so pages stay gap- and duplicate-free while new messages arrive. A page is cut to the byte budget
// (routers/_lib/page-budget.ts) in its statement: a cut page has a nextCursor like a full one.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { readFor } from "../../server/db/insert.js";
import { validation } from "../../server/errors.js";
import { Message, toMessage, type MessageRow } from "../../model/conversation.js";
import { toIso } from "../../model/instants.js";
import { BUDGET_DOC, budgetCut, cutToBudget, messageSize, type Cut } from "../_lib/page-budget.js";
import { DEFAULT_LIMIT, Id, isStorableInstant, MAX_LIMIT, queryIntDefault } from "../_lib/schemas.js";
import { sqlTime } from "../_lib/totals.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { MessageList } from "./schemas.js";

export const ListMessagesQuery = z.object({
  id: Id,
  cursor: z.string().optional(),
  limit: queryIntDefault("limit", 1, MAX_LIMIT, DEFAULT_LIMIT),
});

interface Keyset {
  createdAt: Date;
  id: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

export function encodeCursor(k: { createdAt: Date | string; id: string }): string {
  return Buffer.from(JSON.stringify({ t: toIso(k.createdAt), i: k.id }), "utf8").toString("base64url");
}

/** The keyset in a cursor, or undefined when it is not one this service issued. */
export function decodeCursor(cursor: string): Keyset | undefined {
  if (!/^[A-Za-z0-9_-]{1,512}$/.test(cursor)) return undefined;
  try {
    const v = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (!v || typeof v !== "object" || Array.isArray(v) || Object.keys(v).length !== 2) return undefined;
    if (typeof v.t !== "string" || !ISO.test(v.t) || typeof v.i !== "string" || !UUID.test(v.i)) return undefined;
    const createdAt = new Date(v.t);
    if (Number.isNaN(createdAt.getTime()) || createdAt.toISOString() !== v.t || !isStorableInstant(createdAt))
      return undefined;
    return { createdAt, id: v.i.toLowerCase() };
  } catch {
    return undefined;
  }
}

export const listMessages = scoped("tenant:conversations.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/conversations/{id}/messages",
      tags: ["conversations"],
      summary: "List messages",
      protect: true,
      description:
        "Newest first. Pass `pagination.nextCursor` back as the `cursor` query parameter for the next (older) page; it is opaque and stable under concurrent inserts. `limit` 1 to 200, default 50. An unknown conversation gives 404 before the cursor is read; a malformed cursor gives 422. " +
        `${BUDGET_DOC}, with \`pagination.hasMore\` true and a \`nextCursor\` that continues after its last item.`,
    },
  })
  .input(ListMessagesQuery)
  .output(MessageList)
  .query(async ({ ctx, input }) => {
    const conversation = await mustExist(
      ctx.db.conversation.findFirst({ where: owned(ctx, { id: input.id }), select: { id: true } }),
      "Conversation",
    );
    let after: Keyset | undefined;
    if (input.cursor !== undefined) {
      after = decodeCursor(input.cursor);
      if (!after)
        throw validation("Malformed cursor", {
          fields: [{ field: "cursor", code: "invalid_cursor", message: "not a cursor returned by this endpoint" }],
        });
    }
    // One statement: limit + 1 messages after the cursor, newest first, cut to the byte budget
    // (routers/_lib/page-budget.ts; an empty gate is read again as the walk, whose "_fetched" is how
    // many were read before the cut).
    const keyset = after
      ? Prisma.sql`AND ("createdAt" < ${sqlTime(after.createdAt)} OR ("createdAt" = ${sqlTime(after.createdAt)} AND "id" < ${after.id}::uuid))`
      : Prisma.empty;
    const read = (cut: Cut) =>
      readFor(ctx.database, ctx.db, { isoTimes: true, prepare: true, tenant: ctx.tenantId })<
        MessageRow & { _fetched?: number | string }
      >(Prisma.sql`
      SELECT * FROM (${budgetCut(
        cut,
        Prisma.sql`SELECT ${Message.select()} FROM "Message"
                    WHERE "tenantId" = ${ctx.tenantId}::uuid AND "conversationId" = ${conversation.id}::uuid ${keyset}
                    ORDER BY "createdAt" DESC, "id" DESC LIMIT ${input.limit + 1}`,
        messageSize(),
        Prisma.sql`"createdAt" DESC, "id" DESC`,
        { fetched: true, budget: ctx.pageBudget },
      )}) m ORDER BY m."createdAt" DESC, m."id" DESC`);
    const rows = await cutToBudget(read, (gated) => gated.length === 0);
    // More: a message past the limit was read, or the budget cut the page.
    const hasMore =
      rows.length > input.limit || (rows[0]?._fetched !== undefined && rows.length < Number(rows[0]._fetched));
    const items = rows.slice(0, input.limit);
    const last = items[items.length - 1];
    return {
      items: items.map(toMessage),
      pagination: { nextCursor: hasMore && last ? encodeCursor(last) : null, prevCursor: null, hasMore },
    };
  });
