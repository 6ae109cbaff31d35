// Message template: the tenant's approved templates as the public API shows them (GET /templates) —
// what POST /conversations/start's `templateName`, `templateLanguage` and `variables` must match. The
// body stays internal; `variables` is counted from it in the statement that reads the row.
import { z } from "zod";
import { col, defineRow, type RowOf } from "./row.js";

export const TemplateObject = z
  .object({
    id: z.string(),
    channelId: z.string(),
    name: z.string().meta({ description: "POST /conversations/start's `templateName`" }),
    language: z.string().meta({ description: "POST /conversations/start's `templateLanguage`" }),
    variables: z
      .number()
      .int()
      .meta({
        description:
          "How many `variables` POST /conversations/start must send: the highest {{n}} placeholder of the template " +
          "(0 when it has none)",
      }),
  })
  .meta({ id: "Template" });
export type TemplateObject = z.infer<typeof TemplateObject>;

/**
 * An approved template's row, with its body's highest {{n}} placeholder computed by the statement that
 * reads it (routers/templates/schemas.ts), so that the body itself is never read out.
 */
export const Template = defineRow("MessageTemplate", {
  id: col.uuid(),
  channelId: col.uuid(),
  name: col.text(),
  language: col.text(),
}).with<{ highestPlaceholder: number }>();
export type TemplateRow = RowOf<typeof Template>;

/** A template row → the public template. */
export const toTemplate = Template.toPublic(TemplateObject, { composed: { variables: (r) => r.highestPlaceholder } });
