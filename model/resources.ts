// The one list of the API's resources: each one's public name (its paths and scopes), its table, its
// type in the changes feed, and whether it carries the integrator's external id. The scopes
// (server/auth/scopes.ts), the feed's types and their read scopes (routers/changes/schemas.ts) and
// the external ids' unique indexes (routers/_lib/sync.ts) derive from it; the lists that describe
// something else stay separate, each named by test/unit/resources.test.ts with its reason.
export const RESOURCE_TABLE = {
  leads: { table: "Lead", type: "lead", externalId: true },
  contacts: { table: "Contact", type: "contact", externalId: true },
  conversations: { table: "Conversation", type: "conversation", externalId: false },
  appointments: { table: "Appointment", type: "appointment", externalId: false },
  tickets: { table: "Ticket", type: "ticket", externalId: true },
} as const;

export type Resource = keyof typeof RESOURCE_TABLE;
export const RESOURCES = Object.keys(RESOURCE_TABLE) as Resource[];
/** A resource's type in the changes feed ("lead" …). */
export type ChangeType = (typeof RESOURCE_TABLE)[Resource]["type"];
export const CHANGE_TYPES = RESOURCES.map((r) => RESOURCE_TABLE[r].type) as ChangeType[];
/** The resource of a feed type. */
export const resourceOfType = (type: ChangeType): Resource => RESOURCES.find((r) => RESOURCE_TABLE[r].type === type)!;
/** The tables whose objects carry an external id. */
export type SyncedTable = {
  [R in Resource]: (typeof RESOURCE_TABLE)[R]["externalId"] extends true ? (typeof RESOURCE_TABLE)[R]["table"] : never;
}[Resource];
export const SYNCED_TABLES = RESOURCES.filter((r) => RESOURCE_TABLE[r].externalId).map(
  (r) => RESOURCE_TABLE[r].table,
) as SyncedTable[];
