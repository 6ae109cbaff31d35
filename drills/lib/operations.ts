// The operations of /public/v1 (the spec's 20, GET /changes and the reference lists) as the drills
// drive them: method, path with its id parameter, query parameters, and a valid body built from a
// tenant's ids (what the fuzzer mutates and the cross-tenant matrix fills with another tenant's ids).
import type { TenantIds } from "../../server/admin/fixture.js";

export type IdKind =
  | "lead"
  | "contact"
  | "conversation"
  | "appointment"
  | "ticket"
  | "stage"
  | "user"
  | "channel"
  | "list";

export interface Operation {
  name: string;
  method: "GET" | "POST" | "PATCH" | "PUT";
  /** Path with `{id}` where the path id goes (`{externalId}`: an external id, URL-encoded; SYNC_OPERATIONS). */
  path: string;
  /** What the path id is. */
  pathId?: IdKind;
  /** Query parameters with the kind of id they carry (null: not an id). */
  query?: Record<string, IdKind | null>;
  /** Body fields that carry ids, and a valid body. */
  bodyIds?: Record<string, IdKind>;
  body?: (ids: TenantIds, n: number) => Record<string, unknown>;
  create?: boolean;
}

const DAY = 86_400_000;
const future = (n: number, hour: number) => {
  const base = Math.ceil(Date.now() / DAY) * DAY + (30 + (n % 300)) * DAY;
  return new Date(base + hour * 3_600_000).toISOString();
};

