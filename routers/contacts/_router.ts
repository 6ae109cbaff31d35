import { router } from "../trpc.js";
import { createContact } from "./create.js";
import { listContacts } from "./list.js";
import { updateContact } from "./update.js";
import { getContact } from "./get.js";
import { upsertContact } from "./upsert.js";
import { batchUpsertContacts } from "./batch-upsert.js";

export const contactsRouter = router({
  list: listContacts,
  create: createContact,
  get: getContact,
  update: updateContact,
  upsert: upsertContact,
  batchUpsert: batchUpsertContacts,
});
