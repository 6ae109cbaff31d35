// The changes feed (GET /public/v1/changes): the types and their read scopes, the public item and
// page, the `types` and `since` query parameters, and the opaque `since` token.
import { CHANGE_TYPES, resourceOfType, type ChangeType } from "../../model/resources.js";
import { createHash } from "node:crypto";
import { z } from "zod";
import type { Scope } from "../../server/auth/scopes.js";
import { AppointmentObject } from "../../model/appointment.js";
import { ContactObject } from "../../model/contact.js";
import { ConversationObject } from "../../model/conversation.js";
import { LeadObject } from "../../model/lead.js";
import { TicketObject } from "../../model/ticket.js";
import { Timestamp } from "../_lib/schemas.js";

export { CHANGE_TYPES, type ChangeType };
export const isChangeType = (s: string): s is ChangeType => (CHANGE_TYPES as readonly string[]).includes(s);

/** The scope that lets a key read each type (the same as the resource's own list). */
export const READ_SCOPE = Object.fromEntries(
  CHANGE_TYPES.map((t) => [t, `tenant:${resourceOfType(t)}.read`]),
) as Record<ChangeType, Scope>;

export const CHANGE_ACTIONS = ["upsert", "delete"] as const;
export type ChangeAction = (typeof CHANGE_ACTIONS)[number];

function changeOf<T extends ChangeType, O extends z.ZodType>(type: T, data: O, name: string) {
  return z
    .object({
      type: z.literal(type),
      id: z.string().describe("The object's id"),
      action: z
        .enum(CHANGE_ACTIONS)
        .describe(
          "`upsert`: `data` is the object as its own GET/list returns it now; `delete`: it is gone (a soft-deleted contact), `data` is null",
        ),
      changedAt: Timestamp.describe("When the object last changed (database clock)"),
      data: data.nullable(),
    })
    .meta({ id: name });
}

export const ChangeItem = z.discriminatedUnion("type", [
  changeOf("lead", LeadObject, "LeadChange"),
  changeOf("contact", ContactObject, "ContactChange"),
  changeOf("conversation", ConversationObject, "ConversationChange"),
  changeOf("appointment", AppointmentObject, "AppointmentChange"),
  changeOf("ticket", TicketObject, "TicketChange"),
]);
export type ChangeItem = z.infer<typeof ChangeItem>;

export const ChangePage = z.object({
  items: z.array(ChangeItem).describe("In feed order (the order in which the changes were committed)"),
  nextSince: z
    .string()
    .describe(
      "Opaque token: pass it as `since` in the next request (also when `items` is empty); persist it between runs",
    ),
  hasMore: z.boolean().describe("More changes are available right now: ask again at once with `nextSince`"),
  backoff: z
    .number()
    .int()
    .optional()
    .describe(
      "Set when a long-poll (`wait`) could not be held (too many waits of this key, or of the instance): seconds to leave before the next call",
    ),
});

export const MAX_SINCE_LENGTH = 200;

/** `types`: a comma list of the five type names; duplicates are ignored; anything else → 422. */
export const TypesInput = z
  .string()
  .max(200)
  .transform((s, ctx) => {
    const parts = s.split(",");
    const bad = parts.filter((p) => !isChangeType(p));
    if (bad.length) {
      ctx.addIssue({
        code: "custom",
        message: `unknown type${bad.length > 1 ? "s" : ""} ${bad.map((b) => JSON.stringify(b)).join(", ")}; allowed: ${CHANGE_TYPES.join(", ")}`,
      });
      return z.NEVER;
    }
    return CHANGE_TYPES.filter((t) => parts.includes(t));
  })
  .meta({
    description: `Comma-separated: ${CHANGE_TYPES.join(", ")}. Default: every type the key can read. Keep the same value for one chain of tokens.`,
  });

// ---- the since token ----------------------------------------------------------------------------

/**
 * What a `since` token carries. Positions are per tenant.
 *   pos    the position read up to (the next page starts after it)
 *   skip   tombstones at or below this position are left out: the head when the chain started from
 *          the beginning (a mirror built from scratch never held what was deleted before), else 0
 *   at     ms since the epoch: the time from which every tombstone the chain may still have to
 *          deliver is kept (refreshed whenever a page catches up; the retention check uses it)
 */
export interface SinceToken {
  pos: number;
  skip: number;
  at: number;
}

const VERSION = "c1";
const TOKEN_RE = /^c1\.(\d{1,15})\.(\d{1,15})\.(\d{1,15})\.([0-9a-f]{12})$/;

/** A short tag of the tenant, so that another tenant's token is refused (not a secret). */
const tenantTag = (tenantId: string) =>
  createHash("sha256").update(`changes:${tenantId.toLowerCase()}`).digest("hex").slice(0, 12);

export const encodeSince = (tenantId: string, t: SinceToken) =>
  Buffer.from(`${VERSION}.${t.pos}.${t.skip}.${t.at}.${tenantTag(tenantId)}`, "utf8").toString("base64url");

/** The token, or why it is refused: `malformed` (not one of ours) or `foreign` (another tenant's). */
export function decodeSince(raw: string, tenantId: string): SinceToken | "malformed" | "foreign" {
  if (raw.length > MAX_SINCE_LENGTH || !/^[A-Za-z0-9_-]+$/.test(raw)) return "malformed";
  const m = TOKEN_RE.exec(Buffer.from(raw, "base64url").toString("utf8"));
  if (!m) return "malformed";
  if (m[4] !== tenantTag(tenantId)) return "foreign";
  return { pos: Number(m[1]), skip: Number(m[2]), at: Number(m[3]) };
}