export const OPERATIONS: Operation[] = [
  { name: "me", method: "GET", path: "/public/v1/me" },
  {
    name: "leads.list",
    method: "GET",
    path: "/public/v1/leads",
    query: {
      dateFrom: null,
      dateTo: null,
      customerId: "contact",
      id: "lead",
      sort: null,
      updatedFrom: null,
      updatedTo: null,
      cursor: null,
      offset: null,
      limit: null,
    },
  },
  {
    name: "leads.create",
    method: "POST",
    path: "/public/v1/leads",
    create: true,
    bodyIds: { conversationId: "conversation", stageId: "stage", assignedOperatorId: "user" },
    body: (ids, n) => ({
      customerName: `Fuzz ${n}`,
      customerPhone: "+34600000123",
      customerEmail: `f${n}@x.test`,
      intent: "buy",
      quality: "warm",
      stageId: ids.stages.new,
      budget: { min: 1, max: 10 },
      zones: ["a"],
      rooms: 2,
      assignedOperatorId: ids.users.ana,
      notes: "n",
    }),
  },
  { name: "leads.get", method: "GET", path: "/public/v1/leads/{id}", pathId: "lead" },
  {
    name: "leads.update",
    method: "PATCH",
    path: "/public/v1/leads/{id}",
    pathId: "lead",
    bodyIds: { stageId: "stage", assignedOperatorId: "user" },
    body: (ids) => ({ stageId: ids.stages.won, quality: "hot", assignedOperatorId: ids.users.bob, notes: "patched" }),
  },
  {
    name: "contacts.list",
    method: "GET",
    path: "/public/v1/contacts",
    query: {
      search: null,
      listId: "list",
      id: "contact",
      sort: null,
      updatedFrom: null,
      updatedTo: null,
      cursor: null,
      offset: null,
      limit: null,
    },
  },
  {
    name: "contacts.create",
    method: "POST",
    path: "/public/v1/contacts",
    create: true,
    body: (_ids, n) => ({
      fullName: `Fuzz Contact ${n}`,
      phone: `+3462${String(n % 10_000_000).padStart(7, "0")}`,
      email: `c${n}@x.test`,
      country: "ES",
    }),
  },
  {
    name: "contacts.update",
    method: "PATCH",
    path: "/public/v1/contacts/{id}",
    pathId: "contact",
    body: () => ({ fullName: "Renamed", marketingOptOut: true }),
  },
  {
    name: "conversations.list",
    method: "GET",
    path: "/public/v1/conversations",
    query: {
      status: null,
      channel: null,
      customerId: "contact",
      id: "conversation",
      sort: null,
      updatedFrom: null,
      updatedTo: null,
      cursor: null,
      offset: null,
      limit: null,
    },
  },
  {
    name: "conversations.start",
    method: "POST",
    path: "/public/v1/conversations/start",
    create: true,
    bodyIds: { channelId: "channel", leadId: "lead" },
    body: (ids, n) => ({
      channelId: ids.channels.wa,
      phone: `+3469${String(n % 10_000_000).padStart(7, "0")}`,
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["A", "B"],
      leadId: ids.leads.l2,
    }),
  },
  {
    name: "messages.list",
    method: "GET",
    path: "/public/v1/conversations/{id}/messages",
    pathId: "conversation",
    query: { cursor: null, limit: null },
  },
  {
    name: "messages.send",
    method: "POST",
    path: "/public/v1/conversations/{id}/messages",
    pathId: "conversation",
    create: true,
    body: (_ids, n) => ({ content: `hello ${n}` }),
  },
  {
    name: "appointments.list",
    method: "GET",
    path: "/public/v1/appointments",
    query: {
      userId: "user",
      customerId: "contact",
      leadId: "lead",
      status: null,
      from: null,
      to: null,
      id: "appointment",
      sort: null,
      updatedFrom: null,
      updatedTo: null,
      cursor: null,
      offset: null,
      limit: null,
    },
  },
  {
    name: "appointments.create",
    method: "POST",
    path: "/public/v1/appointments",
    create: true,
    bodyIds: { assignedUserId: "user", customerId: "contact", conversationId: "conversation", leadId: "lead" },
    body: (ids, n) => ({
      assignedUserId: ids.users.ana,
      title: `Visit ${n}`,
      appointmentType: "visit",
      startsAt: future(n, n % 20),
      endsAt: future(n, (n % 20) + 1),
      customerId: ids.contacts.bea,
      conversationId: ids.conversations.c1,
      leadId: ids.leads.l1,
      notes: "x",
    }),
  },
  {
    name: "appointments.update",
    method: "PATCH",
    path: "/public/v1/appointments/{id}",
    pathId: "appointment",
    body: (_ids, n) => ({ status: "scheduled", startsAt: future(n + 7, 3), endsAt: future(n + 7, 4), notes: "moved" }),
  },
  {
    name: "availability.get",
    method: "GET",
    path: "/public/v1/availability",
    query: { from: null, to: null, userId: "user" },
  },
  {
    name: "tickets.list",
    method: "GET",
    path: "/public/v1/tickets",
    query: {
      status: null,
      assignedTo: "user",
      customerId: "contact",
      id: "ticket",
      sort: null,
      updatedFrom: null,
      updatedTo: null,
      cursor: null,
      offset: null,
      limit: null,
    },
  },
  {
    name: "tickets.create",
    method: "POST",
    path: "/public/v1/tickets",
    create: true,
    bodyIds: { customerId: "contact", leadId: "lead", conversationId: "conversation", assignedTo: "user" },
    body: (ids, n) => ({
      subject: `Ticket ${n}`,
      customerId: ids.contacts.bea,
      leadId: ids.leads.l1,
      conversationId: ids.conversations.c1,
      assignedTo: ids.users.ana,
      comment: "first",
    }),
  },
  {
    name: "tickets.update",
    method: "PATCH",
    path: "/public/v1/tickets/{id}",
    pathId: "ticket",
    bodyIds: { assignedTo: "user" },
    body: (ids) => ({ status: "pending", assignedTo: ids.users.ana, subject: "Updated" }),
  },
  {
    name: "tickets.comment",
    method: "POST",
    path: "/public/v1/tickets/{id}/comments",
    pathId: "ticket",
    create: true,
    body: () => ({ body: "a comment" }),
  },
  { name: "changes.list", method: "GET", path: "/public/v1/changes", query: { since: null, types: null, limit: null } },
  // The tenant's reference data (additive): read-only lists, templates filtered by a channel id.
  { name: "stages.list", method: "GET", path: "/public/v1/stages", query: { offset: null, limit: null } },
  { name: "users.list", method: "GET", path: "/public/v1/users", query: { offset: null, limit: null } },
  { name: "channels.list", method: "GET", path: "/public/v1/channels", query: { offset: null, limit: null } },
  {
    name: "templates.list",
    method: "GET",
    path: "/public/v1/templates",
    query: { channelId: "channel", offset: null, limit: null },
  },
];

