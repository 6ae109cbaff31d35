// The OpenAPI document's examples, in one place (applied by rest/openapi.ts; the routers hold none):
// for every operation a request example (its path and query parameters, its body) and, for every
// error code it can give, an error body with that code, a message as the service writes it and
// realistic details.
//
// The ids are the demo tenant's (server/admin/demo.ts, DEMO_IDS: the first `npm start` on an empty
// embedded database loads the demo with them), so Swagger UI's "Try it out" at /docs succeeds with
// the demo key on every operation: the creates answer 201 (each once: a second POST /contacts with
// the same phone is a 409 ALREADY_EXISTS, as it should be), the lists find the demo's objects, and
// the upserts by external id answer 200 however often they run (the PUTs name the external ids the
// demo's objects hold, DEMO_EXTERNAL_IDS; a batch creates its new objects once, then finds them
// unchanged). The contacts the examples create have phones and e-mails no other contact has (both
// are unique per tenant).
// test/db/openapi.test.ts runs every example against the demo; test/unit/docs.test.ts clicks "Try it out"
// on every POST in headless Chromium.
import { DEMO_EXTERNAL_IDS, DEMO_IDS } from "../server/admin/demo.js";
import type { ErrorCode } from "../server/errors.js";

/** The message and details of an error example (the code is the example's key). */
export interface ErrorExample {
  message: string;
  details?: Record<string, unknown>;
}

export interface OperationExample {
  /** What the example request does, in a few words (the example's summary in Swagger UI). */
  summary: string;
  /** Path and query parameter values, by parameter name. */
  parameters?: Record<string, string | number>;
  /** The JSON request body (POST, PATCH). */
  body?: Record<string, unknown>;
  /** This operation's own error examples, where the common one (ERROR_EXAMPLES) would not fit. */
  errors?: Partial<Record<ErrorCode, ErrorExample>>;
}

/**
 * Parameters that get no example, and why. Swagger UI sends a parameter's example on every
 * "Try it out", so a value that is only valid as a previous answer's would make it fail.
 */
export const UNEXAMPLED_PARAMETERS: Record<string, string> = {
  cursor: "opaque: only a previous page's `nextCursor` is valid",
  // A list whose example names objects by externalId cannot name them by id as well (422: one or the other).
  "GET /public/v1/leads id": "the example names its lead by externalId, which id may not accompany",
  "GET /public/v1/tickets id": "the example names its ticket by externalId, which id may not accompany",
  "GET /public/v1/contacts id": "the example names its contact by externalId, which id may not accompany",
  since: "opaque: only a previous answer's `nextSince` is valid; absent starts from the beginning",
  "Idempotency-Key":
    "a pre-filled key would be sent again with an edited body (422 IDEMPOTENCY_KEY_REUSE_MISMATCH); any client-made unique value, e.g. a UUID, is one",
  "If-Match":
    "a pre-filled version goes stale after the first write (every later try a 412 PRECONDITION_FAILED); only the ETag of a previous answer is meant",
  "If-None-Match":
    "a pre-filled version would turn the read into a 304 without a body, and goes stale after the first write; only the ETag of a previous answer is meant",
};

/** The request id of the error examples (the service makes a UUID unless the client sent X-Request-Id). */
export const EXAMPLE_REQUEST_ID = "5b0e6a42-8c1d-4f3e-9a7b-2d4c6e8f0a13";

const { users, stages, channels, contactLists, contacts, conversations, leads, appointments, tickets } = DEMO_IDS;
const external = DEMO_EXTERNAL_IDS;

/** A validation error as the service reports it: "Request validation failed" and one failing field. */
const invalid = (field: string, code: string, message: string): ErrorExample => ({
  message: "Request validation failed",
  details: { fields: [{ field, code, message }], fieldCount: 1, truncated: false },
});
const notFound = (what: string): ErrorExample => ({ message: `${what} not found`, details: {} });
/** A 409 on a value another object of the tenant holds, naming it (routers/_lib/sync.ts, alreadyExists). */
const taken = (what: string, field: string, existingId: string): ErrorExample => ({
  message: `A ${what} with this ${field} already exists`,
  details: { field, existingId },
});
/** The 422 of an update by external id that would change a field PATCH may not change (routers/leads/upsert.ts, mayNotChange). */
const immutable = (field: string) =>
  invalid(field, "immutable", "differs from the stored value, and an update may not change it");
