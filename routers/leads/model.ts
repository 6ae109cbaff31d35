// Leads' write model, stated once: what PATCH and PUT may change, what only a create sets (PUT
// compares it: 422 `immutable` when a body names another value), and the unique key behind the
// 409. The row a create stores is create.ts leadRow() (one row for the one-statement create and the
// transactional path alike).
import type { z } from "zod";
import { phoneForMatching } from "../../server/phone.js";
import { storedId, type CreateOnly } from "../_lib/upsert.js";
import type { AuthedContext } from "../trpc.js";
import type { CreateLeadInput } from "./create.js";

/** What a PUT compares of a stored lead. */
interface StoredLead {
  conversationId: string | null;
  customerName: string;
  customerEmail: string | null;
  customerPhone: string | null;
  intent: string;
  budgetMin: number | null;
  budgetMax: number | null;
  zones: string[];
  rooms: number | null;
}

const phone = (ctx: AuthedContext, p: string | null | undefined) =>
  phoneForMatching(p, ctx.caller.tenant.defaultCountry) ?? p ?? null;

export const LEAD_WRITES = {
  /** PATCH's fields, and what PUT applies. */
  updatable: ["stageId", "quality", "assignedOperatorId", "notes", "externalId"],
  /** What PUT applies to an object it finds (every other field of its body is create-only). */
  put: ["stageId", "quality", "assignedOperatorId", "notes"],
  /** Set by a create only, each with what "the same value" means (the phone after normalisation). */
  createOnly: {
    conversationId: (v, l) => storedId(v) === l.conversationId,
    customerName: (v, l) => v === l.customerName,
    customerEmail: (v, l) => (v ?? null) === l.customerEmail,
    customerPhone: (v, l, ctx) => phone(ctx, v) === phone(ctx, l.customerPhone),
    intent: (v, l) => v === l.intent,
    budget: (v, l) => (v?.min ?? null) === l.budgetMin && (v?.max ?? null) === l.budgetMax,
    zones: (v, l) => JSON.stringify(v) === JSON.stringify(l.zones),
    rooms: (v, l) => (v ?? null) === l.rooms,
  } satisfies CreateOnly<z.output<typeof CreateLeadInput>, StoredLead>,
  unique: { externalId: "Lead_tenantId_externalId_key" },
} as const;
