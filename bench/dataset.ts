// The benchmark dataset, loaded with set-based SQL (generate_series) into a fresh database that the
// project's own migrator has built: tenants of 10k, 100k and 1M leads (BENCH_SIZES), the
// availability worst case and 50 small tenants.
// Ids are md5-derived UUIDs (random-looking, so indexes see the same spread as with
// gen_random_uuid()), which lets every reference be computed inside the INSERT ... SELECT.
// API keys are made with server/auth/keys.ts (the same format and SHA-256 hash as the admin CLI).
import pg from "pg";
import { generateKey } from "../server/auth/keys.js";
import { ALL_SCOPES } from "../server/auth/scopes.js";
import { openPostgres } from "../server/db/client.js";
import { migrate } from "../server/db/migrate.js";
import { dbUrl } from "./config.js";
import { sizeLabel } from "./size.js";

export interface TenantSize {
  users: number;
  contacts: number;
  conversations: number;
  messagesPer: number;
  leads: number;
  appointments: number;
  tickets: number;
}

/**
 * The tenant of `leads` leads and, in proportion, everything else (the same scenarios at
 * 10k, 100k and 1M leads): a contact per 5 leads, a conversation (50 messages) per 200, an
 * appointment and a ticket (0–3 comments) per 20; a bookable user per 10,000 leads (10 to 100), so
 * that each user's one-a-day appointments stay within ±250 days of the anchor.
 */
export const tenantSizeFor = (leads: number): TenantSize => ({
  users: Math.min(100, Math.max(10, Math.round(leads / 10_000))),
  contacts: Math.max(10, Math.round(leads / 5)),
  conversations: Math.max(10, Math.round(leads / 200)),
  messagesPer: 50,
  leads,
  appointments: Math.max(10, Math.round(leads / 20)),
  tickets: Math.max(10, Math.round(leads / 20)),
});

export const SMALL_TENANTS = 50;
export const smallTenantSize: TenantSize = {
  users: 3,
  contacts: 100,
  conversations: 5,
  messagesPer: 10,
  leads: 500,
  appointments: 30,
  tickets: 20,
};

/**
 * The worst case of GET /availability without userId that the benchmark measures: many
 * bookable users who all work around the clock (7 × 00:00–24:00) in the shortest slots the schema
 * allows (5 minutes), each booked back to back for the first 700 hours of the 31-day range (50
 * appointments of 14 h), so every user's earliest free slot lies late in the range and each of them
 * is swept over ~8,400 slots and all their appointments.
 */
export const availabilityWorstCase = {
  tenant: 900,
  users: 200,
  appointmentsPerUser: 50,
  appointmentHours: 14,
  slotMinutes: 5,
  days: 31,
};

const availabilityTenantSize: TenantSize = {
  users: availabilityWorstCase.users,
  contacts: 0,
  conversations: 0,
  messagesPer: 0,
  leads: 0,
  appointments: availabilityWorstCase.users * availabilityWorstCase.appointmentsPerUser,
  tickets: 0,
};

export interface BenchTenant {
  index: number;
  /** "10k", "100k", "1m" for the sized tenants. */
  label: string;
  id: string;
  size: TenantSize;
  key: string;
  keyId: string;
  userIds: string[];
  conversationIds: string[];
}

export interface Dataset {
  url: string;
  anchor: Date;
  /** The tenant of the service/baseline matrix (one of `sized`). */
  big: BenchTenant;
  /** The tenants of 10k, 100k and 1M leads (BENCH_SIZES), smallest first. */
  sized: BenchTenant[];
  /** The availability worst-case tenant (availabilityWorstCase). */
  availability: BenchTenant;
  small: BenchTenant[];
  loadSeconds: number;
  /** Seconds per load phase. */
  phases: Record<string, number>;
  rows: Record<string, number>;
}

