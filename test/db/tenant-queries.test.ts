// No query of the API joins across tenants or looks a tenant-owned row up without "tenantId".
// Every statement the service sends to the database while it answers the whole HTTP surface (every
// documented operation, its success and its not-found / foreign-id paths, an idempotent replay, a
// conflict, a bad key) is recorded at the driver and analysed (test/helpers/tenant-sql.ts): every
// relation of a tenant-scoped table must be pinned by the statement's own conditions, and only to the
// calling key's tenant. What is checked and its limits: docs/decisions/scale-out.md, "Every statement pinned to the
// caller's tenant".
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { documentedOperations } from "../helpers/conformance.js";
import { readCatalog } from "../helpers/citus.js";
import { analyzeSql, loadSqlParser, tenantModel, type TenantModel } from "../helpers/tenant-sql.js";
import { freshDatabase, randomUuid, startApp, type TestApp, type TestDb } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import type { LoadResult } from "../../server/admin/fixture.js";
import { isKeyLookup, LOOKUP } from "../../server/auth/authenticate.js";
import { isPlacementLookup } from "../../server/db/routing.js";
import { encodeCursor as contactCursor } from "../../routers/contacts/schemas.js";
import { encodeCursor as messageCursor } from "../../routers/conversations/messages-list.js";

interface Statement {
  sql: string;
  params: unknown[];
}
const recorded: Statement[] = [];
let recording = false;

let app: TestApp;
let model: TenantModel;
let ids: LoadResult;
const checked = { requests: 0, statements: 0, distributed: 0 };

const data = (ref: string) =>
  tenant(ref, {
    contactLists: [{ ref: "vip", name: "VIP" }],
    contacts: [
      {
        ref: "bea",
        fullName: "Bea Soto",
        phone: ref === "acme" ? "+34600000001" : "+34600000002",
        email: `bea@${ref}.test`,
        lists: ["vip"],
        externalId: "ext-bea",
      },
      { ref: "carl", fullName: "Carl Ruiz", phone: ref === "acme" ? "+34600000011" : "+34600000012" },
    ],
    conversations: [
      {
        ref: "c1",
        channel: "wa",
        status: "active",
        assignedTo: "ana",
        identity: {
          externalId: ref === "acme" ? "34600000001" : "34600000002",
          name: "Bea",
          phone: null,
          email: null,
          contact: "bea",
        },
        messages: [{ role: "user", content: "Hi!" }],
      },
    ],
    leads: [
      { ref: "l1", customerName: "Bea Soto", stage: "new", contact: "bea", conversation: "c1", externalId: "ext-l1" },
    ],
    appointments: [
      {
        ref: "a1",
        assignedTo: "ana",
        title: "Viewing",
        appointmentType: "visit",
        startsAt: "2030-03-04T10:00:00Z",
        endsAt: "2030-03-04T11:00:00Z",
        contact: "bea",
      },
    ],
    // The same external ids in both tenants: an upsert or a filter by one must find its own tenant's object only.
    tickets: [
      {
        ref: "t1",
        subject: "Broken link",
        createdBy: "ana",
        assignedTo: "ana",
        contact: "bea",
        comments: [{ author: "ana", body: "On it" }],
        externalId: "ext-t1",
      },
    ],
  } as any);

let db: TestDb | undefined;
beforeAll(async () => {
  await loadSqlParser();
  db = await freshDatabase({ observe: (sql, params) => recording && recorded.push({ sql, params: [...params] }) });
  app = await startApp({ db });
  model = tenantModel(await readCatalog(app.db.sql));
  ids = await app.load(fixture(data("acme"), data("globex")));
});
// The database is this file's own (passed to startApp, which then leaves it alone): dropped here.
afterAll(async () => {
  await app?.close();
  await db?.drop();
});

const A = () => ids.tenants.acme!;
const G = () => ids.tenants.globex!;

interface Call {
  /** The documented operation, "METHOD /public/v1/template". */
  op: string;
  path: () => string;
  body?: () => unknown;
  query?: () => Record<string, string>;
  headers?: Record<string, string>;
  key?: () => string;
  status: number;
  /** A batch upsert's per-item statuses, in order (that each path of the batch ran). */
  results?: string[];
}
const call = (op: string, status: number, path: () => string, extra: Partial<Call> = {}): Call => ({
  op,
  status,
  path,
  ...extra,
});

