// Exact list totals: every list's `total` equals count(*) of the rows its filters select,
// in the same snapshot, while the counters behind it are kept by the "ListCounter_apply" trigger; deep
// offsets (walked through the day buckets) return exactly what a plain OFFSET returns.
// @topology pooler
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Prisma } from "../../generated/prisma/client.js";
import type { LoadResult } from "../../server/admin/fixture.js";
import { DEEP_OFFSET } from "../../routers/_lib/totals.js";
import { randomUuid, startApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { lockWaits } from "../helpers/cluster.js";

let app: Awaited<ReturnType<typeof startApp>>;
let ids: LoadResult;
let A: string; // the busy tenant
let B: string; // a second tenant: its counters never move with A's writes
let key: string;
let keyB: string;

// Test data and ground truth without the pool's statement_timeout (the service's 5 s, meant for API
// requests): bulk writes through the counters' triggers and counts over every row take longer on
// Citus on a busy machine.
const untimedTx = <T>(fn: (tx: Prisma.TransactionClient) => Promise<T>) =>
  app.db.prisma.$transaction(async (tx) => {
    await tx.$executeRawUnsafe("SET LOCAL statement_timeout = 0");
    return fn(tx);
  });
const rows = <R = any>(q: string, ...params: unknown[]) => untimedTx((tx) => tx.$queryRawUnsafe<R[]>(q, ...params));
const one = async <R = any>(q: string, ...params: unknown[]) => (await rows<R>(q, ...params))[0]!;
const exec = (q: string, ...params: unknown[]) => untimedTx((tx) => tx.$executeRawUnsafe(q, ...params));
const get = (path: string, query: Record<string, string | number | undefined>, k = key) =>
  app.request("GET", `/public/v1/${path}`, { key: k, query });

const contacts = (ref: string) =>
  Array.from({ length: 14 }, (_, i) => ({
    ref: `c${i}`,
    fullName: `${["Ana", "Bea", "Carl", "Dora"][i % 4]} ${ref} ${i}`,
    phone: `+346100${ref === "acme" ? "1" : "2"}${String(i).padStart(4, "0")}`,
    email: `c${i}@${ref}.test`,
    deleted: i % 7 === 6,
    lists: i % 2 === 0 ? ["vip", "news"] : i % 3 === 0 ? ["news"] : [],
    createdAt: new Date(Date.UTC(2025, i % 12, 1 + i, 10)).toISOString(),
  }));

function busyTenant(ref: string) {
  return tenant(ref, {
    rateLimit: { perMinute: 1_000_000, perDay: 10_000_000 },
    contactLists: [{ ref: "vip" }, { ref: "news" }],
    contacts: contacts(ref),
    conversations: [0, 1, 2, 3, 4].map((i) => ({
      ref: `v${i}`,
      channel: i % 2 ? "wa" : "site",
      status: (["active", "escalated", "resolved"] as const)[i % 3],
      identity: { externalId: `${ref}-ext-${i}`, name: `Person ${i}`, contact: i < 4 ? `c${[0, 2, 4, 8][i]}` : null },
      messages: [
        { role: "user" as const, content: "Hi", createdAt: new Date(Date.UTC(2026, 10, 1 + i, 9)).toISOString() },
      ],
    })),
    leads: [0, 1, 2, 3, 4, 5].map((i) => ({
      ref: `l${i}`,
      customerName: `Lead ${i}`,
      contact: i < 4 ? `c${i}` : null,
      createdAt: new Date(Date.UTC(2026, 9, 28 + i, 23, 59, 59, 999)).toISOString(),
    })),
    appointments: [0, 1, 2, 3].map((i) => ({
      ref: `a${i}`,
      assignedTo: "ana",
      title: `Visit ${i}`,
      appointmentType: "visit",
      startsAt: new Date(Date.UTC(2026, 11, 1 + i, 10)).toISOString(),
      endsAt: new Date(Date.UTC(2026, 11, 1 + i, 11)).toISOString(),
      status: (["scheduled", "cancelled", "completed", "no_show"] as const)[i],
      contact: `c${[0, 2, 4, 8][i]}`,
      lead: i % 2 ? "l1" : null,
    })),
    tickets: [0, 1, 2, 3, 4].map((i) => ({
      ref: `t${i}`,
      subject: `Ticket ${i}`,
      status: (["open", "pending", "resolved", "closed"] as const)[i % 4],
      createdBy: "ana",
      assignedTo: i % 2 ? "ana" : null,
      contact: `c${[0, 2, 4, 8, 10][i]}`,
      createdAt: new Date(Date.UTC(2026, 10, 10 + i, 9)).toISOString(),
      comments:
        i === 0
          ? [
              { author: "ana", body: "First" },
              { author: "ana", body: "Second" },
            ]
          : [],
    })),
  });
}

/** Bulk rows for a tenant in plain SQL (statement triggers over whole INSERT … SELECTs). */
async function bulk(
  t: string,
  n: { leads: number; tickets: number; appointments: number; contacts: number; conversations: number },
  seed: number,
) {
  const { stage } = await one<{ stage: string }>(
    `SELECT "id"::text AS stage FROM "PipelineStage" WHERE "tenantId" = $1::uuid LIMIT 1`,
    t,
  );
  const { ana } = await one<{ ana: string }>(
    `SELECT "id"::text AS ana FROM "User" WHERE "tenantId" = $1::uuid ORDER BY "name" LIMIT 1`,
    t,
  );
  await exec(
    `INSERT INTO "Contact" ("tenantId", "fullName", "phone", "email", "deletedAt", "createdAt")
     SELECT $1::uuid, 'Bulk ' || i, '+3462' || lpad(($2 * 100000 + i)::text, 7, '0'),
       'bulk' || i || '@s' || $2 || '.test',
            CASE WHEN i % 11 = 0 THEN now() END,
            timestamptz '2024-02-27 00:00:00+00' + (i * 7919 % 1000) * interval '19 hours 13 minutes'
       FROM generate_series(1, $3::int) i`,
    t,
    seed,
    n.contacts,
  );
  await exec(
    `INSERT INTO "ContactListMember" ("tenantId", "listId", "contactId")
     SELECT $1::uuid, l."id", c."id" FROM "Contact" c JOIN "ContactList" l ON l."tenantId" = c."tenantId"
      WHERE c."tenantId" = $1::uuid AND c."fullName" LIKE 'Bulk %'
        AND (hashtext(c."id"::text || l."id"::text) % 3 = 0)`,
    t,
  );
  await exec(
    `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId", "createdAt")
     SELECT $1::uuid, 'Bulk lead ' || i, $2::uuid,
            (SELECT c."id" FROM "Contact" c WHERE c."tenantId" = $1::uuid ORDER BY c."id" OFFSET (i % 9) LIMIT 1),
            CASE WHEN i % 13 = 0 THEN timestamptz '2025-12-31 23:59:59.999+00'   -- ties across a year boundary
                 WHEN i % 17 = 0 THEN timestamptz '2026-01-01 00:00:00+00'
                 ELSE timestamptz '2023-11-30 00:00:00+00' + (i * 7919 % 1500) * interval '17 hours 7 minutes' END
       FROM generate_series(1, $3::int) i`,
    t,
    stage,
    n.leads,
  );
  await exec(
    `INSERT INTO "Ticket" ("tenantId", "subject", "status", "createdById", "assignedToId", "customerId", "createdAt")
     SELECT $1::uuid, 'Bulk ticket ' || i, (ARRAY['open','pending','resolved','closed']::"TicketStatus"[])[1 + i % 4],
       $2::uuid,
            CASE WHEN i % 3 = 0 THEN $2::uuid END,
            (SELECT c."id" FROM "Contact" c WHERE c."tenantId" = $1::uuid ORDER BY c."id" OFFSET (i % 5) LIMIT 1),
            timestamptz '2024-06-01 00:00:00+00' + (i * 104729 % 997) * interval '13 hours 1 minute'
       FROM generate_series(1, $3::int) i`,
    t,
    ana,
    n.tickets,
  );
  await exec(
    `INSERT INTO "Appointment" ("tenantId", "assignedUserId", "title", "appointmentType", "startsAt", "endsAt",
     "status", "customerId")
     SELECT $1::uuid, $2::uuid, 'Bulk visit ' || i, 'visit', s, s + interval '45 minutes',
            (ARRAY['scheduled','cancelled','completed','no_show']::"AppointmentStatus"[])[1 + i % 4],
            CASE WHEN i % 2 = 0 THEN (SELECT c."id" FROM "Contact" c WHERE c."tenantId" = $1::uuid ORDER BY c."id"
              OFFSET (i % 4) LIMIT 1) END
       FROM (SELECT i, timestamptz '2024-12-30 08:00:00+00' + i * interval '7 hours' AS s
         FROM generate_series(1, $3::int) i) x`,
    t,
    ana,
    n.appointments,
  );
  await exec(
    `INSERT INTO "Customer" ("tenantId", "name", "contactId")
     SELECT $1::uuid, 'Bulk customer ' || i, (SELECT c."id" FROM "Contact" c WHERE c."tenantId" = $1::uuid
       ORDER BY c."id" OFFSET i LIMIT 1)
       FROM generate_series(0, 5) i`,
    t,
  );
  await exec(
    `INSERT INTO "Conversation" ("tenantId", "channelId", "customerId", "status", "lastMessageAt", "createdAt")
     SELECT $1::uuid,
            (SELECT ch."id" FROM "Channel" ch WHERE ch."tenantId" = $1::uuid ORDER BY ch."id" OFFSET (i % 2) LIMIT 1),
            (SELECT cu."id" FROM "Customer" cu WHERE cu."tenantId" = $1::uuid ORDER BY cu."id" OFFSET (i % 6) LIMIT 1),
            (ARRAY['active','escalated','resolved']::"ConversationStatus"[])[1 + i % 3],
            timestamptz '2025-03-01 00:00:00+00' + (i * 7919 % 700) * interval '11 hours 3 minutes', now()
       FROM generate_series(1, $2::int) i`,
    t,
    n.conversations,
  );
}

// ---- ground truth: count(*) over the rows, written independently of the counters ------------------

interface Probe {
  path: string;
  query: Record<string, string>;
  truth: string;
  params: unknown[];
}

/** Every list with no filter, each single filter value in use (and an unknown one), and combinations. */
async function probes(t: string): Promise<Probe[]> {
  const col = async (q: string) => (await rows<{ v: string }>(q, t)).map((r) => r.v);
  const unknown = randomUuid();
  const leadCustomers = [
    ...(await col(
      `SELECT DISTINCT "customerId"::text AS v FROM "Lead" WHERE "tenantId" = $1::uuid AND "customerId" IS NOT NULL`,
    )),
    unknown,
  ];
  const lists = [...(await col(`SELECT "id"::text AS v FROM "ContactList" WHERE "tenantId" = $1::uuid`)), unknown];
  const users = [...(await col(`SELECT "id"::text AS v FROM "User" WHERE "tenantId" = $1::uuid`)), unknown];
  const contactIds = [
    ...(await col(`SELECT "id"::text AS v FROM "Contact" WHERE "tenantId" = $1::uuid ORDER BY "id" LIMIT 6`)),
    unknown,
  ];
  const apptLeads = [
    ...(await col(
      `SELECT DISTINCT "leadId"::text AS v FROM "Appointment" WHERE "tenantId" = $1::uuid AND "leadId" IS NOT NULL`,
    )),
    unknown,
  ];

  const out: Probe[] = [];
  const leads = (q: Record<string, string>) =>
    out.push({
      path: "leads",
      query: q,
      truth: `SELECT count(*)::int AS n FROM "Lead" WHERE "tenantId" = $1::uuid AND ($2::uuid IS NULL OR "customerId" = $2::uuid)
                AND ($3::timestamptz IS NULL OR "createdAt" >= $3::timestamptz) AND ($4::timestamptz IS NULL OR "createdAt" < $4::timestamptz)`,
      params: [t, q.customerId ?? null, q.dateFrom ?? null, q.dateTo ?? null],
    });
  leads({});
  for (const c of leadCustomers) leads({ customerId: c });
  const ranges: [string | undefined, string | undefined][] = [
    ["2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00.001Z"],
    ["2024-02-10T13:00:00Z", "2024-02-11T01:00:00Z"],
    ["2024-02-10T13:00:00Z", "2024-05-03T07:30:00+02:00"],
    ["2023-12-15T00:00:00Z", "2026-02-02T12:00:00Z"],
    ["2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"],
    ["2026-10-29T23:59:59.999Z", undefined],
    [undefined, "2025-06-15T10:20:30.400Z"],
    ["1990-01-01T00:00:00Z", "2090-01-01T00:00:00Z"],
    ["2030-01-01T00:00:00Z", undefined],
    ["2025-05-05T05:05:05Z", "2025-05-05T05:05:05Z"],
  ];
  for (const [from, to] of ranges) leads({ ...(from ? { dateFrom: from } : {}), ...(to ? { dateTo: to } : {}) });
  leads({ customerId: leadCustomers[0]!, dateFrom: "2024-06-01T00:00:00Z" });

  const contactsProbe = (q: Record<string, string>) =>
    out.push({
      path: "contacts",
      query: q,
      truth: `SELECT count(*)::int AS n FROM "Contact" c WHERE c."tenantId" = $1::uuid AND c."deletedAt" IS NULL
                AND ($2::uuid IS NULL OR EXISTS (SELECT 1 FROM "ContactListMember" m WHERE m."tenantId" = $1::uuid AND m."listId" = $2::uuid AND m."contactId" = c."id"))
                AND ($3::text IS NULL OR strpos(lower(c."fullName"), lower($3)) > 0 OR strpos(lower(c."email"), lower($3)) > 0
                     OR strpos(lower(c."phone"), lower($3)) > 0)`,
      params: [t, q.listId ?? null, q.search ?? null],
    });
  contactsProbe({});
  for (const l of lists) contactsProbe({ listId: l });
  for (const s of ["bea", "bulk 1", "_", "zzz", "moved", "bulk"]) contactsProbe({ search: s });
  contactsProbe({ listId: lists[0]!, search: "a" });

  const conv = (q: Record<string, string>) =>
    out.push({
      path: "conversations",
      query: q,
      truth: `SELECT count(*)::int AS n FROM "Conversation" v
                JOIN "Channel" ch ON ch."tenantId" = v."tenantId" AND ch."id" = v."channelId"
                JOIN "Customer" cu ON cu."tenantId" = v."tenantId" AND cu."id" = v."customerId"
               WHERE v."tenantId" = $1::uuid AND ($2::text IS NULL OR v."status"::text = $2) AND ($3::text IS NULL OR ch."kind"::text = $3)
                 AND ($4::uuid IS NULL OR cu."contactId" = $4::uuid)`,
      params: [t, q.status ?? null, q.channel ?? null, q.customerId ?? null],
    });
  conv({});
  for (const s of ["active", "escalated", "resolved", "closed"]) conv({ status: s });
  for (const k of ["web", "whatsapp", "telegram", "fax"]) conv({ channel: k });
  for (const c of contactIds) conv({ customerId: c });
  conv({ status: "active", channel: "whatsapp" });

  const appts = (q: Record<string, string>) =>
    out.push({
      path: "appointments",
      query: q,
      truth: `SELECT count(*)::int AS n FROM "Appointment" WHERE "tenantId" = $1::uuid AND ($2::uuid IS NULL OR "assignedUserId" = $2::uuid)
                AND ($3::uuid IS NULL OR "customerId" = $3::uuid) AND ($4::uuid IS NULL OR "leadId" = $4::uuid)
                AND ($5::text IS NULL OR "status"::text = $5) AND ($6::timestamptz IS NULL OR "endsAt" > $6::timestamptz)
                AND ($7::timestamptz IS NULL OR "startsAt" < $7::timestamptz)`,
      params: [
        t,
        q.userId ?? null,
        q.customerId ?? null,
        q.leadId ?? null,
        q.status ?? null,
        q.from ?? null,
        q.to ?? null,
      ],
    });
  appts({});
  for (const u of users) appts({ userId: u });
  for (const c of contactIds) appts({ customerId: c });
  for (const l of apptLeads) appts({ leadId: l });
  for (const s of ["scheduled", "cancelled", "completed", "no_show"]) appts({ status: s });
  appts({ from: "2025-01-03T10:30:00Z", to: "2025-01-05T00:00:00Z" });
  appts({ from: "2025-01-03T10:30:00Z" });
  appts({ to: "2025-01-03T10:30:00Z" });
  appts({ from: "2025-01-03T10:30:00Z", to: "2025-01-03T10:30:00Z" });
  appts({ status: "scheduled", userId: users[0]!, from: "2025-01-01T00:00:00Z" });

  const tickets = (q: Record<string, string>) =>
    out.push({
      path: "tickets",
      query: q,
      truth: `SELECT count(*)::int AS n FROM "Ticket" WHERE "tenantId" = $1::uuid AND ($2::text IS NULL OR "status"::text = $2)
                AND ($3::uuid IS NULL OR "assignedToId" = $3::uuid) AND ($4::uuid IS NULL OR "customerId" = $4::uuid)`,
      params: [t, q.status ?? null, q.assignedTo ?? null, q.customerId ?? null],
    });
  tickets({});
  for (const s of ["open", "pending", "resolved", "closed", "new"]) tickets({ status: s });
  for (const u of users) tickets({ assignedTo: u });
  for (const c of contactIds) tickets({ customerId: c });
  tickets({ status: "open", assignedTo: users[0]! });
  return out;
}

/** Every probe's HTTP total (and totalItems) equals its count(*). */
async function expectTotalsExact(t: string, k: string) {
  const problems: string[] = [];
  for (const p of await probes(t)) {
    const { n } = await one<{ n: number }>(p.truth, ...p.params);
    const res = await get(p.path, { ...p.query, limit: 1 }, k);
    if (res.status !== 200 || res.body.total !== n || res.body.pagination.totalItems !== n)
      problems.push(`${p.path} ${JSON.stringify(p.query)}: ${res.status} total ${res.body?.total}, count(*) ${n}`);
  }
  expect(problems).toEqual([]);
}

/**
 * ONE statement: every counter key of a tenant (summed over slots) against count(*) of the rows it
 * stands for — the unfiltered lists, each filter value and each UTC year/month/day bucket of the
 * order column. Returns the keys that disagree (none, in any snapshot).
 */
const MISMATCHES = `
  WITH truth AS (
    SELECT entity, dim, value, count(*) AS n FROM (
      SELECT 'Lead' AS entity, "customerId"::text AS f1, NULL::text AS f2, NULL::text AS f3, NULL::text AS f4, "createdAt" AS at
        FROM "Lead" WHERE "tenantId" = $1::uuid
      UNION ALL SELECT 'Contact', NULL, NULL, NULL, NULL, "createdAt" FROM "Contact" WHERE "tenantId" = $1::uuid AND "deletedAt" IS NULL
      UNION ALL SELECT 'Conversation', "status"::text, "channelId"::text, "customerId"::text, NULL, "lastMessageAt"
        FROM "Conversation" WHERE "tenantId" = $1::uuid
      UNION ALL SELECT 'Appointment', "status"::text, "assignedUserId"::text, "customerId"::text, "leadId"::text, "startsAt"
        FROM "Appointment" WHERE "tenantId" = $1::uuid
      UNION ALL SELECT 'Ticket', "status"::text, "assignedToId"::text, "customerId"::text, NULL, "createdAt"
        FROM "Ticket" WHERE "tenantId" = $1::uuid
    ) r, LATERAL (VALUES
      ('all', ''),
      ('y', to_char(r.at AT TIME ZONE 'UTC', 'YYYY')), ('m', to_char(r.at AT TIME ZONE 'UTC', 'YYYY-MM')),
      ('d', to_char(r.at AT TIME ZONE 'UTC', 'YYYY-MM-DD')),
      (CASE r.entity WHEN 'Lead' THEN 'customerId' WHEN 'Appointment' THEN 'status' WHEN 'Ticket' THEN 'status'
                     WHEN 'Conversation' THEN 'status' END, r.f1),
      (CASE r.entity WHEN 'Appointment' THEN 'userId' WHEN 'Ticket' THEN 'assignedTo' WHEN 'Conversation' THEN 'channelId' END, r.f2),
      (CASE r.entity WHEN 'Appointment' THEN 'customerId' WHEN 'Ticket' THEN 'customerId' WHEN 'Conversation' THEN 'customerId' END, r.f3),
      (CASE r.entity WHEN 'Appointment' THEN 'leadId' END, r.f4)
    ) k(dim, value)
    WHERE k.dim IS NOT NULL AND k.value IS NOT NULL
    GROUP BY 1, 2, 3
    UNION ALL
    SELECT 'Contact', 'listId', m."listId"::text, count(*) FROM "ContactListMember" m
      JOIN "Contact" c ON c."tenantId" = m."tenantId" AND c."id" = m."contactId" AND c."deletedAt" IS NULL
     WHERE m."tenantId" = $1::uuid GROUP BY 3
  ),
  counters AS (SELECT "entity" AS entity, "dim" AS dim, "value" AS value, sum("n") AS n FROM "ListCounter"
                WHERE "tenantId" = $1::uuid AND "dim" <> 'v' GROUP BY 1, 2, 3)
  SELECT entity, dim, value, coalesce(t.n, 0)::int AS rows, coalesce(c.n, 0)::int AS counted
    FROM truth t FULL JOIN counters c USING (entity, dim, value)
   WHERE coalesce(t.n, 0) <> coalesce(c.n, 0)`;

const mismatches = (t: string) =>
  rows<{ entity: string; dim: string; value: string; rows: number; counted: number }>(MISMATCHES, t);

beforeAll(async () => {
  app = await startApp();
  ids = await app.load(fixture(busyTenant("acme"), busyTenant("other")));
  A = ids.tenants.acme!.id;
  B = ids.tenants.other!.id;
  key = ids.tenants.acme!.apiKeys.full!.key;
  keyB = ids.tenants.other!.apiKeys.full!.key;
  await bulk(A, { leads: 900, tickets: 850, appointments: 850, contacts: 900, conversations: 700 }, 1);
  await bulk(B, { leads: 40, tickets: 20, appointments: 20, contacts: 20, conversations: 10 }, 2);
}, 120_000);
afterAll(() => app?.close());

describe("counters", () => {
  it("match count(*) of every key after fixture loads and bulk inserts (both tenants)", async () => {
    expect(await mismatches(A)).toEqual([]);
    expect(await mismatches(B)).toEqual([]);
    const { n } = await one<{ n: number }>(
      `SELECT count(*)::int AS n FROM "ListCounter" WHERE "tenantId" = $1::uuid AND "dim" = 'listId'`,
      A,
    );
    expect(n).toBeGreaterThan(0);
  });

  it("every list's total, for every filter value and combination, equals count(*) (HTTP)", async () => {
    await expectTotalsExact(A, key);
    await expectTotalsExact(B, keyB);
  });

  it("a page and its total come from one snapshot: items.length agrees with total on every list", async () => {
    for (const path of ["leads", "contacts", "conversations", "appointments", "tickets"]) {
      const first = await get(path, { limit: 200 });
      expect(first.status).toBe(200);
      expect(first.body.items.length).toBe(Math.min(200, first.body.total));
      const last = await get(path, { limit: 200, offset: first.body.total - 3 });
      expect(last.body.items.length).toBe(3);
      expect(last.body.pagination.hasNext).toBe(false);
    }
  });

  it("soft deletes, undeletes, status changes, re-links, moves across days and hard deletes move exactly their keys", async () => {
    const some = async (q: string, n = 3) => (await rows<{ id: string }>(`${q} LIMIT ${n}`, A)).map((r) => r.id);
    const [ana] = await some(`SELECT "id"::text AS id FROM "User" WHERE "tenantId" = $1::uuid AND "bookable"`, 1);
    // Through the API: ticket status and assignee, appointment status and a reschedule to another day.
    for (const id of await some(
      `SELECT "id"::text AS id FROM "Ticket" WHERE "tenantId" = $1::uuid AND "status" = 'open' ORDER BY "id"`,
    )) {
      expect(
        (await app.request("PATCH", `/public/v1/tickets/${id}`, { key, body: { status: "closed", assignedTo: ana } }))
          .status,
      ).toBe(200);
    }
    for (const id of await some(
      `SELECT "id"::text AS id FROM "Ticket" WHERE "tenantId" = $1::uuid AND "assignedToId" IS NOT NULL ORDER ` +
        `BY "id" DESC`,
    )) {
      expect(
        (await app.request("PATCH", `/public/v1/tickets/${id}`, { key, body: { assignedTo: null, status: "pending" } }))
          .status,
      ).toBe(200);
    }
    for (const id of await some(
      `SELECT "id"::text AS id FROM "Appointment" WHERE "tenantId" = $1::uuid AND "status" <> 'scheduled' ` +
        `ORDER BY "id"`,
    )) {
      expect(
        (await app.request("PATCH", `/public/v1/appointments/${id}`, { key, body: { status: "completed" } })).status,
      ).toBe(200);
    }
    const [moved] = await some(
      `SELECT "id"::text AS id FROM "Appointment" WHERE "tenantId" = $1::uuid AND "status" = 'cancelled' ORDER BY "id"`,
      1,
    );
    const res = await app.request("PATCH", `/public/v1/appointments/${moved}`, {
      key,
      body: { startsAt: "2031-02-03T23:30:00Z", endsAt: "2031-02-04T00:30:00Z" },
    });
    expect(res.status).toBe(200);
    // In SQL: what the API cannot do. Every statement pins the tenant, and moves a time in UTC
    // ((t AT TIME ZONE 'UTC' ± interval) AT TIME ZONE 'UTC': immutable, which Citus needs of an
    // expression of a column in an UPDATE; timestamptz ± interval is STABLE).
    await exec(
      `UPDATE "Contact" SET "deletedAt" = now() WHERE "tenantId" = $1::uuid AND "id" IN
                  (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "deletedAt" IS NULL ORDER BY "id"
                    LIMIT 5)`,
      A,
    );
    await exec(
      `UPDATE "Contact" SET "deletedAt" = NULL WHERE "tenantId" = $1::uuid AND "id" IN
                  (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "deletedAt" IS NOT NULL
                    ORDER BY "id" DESC LIMIT 4)`,
      A,
    );
    await exec(
      `UPDATE "Contact" SET "createdAt" = ("createdAt" AT TIME ZONE 'UTC' - interval '400 days') AT TIME ZONE 'UTC'
       WHERE "tenantId" = $1::uuid AND "fullName" LIKE 'Bulk 1%'`,
      A,
    );
    await exec(
      `UPDATE "Lead" SET "customerId" = (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid ORDER BY "id" DESC
       LIMIT 1)
                 WHERE "tenantId" = $1::uuid AND "customerName" LIKE 'Bulk lead 1%'`,
      A,
    );
    await exec(
      `UPDATE "Lead" SET "customerId" = NULL WHERE "tenantId" = $1::uuid AND "customerName" LIKE 'Bulk lead 2%'`,
      A,
    );
    await exec(
      `UPDATE "Lead" SET "createdAt" = ("createdAt" AT TIME ZONE 'UTC' + interval '36 hours') AT TIME ZONE 'UTC'
       WHERE "tenantId" = $1::uuid AND "customerName" LIKE 'Bulk lead 3%'`,
      A,
    );
    await exec(
      `UPDATE "Conversation" SET "status" = 'resolved', "channelId" = (SELECT "id" FROM "Channel"
       WHERE "tenantId" = $1::uuid AND "kind" = 'web')
                 WHERE "tenantId" = $1::uuid AND "id" IN (SELECT "id" FROM "Conversation" WHERE "tenantId" = $1::uuid
                   ORDER BY "id" LIMIT 7)`,
      A,
    );
    await exec(
      `UPDATE "Conversation" SET "customerId" = (SELECT "id" FROM "Customer" WHERE "tenantId" = $1::uuid ORDER BY "id"
       LIMIT 1),
                       "lastMessageAt" = ("lastMessageAt" AT TIME ZONE 'UTC' + interval '3 days') AT TIME ZONE 'UTC'
                 WHERE "tenantId" = $1::uuid AND "id" IN (SELECT "id" FROM "Conversation" WHERE "tenantId" = $1::uuid
                   ORDER BY "id" DESC LIMIT 5)`,
      A,
    );
    // A customer re-linked to another contact moves its conversations under the contact filter.
    await exec(
      `UPDATE "Customer" SET "contactId" = (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid ORDER BY "id" DESC
       LIMIT 1)
                 WHERE "tenantId" = $1::uuid AND "id" = (SELECT "id" FROM "Customer" WHERE "tenantId" = $1::uuid
                   ORDER BY "id" LIMIT 1)`,
      A,
    );
    await exec(
      `UPDATE "ContactListMember" SET "listId" = (SELECT "id" FROM "ContactList" WHERE "tenantId" = $1::uuid
       ORDER BY "id" LIMIT 1)
                 WHERE "tenantId" = $1::uuid AND "contactId" IN (SELECT "contactId" FROM "ContactListMember"
                   WHERE "tenantId" = $1::uuid
                   GROUP BY 1 HAVING count(*) = 1 ORDER BY 1 LIMIT 3)`,
      A,
    );
    await exec(
      `DELETE FROM "ContactListMember" WHERE "tenantId" = $1::uuid AND "contactId" IN
                  (SELECT "contactId" FROM "ContactListMember" WHERE "tenantId" = $1::uuid ORDER BY "contactId" DESC
                    LIMIT 4)`,
      A,
    );
    // Hard deletes (a live contact with memberships: its lists lose it before the cascade removes them).
    await exec(
      `DELETE FROM "Lead" WHERE "tenantId" = $1::uuid AND "customerName" LIKE 'Bulk lead 4%'
                  AND NOT EXISTS (SELECT 1 FROM "Appointment" a WHERE a."tenantId" = $1::uuid
                    AND a."leadId" = "Lead"."id")
                  AND NOT EXISTS (SELECT 1 FROM "Ticket" t WHERE t."tenantId" = $1::uuid AND t."leadId" = "Lead"."id")`,
      A,
    );
    await exec(`DELETE FROM "Ticket" WHERE "tenantId" = $1::uuid AND "subject" LIKE 'Bulk ticket 5%'`, A);
    await exec(`DELETE FROM "Appointment" WHERE "tenantId" = $1::uuid AND "title" LIKE 'Bulk visit 6%'`, A);
    const { n: before } = await one<{ n: number }>(
      `SELECT count(*)::int AS n FROM "ContactListMember" WHERE "tenantId" = $1::uuid`,
      A,
    );
    const deleted = await exec(
      `DELETE FROM "Contact" WHERE "tenantId" = $1::uuid AND "id" IN (
                  SELECT c."id" FROM "Contact" c WHERE c."tenantId" = $1::uuid AND c."deletedAt" IS NULL
                     AND EXISTS (SELECT 1 FROM "ContactListMember" m WHERE m."tenantId" = $1::uuid
                       AND m."contactId" = c."id")
                     AND NOT EXISTS (SELECT 1 FROM "Lead" l WHERE l."tenantId" = $1::uuid AND l."customerId" = c."id")
                     AND NOT EXISTS (SELECT 1 FROM "Ticket" t WHERE t."tenantId" = $1::uuid AND t."customerId" = c."id")
                     AND NOT EXISTS (SELECT 1 FROM "Appointment" a WHERE a."tenantId" = $1::uuid
                       AND a."customerId" = c."id")
                     AND NOT EXISTS (SELECT 1 FROM "Customer" u WHERE u."tenantId" = $1::uuid
                       AND u."contactId" = c."id")
                   ORDER BY c."id" LIMIT 6)`,
      A,
    );
    expect(deleted).toBeGreaterThan(0);
    const { n: after } = await one<{ n: number }>(
      `SELECT count(*)::int AS n FROM "ContactListMember" WHERE "tenantId" = $1::uuid`,
      A,
    );
    expect(after).toBeLessThan(before);

    expect(await mismatches(A)).toEqual([]);
    expect(await mismatches(B)).toEqual([]);
    await expectTotalsExact(A, key);
  });

  it("a failed transaction takes its deltas with it (SQL rollback, a failing Prisma transaction, a refused API write)", async () => {
    const snapshot = () =>
      rows(
        `SELECT "entity", "dim", "value", sum("n")::int AS n FROM "ListCounter" WHERE "tenantId" = $1::uuid
                                  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
        A,
      );
    const before = await snapshot();
    await expect(
      untimedTx(async (tx) => {
        await tx.$executeRawUnsafe(
          `INSERT INTO "Lead" ("tenantId", "customerName", "stageId")
          SELECT "tenantId", 'Doomed', "id" FROM "PipelineStage" WHERE "tenantId" = $1::uuid LIMIT 1`,
          A,
        );
        await tx.$executeRawUnsafe(`UPDATE "Ticket" SET "status" = 'closed' WHERE "tenantId" = $1::uuid`, A);
        await tx.$executeRawUnsafe(`UPDATE "Contact" SET "deletedAt" = now() WHERE "tenantId" = $1::uuid`, A);
        await tx.$executeRawUnsafe(`DELETE FROM "ContactListMember" WHERE "tenantId" = $1::uuid`, A);
        await tx.$executeRawUnsafe(`UPDATE "Conversation" SET "status" = 'escalated' WHERE "tenantId" = $1::uuid`, A);
        throw new Error("rollback");
      }),
    ).rejects.toThrow("rollback");
    // A statement that fails midway: its second row violates the budget CHECK.
    await expect(
      exec(
        `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "budgetMin", "budgetMax")
            SELECT "tenantId", 'Doomed ' || i, "id", 10, CASE WHEN i = 2 THEN 1 ELSE 20 END
              FROM "PipelineStage", generate_series(1, 2) i WHERE "tenantId" = $1::uuid`,
        A,
      ),
    ).rejects.toThrow();
    // API writes refused by the database: an overlapping appointment (409) and a duplicate contact (409).
    const [appt] = await rows<{ startsAt: Date; endsAt: Date; userId: string }>(
      `SELECT "startsAt", "endsAt", "assignedUserId"::text AS "userId" FROM "Appointment" WHERE "tenantId" = $1::uuid
       AND "status" = 'scheduled' LIMIT 1`,
      A,
    );
    const overlap = await app.request("POST", "/public/v1/appointments", {
      key,
      body: {
        assignedUserId: appt!.userId,
        title: "Clash",
        appointmentType: "visit",
        startsAt: appt!.startsAt.toISOString(),
        endsAt: appt!.endsAt.toISOString(),
      },
    });
    expect(overlap.status).toBe(409);
    const [c] = await rows<{ phone: string }>(
      `SELECT "phone" FROM "Contact" WHERE "tenantId" = $1::uuid AND "phone" IS NOT NULL LIMIT 1`,
      A,
    );
    expect(
      (await app.request("POST", "/public/v1/contacts", { key, body: { phone: c!.phone, fullName: "Dup" } })).status,
    ).toBe(409);
    expect(await snapshot()).toEqual(before);
    expect(await mismatches(A)).toEqual([]);
  });
});

describe("the count cache of contact searches", () => {
  // A search's total is cached under the contacts' version (routers/_lib/totals.ts CachedTotal):
  // every write that changes which contacts a search matches must move the version in its transaction.
  const SEARCH_TRUTH = `SELECT count(*)::int AS n FROM "Contact" c WHERE c."tenantId" = $1::uuid AND c."deletedAt" IS NULL
      AND ($2::uuid IS NULL OR EXISTS (SELECT 1 FROM "ContactListMember" m WHERE m."tenantId" = $1::uuid AND m."listId" = $2::uuid AND m."contactId" = c."id"))
      AND (strpos(lower(c."fullName"), lower($3)) > 0 OR strpos(lower(c."email"), lower($3)) > 0 OR strpos(lower(c."phone"), lower($3)) > 0)`;
  const version = async (t = A) =>
    Number(
      (
        await one<{ v: string }>(
          `SELECT coalesce(sum("n"), 0)::text AS v FROM "ListCounter" WHERE "tenantId" = $1::uuid
           AND "entity" = 'Contact' AND "dim" = 'v'`,
          t,
        )
      ).v,
    );
  /** The API's total of a search (asked twice: the second answer can only come from the cache) against count(*). */
  async function expectSearch(search: string, listId?: string) {
    const { n } = await one<{ n: number }>(SEARCH_TRUTH, A, listId ?? null, search);
    for (let i = 0; i < 2; i++) {
      const res = await get("contacts", { search, listId, limit: 200 });
      expect(res.status).toBe(200);
      expect({ search, listId, total: res.body.total, items: res.body.items.length }).toEqual({
        search,
        listId,
        total: n,
        items: Math.min(n, 200),
      });
    }
    return n;
  }

  it("every kind of contact write moves the version, and the next search counts again: exact after each", async () => {
    const [vip] = (
      await rows<{ id: string }>(
        `SELECT "id"::text AS id FROM "ContactList" WHERE "tenantId" = $1::uuid ORDER BY "id" LIMIT 1`,
        A,
      )
    ).map((r) => r.id);
    const term = "Zebra";
    const warm = async () => {
      await expectSearch(term);
      await expectSearch(term, vip);
      await expectSearch("bulk 1");
      return version();
    };
    const steps: [string, () => Promise<unknown>][] = [
      [
        "POST /contacts (a match)",
        async () =>
          expect(
            (
              await app.request("POST", "/public/v1/contacts", {
                key,
                body: { fullName: "Zebra One", email: "zebra1@cache.test", phone: "+34611900001" },
              })
            ).status,
          ).toBe(201),
      ],
      [
        "PATCH fullName (a match → none)",
        async () => {
          const { id } = await one<{ id: string }>(
            `SELECT "id"::text AS id FROM "Contact" WHERE "tenantId" = $1::uuid AND "fullName" = 'Zebra One'`,
            A,
          );
          expect(
            (await app.request("PATCH", `/public/v1/contacts/${id}`, { key, body: { fullName: "Plain One" } })).status,
          ).toBe(200);
        },
      ],
      [
        "PATCH email (none → a match)",
        async () => {
          const { id } = await one<{ id: string }>(
            `SELECT "id"::text AS id FROM "Contact" WHERE "tenantId" = $1::uuid AND "fullName" = 'Plain One'`,
            A,
          );
          expect(
            (await app.request("PATCH", `/public/v1/contacts/${id}`, { key, body: { email: "zebra.mail@cache.test" } }))
              .status,
          ).toBe(200);
        },
      ],
      // One live bulk contact that is sure to exist: an earlier test hard-deletes contacts picked by
      // their (random) ids, which may take any one named contact.
      [
        "a phone change (SQL)",
        async () =>
          expect(
            await exec(
              `UPDATE "Contact" SET "phone" = '+34699' || right("phone", 6) WHERE "tenantId" = $1::uuid AND "id" =
            (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "fullName" LIKE 'Bulk %'
              AND "phone" LIKE '+3462%' ORDER BY "id" LIMIT 1)`,
              A,
            ),
          ).toBe(1),
      ],
      [
        "a membership added",
        () =>
          exec(
            `INSERT INTO "ContactListMember" ("tenantId", "listId", "contactId")
            SELECT $1::uuid, $2::uuid, "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "email" LIKE 'zebra%'
              ON CONFLICT DO NOTHING`,
            A,
            vip,
          ),
      ],
      [
        "a membership removed",
        () =>
          exec(
            `DELETE FROM "ContactListMember" WHERE "tenantId" = $1::uuid AND "listId" = $2::uuid
            AND "contactId" IN (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "email" LIKE 'zebra%')`,
            A,
            vip,
          ),
      ],
      [
        "a soft delete",
        () => exec(`UPDATE "Contact" SET "deletedAt" = now() WHERE "tenantId" = $1::uuid AND "email" LIKE 'zebra%'`, A),
      ],
      [
        "an undelete",
        () => exec(`UPDATE "Contact" SET "deletedAt" = NULL WHERE "tenantId" = $1::uuid AND "email" LIKE 'zebra%'`, A),
      ],
      [
        "a bulk rename of 10 matches",
        () =>
          exec(
            `UPDATE "Contact" SET "fullName" = 'Renamed ' || "id" WHERE "tenantId" = $1::uuid AND "id" IN
            (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "fullName" LIKE 'Bulk 1%'
              AND "deletedAt" IS NULL ORDER BY "id" LIMIT 10)`,
            A,
          ),
      ],
      ["a hard delete", () => exec(`DELETE FROM "Contact" WHERE "tenantId" = $1::uuid AND "email" LIKE 'zebra%'`, A)],
    ];
    let before = await warm();
    for (const [name, write] of steps) {
      await write();
      const after = version();
      expect(await after, name).toBeGreaterThan(before);
      before = await warm();
    }
    // Writes that change no match of any search leave the version (and the cache) alone: another
    // column of a contact, and a rolled-back contact write.
    await exec(
      `UPDATE "Contact" SET "marketingOptOut" = NOT "marketingOptOut" WHERE "tenantId" = $1::uuid
       AND "fullName" LIKE 'Bulk 2%'`,
      A,
    );
    await expect(
      app.db.prisma.$transaction(async (tx) => {
        await tx.$executeRawUnsafe(
          `UPDATE "Contact" SET "fullName" = 'Zebra Doomed' WHERE "tenantId" = $1::uuid AND "fullName" LIKE 'Bulk 3%'`,
          A,
        );
        throw new Error("rollback");
      }),
    ).rejects.toThrow("rollback");
    expect(await version()).toBe(before);
    expect(await warm()).toBe(before);
    // Another tenant's writes move only its own version.
    const otherBefore = await version(B);
    expect(
      (
        await app.request("POST", "/public/v1/contacts", {
          key: keyB,
          body: { fullName: "Zebra Other", phone: "+34611900002" },
        })
      ).status,
    ).toBe(201);
    expect(await version(B)).toBeGreaterThan(otherBefore);
    expect(await version()).toBe(before);
  });

  it("a cached count answers until the version moves: a write that bypasses the triggers (a bulk load) is counted after ListCounter_rebuild", async () => {
    const n = await expectSearch("bulk 2");
    // Triggers off for one transaction (session_replication_role): the rows change, the version does not.
    // On Citus the triggers fire on the workers, which get the transaction's SET LOCALs only with
    // citus.propagate_set_commands = 'local' (elsewhere an inert placeholder setting).
    await app.db.prisma.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`SET LOCAL citus.propagate_set_commands = 'local'`);
      await tx.$executeRawUnsafe(`SET LOCAL session_replication_role = replica`);
      await tx.$executeRawUnsafe(
        `UPDATE "Contact" SET "fullName" = 'Hidden ' || "id" WHERE "tenantId" = $1::uuid AND "id" IN
        (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "fullName" LIKE 'Bulk 2%' AND "deletedAt" IS NULL
          ORDER BY "id" LIMIT 3)`,
        A,
      );
    });
    // The total is the cached count (the page itself is read fresh): proof the count was not taken again.
    const stale = await get("contacts", { search: "bulk 2", limit: 200 });
    expect(stale.status).toBe(200);
    expect(stale.body.total).toBe(n);
    expect(stale.body.items.length).toBe(Math.min(200, n - 3));
    await one(`SELECT "ListCounter_rebuild"($1::uuid)`, A);
    expect(await expectSearch("bulk 2")).toBe(n - 3);
    expect(await mismatches(A)).toEqual([]);
  });
});

describe("contact search pages", () => {
  // A search's page is read in one of two forms (routers/contacts/list.ts searchCond): the ILIKE form
  // through the trigram index (all matches, then sorted), or a walk down "Contact_search_walk_idx"
  // testing each contact's generated "searchText" with strpos. Both must select the same rows.
  const TRUTH = `FROM "Contact" c WHERE c."tenantId" = $1::uuid AND c."deletedAt" IS NULL
      AND (strpos(lower(c."fullName"), lower($2)) > 0 OR strpos(lower(c."email"), lower($2)) > 0 OR strpos(lower(c."phone"), lower($2)) > 0)`;

  beforeAll(async () => {
    await exec(
      `INSERT INTO "Contact" ("tenantId", "fullName", "email", "createdAt")
       SELECT $1::uuid, (ARRAY['Walker', 'WALKER', 'wälker', 'Wälker', 'Straße', 'STRASSE', 'İrem', 'ırmak',
         '100% _x_ a\\b'])[1 + i % 9] || ' ' || i,
              'walker.' || i || '@walk.test', timestamptz '2025-06-01 00:00:00+00' - (i % 500) * interval '1 hour'
         FROM generate_series(1, 2600) i`,
      A,
    );
    await exec(
      `INSERT INTO "Contact" ("tenantId", "fullName", "email")
       VALUES ($1::uuid, E'unit\\x1fsep', E'st\\x1fwalker@walk.test')`,
      A,
    );
  });

  it("the ILIKE form and the strpos form select the same contacts, for every kind of search", async () => {
    const { searchCond } = await import("../../routers/contacts/list.js");
    const terms = [
      "walker",
      "WALK",
      "wälker",
      "WÄLKER",
      "ä",
      "straße",
      "STRASSE",
      "ss",
      "İ",
      "i",
      "ı",
      "I",
      "100%",
      "%",
      "_x_",
      "_",
      "\\",
      "a\\b",
      "1 2",
      "alker 1",
      "@walk.test",
      "W12@",
      "zzz",
      "612 345",
      // U+001F joins the columns in "searchText": a search holding it must not match across them.
      "1\u001fwalker",
      "\u001f",
      "st\u001f",
    ];
    const problems: string[] = [];
    for (const term of terms) {
      const index = searchCond(term, "index");
      const scan = searchCond(term, "scan");
      const [r] = await app.db.prisma.$queryRaw<{ a: number; b: number; both: number }[]>`
        SELECT count(*) FILTER (WHERE ${index})::int AS a, count(*) FILTER (WHERE ${scan})::int AS b,
               count(*) FILTER (WHERE ${index} AND ${scan})::int AS both
          FROM "Contact" WHERE "tenantId" = ${A}::uuid`;
      if (r!.a !== r!.b || r!.a !== r!.both)
        problems.push(`${JSON.stringify(term)}: ILIKE ${r!.a}, strpos ${r!.b}, both ${r!.both}`);
    }
    expect(problems).toEqual([]);
  });

  it("pages of a search with more than 2,000 matches (the createdAt walk) are exactly the ORDER BY … OFFSET pages", async () => {
    for (const search of ["walker", "WALK", "alker 1"]) {
      const { n } = await one<{ n: number }>(`SELECT count(*)::int AS n ${TRUTH}`, A, search);
      expect(n).toBeGreaterThan(search === "alker 1" ? 100 : 2000);
      for (const offset of [0, 1000, Math.max(0, n - 150)]) {
        const want = (
          await rows<{ id: string }>(
            `SELECT c."id"::text AS id ${TRUTH} ORDER BY c."createdAt" DESC, c."id" DESC LIMIT 200 OFFSET $3`,
            A,
            search,
            offset,
          )
        ).map((r) => r.id);
        const res = await get("contacts", { search, offset, limit: 200 });
        expect(res.status).toBe(200);
        expect(res.body.total).toBe(n);
        expect({ search, offset, ids: res.body.items.map((c: { id: string }) => c.id) }).toEqual({
          search,
          offset,
          ids: want,
        });
      }
    }
  });

  it("the span of createdAt cached with a search's count never hides a match: new, re-dated and extreme-dated matches", async () => {
    // The walk seeks between the oldest and the newest match's createdAt, kept with the count under the
    // contacts' version (CachedTotal). Each page is read twice: once counting, once from the cache.
    const search = "walker";
    const page = async (step: string, offset: "first" | "last") => {
      const { n } = await one<{ n: number }>(`SELECT count(*)::int AS n ${TRUTH}`, A, search);
      // The last page: 199 of a page of 200, so that it is walked too (the gate of routers/contacts/list.ts
      // walks while (before + take) × live < 20 × total × (total − before)) and ends at the oldest match.
      const at = offset === "first" ? 0 : Math.max(0, n - 199);
      const want = (
        await rows<{ id: string }>(
          `SELECT c."id"::text AS id ${TRUTH} ORDER BY c."createdAt" DESC, c."id" DESC LIMIT 200 OFFSET $3`,
          A,
          search,
          at,
        )
      ).map((r) => r.id);
      for (const pass of ["counted", "cached"]) {
        const res = await get("contacts", { search, offset: at, limit: 200 });
        expect(res.status).toBe(200);
        expect(res.body.total).toBe(n);
        expect({ step, pass, ids: res.body.items.map((c: { id: string }) => c.id) }).toEqual({ step, pass, ids: want });
      }
      return want;
    };
    const added: string[] = [];
    const add = async (createdAt: string) => {
      const { id } = await one<{ id: string }>(
        `INSERT INTO "Contact" ("tenantId", "fullName", "createdAt") VALUES ($1::uuid, 'Span walker', $2::timestamptz)
         RETURNING "id"::text AS id`,
        A,
        createdAt,
      );
      added.push(id);
      return id;
    };
    const { id: old, createdAt: oldAt } = await one<{ id: string; createdAt: string }>(
      `SELECT c."id"::text AS id, c."createdAt"::text AS "createdAt" ${TRUTH} ORDER BY c."createdAt", c."id" LIMIT 1`,
      A,
      search,
    );
    try {
      await page("before", "first");
      const earlier = await add("2030-01-01T11:00:00Z");
      const newer = await add("2030-01-01T12:00:00Z");
      expect((await page("a newer match", "first"))[0]).toBe(newer);
      // Within the same UTC day: no day counter moves, the version still must.
      await exec(
        `UPDATE "Contact" SET "createdAt" = '2030-01-01T12:00:00.001Z' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        A,
        earlier,
      );
      expect((await page("a match re-dated past the newest within its day", "first"))[0]).toBe(earlier);
      await exec(
        `UPDATE "Contact" SET "createdAt" = '2031-01-01T00:00:00Z' WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        A,
        old,
      );
      expect((await page("the oldest match re-dated past the newest", "first"))[0]).toBe(old);
      const last = await add("9999-12-31T23:59:59.999Z");
      expect((await page("the last storable millisecond", "first"))[0]).toBe(last);
      const first = await add("0001-01-01T00:00:00.001Z");
      expect((await page("year 1", "last")).at(-1)).toBe(first);
    } finally {
      await exec(`DELETE FROM "Contact" WHERE "tenantId" = $1::uuid AND "id" = ANY($2::uuid[])`, A, added);
      await exec(
        `UPDATE "Contact" SET "createdAt" = $3::timestamptz WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
        A,
        old,
        oldAt,
      );
    }
  });
});