const FIRST = [
  "Lucia",
  "Hugo",
  "Martina",
  "Mateo",
  "Sofia",
  "Leo",
  "Julia",
  "Daniel",
  "Paula",
  "Alejandro",
  "Valeria",
  "Pablo",
  "Emma",
  "Manuel",
  "Daniela",
  "Alvaro",
  "Carla",
  "Adrian",
  "Sara",
  "Mario",
  "Ana",
  "David",
  "Elena",
  "Diego",
  "Irene",
  "Javier",
  "Laura",
  "Marcos",
  "Marta",
  "Sergio",
  "Noa",
  "Bruno",
  "Alba",
  "Izan",
  "Claudia",
  "Enzo",
  "Vera",
  "Marco",
  "Lola",
  "Thiago",
];
const LAST = [
  "Garcia",
  "Rodriguez",
  "Gonzalez",
  "Fernandez",
  "Lopez",
  "Martinez",
  "Sanchez",
  "Perez",
  "Gomez",
  "Martin",
  "Jimenez",
  "Ruiz",
  "Hernandez",
  "Diaz",
  "Moreno",
  "Munoz",
  "Alvarez",
  "Romero",
  "Alonso",
  "Gutierrez",
  "Navarro",
  "Torres",
  "Dominguez",
  "Vazquez",
  "Ramos",
  "Gil",
  "Ramirez",
  "Serrano",
  "Blanco",
  "Molina",
  "Morales",
  "Suarez",
  "Ortega",
  "Delgado",
  "Castro",
  "Ortiz",
  "Rubio",
  "Marin",
  "Sanz",
  "Nunez",
  "Iglesias",
  "Medina",
  "Garrido",
  "Cortes",
  "Castillo",
  "Santos",
  "Lozano",
  "Guerrero",
  "Cano",
  "Prieto",
];

