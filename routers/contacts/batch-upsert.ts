// POST /public/v1/contacts/batch/upsert — up to 100 upserts by external id in one request (scope
// tenant:contacts.manage): each item `{"externalId": ..., ...PUT body}`, each atomic on its own, answered
// in order with its own status (routers/_lib/upsert.ts).
import { batchMeta, BatchInput, batchOutput, batchResolver } from "../_lib/upsert.js";
import { ContactObject } from "../../model/contact.js";
import { scoped } from "../trpc.js";
import { contactUpserts } from "./upsert.js";

export const batchUpsertContacts = scoped("tenant:contacts.manage")
  .meta({ openapi: batchMeta("contacts") })
  .input(BatchInput)
  .output(batchOutput(ContactObject))
  .mutation(batchResolver(contactUpserts));
