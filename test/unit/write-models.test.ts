// The write models (routers/<resource>/model.ts) are what the operations take: PATCH's input is the
// model's `updatable` fields (and the path's id), a PUT body's fields are its `put` and `createOnly`
// fields, and README.md's table "Which fields an update may change" says the same.
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { CONTACT_WRITES } from "../../routers/contacts/model.js";
import { UpdateContactInput } from "../../routers/contacts/update.js";
import { ContactUpsertBody } from "../../routers/contacts/upsert.js";
import { LEAD_WRITES } from "../../routers/leads/model.js";
import { UpdateLeadInput } from "../../routers/leads/update.js";
import { LeadUpsertBody } from "../../routers/leads/upsert.js";
import { TICKET_WRITES } from "../../routers/tickets/model.js";
import { UpdateTicketInput } from "../../routers/tickets/update.js";
import { TicketUpsertItem } from "../../routers/tickets/upsert.js";
import { UpdateAppointmentInput } from "../../routers/appointments/update.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const keys = (schema: z.ZodType) => Object.keys((schema as unknown as { shape: Record<string, unknown> }).shape).sort();
const sorted = (xs: readonly string[]) => [...xs].sort();

const models = [
  { name: "leads", writes: LEAD_WRITES, patch: UpdateLeadInput, id: "lead_id", put: keys(LeadUpsertBody) },
  {
    name: "contacts",
    writes: CONTACT_WRITES,
    patch: UpdateContactInput,
    id: "contact_id",
    put: keys(ContactUpsertBody),
  },
  {
    name: "tickets",
    writes: TICKET_WRITES,
    patch: UpdateTicketInput,
    id: "ticket_id",
    put: keys(TicketUpsertItem).filter((k) => k !== "externalId"),
  },
];

/** README's row of a resource: its cells' field names, column by column. */
function readmeRow(resource: string): string[][] {
  const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
  const line = readme.split("\n").find((l) => new RegExp(`^\\| ${resource} +\\|`).test(l));
  if (!line) throw new Error(`README.md has no row for ${resource}`);
  return line
    .split("|")
    .slice(2, -1)
    .map((cell) => [...cell.matchAll(/`(\w+)`/g)].map((m) => m[1]!));
}

describe("the write models", () => {
  for (const m of models) {
    it(`${m.name}: PATCH takes the updatable fields, PUT's body is its applied and create-only fields, README says so`, () => {
      expect(keys(m.patch).filter((k) => k !== m.id)).toEqual(sorted(m.writes.updatable));
      const createOnly = Object.keys(m.writes.createOnly);
      expect(m.put).toEqual(sorted([...m.writes.put, ...createOnly]));
      expect(m.writes.put.every((f) => (m.writes.updatable as readonly string[]).includes(f))).toBe(true);
      const [patch, put, only] = readmeRow(m.name);
      expect(sorted(patch!)).toEqual(sorted(m.writes.updatable));
      expect(sorted(put!)).toEqual(sorted(m.writes.put));
      expect(sorted(only!)).toEqual(sorted(createOnly));
    });
  }

  it("appointments: README's PATCH fields are the PATCH input's", () => {
    const [patch] = readmeRow("appointments");
    expect(sorted(patch!)).toEqual(keys(UpdateAppointmentInput).filter((k) => k !== "appointment_id"));
  });
});