const arr = (xs: string[]) => `ARRAY[${xs.map((x) => `'${x}'`).join(",")}]`;
/** A deterministic UUID for (tenant, kind, i) — i is a SQL expression. */
const uid = (t: number, kind: string, i: string) => `md5('${t}:${kind}:' || (${i}))::uuid`;
export const uidJs = async (t: number, kind: string, i: number) => {
  const { createHash } = await import("node:crypto");
  const h = createHash("md5").update(`${t}:${kind}:${i}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

/** The leads [lo, hi] of tenant t (a separate statement: the large tenants' leads load in parallel chunks). */
function leadSql(t: number, s: TenantSize, anchorIso: string, lo: number, hi: number): string {
  const tid = uid(t, "tenant", "0");
  const A = `'${anchorIso}'::timestamptz`;
  const user = (i: string) => uid(t, "user", `(${i}) % ${s.users}`);
  const contact = (i: string) => uid(t, "contact", `(${i}) % ${s.contacts}`);
  const conv = (i: string) => uid(t, "conv", `(${i}) % ${s.conversations}`);
  const leadSpacing = (365 * 86400) / s.leads; // seconds between leads: one year of history
  return `
INSERT INTO "Lead" ("id","tenantId","customerId","conversationId","customerName","customerEmail","customerPhone","intent","quality",
                    "stageId","budgetMin","budgetMax","zones","rooms","assignedOperatorId","source","notes","createdAt","updatedAt")
SELECT ${uid(t, "lead", "i")}, ${tid},
       CASE WHEN i % 3 = 0 THEN ${contact("i")} END,
       CASE WHEN i % 10 = 1 THEN ${conv("i / 10")} END,
       (${arr(FIRST)})[1 + i % ${FIRST.length}] || ' ' || (${arr(LAST)})[1 + (i / 7) % ${LAST.length}],
       CASE WHEN i % 4 <> 3 THEN 'lead' || i || '@mail.example' END,
       '+347' || lpad(i::text, 8, '0'),
       (ARRAY['buy','rent','sell','unknown'])[1 + i % 4], (ARRAY['hot','warm','cold','unknown'])[1 + (i / 4) % 4],
       ${uid(t, "stage", "i % 5")},
       CASE WHEN i % 2 = 0 THEN 100000 + (i % 50) * 5000 END, CASE WHEN i % 2 = 0 THEN 200000 + (i % 50) * 5000 END,
       CASE WHEN i % 3 = 0 THEN ARRAY['Centro','Salamanca'] WHEN i % 3 = 1 THEN ARRAY['Chamberi'] ELSE ARRAY[]::text[] END,
       CASE WHEN i % 5 <> 0 THEN 1 + i % 5 END, ${user("i")},
       (ARRAY['api','web','whatsapp','import'])[1 + i % 4],
       CASE WHEN i % 4 = 0 THEN 'Prefers a call in the afternoon; budget flexible.' END,
       ${A} - i * interval '${leadSpacing} seconds', ${A} - i * interval '${leadSpacing} seconds'
  FROM generate_series(${lo}, ${hi}) i;`;
}

function tenantSql(t: number, s: TenantSize, anchorIso: string, big: boolean, opts: { leads?: boolean } = {}): string {
  const tid = uid(t, "tenant", "0");
  const A = `'${anchorIso}'::timestamptz`;
  const user = (i: string) => uid(t, "user", `(${i}) % ${s.users}`);
  const contact = (i: string) => uid(t, "contact", `(${i}) % ${s.contacts}`);
  const conv = (i: string) => uid(t, "conv", `(${i}) % ${s.conversations}`);
  const ticketSpacing = (365 * 86400) / Math.max(1, s.tickets);
  const perUser = Math.ceil(s.appointments / s.users);
  const scopes = `ARRAY[${ALL_SCOPES.map((x) => `'${x}'`).join(",")}]::text[]`;
  return `
INSERT INTO "Tenant" ("id","name","plan","timezone","defaultCountry","slotMinutes","rateLimitPerMinute","rateLimitPerDay","createdAt","updatedAt")
VALUES (${tid}, 'Bench tenant ${t}', '${big ? "enterprise" : "pro"}', 'Europe/Madrid', 'ES', 30,
        ${big ? "1000000000, 2000000000" : "NULL, NULL"}, ${A} - interval '2 years', ${A} - interval '2 years');

INSERT INTO "User" ("id","tenantId","name","email","bookable","assignable","apiGrant","createdAt")
SELECT ${uid(t, "user", "i")}, ${tid}, 'User ' || i, 'user' || i || '@t${t}.example', true, true, ${scopes}, ${A} - interval '2 years'
  FROM generate_series(0, ${s.users - 1}) i;

INSERT INTO "WorkingHours" ("id","tenantId","userId","weekday","start","end")
SELECT gen_random_uuid(), ${tid}, ${uid(t, "user", "u")}, d, '09:00', '18:00'
  FROM generate_series(0, ${s.users - 1}) u, generate_series(1, 5) d;

INSERT INTO "PipelineStage" ("id","tenantId","name","position","defaultEntry","createdAt")
SELECT ${uid(t, "stage", "i")}, ${tid}, (ARRAY['New','Contacted','Qualified','Proposal','Won'])[i + 1], i, i = 0, ${A} - interval '2 years'
  FROM generate_series(0, 4) i;

INSERT INTO "Channel" ("id","tenantId","kind","name","connected","config","createdAt") VALUES
  (${uid(t, "channel", "0")}, ${tid}, 'whatsapp', 'WhatsApp', true, '{}', ${A} - interval '2 years'),
  (${uid(t, "channel", "1")}, ${tid}, 'web', 'Web chat', true, '{}', ${A} - interval '2 years');

INSERT INTO "Contact" ("id","tenantId","fullName","phone","email","country","marketingOptOut","origin","deletedAt","createdAt","updatedAt")
SELECT ${uid(t, "contact", "i")}, ${tid},
       (${arr(FIRST)})[1 + i % ${FIRST.length}] || ' ' || (${arr(LAST)})[1 + (i / ${FIRST.length}) % ${LAST.length}],
       '+346' || lpad(i::text, 8, '0'),
       lower((${arr(FIRST)})[1 + i % ${FIRST.length}]) || '.' || i || '@mail${t}.example',
       'ES', i % 17 = 0, 'import',
       CASE WHEN i % 100 = 99 THEN ${A} - interval '1 day' END,
       ${A} - i * interval '26 minutes', ${A} - i * interval '26 minutes'
  FROM generate_series(0, ${s.contacts - 1}) i;

INSERT INTO "Customer" ("id","tenantId","name","email","phone","contactId","createdAt")
SELECT ${uid(t, "customer", "i")}, ${tid}, c."fullName", c."email", c."phone", c."id", c."createdAt"
  FROM generate_series(0, ${s.conversations - 1}) i JOIN "Contact" c ON c."tenantId" = ${tid} AND c."id" = ${uid(t, "contact", "i")};

INSERT INTO "ChannelIdentity" ("id","tenantId","customerId","channelId","externalId","createdAt")
SELECT ${uid(t, "identity", "i")}, ${tid}, ${uid(t, "customer", "i")}, ${uid(t, "channel", "0")}, '346' || lpad(i::text, 8, '0'), ${A} - interval '1 year'
  FROM generate_series(0, ${s.conversations - 1}) i;

INSERT INTO "Conversation" ("id","tenantId","channelId","customerId","identityId","status","subject","assignedOperatorId",
                            "lastMessagePreview","lastMessageAt","createdAt","updatedAt")
SELECT ${uid(t, "conv", "i")}, ${tid}, ${uid(t, "channel", "0")}, ${uid(t, "customer", "i")}, ${uid(t, "identity", "i")},
       (ARRAY['active','escalated','resolved']::"ConversationStatus"[])[1 + i % 3], 'Conversation ' || i, ${user("i")},
       'Thanks, see you then', ${A} - i * interval '3 hours', ${A} - i * interval '3 hours' - interval '${s.messagesPer} minutes',
       ${A} - i * interval '3 hours'
  FROM generate_series(0, ${s.conversations - 1}) i;

INSERT INTO "Message" ("id","tenantId","conversationId","role","content","deliveryStatus","providerMessageId","authorUserId","createdAt")
SELECT ${uid(t, "msg", "i")}, ${tid}, ${uid(t, "conv", `i / ${s.messagesPer}`)},
       CASE WHEN i % 2 = 0 THEN 'user'::"MessageRole" ELSE 'assistant'::"MessageRole" END,
       'Message ' || (i % ${s.messagesPer}) || ' of conversation ' || (i / ${s.messagesPer}) || ': hello, I would like to know more about the flat on Calle Mayor.',
       CASE WHEN i % 2 = 0 THEN 'received' ELSE 'delivered' END,
       'wamid.' || md5(i::text), NULL,
       ${A} - (i / ${s.messagesPer}) * interval '3 hours' - (${s.messagesPer - 1} - i % ${s.messagesPer}) * interval '1 minute'
  FROM generate_series(0, ${s.conversations * s.messagesPer - 1}) i;

${opts.leads === false ? "" : leadSql(t, s, anchorIso, 0, s.leads - 1)}

-- One appointment a day per user, at a per-user hour inside working hours; half past, half future.
INSERT INTO "Appointment" ("id","tenantId","assignedUserId","customerId","conversationId","leadId","title","appointmentType",
                           "startsAt","endsAt","status","source","notes","createdAt","updatedAt")
SELECT ${uid(t, "appt", "i")}, ${tid}, ${user("i")}, ${contact("i * 7")}, NULL,
       CASE WHEN i % 2 = 0 THEN ${uid(t, "lead", `(i * 13) % ${s.leads}`)} END,
       'Visit ' || i, (ARRAY['visit','call','video'])[1 + i % 3],
       st, st + interval '1 hour',
       CASE WHEN st < ${A} THEN (CASE WHEN i % 7 = 0 THEN 'no_show' ELSE 'completed' END)::"AppointmentStatus"
            WHEN i % 11 = 0 THEN 'cancelled'::"AppointmentStatus" ELSE 'scheduled'::"AppointmentStatus" END,
       'manual', NULL, st - interval '7 days', st - interval '7 days'
  FROM (SELECT i, date_trunc('day', ${A}) + interval '8 hours' + ((i % ${s.users}) % 8) * interval '1 hour'
               + ((i / ${s.users}) - ${Math.floor(perUser / 2)}) * interval '1 day' AS st
          FROM generate_series(0, ${s.appointments - 1}) i) x;

INSERT INTO "Ticket" ("id","tenantId","customerId","leadId","conversationId","subject","status","createdById","assignedToId","createdAt","updatedAt")
SELECT ${uid(t, "ticket", "i")}, ${tid}, ${contact("i * 3")},
       CASE WHEN i % 3 = 0 THEN ${uid(t, "lead", `(i * 11) % ${s.leads}`)} END,
       CASE WHEN i % 5 = 0 THEN ${conv("i")} END,
       'Ticket ' || i || ': the customer asks about the visit schedule',
       (ARRAY['open','pending','resolved','closed']::"TicketStatus"[])[1 + i % 4], ${user("i")},
       CASE WHEN i % 4 <> 3 THEN ${user("i + 1")} END,
       ${A} - i * interval '${ticketSpacing} seconds', ${A} - i * interval '${ticketSpacing} seconds'
  FROM generate_series(0, ${s.tickets - 1}) i;

-- 0 to 3 comments per ticket (1.5 on average), oldest first; md5-derived ids, as every row whose id
-- an answer shows (two loads with one anchor answer alike: bench/citus.ts).
INSERT INTO "TicketComment" ("id","tenantId","ticketId","authorUserId","body","seq","createdAt")
SELECT ${uid(t, "comment", "i * 4 + k")}, ${tid}, ${uid(t, "ticket", "i")}, ${user("i + k")},
       'Comment ' || k || ' on ticket ' || i || ': called the customer, waiting for an answer.', k,
       ${A} - i * interval '${ticketSpacing} seconds' + k * interval '1 hour'
  FROM generate_series(0, ${s.tickets - 1}) i, generate_series(1, 3) k
 WHERE k <= i % 4;
`;
}

/**
 * The availability worst-case tenant: users, round-the-clock
 * hours, back-to-back appointments from the day after the anchor.
 */
export function availabilitySql(anchorIso: string): string {
  const w = availabilityWorstCase;
  const t = w.tenant;
  const tid = uid(t, "tenant", "0");
  const A = `'${anchorIso}'::timestamptz`;
  const scopes = `ARRAY[${ALL_SCOPES.map((x) => `'${x}'`).join(",")}]::text[]`;
  return `
INSERT INTO "Tenant" ("id","name","plan","timezone","defaultCountry","slotMinutes","rateLimitPerMinute","rateLimitPerDay","createdAt","updatedAt")
VALUES (${tid}, 'Bench availability worst case', 'enterprise', 'UTC', 'ES', ${w.slotMinutes}, 1000000000, 2000000000, ${A}, ${A});

INSERT INTO "User" ("id","tenantId","name","email","bookable","assignable","apiGrant","createdAt")
SELECT ${uid(t, "user", "i")}, ${tid}, 'Agent ' || i, 'agent' || i || '@avail.example', true, true, ${scopes}, ${A}
  FROM generate_series(0, ${w.users - 1}) i;

INSERT INTO "WorkingHours" ("id","tenantId","userId","weekday","start","end")
SELECT gen_random_uuid(), ${tid}, ${uid(t, "user", "u")}, d, '00:00', '24:00'
  FROM generate_series(0, ${w.users - 1}) u, generate_series(0, 6) d;

INSERT INTO "Appointment" ("id","tenantId","assignedUserId","title","appointmentType","startsAt","endsAt","status","source","createdAt","updatedAt")
SELECT ${uid(t, "appt", `u * ${w.appointmentsPerUser} + k`)}, ${tid}, ${uid(t, "user", "u")}, 'Busy ' || k, 'visit',
       date_trunc('day', ${A}) + interval '1 day' + k * interval '${w.appointmentHours} hours',
       date_trunc('day', ${A}) + interval '1 day' + (k + 1) * interval '${w.appointmentHours} hours',
       'scheduled', 'manual', ${A}, ${A}
  FROM generate_series(0, ${w.users - 1}) u, generate_series(0, ${w.appointmentsPerUser - 1}) k;
`;
}

async function tenantIds(t: number, s: TenantSize) {
  const id = await uidJs(t, "tenant", 0);
  const userIds = await Promise.all(Array.from({ length: s.users }, (_, i) => uidJs(t, "user", i)));
  const conversationIds = await Promise.all(
    Array.from({ length: Math.min(s.conversations, 200) }, (_, i) => uidJs(t, "conv", i)),
  );
  return { id, userIds, conversationIds };
}

/** The tenant index of the sized tenant of `leads` leads (the small tenants are 1–50, the availability one 900). */
const sizedIndex = (leads: number) => 1000 + Math.round(Math.log10(Math.max(1, leads)) * 100);

/**
 * The changes feed as the migration's backfill makes it (20261123300000_changes_feed): one placed
 * row per live object, positions 1..n per tenant in the order of the objects' last change. One
 * statement an entry: the loader runs them after its load, bench/citus.ts on the distributed schema.
 */
export const CHANGES_REBUILD: readonly string[] = [
  `DELETE FROM "ChangeLog"`,
  `DELETE FROM "ChangeHead"`,
  `INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
   SELECT o."tenantId", o."type", o."objectId",
          row_number() OVER (PARTITION BY o."tenantId" ORDER BY o."changedAt", o."type", o."objectId"),
          'upsert', o."changedAt"
     FROM (SELECT "tenantId", 'lead' AS "type", "id" AS "objectId", "updatedAt" AS "changedAt" FROM "Lead"
           UNION ALL SELECT "tenantId", 'contact', "id", "updatedAt" FROM "Contact" WHERE "deletedAt" IS NULL
           UNION ALL SELECT "tenantId", 'conversation', "id", "updatedAt" FROM "Conversation"
           UNION ALL SELECT "tenantId", 'appointment', "id", "updatedAt" FROM "Appointment"
           UNION ALL SELECT "tenantId", 'ticket', "id", "updatedAt" FROM "Ticket") o`,
  `INSERT INTO "ChangeHead" ("tenantId", "pos") SELECT "tenantId", max("pos") FROM "ChangeLog" GROUP BY "tenantId"`,
];

// What the disabled BEFORE INSERT trigger of TicketComment ("ticket_comment_admit") would have
// kept: each ticket's comment count and characters, and each comment's seq (set by the load).
const TICKET_COUNTERS_REBUILD = `
UPDATE "Ticket" t SET "commentCount" = s.n, "commentChars" = s.chars
  FROM (SELECT "tenantId", "ticketId", count(*)::int AS n, sum(char_length("body"))::int AS chars
          FROM "TicketComment" GROUP BY "tenantId", "ticketId") s
 WHERE t."tenantId" = s."tenantId" AND t."id" = s."ticketId";
`;

const TABLES = [
  "Lead",
  "Contact",
  "Conversation",
  "Message",
  "Appointment",
  "Ticket",
  "TicketComment",
  "ChangeLog",
  "ListCounter",
  "Tenant",
];

async function countRows(c: pg.Client): Promise<Record<string, number>> {
  const rows: Record<string, number> = {};
  for (const table of TABLES)
    rows[table] = (await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`)).rows[0]!.n;
  return rows;
}

