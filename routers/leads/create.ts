// POST /public/v1/leads — create a lead (scope tenant:leads.manage, 201, Idempotency-Key).
//   1. `source` is always "api" (and cannot be sent: unknown fields are 422).
//   2. With conversationId: the tenant's conversation (else 404); customerId = the contact linked to
//      the conversation's customer (its identity's person), null when there is none.
//   3. Without conversationId: customerId = the tenant's live contact whose phone matches
//      customerPhone (normalized with the tenant's default country), else whose email matches
//      customerEmail case-insensitively, else null. A contact is never created.
//   4. stageId: a stage of the tenant (else 404); omitted → the tenant's default-entry stage.
//   5. assignedOperatorId: a user of the tenant (else 404).
// Every id is resolved before the insert; everything runs on ctx.db (the idempotency transaction).
import { z } from "zod";
import { AppError } from "../../server/errors.js";
import { phoneForMatching } from "../../server/phone.js";
import { idempotent } from "../_lib/idempotent.js";
import { Id, Text } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { LeadBudgetInput, LeadIntent, LeadNotes, LeadObject, LeadQuality, LeadRooms, LeadZones, toLead } from "./schemas.js";

export const CreateLeadInput = z
  .object({
    conversationId: Id.nullable().optional(),
    customerName: Text(255),
    customerEmail: Text(320).nullable().optional(),
    customerPhone: Text(20).nullable().optional(),
    intent: LeadIntent.optional(),
    quality: LeadQuality.optional(),
    stageId: Id.optional(),
    budget: LeadBudgetInput.nullable().optional(),
    zones: LeadZones.optional(),
    rooms: LeadRooms.nullable().optional(),
    assignedOperatorId: Id.nullable().optional(),
    notes: LeadNotes.nullable().optional(),
  })
  .strict();

/** The tenant's default-entry stage (the lowest position if, unexpectedly, none is flagged). */
async function defaultStageId(ctx: AuthedContext): Promise<string> {
  const stage = await ctx.db.pipelineStage.findFirst({
    where: owned(ctx, {}),
    orderBy: [{ defaultEntry: "desc" }, { position: "asc" }, { createdAt: "asc" }, { id: "asc" }],
    select: { id: true },
  });
  if (!stage) throw new AppError("INTERNAL_ERROR", "The tenant has no pipeline stage");
  return stage.id;
}

/** Rule 3: the live contact matching the phone (preferred) or the email, without creating one. */
async function matchContact(ctx: AuthedContext, phone: string | null | undefined, email: string | null | undefined): Promise<string | null> {
  const e164 = phoneForMatching(phone, ctx.caller.tenant.defaultCountry);
  if (e164) {
    const byPhone = await ctx.db.contact.findFirst({ where: owned(ctx, { phone: e164, deletedAt: null }), select: { id: true } });
    if (byPhone) return byPhone.id;
  }
  const mail = email?.trim();
  if (mail) {
    // lower() = lower() (the expression the unique index uses), not ILIKE: no wildcard surprises.
    const rows = await ctx.db.$queryRaw<{ id: string }[]>`
      SELECT "id" FROM "Contact"
       WHERE "tenantId" = ${ctx.tenantId}::uuid AND lower("email") = lower(${mail}) AND "deletedAt" IS NULL
       LIMIT 1`;
    if (rows[0]) return rows[0].id;
  }
  return null;
}

export const createLead = scoped("tenant:leads.manage")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: { method: "POST", path: "/public/v1/leads", tags: ["leads"], summary: "Create a lead", protect: true },
    successStatus: 201,
  })
  .input(CreateLeadInput)
  .output(LeadObject)
  .mutation(
    idempotent(async ({ ctx, input }: { ctx: AuthedContext; input: z.output<typeof CreateLeadInput> }) => {
      // Rule 2 / 3: who the lead is about.
      let customerId: string | null;
      if (input.conversationId) {
        const conversation = await mustExist(
          ctx.db.conversation.findFirst({
            where: owned(ctx, { id: input.conversationId }),
            select: { customer: { select: { contact: { select: { id: true, deletedAt: true } } } } },
          }),
          "Conversation",
        );
        const contact = conversation.customer.contact;
        customerId = contact && contact.deletedAt === null ? contact.id : null;
      } else {
        customerId = null;
      }
      // Rule 4.
      const stageId = input.stageId
        ? (await mustExist(ctx.db.pipelineStage.findFirst({ where: owned(ctx, { id: input.stageId }), select: { id: true } }), "Stage")).id
        : await defaultStageId(ctx);
      // Rule 5.
      if (input.assignedOperatorId)
        await mustExist(ctx.db.user.findFirst({ where: owned(ctx, { id: input.assignedOperatorId }), select: { id: true } }), "Operator");
      if (!input.conversationId) customerId = await matchContact(ctx, input.customerPhone, input.customerEmail);

      const now = ctx.services.now();
      const row = await ctx.db.lead.create({
        data: {
          tenantId: ctx.tenantId,
          customerId,
          conversationId: input.conversationId ?? null,
          customerName: input.customerName,
          customerEmail: input.customerEmail ?? null,
          customerPhone: input.customerPhone ?? null,
          intent: input.intent ?? "unknown",
          quality: input.quality ?? "unknown",
          stageId,
          budgetMin: input.budget?.min ?? null,
          budgetMax: input.budget?.max ?? null,
          zones: input.zones ?? [],
          rooms: input.rooms ?? null,
          assignedOperatorId: input.assignedOperatorId ?? null,
          source: "api",
          notes: input.notes ?? null,
          createdAt: now,
          updatedAt: now,
        },
      });
      return toLead(row);
    }),
  );