const ME = "GET /public/v1/me";
const LEADS = "GET /public/v1/leads";
const LEAD_CREATE = "POST /public/v1/leads";
const LEAD_GET = "GET /public/v1/leads/{lead_id}";
const LEAD_PATCH = "PATCH /public/v1/leads/{lead_id}";
const LEAD_PUT = "PUT /public/v1/leads/by-external-id/{externalId}";
const LEAD_BATCH = "POST /public/v1/leads/batch/upsert";
const CONTACTS = "GET /public/v1/contacts";
const CONTACT_CREATE = "POST /public/v1/contacts";
const CONTACT_GET = "GET /public/v1/contacts/{contact_id}";
const CONTACT_PATCH = "PATCH /public/v1/contacts/{contact_id}";
const CONTACT_PUT = "PUT /public/v1/contacts/by-external-id/{externalId}";
const CONTACT_BATCH = "POST /public/v1/contacts/batch/upsert";
const CONVERSATIONS = "GET /public/v1/conversations";
const CONVERSATION_GET = "GET /public/v1/conversations/{id}";
const START = "POST /public/v1/conversations/start";
const MESSAGES = "GET /public/v1/conversations/{id}/messages";
const SEND = "POST /public/v1/conversations/{id}/messages";
const APPOINTMENTS = "GET /public/v1/appointments";
const APPOINTMENT_CREATE = "POST /public/v1/appointments";
const APPOINTMENT_GET = "GET /public/v1/appointments/{appointment_id}";
const APPOINTMENT_PATCH = "PATCH /public/v1/appointments/{appointment_id}";
const AVAILABILITY = "GET /public/v1/availability";
const TICKETS = "GET /public/v1/tickets";
const TICKET_CREATE = "POST /public/v1/tickets";
const TICKET_GET = "GET /public/v1/tickets/{ticket_id}";
const TICKET_PATCH = "PATCH /public/v1/tickets/{ticket_id}";
const TICKET_PUT = "PUT /public/v1/tickets/by-external-id/{externalId}";
const TICKET_BATCH = "POST /public/v1/tickets/batch/upsert";
const COMMENT = "POST /public/v1/tickets/{ticket_id}/comments";
const CHANGES = "GET /public/v1/changes";
const STAGES = "GET /public/v1/stages";
const USERS = "GET /public/v1/users";
const CHANNELS = "GET /public/v1/channels";
const TEMPLATES = "GET /public/v1/templates";

const replayKey = `replay-${randomUuid()}`;