async function keyFor(c: pg.Client, t: number, s: TenantSize, label?: string): Promise<BenchTenant> {
  const ids = await tenantIds(t, s);
  const g = generateKey();
  const row = await c.query<{ id: string }>(
    `INSERT INTO "ApiKey" ("tenantId","ownerId","name","prefix","keyHash","scopes") VALUES ($1,$2,'bench',$3,$4,$5)
     RETURNING "id"`,
    [ids.id, ids.userIds[0], g.prefix, g.hash, ALL_SCOPES],
  );
  return { index: t, size: s, label: label ?? `tenant ${t}`, key: g.key, keyId: row.rows[0]!.id, ...ids };
}

export interface DatasetOptions {
  pgBase: string;
  dbName: string;
  /** Lead counts of the sized tenants (10k, 100k, 1M). */
  sizes: number[];
  /** The size whose tenant the service/baseline matrix uses (`big`). */
  matrixSize: number;
  log?: (s: string) => void;
  /** Connections loading in parallel (default 2: the machine's cores). */
  jobs?: number;
  /**
   * The dataset's clock (default: now, to the second). Two loads with one anchor hold the same rows (bench/citus.ts).
   */
  anchor?: Date;
  /**
   * Creates the empty database instead of DROP/CREATE DATABASE on
   * pgBase (bench/citus.ts: on every node of a Citus cluster).
   */
  createDatabase?: () => Promise<void>;
  /** Runs after the rows, the rebuilds and the keys, before VACUUM ANALYZE (bench/citus.ts: db:distribute). */
  afterLoad?: (url: string, phases: Record<string, number>) => Promise<void>;
}

