// PATCH /public/v1/leads/{lead_id} — partial update (scope tenant:leads.manage).
// Only stageId, quality, assignedOperatorId (null unassigns) and notes (null clears); any other
// field is 422. The lead, a new stage and a new operator are all resolved (404) before the one
// UPDATE, so a failed PATCH applies none of its fields. {} or values equal to the current ones
// return the lead unchanged (updatedAt only advances on a real change).
// externalId: a value (another lead of the tenant holding it → 409 ALREADY_EXISTS with
// details.existingId) or null to clear it. If-Match (routers/_lib/sync.ts): checked after the 404s
// against the lead's version, and the UPDATE only writes while the lead still has it → 412.
import { z } from "zod";
import { LeadObject, toLead, type LeadRow } from "../../model/lead.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import {
  checkVersion,
  ExternalId,
  externalIdConflict,
  missedWrite,
  preconditionOf,
  versionGuard,
  type EntityTags,
} from "../_lib/sync.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { LeadNotes, LeadQuality } from "./schemas.js";

export const UpdateLeadInput = z
  .object({
    lead_id: Id,
    stageId: Id.optional(),
    quality: LeadQuality.optional(),
    assignedOperatorId: Id.nullable().optional(),
    notes: LeadNotes.nullable().optional(),
    externalId: ExternalId.nullable().optional(),
  })
  .strict();

export const updateLead = scoped("tenant:leads.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS", "PRECONDITION_FAILED"],
    openapi: {
      method: "PATCH",
      path: "/public/v1/leads/{lead_id}",
      tags: ["leads"],
      summary: "Update a lead",
      description:
        "Partial update of stageId, quality, assignedOperatorId (null unassigns), notes (null clears) and externalId (null clears; " +
        "one another lead holds gives 409 ALREADY_EXISTS with `details.existingId`). Accepts `If-Match`: when it names no current " +
        "version, 412 PRECONDITION_FAILED with the current `ETag`, and nothing is written.",
      protect: true,
    },
  })
  .input(UpdateLeadInput)
  .output(LeadObject)
  .mutation(async ({ ctx, input }) => {
    const pre = preconditionOf(ctx);
    const lead = await mustExist(ctx.db.lead.findFirst({ where: owned(ctx, { id: input.lead_id }) }), "Lead");
    return toLead((await patchLead(ctx, lead, input, pre)) ?? lead);
  });

/** What PATCH reads of a stored lead. */
type PatchedLead = Pick<
  LeadRow,
  "id" | "version" | "stageId" | "quality" | "assignedOperatorId" | "notes" | "externalId"
>;
type LeadPatch = {
  stageId?: string;
  quality?: string;
  assignedOperatorId?: string | null;
  notes?: string | null;
  externalId?: string | null;
};

/**
 * PATCH's rules over a lead read: a new stage and a new operator resolved (404), If-Match checked
 * (412), then the fields that differ in one UPDATE, guarded by the version checked. Null: nothing
 * differs, nothing written. Also the update of an upsert by external id (routers/leads/upsert.ts).
 */
export async function patchLead<R extends PatchedLead>(
  ctx: AuthedContext,
  lead: R,
  input: LeadPatch,
  pre: EntityTags | undefined,
) {
  if (input.stageId !== undefined)
    await mustExist(
      ctx.db.pipelineStage.findFirst({ where: owned(ctx, { id: input.stageId }), select: { id: true } }),
      "Stage",
    );
  if (input.assignedOperatorId)
    await mustExist(
      ctx.db.user.findFirst({ where: owned(ctx, { id: input.assignedOperatorId }), select: { id: true } }),
      "Operator",
    );
  checkVersion(pre, lead.version);
  const changes = leadChanges(lead, input);
  if (Object.keys(changes).length === 0) return null;
  const rows = await ctx.db.lead
    .updateManyAndReturn({
      where: owned(ctx, { id: lead.id, ...versionGuard(pre, lead.version) }),
      data: { ...changes, updatedAt: ctx.services.now() },
    })
    .catch((err) => externalIdConflict(err, ctx.tenantId, "Lead", changes.externalId));
  return rows[0] ?? (await missedWrite(ctx.db.lead.findFirst({ where: owned(ctx, { id: lead.id }) }), "Lead"));
}

/** The PATCH-able fields of `input` that differ from the lead's (ids compared in lower case). */
function leadChanges(lead: PatchedLead, input: LeadPatch) {
  const lc = (id: string | null | undefined) => (typeof id === "string" ? id.toLowerCase() : id);
  const changes: LeadPatch = {};
  if (input.stageId !== undefined && lc(input.stageId) !== lead.stageId) changes.stageId = lc(input.stageId)!;
  if (input.quality !== undefined && input.quality !== lead.quality) changes.quality = input.quality;
  if (input.assignedOperatorId !== undefined && lc(input.assignedOperatorId) !== lead.assignedOperatorId)
    changes.assignedOperatorId = lc(input.assignedOperatorId) ?? null;
  if (input.notes !== undefined && input.notes !== lead.notes) changes.notes = input.notes;
  if (input.externalId !== undefined && input.externalId !== lead.externalId) changes.externalId = input.externalId;
  return changes;
}
