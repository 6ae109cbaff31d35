import { router } from "../trpc.js";
import { createContact } from "./create.js";
import { listContacts } from "./list.js";
import { updateContact } from "./update.js";

export const contactsRouter = router({
  list: listContacts,
  create: createContact,
  update: updateContact,
});