const LEAD_CHUNK = 250_000;

/** Drops the indexes of `tables` that no constraint owns; returns their definitions (CREATE INDEX …). */
async function dropSecondaryIndexes(c: pg.Client, tables: string[]): Promise<string[]> {
  const { rows } = await c.query<{ name: string; def: string }>(
    `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
       FROM pg_index i
      WHERE i.indrelid = ANY($1::regclass[])
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)
      ORDER BY pg_relation_size(i.indrelid) DESC, 1`,
    [tables.map((t) => `"${t}"`)],
  );
  for (const r of rows) await c.query(`DROP INDEX ${r.name}`);
  return rows.map((r) => r.def);
}

/** Runs the statements (each a task, in autocommit) on `jobs` connections, `setup` first on each. */
async function inParallel(url: string, jobs: number, tasks: string[], setup: string[] = []): Promise<void> {
  const queue = [...tasks];
  await Promise.all(
    Array.from({ length: Math.min(jobs, tasks.length) }, async () => {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      try {
        for (const q of [
          "SET synchronous_commit = off",
          "SET maintenance_work_mem = '256MB'",
          "SET work_mem = '64MB'",
          ...setup,
        ])
          await c.query(q);
        for (let task = queue.shift(); task !== undefined; task = queue.shift()) await c.query(task);
      } finally {
        await c.end();
      }
    }),
  );
}

