// The counter registry (issue 27): the ONE place that names which list filters have a counter. The
// counters themselves are kept in the database by the "ListCounter_apply" trigger of each list table
// (prisma/functions/ListCounter_apply.sql): a row's keys are "ListCounter_keys"(table, row), whose
// filter list must name exactly the pairs below, with the same columns; a contact's 'listId' keys come
// from its memberships. test/db/counter-registry.test.ts derives the pairs from the migrated database (the
// keys function over a row with every column set, and the UPDATE triggers' WHEN clauses) and fails on
// any difference.
//
// What a missing registration costs is speed, never correctness: a filter whose (list, dim) is not
// registered here gets no counter, and its list's total is a count of the matching rows (exactTotal()
// in totals.ts), logged once per filter. A registered filter the database does not count would be a
// lie — the drift test is what stops that.

/** A list filter with a counter: the column whose value is its key (`via`: kept from another table). */
export interface CountedFilter {
  column: string;
  via?: "ContactListMember";
}

export interface CountedList {
  /** The list's order column, whose UTC year/month/day buckets are counted (the deep offset's seek). */
  order: string;
  /** dim → the filter's column. */
  filters: Readonly<Record<string, CountedFilter>>;
}

export const LIST_COUNTERS = {
  Lead: { order: "createdAt", filters: { customerId: { column: "customerId" } } },
  Ticket: {
    order: "createdAt",
    filters: {
      status: { column: "status" },
      assignedTo: { column: "assignedToId" },
      customerId: { column: "customerId" },
    },
  },
  Appointment: {
    order: "startsAt",
    filters: {
      userId: { column: "assignedUserId" },
      customerId: { column: "customerId" },
      leadId: { column: "leadId" },
      status: { column: "status" },
    },
  },
  Conversation: {
    order: "lastMessageAt",
    filters: { status: { column: "status" }, channelId: { column: "channelId" }, customerId: { column: "customerId" } },
  },
  // Live contacts only; one 'listId' key per membership of a live contact.
  Contact: { order: "createdAt", filters: { listId: { column: "listId", via: "ContactListMember" } } },
} as const satisfies Record<string, CountedList>;

/** A list table (the counters' "entity"). */
export type ListEntity = keyof typeof LIST_COUNTERS;

const warned = new Set<string>();

/** Called once per unregistered filter (default: a process warning); tests replace it. */
export let onUncounted = (entity: string, dim: string, column: string) =>
  process.emitWarning(
    `no counter for the ${entity} list's filter ${dim} (${column}): its total is a count of the matching rows (routers/_lib/counters.ts)`,
    {
      code: "CRM_UNCOUNTED_FILTER",
    },
  );

/** Replaces the once-per-filter report (tests); returns the previous one. */
export function setOnUncounted(fn: typeof onUncounted): typeof onUncounted {
  const previous = onUncounted;
  onUncounted = fn;
  warned.clear();
  return previous;
}

/**
 * Whether the filter `dim` on `column` of `entity` has a counter. An unregistered one (or one registered
 * with another column) is reported once and counted row by row.
 */
export function isCounted(entity: string, dim: string, column: string): boolean {
  const list = (LIST_COUNTERS as Record<string, CountedList>)[entity];
  if (list?.filters[dim]?.column === column) return true;
  const key = `${entity}\u0000${dim}\u0000${column}`;
  if (!warned.has(key)) {
    warned.add(key);
    onUncounted(entity, dim, column);
  }
  return false;
}

/** Whether `entity` is a counted list at all (its unfiltered total and its buckets). */
export const isCountedList = (entity: string): entity is ListEntity => Object.hasOwn(LIST_COUNTERS, entity);