/** The 422 of a batch of more than 100 items. */
const tooManyItems = invalid("items", "too_big", "Too big: expected array to have <=100 items");

/** Each code's example unless the operation has its own (PERMISSION_DENIED: made from the operation's scope). */
export const ERROR_EXAMPLES: Record<ErrorCode, ErrorExample> = {
  VALIDATION_ERROR: invalid("limit", "too_big", "Too big: expected number to be <=200"),
  IDEMPOTENCY_KEY_REUSE_MISMATCH: {
    message: "This Idempotency-Key was used with a different request body",
    details: {},
  },
  INVALID_CREDENTIALS: { message: "Invalid API key", details: {} },
  TOKEN_EXPIRED: { message: "API key has expired", details: {} },
  PERMISSION_DENIED: {
    message: "This key lacks the scope tenant:leads.read",
    details: { requiredScope: "tenant:leads.read" },
  },
  PLAN_NOT_ELIGIBLE: {
    message: "The tenant's plan does not include API access (Pro or Enterprise required)",
    details: { plan: "starter" },
  },
  NOT_FOUND: notFound("Resource"),
  MESSAGING_SESSION_WINDOW_CLOSED: {
    message: "The 24-hour session window is closed; use POST /public/v1/conversations/start with an approved template",
    details: { conversationId: conversations.c1 },
  },
  APPOINTMENT_OVERLAP: {
    message: "The assigned user already has a scheduled appointment that overlaps this time range",
    details: { conflictingAppointmentId: appointments.a1 },
  },
  ALREADY_EXISTS: {
    message: "A contact with this phone already exists",
    details: { field: "phone", existingId: contacts.bea },
  },
  PRECONDITION_FAILED: {
    message: "The object is at version 2, which If-Match does not name",
    details: { currentVersion: 2 },
  },
  TICKET_COMMENT_LIMIT_REACHED: {
    message: "A ticket holds at most 500 comments",
    details: { limit: "comments", max: 500 },
  },
  PAYLOAD_TOO_LARGE: { message: "Request body exceeds 1048576 bytes", details: { limitBytes: 1048576 } },
  REQUEST_HEADERS_TOO_LARGE: {
    message: "The request line and headers exceed 327680 bytes",
    details: { limitBytes: 327680 },
  },
  RATE_LIMIT_EXCEEDED: { message: "Rate limit exceeded for this API key", details: { retryAfter: 17 } },
  INTERNAL_ERROR: { message: "Internal server error", details: {} },
  SERVICE_UNAVAILABLE: { message: "A backing service is temporarily unavailable; retry shortly", details: {} },
};