/**
 * Drops and recreates the benchmark database, migrates it and loads the dataset: set-based inserts
 * with every trigger off (session_replication_role = replica: no list-counter, changes-feed or
 * comment-admission trigger, no foreign-key check — the generator's references are consistent by
 * construction), then the counters and the feed rebuilt set-based, then VACUUM ANALYZE.
 */
export async function createDataset(opts: DatasetOptions): Promise<Dataset> {
  const log = opts.log ?? (() => {});
  const started = Date.now();
  if (opts.createDatabase) await opts.createDatabase();
  else {
    const admin = new pg.Client({ connectionString: opts.pgBase });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${opts.dbName}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${opts.dbName}"`);
    await admin.end();
  }
  const url = dbUrl(opts.pgBase, opts.dbName);

  const db = await openPostgres(url, { max: 2 });
  await migrate(db.sql);
  await db.close();

  const anchor = opts.anchor ?? new Date(Math.floor(Date.now() / 1000) * 1000);
  const A = anchor.toISOString();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const sizes = [...new Set(opts.sizes)].sort((x, y) => x - y);
    const phases: Record<string, number> = {};
    const jobs = opts.jobs ?? 2;
    // 1. The rows, triggers off, on `jobs` connections: each tenant's other tables as one task, its
    //    leads in chunks of 250,000 (without foreign-key checks the tasks are independent).
    let t0 = Date.now();
    const load: { what: string; sql: string }[] = [];
    for (const leads of [...sizes].reverse()) {
      const t = sizedIndex(leads);
      const size = tenantSizeFor(leads);
      log(
        `loading the ${sizeLabel(leads)} tenant (${leads} leads, ${size.contacts} contacts, ` +
          `${size.conversations} × ${size.messagesPer} messages, ${size.appointments} appointments, ` +
          `${size.tickets} tickets)`,
      );
      for (let lo = 0; lo < leads; lo += LEAD_CHUNK)
        load.push({
          what: `${sizeLabel(leads)} leads from ${lo}`,
          sql: leadSql(t, size, A, lo, Math.min(leads, lo + LEAD_CHUNK) - 1),
        });
      load.push({ what: `${sizeLabel(leads)} other tables`, sql: tenantSql(t, size, A, true, { leads: false }) });
    }
    load.push({
      what: "availability and small tenants",
      sql: [
        availabilitySql(A),
        ...Array.from({ length: SMALL_TENANTS }, (_, k) => tenantSql(k + 1, smallTenantSize, A, false)),
      ].join("\n"),
    });
    // The large tables' secondary indexes (none that a constraint owns) are built once after the load
    // (a sort) instead of row by row, exactly as the migrations defined them.
    const bulk = await dropSecondaryIndexes(c, [
      "Lead",
      "Contact",
      "Message",
      "Appointment",
      "Ticket",
      "TicketComment",
    ]);
    await inParallel(
      url,
      jobs,
      load.map((x) => x.sql),
      ["SET session_replication_role = replica"],
    );
    phases["load rows (triggers off)"] = (Date.now() - t0) / 1000;
    t0 = Date.now();
    await inParallel(url, jobs, bulk);
    phases["build secondary indexes"] = (Date.now() - t0) / 1000;

    // 2. What the disabled triggers keep, rebuilt set-based: the ticket comment counters first, then
    //    the list counters ("ListCounter_rebuild", per tenant, largest first) and the changes feed in parallel.
    t0 = Date.now();
    log("rebuilding the ticket comment counters, the list counters and the changes feed (set-based)");
    await inParallel(url, 1, [TICKET_COUNTERS_REBUILD], ["SET session_replication_role = replica"]);
    const others = (await c.query<{ id: string }>(`SELECT "id" FROM "Tenant" ORDER BY "id"`)).rows.map((r) => r.id);
    const sizedIds = await Promise.all([...sizes].reverse().map((n) => uidJs(sizedIndex(n), "tenant", 0)));
    const rest = others.filter((id) => !sizedIds.includes(id));
    const feedIndexes = await dropSecondaryIndexes(c, ["ChangeLog"]);
    await inParallel(url, jobs, [
      ...sizedIds.slice(0, 1).map((id) => `SELECT "ListCounter_rebuild"('${id}')`),
      [...CHANGES_REBUILD, ...feedIndexes].join(";\n"),
      ...sizedIds.slice(1).map((id) => `SELECT "ListCounter_rebuild"('${id}')`),
      rest.map((id) => `SELECT "ListCounter_rebuild"('${id}');`).join("\n"),
    ]);
    phases["rebuild counters and feed"] = (Date.now() - t0) / 1000;

    const sized: BenchTenant[] = [];
    for (const leads of sizes) sized.push(await keyFor(c, sizedIndex(leads), tenantSizeFor(leads), sizeLabel(leads)));
    const availability = await keyFor(c, availabilityWorstCase.tenant, availabilityTenantSize, "availability");
    const small: BenchTenant[] = [];
    for (let t = 1; t <= SMALL_TENANTS; t++) small.push(await keyFor(c, t, smallTenantSize));

    if (opts.afterLoad) await opts.afterLoad(url, phases);

    t0 = Date.now();
    log("VACUUM ANALYZE");
    await c.query("VACUUM ANALYZE");
    // The load's dirty pages written out now, not by the checkpointer during the first measurements.
    await c.query("CHECKPOINT");
    phases["VACUUM ANALYZE"] = (Date.now() - t0) / 1000;
    const rows = await countRows(c);
    const big = sized.find((x) => x.size.leads === opts.matrixSize) ?? sized[sized.length - 1]!;
    return { url, anchor, big, sized, availability, small, loadSeconds: (Date.now() - started) / 1000, phases, rows };
  } finally {
    await c.end();
  }
}