/** The whole surface: every operation's success, and each id it accepts given as another tenant's (404 or empty). */
const calls: Call[] = [
  call(ME, 200, () => "/public/v1/me"),
  call(ME, 401, () => "/public/v1/me", { key: () => `crm_AAAAAAAAAAAA_${"B".repeat(40)}` }),

  call(LEADS, 200, () => "/public/v1/leads"),
  call(LEADS, 200, () => "/public/v1/leads", {
    query: () => ({ customerId: A().contacts.bea!, dateFrom: "2020-01-01T00:00:00Z", limit: "5", offset: "1" }),
  }),
  call(LEADS, 200, () => "/public/v1/leads", { query: () => ({ customerId: G().contacts.bea! }) }),
  call(LEAD_CREATE, 201, () => "/public/v1/leads", {
    body: () => ({
      customerName: "New Lead",
      customerPhone: "+34600000011",
      stageId: A().stages.won,
      assignedOperatorId: A().users.ana,
    }),
  }),
  call(LEAD_CREATE, 201, () => "/public/v1/leads", {
    body: () => ({ customerName: "Mail Lead", customerEmail: "BEA@acme.test" }),
  }),
  call(LEAD_CREATE, 201, () => "/public/v1/leads", {
    body: () => ({ customerName: "From chat", conversationId: A().conversations.c1 }),
    headers: { "Idempotency-Key": replayKey },
  }),
  call(LEAD_CREATE, 201, () => "/public/v1/leads", {
    body: () => ({ customerName: "From chat", conversationId: A().conversations.c1 }),
    headers: { "Idempotency-Key": replayKey },
  }),
  call(LEAD_CREATE, 404, () => "/public/v1/leads", { body: () => ({ customerName: "X", stageId: G().stages.new }) }),
  call(LEAD_CREATE, 404, () => "/public/v1/leads", {
    body: () => ({ customerName: "X", conversationId: G().conversations.c1 }),
  }),
  call(LEAD_CREATE, 404, () => "/public/v1/leads", {
    body: () => ({ customerName: "X", assignedOperatorId: G().users.ana }),
  }),
  call(LEAD_GET, 200, () => `/public/v1/leads/${A().leads.l1}`),
  call(LEAD_GET, 404, () => `/public/v1/leads/${G().leads.l1}`),
  call(LEAD_PATCH, 200, () => `/public/v1/leads/${A().leads.l1}`, {
    body: () => ({ quality: "hot", stageId: A().stages.won, assignedOperatorId: A().users.ana }),
  }),
  call(LEAD_PATCH, 404, () => `/public/v1/leads/${G().leads.l1}`, { body: () => ({ quality: "hot" }) }),
  call(LEAD_PATCH, 404, () => `/public/v1/leads/${A().leads.l1}`, { body: () => ({ stageId: G().stages.won }) }),
  // If-Match: the guarded write, and a stale version's 412 (the current version read back).
  call(LEAD_PATCH, 200, () => `/public/v1/leads/${A().leads.l1}`, {
    body: () => ({ notes: "matched" }),
    headers: { "If-Match": "*" },
  }),
  call(LEAD_PATCH, 412, () => `/public/v1/leads/${A().leads.l1}`, {
    body: () => ({ notes: "stale" }),
    headers: { "If-Match": '"999999"' },
  }),
  call(LEAD_GET, 304, () => `/public/v1/leads/${A().leads.l1}`, { headers: { "If-None-Match": "*" } }),
  call(LEADS, 200, () => "/public/v1/leads", { query: () => ({ externalId: "ext-l1" }) }),
  // Upsert by external id: created, updated (the fixture's ext-l1, which the other tenant holds too), unchanged, inside an Idempotency-Key's transaction.
  call(LEAD_PUT, 201, () => "/public/v1/leads/by-external-id/ext-l-new", {
    body: () => ({ customerName: "Synced", customerPhone: "+34600000041", stageId: A().stages.new }),
  }),
  call(LEAD_PUT, 200, () => "/public/v1/leads/by-external-id/ext-l1", {
    body: () => ({
      customerName: "Bea Soto",
      quality: "warm",
      stageId: A().stages.new,
      assignedOperatorId: A().users.ana,
    }),
  }),
  call(LEAD_PUT, 200, () => "/public/v1/leads/by-external-id/ext-l1", {
    body: () => ({ customerName: "Bea Soto", quality: "warm" }),
    headers: { "If-Match": "*" },
  }),
  call(LEAD_PUT, 200, () => "/public/v1/leads/by-external-id/ext-l1", {
    body: () => ({ customerName: "Bea Soto", notes: "keyed" }),
    headers: { "Idempotency-Key": `lp-${replayKey}` },
  }),
  call(LEAD_PUT, 404, () => "/public/v1/leads/by-external-id/ext-l-x", {
    body: () => ({ customerName: "X", stageId: G().stages.new }),
  }),
  call(LEAD_BATCH, 200, () => "/public/v1/leads/batch/upsert", {
    body: () => ({
      items: [
        { externalId: "ext-l1", customerName: "Bea Soto", quality: "cold" },
        { externalId: "ext-l-new", customerName: "Synced" },
        {
          externalId: "ext-l-b",
          customerName: "Batch lead",
          customerEmail: "bea@acme.test",
          assignedOperatorId: A().users.ana,
        },
        { externalId: "ext-l-c", customerName: "X", stageId: G().stages.new },
        { externalId: "ext-l-d", customerName: "X", conversationId: G().conversations.c1 },
      ],
    }),
    results: ["updated", "unchanged", "created", "NOT_FOUND", "NOT_FOUND"],
  }),

  call(CONTACTS, 200, () => "/public/v1/contacts"),
  call(CONTACTS, 200, () => "/public/v1/contacts", { query: () => ({ search: "bea", listId: A().contactLists.vip! }) }),
  call(CONTACTS, 200, () => "/public/v1/contacts", { query: () => ({ search: "600 000", limit: "1" }) }),
  call(CONTACTS, 200, () => "/public/v1/contacts", { query: () => ({ listId: G().contactLists.vip! }) }),
  call(CONTACTS, 200, () => "/public/v1/contacts", {
    query: () => ({ cursor: contactCursor({ createdAt: new Date(), id: A().contacts.bea! }) }),
  }),
  call(CONTACTS, 200, () => "/public/v1/contacts", {
    query: () => ({ search: "a", cursor: contactCursor({ createdAt: new Date(), id: A().contacts.bea! }) }),
  }),
  call(CONTACT_CREATE, 201, () => "/public/v1/contacts", {
    body: () => ({ fullName: "Dan", phone: "+34600000021", email: "dan@acme.test" }),
  }),
  call(CONTACT_CREATE, 409, () => "/public/v1/contacts", { body: () => ({ fullName: "Dup", phone: "+34600000001" }) }),
  call(CONTACT_PATCH, 200, () => `/public/v1/contacts/${A().contacts.carl}`, {
    body: () => ({ fullName: "Carl R.", marketingOptOut: true }),
  }),
  call(CONTACT_PATCH, 404, () => `/public/v1/contacts/${G().contacts.carl}`, { body: () => ({ fullName: "X" }) }),
  call(CONTACT_PATCH, 200, () => `/public/v1/contacts/${A().contacts.carl}`, {
    body: () => ({ externalId: "ext-carl" }),
    headers: { "If-Match": "*" },
  }),
  // An external id another contact holds: 409 naming it (the holder read after the refusal).
  call(CONTACT_PATCH, 409, () => `/public/v1/contacts/${A().contacts.carl}`, {
    body: () => ({ externalId: "ext-bea" }),
  }),
  call(CONTACT_CREATE, 409, () => "/public/v1/contacts", {
    body: () => ({ phone: "+34600000022", externalId: "ext-bea" }),
  }),
  call(CONTACTS, 200, () => "/public/v1/contacts", { query: () => ({ externalId: "ext-bea" }) }),
  call(CONTACT_GET, 200, () => `/public/v1/contacts/${A().contacts.bea}`),
  call(CONTACT_GET, 304, () => `/public/v1/contacts/${A().contacts.bea}`, {
    headers: { "If-None-Match": '"1", "2", "3"' },
  }),
  call(CONTACT_GET, 404, () => `/public/v1/contacts/${G().contacts.bea}`),
  call(CONTACT_PUT, 201, () => "/public/v1/contacts/by-external-id/ext-eve", {
    body: () => ({ fullName: "Eve", phone: "+34600000051", email: "eve@acme.test" }),
  }),
  call(CONTACT_PUT, 200, () => "/public/v1/contacts/by-external-id/ext-bea", {
    body: () => ({ phone: "+34600000001", fullName: "Bea S." }),
  }),
  call(CONTACT_PUT, 200, () => "/public/v1/contacts/by-external-id/ext-bea", {
    body: () => ({ phone: "+34600000001", email: "bea.s@acme.test" }),
    headers: { "Idempotency-Key": `cp-${replayKey}` },
  }),
  call(CONTACT_PUT, 200, () => "/public/v1/contacts/by-external-id/ext-bea", {
    body: () => ({ phone: "+34600000001", email: "bea.s@acme.test" }),
    headers: { "Idempotency-Key": `cp-${replayKey}` },
  }),
  call(CONTACT_PUT, 412, () => "/public/v1/contacts/by-external-id/ext-bea", {
    body: () => ({ phone: "+34600000001", fullName: "Stale" }),
    headers: { "If-Match": '"999999"' },
  }),
  // A phone another contact of the tenant holds: 409 naming it.
  call(CONTACT_PUT, 409, () => "/public/v1/contacts/by-external-id/ext-dup", {
    body: () => ({ phone: "+34600000001" }),
  }),
  call(CONTACT_BATCH, 200, () => "/public/v1/contacts/batch/upsert", {
    body: () => ({
      items: [
        { externalId: "ext-bea", phone: "+34600000001", fullName: "Bea Soto" },
        { externalId: "ext-eve", phone: "+34600000051" },
        // The other tenant's phone is free in this one.
        { externalId: "ext-b2", phone: "+34600000002", fullName: "Twin" },
        { externalId: "ext-b3", phone: "+34600000011" },
        { externalId: "ext-b4", phone: "+34600000053", email: "BEA.S@acme.test" },
        { externalId: "ext-b5", phone: "not a phone" },
      ],
    }),
    results: ["updated", "unchanged", "created", "ALREADY_EXISTS", "ALREADY_EXISTS", "VALIDATION_ERROR"],
  }),

  call(CONVERSATIONS, 200, () => "/public/v1/conversations", {
    query: () => ({ status: "active", channel: "whatsapp", customerId: A().contacts.bea! }),
  }),
  call(CONVERSATIONS, 200, () => "/public/v1/conversations", { query: () => ({ customerId: G().contacts.bea! }) }),
  call(START, 201, () => "/public/v1/conversations/start", {
    body: () => ({
      channelId: A().channels.wa,
      phone: "+34600000031",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Bea", "Ana"],
      leadId: A().leads.l1,
    }),
  }),
  call(START, 201, () => "/public/v1/conversations/start", {
    body: () => ({
      channelId: A().channels.wa,
      phone: "+34600000031",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["Bea", "Ana"],
    }),
  }),
  call(START, 404, () => "/public/v1/conversations/start", {
    body: () => ({
      channelId: G().channels.wa,
      phone: "+34600000031",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["a", "b"],
    }),
  }),
  call(START, 404, () => "/public/v1/conversations/start", {
    body: () => ({
      channelId: A().channels.wa,
      phone: "+34600000031",
      templateName: "welcome",
      templateLanguage: "en",
      variables: ["a", "b"],
      leadId: G().leads.l1,
    }),
  }),
  call(CONVERSATION_GET, 200, () => `/public/v1/conversations/${A().conversations.c1}`),
  call(CONVERSATION_GET, 404, () => `/public/v1/conversations/${G().conversations.c1}`),
  call(MESSAGES, 200, () => `/public/v1/conversations/${A().conversations.c1}/messages`, {
    query: () => ({ limit: "1" }),
  }),
  call(MESSAGES, 200, () => `/public/v1/conversations/${A().conversations.c1}/messages`, {
    query: () => ({ cursor: messageCursor({ createdAt: new Date(), id: randomUuid() }) }),
  }),
  call(MESSAGES, 404, () => `/public/v1/conversations/${G().conversations.c1}/messages`),
  call(SEND, 201, () => `/public/v1/conversations/${A().conversations.c1}/messages`, {
    body: () => ({ content: "Hello" }),
  }),
  call(SEND, 404, () => `/public/v1/conversations/${G().conversations.c1}/messages`, {
    body: () => ({ content: "Hello" }),
  }),

  call(APPOINTMENTS, 200, () => "/public/v1/appointments", {
    query: () => ({
      userId: A().users.ana!,
      customerId: A().contacts.bea!,
      status: "scheduled",
      from: "2030-03-01T00:00:00Z",
      to: "2030-04-01T00:00:00Z",
    }),
  }),
  call(APPOINTMENTS, 200, () => "/public/v1/appointments", {
    query: () => ({ userId: G().users.ana!, leadId: G().leads.l1! }),
  }),
  call(APPOINTMENT_CREATE, 201, () => "/public/v1/appointments", {
    body: () => ({
      assignedUserId: A().users.ana,
      title: "Call",
      appointmentType: "call",
      startsAt: "2030-03-05T10:00:00Z",
      endsAt: "2030-03-05T10:30:00Z",
      customerId: A().contacts.bea,
      conversationId: A().conversations.c1,
      leadId: A().leads.l1,
    }),
  }),
  call(APPOINTMENT_CREATE, 409, () => "/public/v1/appointments", {
    body: () => ({
      assignedUserId: A().users.ana,
      title: "Clash",
      appointmentType: "call",
      startsAt: "2030-03-04T10:30:00Z",
      endsAt: "2030-03-04T11:30:00Z",
    }),
  }),
  call(APPOINTMENT_CREATE, 404, () => "/public/v1/appointments", {
    body: () => ({
      assignedUserId: G().users.ana,
      title: "X",
      appointmentType: "call",
      startsAt: "2030-03-06T10:00:00Z",
      endsAt: "2030-03-06T10:30:00Z",
    }),
  }),
  call(APPOINTMENT_CREATE, 404, () => "/public/v1/appointments", {
    body: () => ({
      assignedUserId: A().users.ana,
      title: "X",
      appointmentType: "call",
      startsAt: "2030-03-06T10:00:00Z",
      endsAt: "2030-03-06T10:30:00Z",
      leadId: G().leads.l1,
    }),
  }),
  call(APPOINTMENT_PATCH, 200, () => `/public/v1/appointments/${A().appointments.a1}`, {
    body: () => ({ startsAt: "2030-03-04T12:00:00Z", endsAt: "2030-03-04T13:00:00Z", notes: "moved" }),
  }),
  call(APPOINTMENT_PATCH, 404, () => `/public/v1/appointments/${G().appointments.a1}`, {
    body: () => ({ notes: "x" }),
  }),
  call(APPOINTMENT_PATCH, 200, () => `/public/v1/appointments/${A().appointments.a1}`, {
    body: () => ({ notes: "matched" }),
    headers: { "If-Match": "*" },
  }),
  call(APPOINTMENT_PATCH, 412, () => `/public/v1/appointments/${A().appointments.a1}`, {
    body: () => ({ notes: "stale" }),
    headers: { "If-Match": '"999999"' },
  }),
  call(APPOINTMENT_GET, 200, () => `/public/v1/appointments/${A().appointments.a1}`),
  call(APPOINTMENT_GET, 304, () => `/public/v1/appointments/${A().appointments.a1}`, {
    headers: { "If-None-Match": "*" },
  }),
  call(APPOINTMENT_GET, 404, () => `/public/v1/appointments/${G().appointments.a1}`),
  call(AVAILABILITY, 200, () => "/public/v1/availability", { query: () => ({ from: "2030-03-04", to: "2030-03-05" }) }),
  call(AVAILABILITY, 200, () => "/public/v1/availability", {
    query: () => ({ from: "2030-03-04", to: "2030-03-05", userId: A().users.ana! }),
  }),
  call(AVAILABILITY, 404, () => "/public/v1/availability", {
    query: () => ({ from: "2030-03-04", to: "2030-03-05", userId: G().users.ana! }),
  }),

  call(TICKETS, 200, () => "/public/v1/tickets", {
    query: () => ({ status: "open", assignedTo: A().users.ana!, customerId: A().contacts.bea! }),
  }),
  call(TICKETS, 200, () => "/public/v1/tickets", { query: () => ({ assignedTo: G().users.ana! }) }),
  call(TICKET_CREATE, 201, () => "/public/v1/tickets", {
    body: () => ({
      subject: "Help",
      customerId: A().contacts.bea,
      leadId: A().leads.l1,
      conversationId: A().conversations.c1,
      assignedTo: A().users.ana,
      comment: "First",
    }),
  }),
  call(TICKET_CREATE, 404, () => "/public/v1/tickets", {
    body: () => ({ subject: "Help", customerId: G().contacts.bea }),
  }),
  call(TICKET_CREATE, 404, () => "/public/v1/tickets", {
    body: () => ({ subject: "Help", customerId: A().contacts.bea, assignedTo: G().users.ana }),
  }),
  call(TICKET_PATCH, 200, () => `/public/v1/tickets/${A().tickets.t1}`, {
    body: () => ({ status: "pending", assignedTo: A().users.ana }),
  }),
  call(TICKET_PATCH, 404, () => `/public/v1/tickets/${G().tickets.t1}`, { body: () => ({ status: "pending" }) }),
  call(TICKET_PATCH, 200, () => `/public/v1/tickets/${A().tickets.t1}`, {
    body: () => ({ status: "open" }),
    headers: { "If-Match": "*" },
  }),
  call(TICKET_PATCH, 412, () => `/public/v1/tickets/${A().tickets.t1}`, {
    body: () => ({ status: "closed" }),
    headers: { "If-Match": '"999999"' },
  }),
  call(TICKETS, 200, () => "/public/v1/tickets", { query: () => ({ externalId: "ext-t1" }) }),
  call(TICKET_GET, 200, () => `/public/v1/tickets/${A().tickets.t1}`),
  call(TICKET_GET, 304, () => `/public/v1/tickets/${A().tickets.t1}`, { headers: { "If-None-Match": "*" } }),
  call(TICKET_GET, 404, () => `/public/v1/tickets/${G().tickets.t1}`),
  call(TICKET_PUT, 201, () => "/public/v1/tickets/by-external-id/ext-t-new", {
    body: () => ({ subject: "Synced", customerId: A().contacts.bea, leadId: A().leads.l1, assignedTo: A().users.ana }),
  }),
  call(TICKET_PUT, 200, () => "/public/v1/tickets/by-external-id/ext-t1", {
    body: () => ({ subject: "Broken link (synced)", customerId: A().contacts.bea, assignedTo: null }),
  }),
  call(TICKET_PUT, 200, () => "/public/v1/tickets/by-external-id/ext-t1", {
    body: () => ({ subject: "Broken link", customerId: A().contacts.bea, assignedTo: A().users.ana }),
    headers: { "Idempotency-Key": `tp-${replayKey}` },
  }),
  call(TICKET_PUT, 404, () => "/public/v1/tickets/by-external-id/ext-t-x", {
    body: () => ({ subject: "X", customerId: G().contacts.bea }),
  }),
  call(TICKET_PUT, 404, () => "/public/v1/tickets/by-external-id/ext-t1", {
    body: () => ({ subject: "X", customerId: A().contacts.bea, assignedTo: G().users.ana }),
  }),
  call(TICKET_BATCH, 200, () => "/public/v1/tickets/batch/upsert", {
    body: () => ({
      items: [
        { externalId: "ext-t1", subject: "Broken link (batch)", customerId: A().contacts.bea },
        { externalId: "ext-t-new", subject: "Synced", customerId: A().contacts.bea },
        {
          externalId: "ext-t-b",
          subject: "From the helpdesk",
          leadId: A().leads.l1,
          conversationId: A().conversations.c1,
        },
        { externalId: "ext-t-c", subject: "X", customerId: G().contacts.bea },
        { externalId: "ext-t-d", subject: "X", customerId: A().contacts.bea, assignedTo: G().users.ana },
      ],
    }),
    results: ["updated", "unchanged", "created", "NOT_FOUND", "NOT_FOUND"],
  }),
  call(COMMENT, 201, () => `/public/v1/tickets/${A().tickets.t1}/comments`, { body: () => ({ body: "Done" }) }),
  // A comment's Idempotency-Key record rebuilds the thread on replay: that read is scoped too.
  call(COMMENT, 201, () => `/public/v1/tickets/${A().tickets.t1}/comments`, {
    body: () => ({ body: "Again" }),
    headers: { "Idempotency-Key": `c-${replayKey}` },
  }),
  call(COMMENT, 201, () => `/public/v1/tickets/${A().tickets.t1}/comments`, {
    body: () => ({ body: "Again" }),
    headers: { "Idempotency-Key": `c-${replayKey}` },
  }),
  call(COMMENT, 404, () => `/public/v1/tickets/${G().tickets.t1}/comments`, { body: () => ({ body: "Done" }) }),
  // If-Match on a comment: the ticket's row read and locked, then the comment; a stale one is 412; a foreign ticket 404.
  call(COMMENT, 201, () => `/public/v1/tickets/${A().tickets.t1}/comments`, {
    body: () => ({ body: "Matched" }),
    headers: { "If-Match": "*" },
  }),
  call(COMMENT, 412, () => `/public/v1/tickets/${A().tickets.t1}/comments`, {
    body: () => ({ body: "Stale" }),
    headers: { "If-Match": '"999999"' },
  }),
  call(COMMENT, 404, () => `/public/v1/tickets/${G().tickets.t1}/comments`, {
    body: () => ({ body: "Done" }),
    headers: { "If-Match": "*" },
  }),

  // The reference lists: the tenant's rows only, a page past the first, a filter by another tenant's channel.
  call(STAGES, 200, () => "/public/v1/stages"),
  call(STAGES, 200, () => "/public/v1/stages", { query: () => ({ offset: "1", limit: "1" }) }),
  call(USERS, 200, () => "/public/v1/users"),
  call(CHANNELS, 200, () => "/public/v1/channels"),
  call(TEMPLATES, 200, () => "/public/v1/templates", { query: () => ({ channelId: A().channels.wa! }) }),
  call(TEMPLATES, 200, () => "/public/v1/templates", { query: () => ({ channelId: G().channels.wa!, limit: "5" }) }),

  // Last: the writes above left unplaced changes, so the poll runs its sequencer step too.
  call(CHANGES, 200, () => "/public/v1/changes"),
  call(CHANGES, 200, () => "/public/v1/changes", { query: () => ({ types: "lead,ticket", limit: "2" }) }),
];

