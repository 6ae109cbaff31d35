// The benchmark dataset, loaded with set-based SQL (generate_series) into a fresh database that the
// project's own migrator has built: one large tenant (the issue's sizes) and 50 small ones.
// Ids are md5-derived UUIDs (random-looking, so indexes see the same spread as with
// gen_random_uuid()), which lets every reference be computed inside the INSERT ... SELECT.
// API keys are made with server/auth/keys.ts (the same format and SHA-256 hash as the admin CLI).
import pg from "pg";
import { generateKey } from "../server/auth/keys.js";
import { ALL_SCOPES } from "../server/auth/scopes.js";
import { openPostgres } from "../server/db/client.js";
import { migrate } from "../server/db/migrate.js";
import { dbUrl } from "./config.js";

export interface TenantSize {
  users: number;
  contacts: number;
  conversations: number;
  messagesPer: number;
  leads: number;
  appointments: number;
  tickets: number;
}

export const bigTenantSize = (scale = 1): TenantSize => ({
  users: 10,
  contacts: Math.round(20_000 * scale),
  conversations: Math.max(10, Math.round(500 * scale)),
  messagesPer: 50,
  leads: Math.round(100_000 * scale),
  appointments: Math.round(5_000 * scale),
  tickets: Math.round(5_000 * scale),
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

export interface BenchTenant {
  index: number;
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
  big: BenchTenant;
  small: BenchTenant[];
  loadSeconds: number;
  rows: Record<string, number>;
}

const FIRST = [
  "Lucia", "Hugo", "Martina", "Mateo", "Sofia", "Leo", "Julia", "Daniel", "Paula", "Alejandro",
  "Valeria", "Pablo", "Emma", "Manuel", "Daniela", "Alvaro", "Carla", "Adrian", "Sara", "Mario",
  "Ana", "David", "Elena", "Diego", "Irene", "Javier", "Laura", "Marcos", "Marta", "Sergio",
  "Noa", "Bruno", "Alba", "Izan", "Claudia", "Enzo", "Vera", "Marco", "Lola", "Thiago",
];
const LAST = [
  "Garcia", "Rodriguez", "Gonzalez", "Fernandez", "Lopez", "Martinez", "Sanchez", "Perez", "Gomez", "Martin",
  "Jimenez", "Ruiz", "Hernandez", "Diaz", "Moreno", "Munoz", "Alvarez", "Romero", "Alonso", "Gutierrez",
  "Navarro", "Torres", "Dominguez", "Vazquez", "Ramos", "Gil", "Ramirez", "Serrano", "Blanco", "Molina",
  "Morales", "Suarez", "Ortega", "Delgado", "Castro", "Ortiz", "Rubio", "Marin", "Sanz", "Nunez",
  "Iglesias", "Medina", "Garrido", "Cortes", "Castillo", "Santos", "Lozano", "Guerrero", "Cano", "Prieto",
];

const arr = (xs: string[]) => `ARRAY[${xs.map((x) => `'${x}'`).join(",")}]`;
/** A deterministic UUID for (tenant, kind, i) — i is a SQL expression. */
const uid = (t: number, kind: string, i: string) => `md5('${t}:${kind}:' || (${i}))::uuid`;
export const uidJs = async (t: number, kind: string, i: number) => {
  const { createHash } = await import("node:crypto");
  const h = createHash("md5").update(`${t}:${kind}:${i}`).digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};

function tenantSql(t: number, s: TenantSize, anchorIso: string, big: boolean): string {
  const tid = uid(t, "tenant", "0");
  const A = `'${anchorIso}'::timestamptz`;
  const user = (i: string) => uid(t, "user", `(${i}) % ${s.users}`);
  const contact = (i: string) => uid(t, "contact", `(${i}) % ${s.contacts}`);
  const conv = (i: string) => uid(t, "conv", `(${i}) % ${s.conversations}`);
  const leadSpacing = (365 * 86400) / s.leads; // seconds between leads: one year of history
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
  FROM generate_series(0, ${s.conversations - 1}) i JOIN "Contact" c ON c."id" = ${uid(t, "contact", "i")};

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
  FROM generate_series(0, ${s.leads - 1}) i;

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

-- 0 to 3 comments per ticket (1.5 on average), oldest first.
INSERT INTO "TicketComment" ("id","tenantId","ticketId","authorUserId","body","createdAt")
SELECT gen_random_uuid(), ${tid}, ${uid(t, "ticket", "i")}, ${user("i + k")},
       'Comment ' || k || ' on ticket ' || i || ': called the customer, waiting for an answer.',
       ${A} - i * interval '${ticketSpacing} seconds' + k * interval '1 hour'
  FROM generate_series(0, ${s.tickets - 1}) i, generate_series(1, 3) k
 WHERE k <= i % 4;
`;
}

async function tenantIds(t: number, s: TenantSize) {
  const id = await uidJs(t, "tenant", 0);
  const userIds = await Promise.all(Array.from({ length: s.users }, (_, i) => uidJs(t, "user", i)));
  const conversationIds = await Promise.all(Array.from({ length: s.conversations }, (_, i) => uidJs(t, "conv", i)));
  return { id, userIds, conversationIds };
}

/** Drops and recreates the benchmark database, migrates it and loads the dataset. */
export async function createDataset(opts: { pgBase: string; dbName: string; scale: number; log: (s: string) => void }): Promise<Dataset> {
  const started = Date.now();
  const admin = new pg.Client({ connectionString: opts.pgBase });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${opts.dbName}" WITH (FORCE)`);
  await admin.query(`CREATE DATABASE "${opts.dbName}"`);
  await admin.end();
  const url = dbUrl(opts.pgBase, opts.dbName);

  const db = await openPostgres(url, { max: 2 });
  await migrate(db.sql);
  await db.close();

  const anchor = new Date(Math.floor(Date.now() / 1000) * 1000);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const bigSize = bigTenantSize(opts.scale);
    opts.log(`loading the large tenant (${bigSize.leads} leads, ${bigSize.contacts} contacts, ...)`);
    await c.query("BEGIN");
    await c.query(tenantSql(0, bigSize, anchor.toISOString(), true));
    await c.query("COMMIT");
    opts.log(`loading ${SMALL_TENANTS} small tenants`);
    await c.query("BEGIN");
    for (let t = 1; t <= SMALL_TENANTS; t++) await c.query(tenantSql(t, smallTenantSize, anchor.toISOString(), false));
    await c.query("COMMIT");

    const makeKey = async (t: number, s: TenantSize): Promise<BenchTenant> => {
      const ids = await tenantIds(t, s);
      const g = generateKey();
      const row = await c.query<{ id: string }>(
        `INSERT INTO "ApiKey" ("tenantId","ownerId","name","prefix","keyHash","scopes") VALUES ($1,$2,'bench',$3,$4,$5) RETURNING "id"`,
        [ids.id, ids.userIds[0], g.prefix, g.hash, ALL_SCOPES],
      );
      return { index: t, size: s, key: g.key, keyId: row.rows[0]!.id, ...ids };
    };
    const big = await makeKey(0, bigSize);
    const small: BenchTenant[] = [];
    for (let t = 1; t <= SMALL_TENANTS; t++) small.push(await makeKey(t, smallTenantSize));

    opts.log("VACUUM ANALYZE");
    await c.query("VACUUM ANALYZE");
    const rows: Record<string, number> = {};
    for (const table of ["Lead", "Contact", "Conversation", "Message", "Appointment", "Ticket", "TicketComment", "Tenant"]) {
      const r = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
      rows[table] = r.rows[0]!.n;
    }
    return { url, anchor, big, small, loadSeconds: (Date.now() - started) / 1000, rows };
  } finally {
    await c.end();
  }
}

