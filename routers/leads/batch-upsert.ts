// POST /public/v1/leads/batch/upsert — up to 100 upserts by external id in one request (scope
// tenant:leads.manage): each item `{"externalId": ..., ...PUT body}`, each atomic on its own, answered
// in order with its own status (routers/_lib/upsert.ts).
import { batchMeta, BatchInput, batchOutput, batchResolver } from "../_lib/upsert.js";
import { LeadObject } from "../../model/lead.js";
import { scoped } from "../trpc.js";
import { leadUpserts } from "./upsert.js";

export const batchUpsertLeads = scoped("tenant:leads.manage")
  .meta({ openapi: batchMeta("leads") })
  .input(BatchInput)
  .output(batchOutput(LeadObject))
  .mutation(batchResolver(leadUpserts));