/** The dataset of a kept database (BENCH_REUSE_DB=1, loaded with the same BENCH_SIZES): fresh keys, same ids. */
export async function reuseDataset(opts: DatasetOptions): Promise<Dataset> {
  const url = dbUrl(opts.pgBase, opts.dbName);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const anchorRow = await c.query<{ a: Date }>(`SELECT max("lastMessageAt") AS a FROM "Conversation"`);
    const sizes = [...new Set(opts.sizes)].sort((x, y) => x - y);
    const sized: BenchTenant[] = [];
    for (const leads of sizes) sized.push(await keyFor(c, sizedIndex(leads), tenantSizeFor(leads), sizeLabel(leads)));
    const availability = await keyFor(c, availabilityWorstCase.tenant, availabilityTenantSize, "availability");
    const small = [await keyFor(c, 1, smallTenantSize)];
    const big = sized.find((x) => x.size.leads === opts.matrixSize) ?? sized[sized.length - 1]!;
    return {
      url,
      anchor: anchorRow.rows[0]!.a,
      big,
      sized,
      availability,
      small,
      loadSeconds: 0,
      phases: {},
      rows: await countRows(c),
    };
  } finally {
    await c.end();
  }
}

export async function dropDataset(pgBase: string, dbName: string): Promise<void> {
  const admin = new pg.Client({ connectionString: pgBase });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await admin.end();
}
