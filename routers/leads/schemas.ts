// Lead: the list's select (the row, model/lead.ts, over a statement of ids) and the input pieces
// shared by create and update. The public object, the row and the mapper: model/lead.ts.
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { Lead } from "../../model/lead.js";
import { BodyInt, INT4_MAX, Text } from "../_lib/schemas.js";

/**
 * The rows of the leads whose ids `ids` selects (a statement with an "id" column, in any order),
 * as the list and the changes feed read them: the narrow id query first, then only those rows.
 */
export const selectLeads = (tenantId: string, ids: Prisma.Sql) => Prisma.sql`
  SELECT ${Lead.select("l")}
    FROM (${ids}) ids
    JOIN "Lead" l ON l."tenantId" = ${tenantId}::uuid AND l."id" = ids."id"`;

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
