// GET /public/v1/stages — the tenant's pipeline stages (tenant:leads.read): what a lead's `stageId`
// names. Pipeline order (position, then id), the default-entry stage marked. An offset list as every
// list (routers/_lib/reference.ts).
import { z } from "zod";
import { Stage, StageObject, toStage, type StageRow } from "../../model/stage.js";
import { OFFSET_BUDGET_DOC, stageSize } from "../_lib/page-budget.js";
import { referenceList } from "../_lib/reference.js";
import { OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { scoped } from "../trpc.js";

export const ListStagesInput = z.object({ ...PageQuery });

const stageList = referenceList<StageRow, StageObject>({
  table: "PipelineStage",
  select: Stage.select("r"),
  order: [{ column: "position" }],
  size: stageSize(),
  toPublic: toStage,
});

export const listStages = scoped("tenant:leads.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/stages",
      tags: ["stages"],
      summary: "List pipeline stages",
      description:
        "The stages of the tenant's lead pipeline, in pipeline order (`position`, then `id`, ascending): the " +
        "names of the ids a lead's `stageId` holds. `defaultEntry` marks the stage a lead created without " +
        "`stageId` enters. " +
        `\`limit\` 1 to 200 (default 50), \`offset\` default 0. ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
  })
  .input(ListStagesInput)
  .output(OffsetList(StageObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    const { total, items } = await stageList.read(ctx, { filters: [], ...page });
    return offsetList(items, total, page);
  });
