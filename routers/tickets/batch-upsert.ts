// POST /public/v1/tickets/batch/upsert — up to 100 upserts by external id in one request (scope
// tenant:tickets.manage): each item `{"externalId": ..., ...PUT body}`, each atomic on its own, answered
// in order with its own status (routers/_lib/upsert.ts).
import { batchMeta, BatchInput, batchOutput, batchResolver } from "../_lib/upsert.js";
import { TicketObject } from "../../model/ticket.js";
import { scoped } from "../trpc.js";
import { ticketUpserts } from "./upsert.js";

export const batchUpsertTickets = scoped("tenant:tickets.manage")
  .meta({ openapi: batchMeta("tickets") })
  .input(BatchInput)
  .output(batchOutput(TicketObject))
  .mutation(batchResolver(ticketUpserts));
