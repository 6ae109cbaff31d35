// Pipeline stage: the public object, its row and the mapper between them (GET /stages). A lead's
// `stageId` names one of these; new leads without `stageId` enter the tenant's default-entry stage.
import { z } from "zod";
import { col, defineRow, type RowOf } from "./row.js";

export const StageObject = z
  .object({
    id: z.string(),
    name: z.string(),
    position: z
      .number()
      .int()
      .meta({ description: "The stage's place in the pipeline: the list is in this order (lowest first)" }),
    defaultEntry: z.boolean().meta({
      description: "The stage a lead created without `stageId` enters (POST /leads); at most one stage has it",
    }),
  })
  .meta({ id: "Stage" });
export type StageObject = z.infer<typeof StageObject>;

export const Stage = defineRow("PipelineStage", {
  id: col.uuid(),
  name: col.text(),
  position: col.int(),
  defaultEntry: col.bool(),
});
export type StageRow = RowOf<typeof Stage>;

/** A stage row (or Prisma's PipelineStage) → the public stage. */
export const toStage = Stage.toPublic(StageObject, { composed: {} });