/** The example of each operation, keyed "METHOD /path" as in the document. */
export const OPERATION_EXAMPLES: Record<string, OperationExample> = {
  "GET /public/v1/me": { summary: "Who the demo key is" },

  "GET /public/v1/leads": {
    summary: "Bea Soto's leads since January 2026, the one your CRM knows as crm-deal-311",
    parameters: {
      dateFrom: "2026-01-01T00:00:00Z",
      dateTo: "2036-01-01T00:00:00Z",
      customerId: contacts.bea,
      externalId: external.leads.l1,
      sort: "-updatedAt",
      updatedFrom: "2026-01-01T00:00:00Z",
      updatedTo: "2036-01-01T00:00:00Z",
      offset: 0,
      limit: 50,
    },
    errors: {
      VALIDATION_ERROR: invalid(
        "dateFrom",
        "invalid_format",
        "must be an ISO 8601 date-time with an offset (e.g. 2026-11-20T08:00:00Z)",
      ),
    },
  },
  "POST /public/v1/leads": {
    summary: "A buyer from the website form",
    body: {
      customerName: "Eva Mora",
      customerEmail: "eva.mora@example.com",
      customerPhone: "+34600000009",
      intent: "buy",
      quality: "warm",
      stageId: stages.new,
      budget: { min: 250000, max: 320000 },
      zones: ["Chamberí", "Salamanca"],
      rooms: 3,
      assignedOperatorId: users.luis,
      notes: "Wants a balcony; can visit on weekdays after 17:00",
    },
    errors: {
      VALIDATION_ERROR: invalid("customerName", "too_small", "Too small: expected string to have >=1 characters"),
      NOT_FOUND: notFound("Stage"),
      ALREADY_EXISTS: taken("lead", "externalId", leads.l1),
    },
  },
  "GET /public/v1/leads/{lead_id}": {
    summary: "Bea Soto's lead",
    parameters: { lead_id: leads.l1 },
    errors: { VALIDATION_ERROR: invalid("lead_id", "invalid_format", "must be a UUID"), NOT_FOUND: notFound("Lead") },
  },
  "PATCH /public/v1/leads/{lead_id}": {
    summary: "Move Bea Soto's lead to Qualified",
    parameters: { lead_id: leads.l1 },
    body: {
      stageId: stages.qualified,
      quality: "hot",
      assignedOperatorId: users.ana,
      notes: "Mortgage pre-approved; second viewing booked",
    },
    errors: {
      VALIDATION_ERROR: invalid("stageId", "invalid_format", "must be a UUID"),
      NOT_FOUND: notFound("Lead"),
      ALREADY_EXISTS: taken("lead", "externalId", leads.l2),
    },
  },
  "PUT /public/v1/leads/by-external-id/{externalId}": {
    summary: "Your CRM's deal crm-deal-311 (Bea Soto's lead): qualified, with the CRM's notes",
    parameters: { externalId: external.leads.l1 },
    // Bea Soto's lead as the demo holds it: the fields an update may not change are equal (the phone
    // as the CRM writes it is the same number once normalised). Stage, quality, operator and notes are
    // applied; they are the PATCH example's, so after it, or after its own first run, nothing is written.
    body: {
      customerName: "Bea Soto",
      customerEmail: "bea@example.test",
      customerPhone: "600 000 001",
      intent: "buy",
      stageId: stages.qualified,
      quality: "hot",
      assignedOperatorId: users.ana,
      notes: "Mortgage pre-approved; second viewing booked",
    },
    errors: {
      VALIDATION_ERROR: immutable("customerName"),
      NOT_FOUND: notFound("Stage"),
      ALREADY_EXISTS: taken("lead", "externalId", leads.l1),
    },
  },
  "POST /public/v1/leads/batch/upsert": {
    summary: "Two deals from your CRM's nightly export, created once and unchanged on every later run",
    body: {
      items: [
        {
          externalId: "crm-deal-312",
          customerName: "Lucía Prieto",
          customerEmail: "lucia.prieto@example.com",
          customerPhone: "+34600000013",
          intent: "rent",
          quality: "warm",
          zones: ["Retiro"],
          rooms: 2,
          assignedOperatorId: users.luis,
          notes: "Moving in March; has a small dog",
        },
        {
          externalId: "crm-deal-313",
          customerName: "Pablo Núñez",
          customerPhone: "+34600000014",
          intent: "sell",
          stageId: stages.new,
          budget: { min: 400000, max: 450000 },
          zones: ["Chamberí"],
        },
      ],
    },
    errors: { VALIDATION_ERROR: tooManyItems },
  },

  "GET /public/v1/contacts": {
    summary: "VIP contacts named Soto, the one your CRM knows as crm-10042",
    parameters: {
      search: "soto",
      listId: contactLists.vip,
      externalId: external.contacts.bea,
      sort: "-updatedAt",
      updatedFrom: "2026-01-01T00:00:00Z",
      updatedTo: "2036-01-01T00:00:00Z",
      offset: 0,
      limit: 50,
    },
    errors: { VALIDATION_ERROR: invalid("search", "too_big", "Too big: expected string to have <=200 characters") },
  },
  "POST /public/v1/contacts": {
    summary: "A new contact from Spain, with your CRM's id of her",
    body: {
      fullName: "Eva Mora",
      phone: "+34 600 000 009",
      email: "eva.mora@example.com",
      country: "ES",
      externalId: "crm-10046",
    },
    errors: {
      VALIDATION_ERROR: {
        message: "phone is not a valid phone number: not a possible phone number for its region",
        details: {
          fields: [{ field: "phone", code: "invalid_phone", message: "not a possible phone number for its region" }],
        },
      },
    },
  },
  "GET /public/v1/contacts/{contact_id}": {
    summary: "Bea Soto",
    parameters: { contact_id: contacts.bea },
    errors: {
      VALIDATION_ERROR: invalid("contact_id", "invalid_format", "must be a UUID"),
      NOT_FOUND: notFound("Contact"),
    },
  },
  "PATCH /public/v1/contacts/{contact_id}": {
    summary: "Carlos Gil's full name and e-mail, linked to your CRM's crm-10043; he opts out of marketing",
    parameters: { contact_id: contacts.carlos },
    body: {
      fullName: "Carlos Gil Ortega",
      email: "carlos.gil@example.com",
      marketingOptOut: true,
      externalId: "crm-10043",
    },
    errors: {
      VALIDATION_ERROR: invalid("phone", "unknown_field", "Unknown field"),
      NOT_FOUND: notFound("Contact"),
      ALREADY_EXISTS: taken("contact", "email", contacts.bea),
    },
  },
  "PUT /public/v1/contacts/by-external-id/{externalId}": {
    summary: "Your CRM's contact crm-10042 (Bea Soto): her full name as the CRM has it",
    parameters: { externalId: external.contacts.bea },
    // Bea Soto as the demo holds her: phone (the same number once normalised) and country equal, as
    // an update requires; the full name and e-mail are applied.
    body: { fullName: "Beatriz Soto", phone: "+34 600 000 001", email: "bea@example.test", country: "ES" },
    errors: {
      VALIDATION_ERROR: immutable("phone"),
      ALREADY_EXISTS: taken("contact", "phone", contacts.carlos),
    },
  },
  "POST /public/v1/contacts/batch/upsert": {
    summary: "Your CRM's export: Bea Soto as above, and two new contacts (created once, unchanged on every later run)",
    body: {
      items: [
        {
          externalId: external.contacts.bea,
          fullName: "Beatriz Soto",
          phone: "+34600000001",
          email: "bea@example.test",
          country: "ES",
        },
        {
          externalId: "crm-10044",
          fullName: "Marta Ruiz",
          phone: "+34 600 000 011",
          email: "marta.ruiz@example.com",
          country: "ES",
        },
        { externalId: "crm-10045", fullName: "Jorge Pardo", phone: "600 000 012" },
      ],
    },
    errors: { VALIDATION_ERROR: tooManyItems },
  },

  "GET /public/v1/conversations": {
    summary: "Bea Soto's active WhatsApp conversations",
    parameters: {
      status: "active",
      channel: "whatsapp",
      customerId: contacts.bea,
      sort: "-lastMessageAt",
      updatedFrom: "2026-01-01T00:00:00Z",
      updatedTo: "2036-01-01T00:00:00Z",
      id: conversations.c1,
      offset: 0,
      limit: 50,
    },
    errors: { VALIDATION_ERROR: invalid("customerId", "invalid_format", "must be a UUID") },
  },
  "POST /public/v1/conversations/start": {
    summary: "Greet Eva Mora on WhatsApp with the approved welcome template",
    body: {
      channelId: channels.wa,
      phone: "+34600000009",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Eva", "Ana from Demo Realty"],
      leadId: leads.l2,
    },
    errors: {
      VALIDATION_ERROR: invalid("variables", "variables_count", "The template takes 2 variable(s), 1 given"),
      NOT_FOUND: notFound("Channel"),
    },
  },
  "GET /public/v1/conversations/{id}": {
    summary: "Bea Soto's WhatsApp conversation",
    parameters: { id: conversations.c1 },
    errors: {
      VALIDATION_ERROR: invalid("id", "invalid_format", "must be a UUID"),
      NOT_FOUND: notFound("Conversation"),
    },
  },
  "GET /public/v1/conversations/{id}/messages": {
    summary: "The newest messages of Bea Soto's WhatsApp conversation",
    parameters: { id: conversations.c1, limit: 50 },
    errors: {
      VALIDATION_ERROR: {
        message: "Malformed cursor",
        details: {
          fields: [{ field: "cursor", code: "invalid_cursor", message: "not a cursor returned by this endpoint" }],
        },
      },
      NOT_FOUND: notFound("Conversation"),
    },
  },
  "POST /public/v1/conversations/{id}/messages": {
    summary: "Answer Carlos on the website chat",
    parameters: { id: conversations.c2 },
    body: { content: "Hi Carlos! Tuesday at 10:00 works for the visit; see you at Calle Mayor 12." },
    errors: {
      VALIDATION_ERROR: invalid("content", "too_small", "Too small: expected string to have >=1 characters"),
      NOT_FOUND: notFound("Conversation"),
    },
  },

  "GET /public/v1/appointments": {
    summary: "Ana's scheduled appointments with Bea Soto about her lead",
    parameters: {
      userId: users.ana,
      customerId: contacts.bea,
      leadId: leads.l1,
      status: "scheduled",
      from: "2026-01-01T00:00:00Z",
      to: "2036-01-01T00:00:00Z",
      sort: "startsAt",
      updatedFrom: "2026-01-01T00:00:00Z",
      updatedTo: "2036-01-01T00:00:00Z",
      id: appointments.a1,
      offset: 0,
      limit: 50,
    },
    errors: {
      VALIDATION_ERROR: {
        message: "from must not be after to",
        details: { fields: [{ field: "to", code: "invalid_range", message: "must not be before from" }] },
      },
    },
  },
  "POST /public/v1/appointments": {
    summary: "Book Luis for a viewing with Carlos Gil",
    body: {
      assignedUserId: users.luis,
      title: "Viewing: Calle Mayor 12, 3rd floor",
      appointmentType: "visit",
      startsAt: "2027-03-02T10:00:00+01:00",
      endsAt: "2027-03-02T10:45:00+01:00",
      customerId: contacts.carlos,
      conversationId: conversations.c2,
      leadId: leads.l2,
      notes: "Bring the energy certificate",
    },
    errors: { VALIDATION_ERROR: invalid("endsAt", "custom", "must be after startsAt"), NOT_FOUND: notFound("User") },
  },
  "GET /public/v1/appointments/{appointment_id}": {
    summary: "Bea Soto's viewing",
    parameters: { appointment_id: appointments.a1 },
    errors: {
      VALIDATION_ERROR: invalid("appointment_id", "invalid_format", "must be a UUID"),
      NOT_FOUND: notFound("Appointment"),
    },
  },
  "PATCH /public/v1/appointments/{appointment_id}": {
    summary: "Move Bea Soto's viewing to the afternoon",
    parameters: { appointment_id: appointments.a1 },
    body: {
      startsAt: "2027-03-03T16:00:00+01:00",
      endsAt: "2027-03-03T17:00:00+01:00",
      notes: "Moved to the afternoon at the client's request",
    },
    errors: {
      VALIDATION_ERROR: invalid("status", "invalid_value", "must be one of scheduled, cancelled, completed, no_show"),
      NOT_FOUND: notFound("Appointment"),
    },
  },
  "GET /public/v1/availability": {
    summary: "Luis's free slots in the first week of March 2027",
    parameters: { from: "2027-03-01", to: "2027-03-05", userId: users.luis },
    errors: {
      VALIDATION_ERROR: invalid("to", "custom", "the range may span at most 31 days"),
      NOT_FOUND: notFound("User"),
    },
  },

  "GET /public/v1/tickets": {
    summary: "Ana's open tickets about Bea Soto, the one your helpdesk knows as hd-58230",
    parameters: {
      status: "open",
      assignedTo: users.ana,
      customerId: contacts.bea,
      externalId: external.tickets.t1,
      sort: "-updatedAt",
      updatedFrom: "2026-01-01T00:00:00Z",
      updatedTo: "2036-01-01T00:00:00Z",
      offset: 0,
      limit: 50,
    },
    errors: { VALIDATION_ERROR: invalid("assignedTo", "invalid_format", "must be a UUID") },
  },
  "POST /public/v1/tickets": {
    summary: "Bea Soto reports broken listing photos",
    body: {
      subject: "Listing photos do not load",
      customerId: contacts.bea,
      leadId: leads.l1,
      conversationId: conversations.c1,
      assignedTo: users.luis,
      comment: "The customer says the photos of listing 4521 show a broken image on her phone.",
    },
    errors: {
      VALIDATION_ERROR: invalid("(body)", "custom", "At least one of customerId, leadId, conversationId is required"),
      NOT_FOUND: notFound("Contact"),
      ALREADY_EXISTS: taken("ticket", "externalId", tickets.t1),
    },
  },
  "GET /public/v1/tickets/{ticket_id}": {
    summary: "The broken-link ticket with its thread",
    parameters: { ticket_id: tickets.t1 },
    errors: {
      VALIDATION_ERROR: invalid("ticket_id", "invalid_format", "must be a UUID"),
      NOT_FOUND: notFound("Ticket"),
    },
  },
  "PATCH /public/v1/tickets/{ticket_id}": {
    summary: "Hand the broken-link ticket to Luis, waiting for the owner",
    parameters: { ticket_id: tickets.t1 },
    body: { status: "pending", assignedTo: users.luis, subject: "Broken link in listing 4521" },
    errors: {
      VALIDATION_ERROR: invalid("status", "invalid_value", "must be one of open, pending, resolved, closed"),
      NOT_FOUND: notFound("Ticket"),
      ALREADY_EXISTS: taken("ticket", "externalId", tickets.t1),
    },
  },
  "PUT /public/v1/tickets/by-external-id/{externalId}": {
    summary: "Your helpdesk's ticket hd-58230 (the broken-link ticket): its subject, and Luis on it",
    parameters: { externalId: external.tickets.t1 },
    // The ticket as the demo holds it: its contact is Bea Soto (a link an update may not change);
    // the subject and the assignee are applied. Comments go through POST /tickets/{ticket_id}/comments.
    body: { subject: "Broken link in listing 4521", customerId: contacts.bea, assignedTo: users.luis },
    errors: {
      VALIDATION_ERROR: immutable("customerId"),
      NOT_FOUND: notFound("Assignable user"),
      ALREADY_EXISTS: taken("ticket", "externalId", tickets.t1),
    },
  },
  "POST /public/v1/tickets/batch/upsert": {
    summary: "Two tickets from your helpdesk, created once and unchanged on every later run",
    body: {
      items: [
        {
          externalId: "hd-58231",
          subject: "Energy certificate of Calle Mayor 12",
          customerId: contacts.carlos,
          leadId: leads.l2,
          conversationId: conversations.c2,
          assignedTo: users.luis,
        },
        {
          externalId: "hd-58232",
          subject: "Reschedule the viewing",
          customerId: contacts.bea,
          leadId: leads.l1,
          assignedTo: users.ana,
        },
      ],
    },
    errors: { VALIDATION_ERROR: tooManyItems },
  },
  "POST /public/v1/tickets/{ticket_id}/comments": {
    summary: "Note the fix on the broken-link ticket",
    parameters: { ticket_id: tickets.t1 },
    body: { body: "Fixed the link in the listing; asked the customer to confirm." },
    errors: {
      VALIDATION_ERROR: invalid("body", "custom", "must be at least 1 character"),
      NOT_FOUND: notFound("Ticket"),
    },
  },

  "GET /public/v1/stages": {
    summary: "The demo's pipeline: New (where new leads enter), Qualified, Won",
    parameters: { offset: 0, limit: 50 },
  },
  "GET /public/v1/users": {
    summary: "Ana Ruiz and Luis Vega, both bookable and assignable",
    parameters: { offset: 0, limit: 50 },
  },
  "GET /public/v1/channels": {
    summary: "The demo's WhatsApp channel (with its 24-hour window) and its website chat",
    parameters: { offset: 0, limit: 50 },
  },
  "GET /public/v1/templates": {
    summary: "The approved templates of the demo's WhatsApp channel: welcome (en), two variables",
    parameters: { channelId: channels.wa, offset: 0, limit: 50 },
    errors: { VALIDATION_ERROR: invalid("channelId", "invalid_format", "must be a UUID") },
  },

  "GET /public/v1/changes": {
    summary: "The first page of lead and contact changes",
    parameters: { types: "lead,contact", limit: 100, wait: 0 },
    errors: {
      VALIDATION_ERROR: {
        message: "since is not a token of this feed",
        details: { fields: [{ field: "since", code: "invalid_token", message: "since is not a token of this feed" }] },
      },
      PERMISSION_DENIED: {
        message: "This key cannot read ticket",
        details: { requiredScopes: ["tenant:tickets.read"] },
      },
    },
  },
};
