// Ticket and ticket comment: the public objects, their rows and the mappers between them.
import { z } from "zod";
import { Timestamp } from "./instants.js";
import { col, defineRow, type ModelOf, type RowOf } from "./row.js";

export const TICKET_STATUSES = ["open", "pending", "resolved", "closed"] as const;
export type TicketStatus = (typeof TICKET_STATUSES)[number];

export const TicketComment = z
  .object({
    id: z.string(),
    authorUserId: z.string(),
    body: z.string(),
    createdAt: Timestamp,
  })
  .meta({ id: "TicketComment" });
export type TicketComment = z.infer<typeof TicketComment>;

export const TicketObject = z
  .object({
    id: z.string(),
    customerId: z.string().nullable(),
    leadId: z.string().nullable(),
    conversationId: z.string().nullable(),
    subject: z.string(),
    status: z.enum(TICKET_STATUSES),
    createdBy: z.string(),
    assignedTo: z.string().nullable(),
    externalId: z
      .string()
      .nullable()
      .meta({ description: "the integrator's own id, unique per tenant within the resource; null when none" }),
    version: z.number().int().meta({
      description: "1 on create, +1 with every write that changes the object, a new comment included; sent as the ETag",
    }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    comments: z.array(TicketComment).meta({ description: "the thread, oldest first" }),
  })
  .meta({ id: "Ticket" });
export type TicketObject = z.infer<typeof TicketObject>;

export const Comment = defineRow("TicketComment", {
  id: col.uuid(),
  authorUserId: col.uuid(),
  body: col.text(),
  createdAt: col.instant(),
});
export type CommentRow = RowOf<typeof Comment>;

/**
 * A comment row, Prisma's TicketComment, or a comment of a thread's JSON (its createdAt in
 * PostgreSQL's JSON form, made Iso like any instant) → the public comment.
 */
export const toTicketComment = Comment.toPublic(TicketComment, { composed: {} });

/** A ticket with its thread (oldest first): the statement or Prisma's include adds `comments`. */
export const Ticket = defineRow("Ticket", {
  id: col.uuid(),
  customerId: col.uuid().nullable(),
  leadId: col.uuid().nullable(),
  conversationId: col.uuid().nullable(),
  subject: col.text(),
  /** The "TicketStatus" domain. */
  status: col.enum(TICKET_STATUSES),
  createdById: col.uuid(),
  assignedToId: col.uuid().nullable(),
  externalId: col.text().nullable(),
  version: col.int(),
  createdAt: col.instant(),
  updatedAt: col.instant(),
}).with<{ comments: ModelOf<typeof Comment>[] }>();
export type TicketRow = RowOf<typeof Ticket>;

/** A ticket row with its comments (or Prisma's Ticket with them) → the public ticket. */
export const toTicket = Ticket.toPublic(TicketObject, {
  composed: {
    createdBy: (t) => t.createdById,
    assignedTo: (t) => t.assignedToId,
    comments: (t) => t.comments.map(toTicketComment),
  },
  internal: ["createdById", "assignedToId"],
});