/**
 * The operations of two-way sync (issue 39), apart from OPERATIONS (the spec's 20; drills 6, 7 and 8
 * walk both): GET one contact, ticket and appointment, PUT by external id (the path's `{externalId}`
 * is the caller's to fill, URL-encoded) and the batch upserts. Their valid bodies build on the
 * creates' (a PUT's without externalId, a ticket's also without comment).
 */
const createBody = (name: string) => OPERATIONS.find((o) => o.name === name)!.body!;
const putBody = (name: string) => (ids: TenantIds, n: number) => {
  const { comment: _comment, ...body } = createBody(name)(ids, n);
  return body;
};
const PUT_BODY_IDS: Record<string, Record<string, IdKind>> = {
  leads: { conversationId: "conversation", stageId: "stage", assignedOperatorId: "user" },
  contacts: {},
  tickets: { customerId: "contact", leadId: "lead", conversationId: "conversation", assignedTo: "user" },
};
const CREATE_OF: Record<string, string> = {
  leads: "leads.create",
  contacts: "contacts.create",
  tickets: "tickets.create",
};
export const SYNC_OPERATIONS: Operation[] = [
  { name: "contacts.get", method: "GET", path: "/public/v1/contacts/{id}", pathId: "contact" },
  { name: "tickets.get", method: "GET", path: "/public/v1/tickets/{id}", pathId: "ticket" },
  { name: "appointments.get", method: "GET", path: "/public/v1/appointments/{id}", pathId: "appointment" },
  ...(["leads", "contacts", "tickets"] as const).flatMap((r): Operation[] => [
    {
      name: `${r}.upsert`,
      method: "PUT",
      path: `/public/v1/${r}/by-external-id/{externalId}`,
      create: true,
      bodyIds: PUT_BODY_IDS[r],
      body: putBody(CREATE_OF[r]!),
    },
    {
      name: `${r}.batchUpsert`,
      method: "POST",
      path: `/public/v1/${r}/batch/upsert`,
      create: true,
      body: (ids, n) => ({
        items: [0, 1, 2].map((k) => ({ externalId: `fz-batch-${n}-${k}`, ...putBody(CREATE_OF[r]!)(ids, n + k) })),
      }),
    },
  ]),
];

/** An id of the given kind in a tenant (the richTenant fixture). */
export function idOf(ids: TenantIds, kind: IdKind): string {
  switch (kind) {
    case "lead":
      return ids.leads.l1!;
    case "contact":
      return ids.contacts.bea!;
    case "conversation":
      return ids.conversations.c1!;
    case "appointment":
      return ids.appointments.a1!;
    case "ticket":
      return ids.tickets.t1!;
    case "stage":
      return ids.stages.won!;
    case "user":
      return ids.users.ana!;
    case "channel":
      return ids.channels.wa!;
    case "list":
      return ids.contactLists.vip!;
  }
}

/** A valid value for a query parameter that is not an id. */
export function validQuery(param: string): string {
  switch (param) {
    case "sort":
      return "-updatedAt";
    case "dateFrom":
    case "updatedFrom":
    case "from":
      return "2020-01-01T00:00:00Z";
    case "dateTo":
    case "updatedTo":
    case "to":
      return "2030-01-01T00:00:00Z";
    case "offset":
      return "0";
    case "limit":
      return "10";
    case "status":
      return "active";
    case "channel":
      return "whatsapp";
    case "search":
      return "Bea";
    case "types":
      return "lead,ticket";
    default:
      return "x";
  }
}
