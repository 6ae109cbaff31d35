import { router } from "../trpc.js";
import { addTicketComment } from "./comment.js";
import { createTicket } from "./create.js";
import { listTickets } from "./list.js";
import { updateTicket } from "./update.js";
import { getTicket } from "./get.js";
import { upsertTicket } from "./upsert.js";
import { batchUpsertTickets } from "./batch-upsert.js";

export const ticketsRouter = router({
  list: listTickets,
  create: createTicket,
  get: getTicket,
  update: updateTicket,
  upsert: upsertTicket,
  batchUpsert: batchUpsertTickets,
  comment: addTicketComment,
});
