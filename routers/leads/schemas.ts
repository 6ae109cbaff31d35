// Lead: the public object (exactly the spec's table), its serializer from the Prisma row, and the
// input pieces shared by create and update.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { BodyInt, INT4_MAX, iso, Text, Timestamp, type Instant } from "../_lib/schemas.js";

export const LeadBudget = z.object({ min: z.number().int().nullable(), max: z.number().int().nullable() });

export const LeadObject = z.object({
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
  createdAt: Timestamp,
  updatedAt: Timestamp,
}).meta({ id: "Lead" });
export type LeadObject = z.infer<typeof LeadObject>;

export interface LeadRow {
  id: string;
  customerId: string | null;
  conversationId: string | null;
  customerName: string;
  customerEmail: string | null;
  customerPhone: string | null;
  intent: string;
  quality: string;
  stageId: string;
  budgetMin: number | null;
  budgetMax: number | null;
  zones: string[];
  rooms: number | null;
  assignedOperatorId: string | null;
  source: string;
  notes: string | null;
  createdAt: Instant;
  updatedAt: Instant;
}

/**
 * The rows of the leads whose ids `ids` selects (a statement with an "id" column, in any order),
 * as the list and the changes feed read them: the narrow id query first, then only those rows.
 */
export const selectLeads = (tenantId: string, ids: Prisma.Sql) => Prisma.sql`
  SELECT l."id", l."customerId", l."conversationId", l."customerName", l."customerEmail", l."customerPhone",
         l."intent", l."quality", l."stageId", l."budgetMin", l."budgetMax", l."zones", l."rooms",
         l."assignedOperatorId", l."source", l."notes", l."createdAt", l."updatedAt"
    FROM (${ids}) ids
    JOIN "Lead" l ON l."tenantId" = ${tenantId}::uuid AND l."id" = ids."id"`;

/** Prisma row → public object. `budget` is null when neither bound is set. */
export const toLead = (l: LeadRow): LeadObject => ({
  id: l.id,
  customerId: l.customerId,
  conversationId: l.conversationId,
  customerName: l.customerName,
  customerEmail: l.customerEmail,
  customerPhone: l.customerPhone,
  intent: l.intent,
  quality: l.quality,
  stageId: l.stageId,
  budget: l.budgetMin === null && l.budgetMax === null ? null : { min: l.budgetMin, max: l.budgetMax },
  zones: l.zones,
  rooms: l.rooms,
  assignedOperatorId: l.assignedOperatorId,
  source: l.source,
  notes: l.notes,
  createdAt: iso(l.createdAt),
  updatedAt: iso(l.updatedAt),
});

// ---- input pieces -------------------------------------------------------------------------------

export const MAX_NOTES = 10_000;
export const MAX_ZONES = 50;

export const LeadQuality = Text(50);
export const LeadIntent = Text(50);
export const LeadNotes = z.string().max(MAX_NOTES);
export const LeadRooms = BodyInt(0, 1000);
export const LeadZones = z.array(Text(100)).max(MAX_ZONES);

/** `{min, max}`: both keys optional and nullable, whole EUR amounts, min ≤ max when both are given. */
export const LeadBudgetInput = z
  .object({
    min: BodyInt(0, INT4_MAX).nullable().optional(),
    max: BodyInt(0, INT4_MAX).nullable().optional(),
  })
  .strict()
  .refine((b) => b.min === null || b.min === undefined || b.max === null || b.max === undefined || b.min <= b.max, {
    message: "budget.min must not be greater than budget.max",
    path: ["min"],
  });
