// PUT /public/v1/leads/by-external-id/{externalId} — create or update the lead holding an external id
// (scope tenant:leads.manage; routers/_lib/upsert.ts for the mechanism).
//   body: POST /leads's body without externalId. No lead holds it → created as POST creates it (201,
//   Location). One holds it → stageId, quality, assignedOperatorId and notes applied as PATCH applies
//   them (200); every other field must be absent or equal to the stored value (customerPhone compared
//   after normalisation with the tenant's default country), else 422 naming it; nothing differs →
//   200, nothing written. If-Match: only on an update (on a create there is no version: 412).
import type { z } from "zod";
import { LeadObject, toLead } from "../../model/lead.js";
import { owned } from "../_lib/tenant.js";
import {
  differingCreateOnly,
  mayNotChange,
  PathExternalId,
  putMeta,
  putResolver,
  type UpsertResource,
} from "../_lib/upsert.js";
import { scoped, type AuthedContext } from "../trpc.js";
import { CreateLeadInput, insertLead } from "./create.js";
import { LEAD_WRITES } from "./model.js";
import { patchLead } from "./update.js";

export const LeadUpsertBody = CreateLeadInput.omit({ externalId: true });
type Body = z.output<typeof LeadUpsertBody>;
export const LeadUpsertItem = LeadUpsertBody.extend(PathExternalId);
type Stored = NonNullable<Awaited<ReturnType<AuthedContext["db"]["lead"]["findFirst"]>>>;

export const leadUpserts: UpsertResource<Body, Stored, LeadObject> = {
  table: "Lead",
  plural: "leads",
  item: LeadUpsertItem,
  find: (ctx, externalIds) => ctx.db.lead.findMany({ where: owned(ctx, { externalId: { in: externalIds } }) }),
  create: (ctx, body, externalId) => insertLead(ctx, { ...body, externalId }),
  async update(ctx, lead, body, pre) {
    const differs = differingCreateOnly(LEAD_WRITES.createOnly, ctx, lead, body);
    if (differs.length) throw mayNotChange(differs);
    const row = await patchLead(ctx, lead, body, pre);
    return row ? toLead(row) : null;
  },
  toPublic: (row) => toLead(row),
};

export const upsertLead = scoped("tenant:leads.manage")
  .meta({
    errors: ["NOT_FOUND", "ALREADY_EXISTS", "PRECONDITION_FAILED"],
    upsert: true,
    location: "/public/v1/leads/{id}",
    openapi: putMeta({
      plural: "leads",
      tag: "leads",
      summary: "Create or update a lead by your external id",
      description:
        "The body is POST /leads's without `externalId` (the path holds it, URL-encoded). No lead holds the external id: the lead is created " +
        "exactly as POST creates it (201, `Location`). One does: `stageId`, `quality`, `assignedOperatorId` and `notes` are applied as PATCH " +
        "applies them (200); every other field must be absent or equal to the stored value (`customerPhone` compared after normalisation), " +
        "else 422 naming it, with nothing written; when nothing would change, 200 and nothing is written (no new version, no change in the feed). " +
        "Concurrent PUTs of one external id create one lead between them. Accepts `If-Match` (on an update; with no lead, 412) and `Idempotency-Key`.",
    }),
  })
  .input(LeadUpsertItem)
  .output(LeadObject)
  .mutation(putResolver(leadUpserts));
