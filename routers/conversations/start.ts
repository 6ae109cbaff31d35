// POST /public/v1/conversations/start — start or resume a 1:1 outbound WhatsApp conversation with an
// approved template (201). Rule order:
//   validate the body (unknown fields → 422, so the assignment cannot be overridden);
//   channelId foreign/unknown → 404; leadId foreign/unknown → 404 (before any write or send);
//   channel not a connected WhatsApp channel → 422; (templateName, templateLanguage) not an approved
//   template of the channel → 422; phone not a number (E.164 with the tenant's default country) → 422;
//   variables count ≠ highest {{n}} placeholder of the template body → 422.
// Then: find or create the channel identity (phone digits) and its customer (linked to a live contact
// with that phone), resume the newest non-resolved conversation of that identity on the channel or
// create one, assign it to the key owner, store the rendered text as a pending operator message, link
// the lead (when it has no conversation yet), commit; then send the template and record the outcome.
import { z } from "zod";
import type { Db } from "../../server/db/client.js";
import { readOn } from "../../server/db/insert.js";
import { abandonDelivery, prepareDelivery } from "../../server/channels/messages.js";
import { validation } from "../../server/errors.js";
import { requirePhone } from "../../server/phone.js";
import { ConversationObject, toConversation, type ConversationRow } from "../../model/conversation.js";
import { AfterCommit, idempotent } from "../_lib/idempotent.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import type { AuthedContext } from "../trpc.js";
import { scoped } from "../trpc.js";
import { conversationById } from "./schemas.js";

export const StartConversationInput = z
  .object({
    channelId: Id,
    phone: z.string().min(1).max(64),
    templateName: z.string().min(1).max(512),
    templateLanguage: z.string().min(1).max(32),
    variables: z.array(z.string().max(1024)).max(100).default([]),
    leadId: Id.optional(),
  })
  .strict();
type StartInput = z.infer<typeof StartConversationInput>;

const PLACEHOLDER = /\{\{\s*(\d+)\s*\}\}/g;

/** The highest {{n}} in a template body (0 when there is none). */
export function highestPlaceholder(body: string): number {
  let max = 0;
  for (const m of body.matchAll(PLACEHOLDER)) max = Math.max(max, Number(m[1]));
  return max;
}

/** The body with {{n}} replaced by variables[n-1]. */
export function renderTemplate(body: string, variables: string[]): string {
  return body.replace(PLACEHOLDER, (whole, n: string) => variables[Number(n) - 1] ?? whole);
}

const fail = (field: string, code: string, message: string) =>
  validation(message, { fields: [{ field, code, message }] });

/** The identity for (channel, digits), created with its customer when missing; row-locked for this transaction. */
async function identityFor(ctx: AuthedContext, channelId: string, e164: string) {
  const externalId = e164.replace(/\D/g, "");
  let identity = await ctx.db.channelIdentity.findFirst({
    where: owned(ctx, { channelId, externalId }),
    select: { id: true, customerId: true },
  });
  if (!identity) {
    const contact = await ctx.db.contact.findFirst({
      where: owned(ctx, { phone: e164, deletedAt: null }),
      select: { id: true, fullName: true, email: true },
    });
    const customer = await ctx.db.customer.create({
      data: {
        tenantId: ctx.tenantId,
        name: contact?.fullName ?? null,
        email: contact?.email ?? null,
        phone: e164,
        contactId: contact?.id ?? null,
      },
    });
    // ON CONFLICT: a concurrent start for the same number (another Idempotency-Key) waits for the
    // other transaction and then uses its identity instead of failing on the unique constraint.
    const inserted = await ctx.db.$queryRaw<{ id: string }[]>`
      INSERT INTO "ChannelIdentity" ("tenantId", "customerId", "channelId", "externalId")
      VALUES (${ctx.tenantId}::uuid, ${customer.id}::uuid, ${channelId}::uuid, ${externalId})
      ON CONFLICT ("tenantId", "channelId", "externalId") DO NOTHING
      RETURNING "id"`;
    if (inserted.length === 0)
      await ctx.db.customer.delete({ where: { tenantId_id: { tenantId: ctx.tenantId, id: customer.id } } });
    identity = await ctx.db.channelIdentity.findFirstOrThrow({
      where: owned(ctx, { channelId, externalId }),
      select: { id: true, customerId: true },
    });
  }
  // Serializes concurrent starts to one number, so they resume one conversation rather than open two.
  await ctx.db
    .$queryRaw`SELECT 1 FROM "ChannelIdentity" WHERE "tenantId" = ${ctx.tenantId}::uuid AND "id" = ${identity.id}::uuid FOR UPDATE`;
  return { ...identity, externalId };
}

