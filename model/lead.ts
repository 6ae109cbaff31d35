// Lead: the public object (exactly the spec's table), its row and the mapper between them.
import { z } from "zod";
import { Timestamp } from "./instants.js";
import { col, defineRow, type RowOf } from "./row.js";

export const LeadBudget = z.object({ min: z.number().int().nullable(), max: z.number().int().nullable() });

export const LeadObject = z
  .object({
    id: z.string(),
    customerId: z.string().nullable(),
    conversationId: z.string().nullable(),
    customerName: z.string(),
    customerEmail: z.string().nullable(),
    customerPhone: z.string().nullable(),
    intent: z.string(),
    quality: z.string(),
    stageId: z.string(),
    budget: LeadBudget.nullable(),
    zones: z.array(z.string()),
    rooms: z.number().int().nullable(),
    assignedOperatorId: z.string().nullable(),
    source: z.string(),
    notes: z.string().nullable(),
    externalId: z
      .string()
      .nullable()
      .meta({ description: "the integrator's own id, unique per tenant within the resource; null when none" }),
    version: z
      .number()
      .int()
      .meta({ description: "1 on create, +1 with every write that changes the object; sent as the ETag" }),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  })
  .meta({ id: "Lead" });
export type LeadObject = z.infer<typeof LeadObject>;

export const Lead = defineRow("Lead", {
  id: col.uuid(),
  customerId: col.uuid().nullable(),
  conversationId: col.uuid().nullable(),
  customerName: col.text(),
  customerEmail: col.text().nullable(),
  customerPhone: col.text().nullable(),
  intent: col.text(),
  quality: col.text(),
  stageId: col.uuid(),
  budgetMin: col.int().nullable(),
  budgetMax: col.int().nullable(),
  zones: col.textArray(),
  rooms: col.int().nullable(),
  assignedOperatorId: col.uuid().nullable(),
  source: col.text(),
  notes: col.text().nullable(),
  externalId: col.text().nullable(),
  version: col.int(),
  createdAt: col.instant(),
  updatedAt: col.instant(),
});
export type LeadRow = RowOf<typeof Lead>;

/** A lead row (or Prisma's Lead) → the public lead. `budget` is null when neither bound is set. */
export const toLead = Lead.toPublic(LeadObject, {
  composed: {
    budget: (l) => (l.budgetMin === null && l.budgetMax === null ? null : { min: l.budgetMin, max: l.budgetMax }),
  },
  internal: ["budgetMin", "budgetMax"],
});
