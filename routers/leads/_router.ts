import { router } from "../trpc.js";
import { createLead } from "./create.js";
import { getLead } from "./get.js";
import { listLeads } from "./list.js";
import { updateLead } from "./update.js";
import { upsertLead } from "./upsert.js";
import { batchUpsertLeads } from "./batch-upsert.js";

export const leadsRouter = router({
  list: listLeads,
  create: createLead,
  get: getLead,
  update: updateLead,
  upsert: upsertLead,
  batchUpsert: batchUpsertLeads,
});