export const startConversation = scoped("tenant:conversations.manage")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "POST",
      path: "/public/v1/conversations/start",
      tags: ["conversations"],
      summary: "Start or resume an outbound template conversation",
      protect: true,
    },
    successStatus: 201,
  })
  .input(StartConversationInput)
  .output(ConversationObject)
  .mutation(
    idempotent(
      async ({ ctx, input }: { ctx: AuthedContext; input: StartInput }) => {
        const channel = await mustExist(
          ctx.db.channel.findFirst({
            where: owned(ctx, { id: input.channelId }),
            select: { id: true, kind: true, connected: true, config: true },
          }),
          "Channel",
        );
        const lead =
          input.leadId === undefined
            ? null
            : await mustExist(
                ctx.db.lead.findFirst({
                  where: owned(ctx, { id: input.leadId }),
                  select: { id: true, conversationId: true },
                }),
                "Lead",
              );

        if (channel.kind !== "whatsapp" || !channel.connected)
          throw fail("channelId", "channel_not_messaging_app", "The channel is not a connected WhatsApp channel");
        const template = await ctx.db.messageTemplate.findFirst({
          where: owned(ctx, {
            channelId: channel.id,
            name: input.templateName,
            language: input.templateLanguage,
            approved: true,
          }),
          select: { body: true },
        });
        if (!template)
          throw fail(
            "templateName",
            "template_not_approved",
            "No approved template with this name and language on the channel",
          );
        const e164 = requirePhone(input.phone, ctx.caller.tenant.defaultCountry, "phone");
        const expected = highestPlaceholder(template.body);
        if (input.variables.length !== expected)
          throw fail(
            "variables",
            "variables_count",
            `The template takes ${expected} variable(s), ${input.variables.length} given`,
          );

        const now = ctx.services.now();
        const identity = await identityFor(ctx, channel.id, e164);
        const open = await ctx.db.conversation.findFirst({
          where: owned(ctx, { channelId: channel.id, identityId: identity.id, status: { not: "resolved" as const } }),
          orderBy: [{ createdAt: "desc" }, { id: "desc" }],
          select: { id: true },
        });
        const conversationId = open
          ? (
              await ctx.db.conversation.update({
                where: { tenantId_id: { tenantId: ctx.tenantId, id: open.id } },
                data: { assignedOperatorId: ctx.caller.ownerId },
                select: { id: true },
              })
            ).id
          : (
              await ctx.db.conversation.create({
                data: {
                  tenantId: ctx.tenantId,
                  channelId: channel.id,
                  customerId: identity.customerId,
                  identityId: identity.id,
                  status: "active",
                  assignedOperatorId: ctx.caller.ownerId,
                  lastMessageAt: now,
                  createdAt: now,
                },
                select: { id: true },
              })
            ).id;

        const { messageId, send } = await prepareDelivery(ctx.db, ctx.services.providers, {
          tenantId: ctx.tenantId,
          conversationId,
          authorUserId: ctx.caller.ownerId,
          content: renderTemplate(template.body, input.variables),
          channel: { kind: channel.kind, config: channel.config },
          to: identity.externalId,
          payload: {
            kind: "template",
            name: input.templateName,
            language: input.templateLanguage,
            variables: input.variables,
          },
          at: now,
        });

        if (lead && lead.conversationId === null)
          await ctx.db.lead.updateMany({
            where: owned(ctx, { id: lead.id, conversationId: null }),
            data: { conversationId, updatedAt: now },
          });

        // The template is sent after the commit (no transaction held while the provider answers).
        return new AfterCommit({ messageId, conversationId }, async (db) => {
          await send(db);
          return readConversation(db, ctx.tenantId, conversationId);
        });
      },
      {
        recover: async (db, note: { messageId: string; conversationId: string }, ctx) => {
          await abandonDelivery(db, ctx.tenantId, note.messageId);
          return readConversation(db, ctx.tenantId, note.conversationId);
        },
      },
    ),
  );

/** The conversation as the list reads it (selectConversations), on `db`. */
async function readConversation(db: Db, tenantId: string, id: string) {
  const [row] = await readOn(db, { isoTimes: true })<ConversationRow>(conversationById(tenantId, id));
  if (!row) throw new Error(`conversation ${id} not found`);
  return toConversation(row);
}
