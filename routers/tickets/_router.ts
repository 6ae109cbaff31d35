import { router } from "../trpc.js";
import { addTicketComment } from "./comment.js";
import { createTicket } from "./create.js";
import { listTickets } from "./list.js";
import { updateTicket } from "./update.js";

export const ticketsRouter = router({
  list: listTickets,
  create: createTicket,
  update: updateTicket,
  comment: addTicketComment,
});
