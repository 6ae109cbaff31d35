// POST /public/v1/leads — create a lead (scope tenant:leads.manage, 201, Idempotency-Key).
//   1. `source` is always "api" (and cannot be sent: unknown fields are 422).
//   2. With conversationId: the tenant's conversation (else 404); customerId = the contact linked to
//      the conversation's customer (its identity's person), null when there is none.
//   3. Without conversationId: customerId = the tenant's live contact whose phone matches
//      customerPhone (normalized with the tenant's default country), else whose email matches
//      customerEmail case-insensitively, else null. A contact is never created.
//   4. stageId: a stage of the tenant (else 404); omitted → the tenant's default-entry stage.
//   5. assignedOperatorId: a user of the tenant (else 404).
// Every id is resolved (one read statement) before the insert, which is one statement together with
// the Idempotency-Key claim and the stored response (routers/_lib/idempotent.ts `plan`).
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { insertRow, readOn, type Read } from "../../server/db/insert.js";
import { AppError, notFound } from "../../server/errors.js";
import { phoneForMatching } from "../../server/phone.js";
import { idempotent, type OneStatement } from "../_lib/idempotent.js";
import { Id, Text } from "../_lib/schemas.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { LeadBudgetInput, LeadIntent, LeadNotes, LeadObject, LeadQuality, LeadRooms, LeadZones, toLead, type LeadRow } from "./schemas.js";

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

interface Resolved {
  conversationFound: boolean;
  /** The live contact linked to the conversation's customer (rule 2). */
  conversationContact: string | null;
  /** The given stage if it is the tenant's, else (none given) the default-entry stage (rule 4). */
  stageId: string | null;
  operatorFound: boolean;
  /** Rule 3: the live contact matching the phone (preferred) or the email (case-insensitively). */
  matched: string | null;
}

/**
 * Every lookup of rules 2–5 in ONE statement (reads only), then the rules' 404s in the spec's order.
 * Read through the raw runner by the one-statement path and on the transaction by the transactional one.
 */
async function resolveIds(ctx: AuthedContext, input: z.output<typeof CreateLeadInput>, read: Read): Promise<{ customerId: string | null; stageId: string }> {
  const t = ctx.tenantId;
  const conv = input.conversationId ?? null;
  const stage = input.stageId ?? null;
  const operator = input.assignedOperatorId ?? null;
  const phone = conv ? null : phoneForMatching(input.customerPhone, ctx.caller.tenant.defaultCountry) || null;
  const mail = conv ? null : input.customerEmail?.trim() || null;
  // lower() = lower() for the email (the expression the unique index uses), not ILIKE: no wildcards.
  const [r] = await read<Resolved>(Prisma.sql`
    SELECT ${conv}::uuid IS NULL OR EXISTS (SELECT 1 FROM "Conversation" v WHERE v."tenantId" = ${t}::uuid AND v."id" = ${conv}::uuid) AS "conversationFound",
           (SELECT c."id" FROM "Conversation" v
              JOIN "Customer" u ON u."tenantId" = v."tenantId" AND u."id" = v."customerId"
              JOIN "Contact" c ON c."tenantId" = u."tenantId" AND c."id" = u."contactId"
             WHERE v."tenantId" = ${t}::uuid AND u."tenantId" = ${t}::uuid AND c."tenantId" = ${t}::uuid
               AND v."id" = ${conv}::uuid AND c."deletedAt" IS NULL) AS "conversationContact",
           (SELECT s."id" FROM "PipelineStage" s
             WHERE s."tenantId" = ${t}::uuid AND (${stage}::uuid IS NULL OR s."id" = ${stage}::uuid)
             ORDER BY s."defaultEntry" DESC, s."position" ASC, s."createdAt" ASC, s."id" ASC LIMIT 1) AS "stageId",
           ${operator}::uuid IS NULL OR EXISTS (SELECT 1 FROM "User" o WHERE o."tenantId" = ${t}::uuid AND o."id" = ${operator}::uuid) AS "operatorFound",
           coalesce((SELECT c."id" FROM "Contact" c WHERE c."tenantId" = ${t}::uuid AND c."phone" = ${phone}::text AND c."deletedAt" IS NULL LIMIT 1),
                    (SELECT c."id" FROM "Contact" c WHERE c."tenantId" = ${t}::uuid AND lower(c."email") = lower(${mail}::text) AND c."deletedAt" IS NULL LIMIT 1)) AS "matched"`);
  if (!r!.conversationFound) throw notFound("Conversation");
  if (!r!.stageId) {
    if (stage) throw notFound("Stage");
    throw new AppError("INTERNAL_ERROR", "The tenant has no pipeline stage");
  }
  if (!r!.operatorFound) throw notFound("Operator");
  return { customerId: conv ? r!.conversationContact : r!.matched, stageId: r!.stageId };
}

/** The lead row of this request and its public object (no write). */
async function planLead(ctx: AuthedContext, input: z.output<typeof CreateLeadInput>, read: Read): Promise<OneStatement<LeadObject>> {
  const { customerId, stageId } = await resolveIds(ctx, input, read);
  const now = ctx.services.now();
  const row: LeadRow & { tenantId: string } = {
    id: randomUUID(),
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
  };
  return { table: "Lead", row: row as unknown as Record<string, unknown>, body: toLead(row) };
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
    idempotent(
      // The transactional path (a replay, a mismatch, a 404 with a key …): the same plan, on ctx.db.
      async ({ ctx, input }: { ctx: AuthedContext; input: z.output<typeof CreateLeadInput> }) => {
        const plan = await planLead(ctx, input, readOn(ctx.db));
        await insertRow(ctx.db, plan);
        return plan.body;
      },
      { plan: ({ ctx, input, read }) => planLead(ctx, input, read) },
    ),
  );