/** Runs one call with the statement log on; returns what was sent to the database. */
async function run(c: Call): Promise<{ status: number; body: any; statements: Statement[] }> {
  recorded.length = 0;
  recording = true;
  try {
    const res = await app.request(c.op.split(" ")[0]!, c.path(), {
      key: c.key ? c.key() : A().apiKeys.full!.key,
      body: c.body?.(),
      query: c.query?.(),
      headers: c.headers,
    });
    // A send finishes after the response (the provider call): wait until the log is quiet.
    for (let n = -1; n !== recorded.length; ) {
      n = recorded.length;
      await new Promise((r) => setTimeout(r, 50));
    }
    return { status: res.status, body: res.body, statements: [...recorded] };
  } finally {
    recording = false;
  }
}

describe("every statement of the API is scoped to the caller's tenant", () => {
  it("covers every documented operation", () => {
    expect([...new Set(calls.map((c) => c.op))].sort()).toEqual([...new Set(documentedOperations())].sort());
  });

  for (const [n, c] of calls.entries()) {
    it(`${c.op} → ${c.status} (#${n})`, async () => {
      const { status, body, statements } = await run(c);
      expect(status).toBe(c.status);
      if (c.results)
        expect(
          body.results.map((r: any) => r.error?.error ?? r.status),
          JSON.stringify(body),
        ).toEqual(c.results);
      const tenant = `=${A().id}`;
      const problems: string[] = [];
      let distributed = 0;
      let scoped = 0;
      for (const s of statements) {
        // DATABASE_ROUTING=workers: the coordinator's catalog read of where the caller's tenant lives.
        if (isPlacementLookup(s.sql)) {
          if (s.params[0] !== A().id) problems.push(`placement lookup of another tenant (${String(s.params[0])})`);
          continue;
        }
        // No statement names a shard (Citus's supported interfaces only: docs/scaling.md §6).
        if (/"[A-Z][A-Za-z0-9]*_[0-9]{6,}"/.test(s.sql)) problems.push(`a shard named — in: ${s.sql.slice(0, 160)}`);
        const a = analyzeSql(s.sql, s.params, model);
        problems.push(...a.problems);
        for (const v of a.tenants)
          if (v.startsWith("=") && v !== tenant)
            problems.push(`pinned to another tenant (${v}) — in: ${s.sql.slice(0, 160)}`);
        if (a.tables.size && !isKeyLookup(s.sql)) scoped++;
        if ([...a.tables].some((t) => model.roles.get(t) === "distributed")) distributed++;
      }
      expect(problems).toEqual([]);
      // The log is not empty: the key lookup, and for every operation past /me its own tenant-scoped reads.
      expect(statements.some((s) => isKeyLookup(s.sql))).toBe(true);
      if (c.op !== ME) expect(scoped, "tenant-scoped statements past the key lookup").toBeGreaterThan(0);
      checked.requests++;
      checked.statements += statements.length;
      checked.distributed += distributed;
    });
  }

  it("totals", () => {
    // Printed for the record: requests, statements, statements on distributed tables.
    console.log(
      `tenant-queries: ${checked.requests} requests, ${checked.statements} statements, ${checked.distributed} on distributed tables`,
    );
    expect(checked.requests).toBe(calls.length);
  });
});

