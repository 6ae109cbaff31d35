// GET /public/v1/leads/{lead_id} — one lead (scope tenant:leads.read). Unknown or foreign → 404.
import { z } from "zod";
import { LeadObject, toLead } from "../../model/lead.js";
import { Id } from "../_lib/schemas.js";
import { mustExist, owned } from "../_lib/tenant.js";
import { scoped } from "../trpc.js";

export const GetLeadInput = z.object({ lead_id: Id });

export const getLead = scoped("tenant:leads.read")
  .meta({
    errors: ["NOT_FOUND"],
    openapi: {
      method: "GET",
      path: "/public/v1/leads/{lead_id}",
      tags: ["leads"],
      summary: "Get one lead",
      protect: true,
    },
  })
  .input(GetLeadInput)
  .output(LeadObject)
  .query(async ({ ctx, input }) =>
    toLead(await mustExist(ctx.db.lead.findFirst({ where: owned(ctx, { id: input.lead_id }) }), "Lead")),
  );