describe("date bounds", () => {
  it("a bound outside years 0001–9999 in UTC is a 422 (the input rule), never a 500", async () => {
    for (const [path, query] of [
      ["leads", { dateFrom: "9999-12-31T23:59:59-14:00" }],
      ["leads", { dateTo: "0001-01-01T00:00:00+14:00", offset: DEEP_OFFSET }],
      ["appointments", { from: "9999-12-31T23:59:59-14:00" }],
    ] as const) {
      const res = await get(path, query);
      expect(res.status, `${path} ${JSON.stringify(query)}`).toBe(422);
      expect(res.body.error).toBe("VALIDATION_ERROR");
    }
  });

  it("a contacts cursor at the last storable millisecond pages on: its position is counted from 1 ms later", async () => {
    const { id } = await one<{ id: string }>(
      `INSERT INTO "Contact" ("tenantId", "fullName", "createdAt")
       VALUES ($1::uuid, 'Last ms', '9999-12-31T23:59:59.999Z') RETURNING "id"::text AS id`,
      B,
    );
    try {
      const first = await get("contacts", { limit: 1 }, keyB);
      expect(first.body.items[0].id).toBe(id);
      const next = await get("contacts", { limit: 1, cursor: first.body.nextCursor }, keyB);
      expect(next.status, next.text).toBe(200);
      expect(next.body.pagination.page).toBe(2);
      expect(next.body.items[0].id).not.toBe(id);
    } finally {
      await exec(`DELETE FROM "Contact" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`, B, id);
    }
  });
});