describe("the statement analysis itself", () => {
  const t1 = "11111111-1111-4111-8111-111111111111";
  const t2 = "22222222-2222-4222-8222-222222222222";
  const id = "33333333-3333-4333-8333-333333333333";
  const problemsOf = (sql: string, params: unknown[] = [t1, id]) => analyzeSql(sql, params, model).problems;

  it("flags lookups, joins and writes without the tenant", () => {
    const bad: [string, unknown[]?][] = [
      [`SELECT * FROM "Lead" WHERE "id" = $1`, [id]],
      [`SELECT * FROM "Lead" l JOIN "Contact" c ON c."id" = l."customerId" WHERE l."tenantId" = $1`],
      [`SELECT * FROM "Lead" l LEFT JOIN "Contact" c ON c."tenantId" = l."tenantId" WHERE c."tenantId" = $1`],
      [`SELECT * FROM "Lead" WHERE "tenantId" = $1 OR "id" = $2`],
      [`SELECT * FROM "Lead" WHERE "tenantId" = "customerId"`, []],
      [
        `SELECT (SELECT count(*) FROM "Message" m WHERE m."conversationId" = c."id") FROM "Conversation" c WHERE c."tenantId" = $1`,
      ],
      [
        `SELECT * FROM "Contact" WHERE "tenantId" = $1 AND "id" IN (SELECT "contactId" FROM "ContactListMember" WHERE "listId" = $2)`,
      ],
      [`UPDATE "Lead" SET "tenantId" = $1 WHERE "tenantId" = $2 AND "id" = $3`, [t2, t1, id]],
      [`UPDATE "Ticket" SET "status" = 'open' WHERE "id" = $1`, [id]],
      [`INSERT INTO "Lead" ("id", "customerName") VALUES ($1, 'x')`, [id]],
      [`INSERT INTO "Lead" ("tenantId", "customerName") SELECT "tenantId", 'x' FROM "Contact" WHERE "id" = $1`, [id]],
      [`DELETE FROM "IdempotencyRecord" WHERE "expiresAt" <= now()`, []],
      [`SELECT * FROM "User" WHERE "email" = $1`, ["a@b.c"]],
      [`SELECT * FROM "NoSuchTable" WHERE "tenantId" = $1`],
      [`SELEC nothing`, []],
    ];
    for (const [sql, params] of bad) expect(problemsOf(sql, params), sql).not.toEqual([]);
  });

  it("accepts pinned tenants in Prisma's and the service's shapes, and reports the tenants pinned", () => {
    const good: [string, unknown[]?][] = [
      [
        `SELECT "public"."Lead"."id" FROM "public"."Lead" WHERE ("public"."Lead"."id" = $2 AND "public"."Lead"."tenantId" = $1) LIMIT $3`,
        [t1, id, 1],
      ],
      [`SELECT * FROM "TicketComment" WHERE ("tenantId" IN ($1) AND "ticketId" IN ($2))`],
      [
        `SELECT m."id" FROM "Message" m LEFT JOIN "Conversation" AS "j0" ON ("j0"."tenantId", "j0"."id") = (m."tenantId", m."conversationId") WHERE "j0"."tenantId" = $1 AND m."tenantId" = $1`,
      ],
      [
        `SELECT * FROM "Message" WHERE ("tenantId", "conversationId") IN (SELECT "tenantId", "id" FROM "Conversation" WHERE "tenantId" = $1::uuid AND "channelId" = $2)`,
      ],
      [
        `SELECT * FROM "Contact" c WHERE c."tenantId" = $1 AND EXISTS (SELECT 1 FROM "ContactListMember" m WHERE m."tenantId" = c."tenantId" AND m."contactId" = c."id")`,
      ],
      [
        `SELECT * FROM "Lead" l JOIN "PipelineStage" s ON s."tenantId" = l."tenantId" AND s."id" = l."stageId" WHERE l."tenantId" = ANY($1)`,
        [[t1], id],
      ],
      [
        `WITH x AS (SELECT "tenantId", "id" FROM "Lead" WHERE "tenantId" = $1) SELECT * FROM x JOIN "Ticket" t ON t."tenantId" = x."tenantId" AND t."leadId" = x."id"`,
      ],
      [
        `INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1, 'x', $2) ON CONFLICT DO NOTHING RETURNING "id"`,
      ],
      [`UPDATE "IdempotencyRecord" SET "statusCode" = 201 WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`],
      [`DELETE FROM "Customer" WHERE ("tenantId" = $1 AND "id" = $2)`],
      [`SELECT pg_advisory_xact_lock(hashtext('appointments'), hashtext($1))`, ["x"]],
      [`BEGIN`, []],
    ];
    for (const [sql, params] of good) expect(problemsOf(sql, params), sql).toEqual([]);
    expect(
      [...analyzeSql(`SELECT * FROM "Lead" WHERE "tenantId" IN ($1, $2)`, [t1, t2], model).tenants].sort(),
    ).toEqual([`=${t1}`, `=${t2}`]);
  });

  it("the key lookup is pinned by the key's globally unique prefix, and the joined rows follow its tenant", async () => {
    const a = analyzeSql(LOOKUP, ["crm_abc"], model);
    expect(a.problems).toEqual([]);
    expect([...a.tenants]).toEqual(["@ApiKey.prefix=crm_abc"]);
    expect([...a.tables].sort()).toEqual(["ApiKey", "Tenant", "User"]);
    // Joining the owner without its tenant would not be.
    expect(analyzeSql(LOOKUP.replace(`u."tenantId" = k."tenantId" AND `, ""), ["crm_abc"], model).problems).not.toEqual(
      [],
    );
    // What requests send is the function; its body is exactly this query (with p_prefix for $1).
    const [fn] = await app.db.prisma.$queryRawUnsafe<{ src: string }[]>(
      `SELECT prosrc AS src FROM pg_proc WHERE proname = 'ApiKey_lookup'`,
    );
    const body = /RETURN QUERY\s+([\s\S]*?);\s*END/.exec(fn!.src)?.[1];
    const squash = (q: string) => q.replace(/\s+/g, " ").trim();
    expect(squash(body ?? "")).toBe(squash(LOOKUP.replace("$1", "p_prefix")));
  });
});
