// PATCH /public/v1/leads/{lead_id} — partial update (scope tenant:leads.manage).
// Only stageId, quality, assignedOperatorId (null unassigns) and notes (null clears); any other
// field is 422. The lead, a new stage and a new operator are all resolved (404) before the one
// UPDATE, so a failed PATCH applies none of its fields. {} or values equal to the current ones
// return the lead unchanged (updatedAt only advances on a real change).
import { z } from "zod";
import { LeadObject, toLead } from "../../model/lead.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";
import { LeadNotes, LeadQuality } from "./schemas.js";

export const UpdateLeadInput = z
  .object({
    lead_id: Id,
    stageId: Id.optional(),
    quality: LeadQuality.optional(),
    assignedOperatorId: Id.nullable().optional(),
    notes: LeadNotes.nullable().optional(),
  })
  .strict();

export const updateLead = scoped("tenant:leads.manage")
  .meta({ errors: ["NOT_FOUND"], openapi: { method: "PATCH", path: "/public/v1/leads/{lead_id}", tags: ["leads"], summary: "Update a lead", protect: true } })
  .input(UpdateLeadInput)
  .output(LeadObject)
  .mutation(async ({ ctx, input }) => {
    const lead = await mustExist(ctx.db.lead.findFirst({ where: owned(ctx, { id: input.lead_id }) }), "Lead");
    if (input.stageId !== undefined)
      await mustExist(ctx.db.pipelineStage.findFirst({ where: owned(ctx, { id: input.stageId }), select: { id: true } }), "Stage");
    if (input.assignedOperatorId)
      await mustExist(ctx.db.user.findFirst({ where: owned(ctx, { id: input.assignedOperatorId }), select: { id: true } }), "Operator");

    const lc = (id: string | null | undefined) => (typeof id === "string" ? id.toLowerCase() : id);
    const changes: { stageId?: string; quality?: string; assignedOperatorId?: string | null; notes?: string | null } = {};
    if (input.stageId !== undefined && lc(input.stageId) !== lead.stageId) changes.stageId = lc(input.stageId)!;
    if (input.quality !== undefined && input.quality !== lead.quality) changes.quality = input.quality;
    if (input.assignedOperatorId !== undefined && lc(input.assignedOperatorId) !== lead.assignedOperatorId)
      changes.assignedOperatorId = lc(input.assignedOperatorId) ?? null;
    if (input.notes !== undefined && input.notes !== lead.notes) changes.notes = input.notes;
    if (Object.keys(changes).length === 0) return toLead(lead);

    const row = await ctx.db.lead.update({
      where: { tenantId_id: { tenantId: ctx.tenantId, id: lead.id } },
      data: { ...changes, updatedAt: ctx.services.now() },
    });
    return toLead(row);
  });
