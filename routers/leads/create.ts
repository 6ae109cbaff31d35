// POST /public/v1/leads — create a lead (scope tenant:leads.manage, 201, Idempotency-Key).
//   1. `source` is always "api" (and cannot be sent: unknown fields are 422).
//   2. With conversationId: the tenant's conversation (else 404); customerId = the contact linked to
//      the conversation's customer (its identity's person), null when there is none.
//   3. Without conversationId: customerId = the tenant's live contact whose phone matches
//      customerPhone (normalized with the tenant's default country), else whose email matches
//      customerEmail case-insensitively, else null. A contact is never created.
//   4. stageId: a stage of the tenant (else 404); omitted → the tenant's default-entry stage.
//   5. assignedOperatorId: a user of the tenant (else 404).
// A success is ONE statement: the lookups of rules 2–5, the Idempotency-Key claim, the row and the
// stored response (routers/_lib/idempotent.ts `plan`); any 404 falls to the transactional path,
// which resolves every id first and reports the rules' errors in order.
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { insertRow } from "../../server/db/insert.js";
import { AppError, notFound } from "../../server/errors.js";
import { phoneForMatching } from "../../server/phone.js";
import { LeadObject, toLead, type LeadRow } from "../../model/lead.js";
import { idempotent, type OneStatement } from "../_lib/idempotent.js";
import { ExternalId, externalIdConflict } from "../_lib/sync.js";
import { Id, Text } from "../_lib/schemas.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { LeadBudgetInput, LeadIntent, LeadNotes, LeadQuality, LeadRooms, LeadZones } from "./schemas.js";
import type { StoredRow } from "../../model/row.js";

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
    externalId: ExternalId.nullable().optional(),
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
 * Every lookup of rules 2–5 as ONE select of the columns of `Resolved` (reads only). The
 * one-statement create evaluates it as a CTE of its write; the transactional path reads it first and
 * reports the rules' 404s in the spec's order.
 */
function resolveSql(ctx: AuthedContext, input: Input): Prisma.Sql {
  const t = ctx.tenantId;
  const conv = input.conversationId ?? null;
  const stage = input.stageId ?? null;
  const operator = input.assignedOperatorId ?? null;
  const phone = conv ? null : phoneForMatching(input.customerPhone, ctx.caller.tenant.defaultCountry) || null;
  const mail = conv ? null : input.customerEmail?.trim() || null;
  // Only the lookups this body needs are in the statement (an absent id is a constant), so the
  // common create — no conversation, stage or operator given — plans no more than it reads.
  const none = Prisma.sql`NULL::uuid`;
  const conversationFound = conv
    ? Prisma.sql`EXISTS (SELECT 1 FROM "Conversation" v WHERE v."tenantId" = ${t}::uuid AND v."id" = ${conv}::uuid)`
    : Prisma.sql`true`;
  const conversationContact = conv
    ? Prisma.sql`(SELECT c."id" FROM "Conversation" v
              JOIN "Customer" u ON u."tenantId" = v."tenantId" AND u."id" = v."customerId"
              JOIN "Contact" c ON c."tenantId" = u."tenantId" AND c."id" = u."contactId"
             WHERE v."tenantId" = ${t}::uuid AND u."tenantId" = ${t}::uuid AND c."tenantId" = ${t}::uuid
               AND v."id" = ${conv}::uuid AND c."deletedAt" IS NULL)`
    : none;
  const stageId = stage
    ? Prisma.sql`(SELECT s."id" FROM "PipelineStage" s WHERE s."tenantId" = ${t}::uuid AND s."id" = ${stage}::uuid)`
    : Prisma.sql`(SELECT s."id" FROM "PipelineStage" s WHERE s."tenantId" = ${t}::uuid
                   ORDER BY s."defaultEntry" DESC, s."position" ASC, s."createdAt" ASC, s."id" ASC LIMIT 1)`;
  const operatorFound = operator
    ? Prisma.sql`EXISTS (SELECT 1 FROM "User" o WHERE o."tenantId" = ${t}::uuid AND o."id" = ${operator}::uuid)`
    : Prisma.sql`true`;
  // lower() = lower() for the email (the expression the unique index uses), not ILIKE: no wildcards.
  const byPhone = phone
    ? Prisma.sql`(SELECT c."id" FROM "Contact" c WHERE c."tenantId" = ${t}::uuid AND c."phone" = ${phone}::text AND c."deletedAt" IS NULL LIMIT 1)`
    : none;
  const byMail = mail
    ? Prisma.sql`(SELECT c."id" FROM "Contact" c WHERE c."tenantId" = ${t}::uuid AND lower(c."email") = lower(${mail}::text) AND c."deletedAt" IS NULL LIMIT 1)`
    : none;
  return Prisma.sql`
    SELECT ${conversationFound} AS "conversationFound", ${conversationContact} AS "conversationContact", ${stageId} AS "stageId",
           ${operatorFound} AS "operatorFound", coalesce(${byPhone}, ${byMail}) AS "matched"`;
}

