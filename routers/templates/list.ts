// GET /public/v1/templates — the tenant's approved message templates (tenant:conversations.read): the
// `templateName`, `templateLanguage` and number of `variables` POST /conversations/start takes, and
// the channel each belongs to. Unapproved templates are not listed (start refuses them). Filter:
// channelId (malformed → 422; unknown or foreign → empty). By name, then language (code point order),
// then channelId and id. An offset list as every list (routers/_lib/reference.ts).
import { z } from "zod";
import { Prisma } from "../../generated/prisma/client.js";
import { TemplateObject, toTemplate, type TemplateRow } from "../../model/template.js";
import { OFFSET_BUDGET_DOC, templateSize } from "../_lib/page-budget.js";
import { referenceList } from "../_lib/reference.js";
import { Id, OffsetList, offsetList, PageQuery } from "../_lib/schemas.js";
import { scoped } from "../trpc.js";
import { templateSelect } from "./schemas.js";

export const ListTemplatesInput = z.object({
  channelId: Id.meta({ description: "Only this channel's templates (unknown or another tenant's: none)" }).optional(),
  ...PageQuery,
});

const templateList = referenceList<TemplateRow, TemplateObject>({
  table: "MessageTemplate",
  select: templateSelect,
  order: [{ column: "name", text: true }, { column: "language", text: true }, { column: "channelId" }],
  always: [Prisma.sql`r."approved"`],
  size: templateSize(),
  toPublic: toTemplate,
});

export const listTemplates = scoped("tenant:conversations.read")
  .meta({
    openapi: {
      method: "GET",
      path: "/public/v1/templates",
      tags: ["templates"],
      summary: "List approved templates",
      description:
        "The tenant's approved message templates: the `templateName` (`name`), `templateLanguage` (`language`) and " +
        "number of `variables` POST /conversations/start takes, and the channel each belongs to (`channelId`; start " +
        "needs a connected `whatsapp` channel, GET /channels). By `name`, then `language` (compared by Unicode code " +
        "point), then `channelId` and `id`, ascending. Filter: `channelId`. `limit` 1 to 200 (default 50), `offset` " +
        `default 0. ${OFFSET_BUDGET_DOC}`,
      protect: true,
    },
  })
  .input(ListTemplatesInput)
  .output(OffsetList(TemplateObject))
  .query(async ({ ctx, input }) => {
    const page = { offset: input.offset, limit: input.limit };
    const filters = input.channelId === undefined ? [] : [Prisma.sql`r."channelId" = ${input.channelId}::uuid`];
    const { total, items } = await templateList.read(ctx, { filters, ...page });
    return offsetList(items, total, page);
  });