describe("under concurrent writes", () => {
  it("every observed total equals count(*) in the same snapshot while 20 writers run; HTTP totals are exact once they stop", async () => {
    const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)]!;
    const list = async (q: string) => (await rows<{ id: string }>(q, A)).map((r) => r.id);
    const contactIds = await list(`SELECT "id"::text AS id FROM "Contact" WHERE "tenantId" = $1::uuid`);
    const listIds = await list(`SELECT "id"::text AS id FROM "ContactList" WHERE "tenantId" = $1::uuid`);
    const ticketIds = await list(`SELECT "id"::text AS id FROM "Ticket" WHERE "tenantId" = $1::uuid`);
    const convIds = await list(`SELECT "id"::text AS id FROM "Conversation" WHERE "tenantId" = $1::uuid`);
    const channelIds = await list(`SELECT "id"::text AS id FROM "Channel" WHERE "tenantId" = $1::uuid`);
    const leadIds = await list(`SELECT "id"::text AS id FROM "Lead" WHERE "tenantId" = $1::uuid`);
    const [ana] = await list(`SELECT "id"::text AS id FROM "User" WHERE "tenantId" = $1::uuid AND "bookable"`);
    const phones = (
      await rows<{ p: string }>(
        `SELECT "phone" AS p FROM "Contact" WHERE "tenantId" = $1::uuid AND "phone" IS NOT NULL`,
        A,
      )
    ).map((r) => r.p);
    const statuses = ["open", "pending", "resolved", "closed"];
    const tx = (fn: (q: (sql: string, ...p: unknown[]) => Promise<number>) => Promise<void>) =>
      app.db.prisma.$transaction(async (t) => fn((sql, ...p) => t.$executeRawUnsafe(sql, ...p)));

    const failures: string[] = [];
    const errors: string[] = [];
    const iterations = app.db.kind === "postgres" ? 25 : 10;
    const writer = async (w: number) => {
      for (let i = 0; i < iterations; i++) {
        const op = (w + i * 7) % 10;
        try {
          if (op === 0) {
            const r = await app.request("POST", "/public/v1/leads", {
              key,
              body: { customerName: `W${w}-${i}`, customerPhone: pick(phones) },
            });
            if (r.status !== 201) errors.push(`lead ${r.status}`);
          } else if (op === 1) {
            const r = await app.request("POST", "/public/v1/tickets", {
              key,
              body: { subject: `W${w}-${i}`, customerId: pick(contactIds) },
            });
            // 404: the contact is soft-deleted right now
            if (r.status !== 201 && r.status !== 404) errors.push(`ticket ${r.status}`);
          } else if (op === 2) {
            const r = await app.request("PATCH", `/public/v1/tickets/${pick(ticketIds)}`, {
              key,
              body: { status: pick(statuses), assignedTo: Math.random() < 0.5 ? ana : null },
            });
            if (r.status !== 200) errors.push(`ticket patch ${r.status}`);
          } else if (op === 3) {
            const start = new Date(Date.UTC(2032, 0, 1) + (w * 1000 + i) * 3_600_000);
            const r = await app.request("POST", "/public/v1/appointments", {
              key,
              body: {
                assignedUserId: ana,
                title: `W${w}`,
                appointmentType: "visit",
                startsAt: start.toISOString(),
                endsAt: new Date(start.getTime() + 1_800_000).toISOString(),
              },
            });
            if (r.status !== 201) errors.push(`appointment ${r.status}`);
          } else if (op === 4 && i % 2 === 0) {
            // The time as a parameter: Citus refuses now() (not immutable) inside a CASE of an UPDATE.
            await tx((q) =>
              q(
                `UPDATE "Contact" SET "deletedAt" = CASE WHEN "deletedAt" IS NULL THEN $3::timestamptz END ` +
                  `WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
                A,
                pick(contactIds),
                new Date(),
              ).then(() => {}),
            );
          } else if (op === 4) {
            // A rename in and out of the searches the reader runs (cached counts: the version must move).
            await tx((q) =>
              q(
                `UPDATE "Contact" SET "fullName" = CASE WHEN "fullName" LIKE 'Bulk %' THEN 'Moved ' || "fullName" ELSE 'Bulk ' || "fullName" END
                               WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
                A,
                pick(contactIds),
              ).then(() => {}),
            );
          } else if (op === 5) {
            const [l, c] = [pick(listIds), pick(contactIds)];
            await tx(async (q) => {
              const n = await q(
                `DELETE FROM "ContactListMember" WHERE "tenantId" = $1::uuid AND "listId" = $2::uuid AND ` +
                  `"contactId" = $3::uuid`,
                A,
                l,
                c,
              );
              if (n === 0)
                await q(
                  `INSERT INTO "ContactListMember" ("tenantId", "listId", "contactId") VALUES ($1::uuid, ` +
                    `$2::uuid, $3::uuid) ON CONFLICT DO NOTHING`,
                  A,
                  l,
                  c,
                );
            });
          } else if (op === 6) {
            await tx((q) =>
              q(
                `UPDATE "Lead" SET "customerId" = $3::uuid WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
                A,
                pick(leadIds),
                Math.random() < 0.3 ? null : pick(contactIds),
              ).then(() => {}),
            );
          } else if (op === 7) {
            await tx((q) =>
              q(
                `UPDATE "Conversation" SET "status" = $3::"ConversationStatus", "channelId" = $4::uuid,
                                                     "lastMessageAt" = ("lastMessageAt" AT TIME ZONE 'UTC' + interval '20 hours') AT TIME ZONE 'UTC'
                               WHERE "tenantId" = $1::uuid AND "id" = $2::uuid`,
                A,
                pick(convIds),
                pick(["active", "escalated", "resolved"]),
                pick(channelIds),
              ).then(() => {}),
            );
          } else if (op === 8) {
            // Written, then rolled back: nothing may remain.
            await tx(async (q) => {
              await q(
                `INSERT INTO "Lead" ("tenantId", "customerName", "stageId", "customerId")
                       SELECT "tenantId", 'Rolled back', "id", $2::uuid FROM "PipelineStage" WHERE "tenantId" = $1::uuid LIMIT 1`,
                A,
                pick(contactIds),
              );
              await q(
                `UPDATE "Ticket" SET "status" = 'closed', "assignedToId" = NULL WHERE "tenantId" = $1::uuid ` +
                  `AND "id" = $2::uuid`,
                A,
                pick(ticketIds),
              );
              throw new Error("rollback");
            }).catch((e) => {
              if ((e as Error).message !== "rollback") throw e;
            });
          } else {
            // A hard delete of a lead nothing points at, and a bulk re-date.
            await tx(async (q) => {
              await q(
                `DELETE FROM "Lead" WHERE "tenantId" = $1::uuid AND "customerName" = $2`,
                A,
                `W${(w + 1) % 20}-${i - 3}`,
              );
              await q(
                `UPDATE "Lead" SET "createdAt" = ("createdAt" AT TIME ZONE 'UTC' - interval '1 day') AT TIME ` +
                  `ZONE 'UTC' WHERE "tenantId" = $1::uuid AND "customerName" LIKE $2`,
                A,
                `W${w}-%`,
              );
            });
          }
        } catch (e) {
          errors.push(`op ${op}: ${(e as Error).message.slice(0, 200)}`);
        }
      }
    };

    let running = true;
    let observations = 0;
    let pages = 0;
    const reader = (async () => {
      while (running) {
        const bad = await mismatches(A);
        observations++;
        if (bad.length) failures.push(`snapshot ${observations}: ${JSON.stringify(bad.slice(0, 3))}`);
        // Through HTTP: each page and its total describe one snapshot.
        const path = pick(["leads", "contacts", "contacts", "conversations", "appointments", "tickets"]);
        // Contacts: half of the reads are searches, whose totals come from the count cache.
        const search = path === "contacts" && Math.random() < 0.5 ? pick(["bulk 1", "bulk", "moved", "a"]) : undefined;
        const r = await get(path, { limit: 200, offset: 0, search });
        pages++;
        if (r.status !== 200 || r.body.items.length !== Math.min(200, r.body.total))
          failures.push(`${path} ${search ?? ""}: ${r.status} ${r.body.items?.length} of ${r.body.total}`);
      }
    })();
    await Promise.all(Array.from({ length: 20 }, (_, w) => writer(w)));
    running = false;
    await reader;

    expect(errors).toEqual([]);
    expect(failures).toEqual([]);
    expect(observations).toBeGreaterThan(2);
    expect(pages).toBeGreaterThan(2);
    expect(await mismatches(A)).toEqual([]);
    expect(await mismatches(B)).toEqual([]);
    // A counter row that reaches 0 is removed by the statement that brought it there.
    expect((await one<{ n: number }>(`SELECT count(*)::int AS n FROM "ListCounter" WHERE "n" = 0`)).n).toBe(0);
    await expectTotalsExact(A, key);
    await expectTotalsExact(B, keyB);
  }, 300_000);

  // A transaction that created a lead holds the counter rows it added to (or inserted) until it
  // commits. Another writer of the tenant must not queue behind it: neither on an existing key's slot
  // row (each transaction's own slot is xid % 32, so a fixed slot made about one create in 32 wait)
  // nor on a key's row the open transaction inserted, which the others' snapshots cannot see (their
  // insert at that slot waited for its commit, unless the slot is marked by the advisory lock).
  // 200 creates per case all answer while it stays open, and none ever waits for it in pg_locks.
  async function createsBesideAnOpenTransaction(tenantId: string, apiKey: string) {
    const held = new pg.Client({ connectionString: app.testDb.url });
    await held.connect();
    const statuses: number[] = [];
    let done = false;
    let all: Promise<void> = Promise.resolve();
    let waiters = 0;
    try {
      await held.query("BEGIN");
      const stage = (
        await one<{ id: string }>(`SELECT "id" FROM "PipelineStage" WHERE "tenantId" = $1::uuid LIMIT 1`, tenantId)
      ).id;
      await held.query(`INSERT INTO "Lead" ("tenantId", "customerName", "stageId") VALUES ($1, 'held open', $2)`, [
        tenantId,
        stage,
      ]);
      // The slot is the transaction id's where the triggers run: on Citus the worker that holds the
      // tenant's shards, reached by a statement that names the tenant's rows (here its own lead).
      const heldPid = (await held.query<{ pid: number }>(`SELECT pg_backend_pid() AS pid`)).rows[0]!.pid;
      const heldSlot = (
        await held.query<{ slot: number }>(
          `SELECT (txid_current() % "ListCounter_slots"())::int AS slot FROM "Lead" WHERE "tenantId" = $1
           AND "customerName" = 'held open' LIMIT 1`,
          [tenantId],
        )
      ).rows[0]!.slot;
      all = (async () => {
        try {
          // Aimed creates first: the transaction ids are spent up to one before the held transaction's
          // slot, so that the next create's own slot (xid % 32) is the one the held transaction holds.
          for (let aimed = 0; aimed < 5 && waiters === 0; aimed++) {
            for (let spent = 0; spent < 64; spent++) {
              // Spent where the creates' triggers run (on Citus: the statement names the tenant's leads,
              // never read, so that it runs on their worker).
              const { next } = await one<{ next: number }>(
                `WITH x AS (SELECT ((txid_current() + 1) % "ListCounter_slots"())::int AS next)
                 SELECT x.next FROM x WHERE x.next >= 0 OR EXISTS (SELECT 1 FROM "Lead" l
                   WHERE l."tenantId" = $1::uuid)`,
                tenantId,
              );
              if (next === heldSlot) break;
            }
            statuses.push(
              (await app.request("POST", "/public/v1/leads", { key: apiKey, body: { customerName: `aimed ${aimed}` } }))
                .status,
            );
          }
          for (let batch = 0; batch < 20 && waiters === 0; batch++) {
            const answers = await Promise.all(
              Array.from({ length: 10 }, (_, i) =>
                app.request("POST", "/public/v1/leads", {
                  key: apiKey,
                  body: { customerName: `beside ${batch}-${i}` },
                }),
              ),
            );
            statuses.push(...answers.map((r) => r.status));
          }
        } finally {
          done = true;
        }
      })();
      // While they run, nobody ever waits for the open transaction (sampled from the lock waits, on Citus
      // the workers': test/helpers/cluster.ts); and they all finish while it is still open (a create
      // queued behind it never answers before it ends).
      while (!done) {
        const w = (await lockWaits((q, p) => rows(q, ...(p ?? [])))).filter((x) => x.blockers.includes(heldPid)).length;
        waiters = Math.max(waiters, w);
        if (waiters > 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(waiters, "requests waiting for the open transaction").toBe(0);
      await all;
      expect(statuses).toEqual(Array(205).fill(201));
      await held.query("COMMIT");
    } finally {
      // On a failure: end the open transaction first, then let the creates finish (none leaks into later tests).
      await held.query("ROLLBACK").catch(() => {});
      await all.catch(() => {});
      await held.end();
    }
  }

  it.runIf(Boolean(process.env.DATABASE_URL))(
    "a long transaction that created a lead never blocks the tenant's other creates (existing keys)",
    async () => {
      // Today's keys exist before: the open transaction updates a committed slot row of each.
      expect(
        (await app.request("POST", "/public/v1/leads", { key, body: { customerName: "first of the day" } })).status,
      ).toBe(201);
      await createsBesideAnOpenTransaction(A, key);
      expect(await mismatches(A)).toEqual([]);
      await expectTotalsExact(A, key);
    },
    60_000,
  );

  it.runIf(Boolean(process.env.DATABASE_URL))(
    "a long transaction that created a tenant's first lead never blocks its other creates (new keys)",
    async () => {
      // A tenant without leads: the open transaction inserts the first (uncommitted) row of every key.
      const loaded = await app.load(
        fixture(tenant("fresh", { rateLimit: { perMinute: 1_000_000, perDay: 10_000_000 } })),
      );
      const fresh = loaded.tenants.fresh!;
      expect(
        (
          await one<{ n: number }>(
            `SELECT count(*)::int AS n FROM "ListCounter" WHERE "tenantId" = $1::uuid AND "entity" = 'Lead'`,
            fresh.id,
          )
        ).n,
      ).toBe(0);
      await createsBesideAnOpenTransaction(fresh.id, fresh.apiKeys.full!.key);
      expect(await mismatches(fresh.id)).toEqual([]);
      await expectTotalsExact(fresh.id, fresh.apiKeys.full!.key);
    },
    60_000,
  );
});

describe("deep offsets", () => {
  const lists = [
    { path: "leads", table: "Lead", order: `"createdAt" DESC, "id" DESC`, where: "" },
    { path: "tickets", table: "Ticket", order: `"createdAt" DESC, "id" DESC`, where: "" },
    { path: "contacts", table: "Contact", order: `"createdAt" DESC, "id" DESC`, where: `AND "deletedAt" IS NULL` },
    { path: "appointments", table: "Appointment", order: `"startsAt", "id"`, where: "" },
    { path: "conversations", table: "Conversation", order: `"lastMessageAt" DESC, "id" DESC`, where: "" },
  ];

  it("return the same items as a plain OFFSET at every kind of position, on every list", async () => {
    for (const l of lists) {
      const plain = await rows<{ id: string }>(
        `SELECT "id"::text AS id FROM "${l.table}" WHERE "tenantId" = $1::uuid ${l.where} ORDER BY ${l.order}`,
        A,
      );
      const total = plain.length;
      expect(total, l.path).toBeGreaterThan(DEEP_OFFSET + 100);
      const offsets = [
        0,
        1,
        DEEP_OFFSET - 1,
        DEEP_OFFSET,
        DEEP_OFFSET + 1,
        DEEP_OFFSET + 37,
        total - 200,
        total - 51,
        total - 50,
        total - 1,
        total,
        total + 9,
      ];
      for (let k = 0; k < 6; k++) offsets.push(DEEP_OFFSET + Math.floor(Math.random() * (total - DEEP_OFFSET)));
      for (const offset of offsets) {
        for (const limit of [1, 50, 200]) {
          const res = await get(l.path, { offset, limit });
          expect(res.status).toBe(200);
          const want = plain.slice(offset, offset + limit).map((r) => r.id);
          expect({ path: l.path, offset, limit, ids: res.body.items.map((i: any) => i.id) }).toEqual({
            path: l.path,
            offset,
            limit,
            ids: want,
          });
          expect(res.body.total).toBe(total);
          expect(res.body.pagination.hasNext).toBe(offset + limit < total);
        }
      }
    }
  });

  it("lead date ranges page deep through the buckets exactly like OFFSET", async () => {
    for (const [from, to] of [
      ["2024-02-10T13:00:00Z", "2026-01-01T00:00:00.001Z"],
      ["2023-01-01T00:00:00Z", undefined],
      [undefined, "2025-12-31T23:59:59.999Z"],
    ] as const) {
      const plain = await rows<{ id: string }>(
        `SELECT "id"::text AS id FROM "Lead" WHERE "tenantId" = $1::uuid
         AND ($2::timestamptz IS NULL OR "createdAt" >= $2::timestamptz)
            AND ($3::timestamptz IS NULL OR "createdAt" < $3::timestamptz) ORDER BY "createdAt" DESC, "id" DESC`,
        A,
        from ?? null,
        to ?? null,
      );
      for (const offset of [DEEP_OFFSET, DEEP_OFFSET + 3, plain.length - 7, plain.length]) {
        const res = await get("leads", { dateFrom: from, dateTo: to, offset, limit: 20 });
        expect(res.body.total).toBe(plain.length);
        expect(res.body.items.map((i: any) => i.id)).toEqual(plain.slice(offset, offset + 20).map((r) => r.id));
      }
    }
  });

  it("filtered lists (no buckets) page deep exactly like OFFSET too", async () => {
    for (const [path, query, sql] of [
      [
        "tickets",
        { status: "pending" },
        `SELECT "id"::text AS id FROM "Ticket" WHERE "tenantId" = $1::uuid AND "status" = 'pending' ORDER BY ` +
          `"createdAt" DESC, "id" DESC`,
      ],
      [
        "appointments",
        { status: "completed" },
        `SELECT "id"::text AS id FROM "Appointment" WHERE "tenantId" = $1::uuid AND "status" = 'completed' ` +
          `ORDER BY "startsAt", "id"`,
      ],
    ] as const) {
      const plain = await rows<{ id: string }>(sql, A);
      for (const offset of [0, 10, plain.length - 5]) {
        const res = await get(path, { ...query, offset, limit: 10 });
        expect(res.body.total).toBe(plain.length);
        expect(res.body.items.map((i: any) => i.id)).toEqual(plain.slice(offset, offset + 10).map((r) => r.id));
      }
    }
  });

  it("a contacts cursor's page number comes from the buckets and matches its position", async () => {
    const plain = await rows<{ id: string }>(
      `SELECT "id"::text AS id FROM "Contact" WHERE "tenantId" = $1::uuid AND "deletedAt" IS NULL
       ORDER BY "createdAt" DESC, "id" DESC`,
      A,
    );
    let cursor: string | undefined;
    let seen = 0;
    for (let page = 1; page <= 4; page++) {
      const res = await get("contacts", { limit: 37, cursor });
      expect(res.status, res.text).toBe(200);
      expect(res.body.pagination.page).toBe(page);
      expect(res.body.items.map((i: any) => i.id)).toEqual(plain.slice(seen, seen + 37).map((r) => r.id));
      seen += 37;
      cursor = res.body.nextCursor;
    }
  });

  it("ListCounter_seek agrees with OFFSET at every position (SQL, both directions, bounded ranges)", async () => {
    // The day is the finest bucket: what is left to skip row by row lies in the partial days at the
    // range's two ends, so it stays under two of the busiest day's rows.
    const { perDay } = await one<{ perDay: number }>(
      `SELECT max(n)::int AS "perDay" FROM (SELECT count(*) AS n FROM "Lead" WHERE "tenantId" = $1::uuid
        GROUP BY ("createdAt" AT TIME ZONE 'UTC')::date) d`,
      A,
    );
    for (const [desc, lo, hi] of [
      [true, null, null],
      [false, null, null],
      [true, "2024-03-01T07:00:00Z", "2025-12-31T23:59:59.9995Z"],
      [false, "2025-12-31T23:59:59.999Z", "2026-01-01T00:00:00.001Z"],
    ] as const) {
      const dir = desc ? "DESC" : "ASC";
      const bad = await rows<{ rn: number }>(
        `WITH plain AS (
           SELECT "id", (row_number() OVER (ORDER BY "createdAt" ${dir}, "id" ${dir}) - 1) AS rn FROM "Lead"
            WHERE "tenantId" = $1::uuid AND ($2::timestamptz IS NULL OR "createdAt" >= $2::timestamptz)
              AND ($3::timestamptz IS NULL OR "createdAt" < $3::timestamptz))
         SELECT p.rn::int AS rn FROM plain p CROSS JOIN
           LATERAL "ListCounter_seek"($1::uuid, 'Lead', $2::timestamptz, $3::timestamptz, p.rn, $4) s
           LEFT JOIN LATERAL (SELECT "id" FROM "Lead" WHERE "tenantId" = $1::uuid
                      AND ($2::timestamptz IS NULL OR "createdAt" >= $2::timestamptz)
                        AND ($3::timestamptz IS NULL OR "createdAt" < $3::timestamptz)
                      AND CASE WHEN $4 THEN "createdAt" < s."bound" ELSE "createdAt" >= s."bound" END
                    ORDER BY CASE WHEN $4 THEN "createdAt" END DESC, CASE WHEN $4 THEN "id" END DESC, "createdAt", "id"
                    OFFSET s."skip" LIMIT 1) q ON true
          WHERE q."id" IS DISTINCT FROM p."id" OR s."skip" >= 2 * $5::int`,
        A,
        lo,
        hi,
        desc,
        perDay,
      );
      expect(bad).toEqual([]);
    }
  });
});