/** The transactional path's resolution: the lookups, then the rules' 404s in the spec's order. */
async function resolveIds(ctx: AuthedContext, input: Input): Promise<{ customerId: string | null; stageId: string }> {
  const [r] = await ctx.db.$queryRaw<Resolved[]>(resolveSql(ctx, input));
  if (!r!.conversationFound) throw notFound("Conversation");
  if (!r!.stageId) {
    if (input.stageId) throw notFound("Stage");
    throw new AppError("INTERNAL_ERROR", "The tenant has no pipeline stage");
  }
  if (!r!.operatorFound) throw notFound("Operator");
  return { customerId: input.conversationId ? r!.conversationContact : r!.matched, stageId: r!.stageId };
}

/**
 * The lead row of this request (every column of the row, model/lead.ts, and the tenant); customerId
 * and stageId are values, or SQL resolving them.
 */
function leadRow<C extends string | null | Prisma.Sql, S extends string | Prisma.Sql>(
  ctx: AuthedContext,
  input: Input,
  customerId: C,
  stageId: S,
) {
  const now = ctx.services.now();
  const row = {
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
    externalId: input.externalId ?? null,
    version: 1,
    createdAt: now,
    updatedAt: now,
  };
  // Every column of the row: a column added to model/lead.ts and not written here fails to compile.
  return row satisfies StoredRow<LeadRow>;
}

/**
 * The one-statement create: the lookups of rules 2–5 are a CTE of the write itself, their 404s the
 * gate (a refused gate writes nothing, and the transactional path answers the precise 404), and the
 * customerId and stageId they resolve come back in the RETURNING and are set into the stored
 * response in SQL — auth plus this one statement, as a hand-written server would do it.
 */
function planLead(ctx: AuthedContext, input: Input): OneStatement<LeadObject> {
  const from = (column: "conversationContact" | "matched" | "stageId") =>
    Prisma.sql`(SELECT r.${Prisma.raw(`"${column}"`)} FROM "resolved" r)`;
  const row = leadRow(ctx, input, from(input.conversationId ? "conversationContact" : "matched"), from("stageId"));
  return {
    table: "Lead",
    row,
    // Filled in from the RETURNING (resolved); null until then.
    body: toLead({ ...row, customerId: null, stageId: "" }),
    with: Prisma.sql`"resolved" AS (${resolveSql(ctx, input)})`,
    gate: Prisma.sql`(SELECT r."conversationFound" AND r."stageId" IS NOT NULL AND r."operatorFound" FROM "resolved" r)`,
    resolved: ["customerId", "stageId"],
  };
}

type Input = z.output<typeof CreateLeadInput>;

/** The transactional create: rules 2–5, then the INSERT (also the create of an upsert by external id, routers/leads/upsert.ts). */
export async function insertLead(ctx: AuthedContext, input: Input): Promise<LeadObject> {
  const { customerId, stageId } = await resolveIds(ctx, input);
  const row = leadRow(ctx, input, customerId, stageId);
  await insertRow(ctx.db, { table: "Lead", row });
  return toLead(row);
}

const create = idempotent(
  // The transactional path (a replay, a mismatch, a 404 with a key …): the same plan, on ctx.db.
  ({ ctx, input }: { ctx: AuthedContext; input: Input }) => insertLead(ctx, input),
  { plan: ({ ctx, input }) => planLead(ctx, input) },
);

export const createLead = scoped("tenant:leads.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS"],
    openapi: {
      method: "POST",
      path: "/public/v1/leads",
      tags: ["leads"],
      summary: "Create a lead",
      description:
        "An optional `externalId` that another lead of the tenant holds gives 409 ALREADY_EXISTS naming it in `details.existingId`. Accepts `Idempotency-Key`.",
      protect: true,
    },
    successStatus: 201,
    location: "/public/v1/leads/{id}",
  })
  .input(CreateLeadInput)
  .output(LeadObject)
  // An external id another lead holds: 409 naming it (the unique index refused the row).
  .mutation((opts) =>
    create(opts).catch((err) => externalIdConflict(err, opts.ctx.tenantId, "Lead", opts.input.externalId)),
  );