/** The dataset of a kept database (BENCH_REUSE_DB=1): fresh keys, same ids. */
export async function reuseDataset(opts: { pgBase: string; dbName: string; scale: number }): Promise<Dataset> {
  const url = dbUrl(opts.pgBase, opts.dbName);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const anchorRow = await c.query<{ a: Date }>(`SELECT max("lastMessageAt") AS a FROM "Conversation"`);
    const mk = async (t: number, s: TenantSize): Promise<BenchTenant> => {
      const ids = await tenantIds(t, s);
      const g = generateKey();
      const row = await c.query<{ id: string }>(
        `INSERT INTO "ApiKey" ("tenantId","ownerId","name","prefix","keyHash","scopes") VALUES ($1,$2,'bench',$3,$4,$5) RETURNING "id"`,
        [ids.id, ids.userIds[0], g.prefix, g.hash, ALL_SCOPES],
      );
      return { index: t, size: s, key: g.key, keyId: row.rows[0]!.id, ...ids };
    };
    const big = await mk(0, bigTenantSize(opts.scale));
    const small = [await mk(1, smallTenantSize)];
    const rows: Record<string, number> = {};
    for (const table of ["Lead", "Contact", "Conversation", "Message", "Appointment", "Ticket", "TicketComment", "Tenant"]) {
      const r = await c.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
      rows[table] = r.rows[0]!.n;
    }
    return { url, anchor: anchorRow.rows[0]!.a, big, small, loadSeconds: 0, rows };
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
