// The raw baseline (the physical limit): the smallest honest server for GET /me, the lists
// (leads, contacts, tickets, appointments, conversations), POST /leads, POST /appointments and (issue
// 39) PUT /contacts/by-external-id/{externalId} and POST /contacts/batch/upsert on
// node:http + pg (+ ioredis for the quotas), giving the same answers as the service (checked before
// every run) with the fewest statements a careful engineer would write by hand — not the service's SQL:
//   auth    one SQL round trip (the same named LOOKUP as server/auth/authenticate.ts: key by prefix, owner
//           grant, tenant plan and limits), SHA-256 of the presented key compared in constant time,
//           revoked / expired / plan gate, effective scopes
//   quotas  the minute and day windows of the key counted in Redis (one round trip: both windows in
//           one Lua script), X-RateLimit-* headers, 429 over a ceiling
//   op      one SQL statement per route (see the comments per route), JSON out; the lists compute the
//           exact total with a plain count(*) — the header x-bench-no-count: 1 leaves it out (the
//           reference for list throughput: what the page alone costs)
// It is the practical ceiling on this machine: the service's throughput is reported as a ratio to it.
// Env: PORT, DATABASE_URL, REDIS_URL; BENCH_COUNT_QUERIES=1 counts statements (SIGUSR2 prints them).
import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Redis } from "ioredis";
import pg from "pg";
import { phoneForMatching, toE164 } from "../../server/phone.js";

const ALL_SCOPES = ["leads", "contacts", "conversations", "appointments", "tickets"].flatMap((r) => [
  `tenant:${r}.read`,
  `tenant:${r}.manage`,
]);
const KEY_RE = /^(crm_[0-9A-Za-z]{12})_([0-9A-Za-z]{40})$/;

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
let queries = 0;
if (process.env.BENCH_COUNT_QUERIES === "1") {
  pool.on("connect", (c: any) => {
    const q = c.query.bind(c);
    c.query = (...a: unknown[]) => {
      queries++;
      return q(...a);
    };
  });
  process.on("SIGUSR2", () => process.stderr.write(`bench:queries ${queries}\n`));
}
const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379", {
  enableOfflineQueue: true,
  maxRetriesPerRequest: 1,
});
redis.defineCommand("quota2", {
  numberOfKeys: 2,
  lua: `local m = redis.call('incr', KEYS[1]) if m == 1 then redis.call('expire', KEYS[1], 60) end
        local d = redis.call('incr', KEYS[2]) if d == 1 then redis.call('expire', KEYS[2], 86400) end
        return {m, redis.call('pttl', KEYS[1]), d, redis.call('pttl', KEYS[2])}`,
});

const LOOKUP = `
  SELECT k."id", k."keyHash", k."expiresAt", k."revokedAt", k."scopes", k."tenantId", k."ownerId",
         u."apiGrant", t."plan", t."timezone", t."defaultCountry", t."slotMinutes",
         COALESCE(t."rateLimitPerMinute", p."perMinute") AS "perMinute",
         COALESCE(t."rateLimitPerDay", p."perDay") AS "perDay"
    FROM "ApiKey" k
    JOIN "User" u ON u."tenantId" = k."tenantId" AND u."id" = k."ownerId"
    JOIN "Tenant" t ON t."id" = k."tenantId"
    JOIN "PlanLimit" p ON p."plan" = t."plan"
   WHERE k."prefix" = $1`;

interface Caller {
  keyId: string;
  prefix: string;
  tenantId: string;
  defaultCountry: string | null;
  plan: string;
  scopes: string[];
  perMinute: number;
  perDay: number;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, body: unknown, reqId: string) {
  const json = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json; charset=utf-8",
    "Content-Length": Buffer.byteLength(json),
    "X-Request-Id": reqId,
  });
  res.end(json);
}

async function authenticate(req: IncomingMessage, res: ServerResponse): Promise<Caller> {
  const raw = String(req.headers["x-api-key"] ?? "").trim();
  const m = KEY_RE.exec(raw);
  if (!m) throw new HttpError(401, "INVALID_CREDENTIALS", "Invalid API key");
  const { rows } = await pool.query({ name: "auth_lookup", text: LOOKUP, values: [m[1]] });
  const row = rows[0];
  const hash = createHash("sha256").update(raw).digest();
  if (!row || !timingSafeEqual(Buffer.from(row.keyHash, "hex"), hash) || row.revokedAt)
    throw new HttpError(401, "INVALID_CREDENTIALS", "Invalid API key");
  if (row.expiresAt && row.expiresAt.getTime() <= Date.now())
    throw new HttpError(401, "TOKEN_EXPIRED", "API key has expired");
  if (row.plan !== "pro" && row.plan !== "enterprise")
    throw new HttpError(403, "PLAN_NOT_ELIGIBLE", "Plan not eligible");
  const caller: Caller = {
    keyId: row.id,
    prefix: m[1]!,
    tenantId: row.tenantId,
    defaultCountry: row.defaultCountry?.trim() ?? null,
    plan: row.plan,
    scopes: ALL_SCOPES.filter((s) => row.scopes.includes(s) && row.apiGrant.includes(s)),
    perMinute: Number(row.perMinute),
    perDay: Number(row.perDay),
  };
  const hex = hash.toString("hex");
  const [mUsed, mTtl, dUsed, dTtl] = (await (redis as any).quota2(`bl:m:${hex}`, `bl:d:${hex}`)) as number[];
  const now = Date.now();
  res.setHeader("X-RateLimit-Limit", String(caller.perMinute));
  res.setHeader(
    "X-RateLimit-Remaining",
    String(Math.max(0, Math.min(caller.perMinute - mUsed!, caller.perDay - dUsed!))),
  );
  res.setHeader("X-RateLimit-Reset", String(Math.ceil((now + Math.max(mTtl!, 1)) / 1000)));
  if (mUsed! > caller.perMinute || dUsed! > caller.perDay) {
    res.setHeader("Retry-After", String(Math.max(1, Math.ceil((mUsed! > caller.perMinute ? mTtl! : dTtl!) / 1000))));
    throw new HttpError(429, "RATE_LIMIT_EXCEEDED", "Rate limit exceeded for this API key");
  }
  return caller;
}

const need = (c: Caller, scope: string) => {
  if (!c.scopes.includes(scope)) throw new HttpError(403, "PERMISSION_DENIED", `This key lacks the scope ${scope}`);
};

interface LeadRow {
  id: string;
  customerId: string | null;
  conversationId: string | null;
  customerName: string;
  customerEmail: string | null;
  customerPhone: string | null;
  intent: string;
  quality: string;
  stageId: string;
  budgetMin: number | null;
  budgetMax: number | null;
  zones: string[];
  rooms: number | null;
  assignedOperatorId: string | null;
  source: string;
  notes: string | null;
  externalId: string | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

const toLead = (l: LeadRow) => ({
  id: l.id,
  customerId: l.customerId,
  conversationId: l.conversationId,
  customerName: l.customerName,
  customerEmail: l.customerEmail,
  customerPhone: l.customerPhone,
  intent: l.intent,
  quality: l.quality,
  stageId: l.stageId,
  budget: l.budgetMin === null && l.budgetMax === null ? null : { min: l.budgetMin, max: l.budgetMax },
  zones: l.zones,
  rooms: l.rooms,
  assignedOperatorId: l.assignedOperatorId,
  source: l.source,
  notes: l.notes,
  externalId: l.externalId,
  version: l.version,
  createdAt: l.createdAt.toISOString(),
  updatedAt: l.updatedAt.toISOString(),
});

const LEAD_COLS = `l."id", l."customerId", l."conversationId", l."customerName", l."customerEmail", l."customerPhone", l."intent",
  l."quality", l."stageId", l."budgetMin", l."budgetMax", l."zones", l."rooms", l."assignedOperatorId", l."source", l."notes",
  l."externalId", l."version", l."createdAt", l."updatedAt"`;

function int(v: string | null, min: number, max: number, fallback: number): number {
  if (v === null || v === "") return fallback;
  if (!/^\d{1,15}$/.test(v) || Number(v) < min || Number(v) > max)
    throw new HttpError(422, "VALIDATION_ERROR", "bad integer");
  return Number(v);
}

// GET /leads — the same statements as routers/leads/list.ts: one statement with the page (keyset of
// ids first, then the rows: a deep offset walks the narrow index only) and the total and newest
// createdAt of every lead matching the filters. BASELINE_LEADS_NO_COUNT=1 (or the header
// x-bench-no-count) skips the count: what a database-kept counter would save.
async function listLeads(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:leads.read");
  let offset = int(url.searchParams.get("offset"), 0, 2_147_483_647, 0);
  const limit = int(url.searchParams.get("limit"), 1, 200, 50);
  const params: unknown[] = [c.tenantId];
  let where = `"tenantId" = $1`;
  const time = (name: string) => {
    const v = url.searchParams.get(name);
    if (!v) return undefined;
    const d = new Date(v);
    if (Number.isNaN(d.getTime())) throw new HttpError(422, "VALIDATION_ERROR", `bad ${name}`);
    params.push(d);
    return `$${params.length}`;
  };
  const dateFrom = time("dateFrom");
  if (dateFrom) where += ` AND "createdAt" >= ${dateFrom}`;
  const updatedFrom = time("updatedFrom");
  if (updatedFrom) where += ` AND "updatedAt" >= ${updatedFrom}`;
  // sort: the default (createdAt descending) or updatedAt either way; ties by id alike.
  const sort = url.searchParams.get("sort") ?? "-createdAt";
  if (!/^-?(createdAt|updatedAt)$/.test(sort)) throw new HttpError(422, "VALIDATION_ERROR", "bad sort");
  const col = `"${sort.replace(/^-/, "")}"`;
  const dir = sort.startsWith("-") ? "DESC" : "ASC";
  const order = `${col} ${dir}, "id" ${dir}`;
  // A keyset cursor (the service's own, c1|sort|position|id|…): the rows after that position, and the
  // page's offset counted (the envelope's pagination says where the page is).
  let keyset = "";
  const cursor = url.searchParams.get("cursor");
  if (cursor) {
    const [v, s, at, id] = Buffer.from(cursor, "base64url").toString("utf8").split("|");
    if (v !== "c1" || s !== sort || !at || !id) throw new HttpError(422, "VALIDATION_ERROR", "bad cursor");
    params.push(new Date(at), id);
    const cmp = dir === "DESC" ? "<" : ">";
    keyset = `(${col} ${cmp} $${params.length - 1} OR (${col} = $${params.length - 1} AND "id" ${cmp} $${params.length}::uuid))`;
  }
  const before = keyset ? `(SELECT count(*)::int FROM "Lead" WHERE ${where} AND NOT ${keyset})` : "NULL::int";
  const pageWhere = keyset ? `${where} AND ${keyset}` : where;
  params.push(limit, keyset ? 0 : offset);
  const n = params.length;
  const sql = noCount
    ? `SELECT NULL::int AS "total", NULL::timestamptz AS "newest", ${before} AS "before", p.* FROM (SELECT 1) one LEFT JOIN LATERAL (
         SELECT ${LEAD_COLS} FROM (SELECT "id" FROM "Lead" WHERE ${pageWhere} ORDER BY ${order} LIMIT $${n - 1} OFFSET $${n}) ids
           JOIN "Lead" l ON l."tenantId" = $1 AND l."id" = ids."id") p ON true ORDER BY p.${order.replace(", ", ", p.")}`
    : `SELECT (SELECT count(*)::int FROM "Lead" WHERE ${where}) AS "total", (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest", ${before} AS "before", p.*
         FROM (SELECT 1) one LEFT JOIN LATERAL (
         SELECT ${LEAD_COLS} FROM (SELECT "id" FROM "Lead" WHERE ${pageWhere} ORDER BY ${order} LIMIT $${n - 1} OFFSET $${n}) ids
           JOIN "Lead" l ON l."tenantId" = $1 AND l."id" = ids."id") p ON true ORDER BY p.${order.replace(", ", ", p.")}`;
  const { rows } = await pool.query(sql, params);
  if (keyset) offset = rows[0].before;
  const items = rows.filter((r) => r.id !== null).map(toLead);
  const total: number = noCount ? offset + items.length : rows[0].total;
  return {
    ...page(items, total, offset, limit),
    cursor: rows[0].newest ? (rows[0].newest as Date).toISOString() : null,
  };
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > 1_048_576) reject(new HttpError(413, "PAYLOAD_TOO_LARGE", "too large"));
      else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

const str = (v: unknown, max: number, what: string, optional = true): string | null => {
  if (v === undefined || v === null) {
    if (optional) return null;
    throw new HttpError(422, "VALIDATION_ERROR", `${what} is required`);
  }
  if (typeof v !== "string" || v.length < 1 || v.length > max)
    throw new HttpError(422, "VALIDATION_ERROR", `bad ${what}`);
  return v;
};

// POST /leads — ONE statement in the common case: the default-entry stage and the matching contact
// (phone, then email) as subqueries, the INSERT of the lead, and the INSERT of the idempotency record
// holding the response (the lead row as jsonb), all in one implicit transaction. A key already used
// makes the record's INSERT fail on its unique index (the lead's INSERT goes with it); the stored
// response is then read back (the replay path: a second statement).
function parseJsonBody(req: IncomingMessage, text: string): any {
  if (!/^application\/json/i.test(String(req.headers["content-type"] ?? "")))
    throw new HttpError(422, "VALIDATION_ERROR", "Content-Type");
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError(422, "VALIDATION_ERROR", "Malformed JSON body");
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new HttpError(422, "VALIDATION_ERROR", "not an object");
  return body;
}

const idemKeyOf = (req: IncomingMessage) => {
  const key = req.headers["idempotency-key"];
  return typeof key === "string" && /^[\x21-\x7e]{1,255}$/.test(key) ? key : null;
};
const fingerprintOf = (body: object) =>
  createHash("sha256")
    .update(JSON.stringify(Object.fromEntries(Object.entries(body).sort())))
    .digest("hex");

/** The stored response of an Idempotency-Key already used (after the unique violation). */
async function replay(c: Caller, endpoint: string, key: string, fingerprint: string) {
  const ex = await pool.query(
    `SELECT "fingerprint","statusCode","responseBody" FROM "IdempotencyRecord"
      WHERE "tenantId" = $1::uuid AND "apiKeyId" = $2::uuid AND "endpoint" = $3 AND "key" = $4`,
    [c.tenantId, c.keyId, endpoint, key],
  );
  if (ex.rows[0].fingerprint !== fingerprint) throw new HttpError(409, "IDEMPOTENCY_KEY_REUSE_MISMATCH", "mismatch");
  return { status: ex.rows[0].statusCode as number, row: ex.rows[0].responseBody, replayed: true };
}

const isUnique = (e: unknown, constraint?: string) =>
  (e as { code?: string }).code === "23505" &&
  (!constraint || (e as { constraint?: string }).constraint === constraint);

/** A jsonb row (timestamps as text) back to the row shape (Dates). */
const revive = <T>(row: Record<string, unknown>, dates: string[]): T =>
  ({ ...row, ...Object.fromEntries(dates.map((k) => [k, row[k] === null ? null : new Date(row[k] as string)])) }) as T;

const IDEM_INSERT = (endpoint: string, from: string) => `
  INSERT INTO "IdempotencyRecord" ("tenantId","apiKeyId","endpoint","key","fingerprint","statusCode","responseBody","expiresAt")
  SELECT $1::uuid, $2::uuid, '${endpoint}', $3::text, $4::text, 201, to_jsonb(x), now() + interval '1 day' FROM ${from} x WHERE $3::text IS NOT NULL`;

async function createLead(c: Caller, req: IncomingMessage) {
  need(c, "tenant:leads.manage");
  const body = parseJsonBody(req, await readBody(req));
  const allowed = new Set(["customerName", "customerEmail", "customerPhone", "intent", "quality", "notes"]);
  for (const k of Object.keys(body))
    if (!allowed.has(k)) throw new HttpError(422, "VALIDATION_ERROR", `unknown field ${k}`);
  const name = str(body.customerName, 255, "customerName", false)!;
  const email = str(body.customerEmail, 320, "customerEmail");
  const phone = str(body.customerPhone, 20, "customerPhone");
  const intent = str(body.intent, 50, "intent") ?? "unknown";
  const quality = str(body.quality, 50, "quality") ?? "unknown";
  const notes = body.notes === undefined || body.notes === null ? null : String(body.notes);
  const idemKey = idemKeyOf(req);
  const fingerprint = fingerprintOf(body);
  const e164 = phoneForMatching(phone, c.defaultCountry);
  const mail = email?.trim() || null;
  try {
    const { rows } = await pool.query(
      `WITH ins AS (
         INSERT INTO "Lead" ("tenantId","customerId","conversationId","customerName","customerEmail","customerPhone",
           "intent","quality",
           "stageId","budgetMin","budgetMax","zones","rooms","assignedOperatorId","source","notes","createdAt",
             "updatedAt")
         VALUES ($1::uuid,
           coalesce((SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "phone" = $5::text
             AND "deletedAt" IS NULL LIMIT 1),
                    (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND lower("email") = lower($6::text)
                      AND "deletedAt" IS NULL LIMIT 1)),
           NULL, $7::text, $8::text, $9::text, $10::text, $11::text,
           (SELECT "id" FROM "PipelineStage" WHERE "tenantId" = $1::uuid
             ORDER BY "defaultEntry" DESC, "position", "createdAt", "id" LIMIT 1),
           NULL, NULL, '{}', NULL, NULL, 'api', $12::text, $13::timestamptz, $13::timestamptz)
         RETURNING ${LEAD_COLS.replace(/l\./g, "")}),
       rec AS (${IDEM_INSERT("baseline.leads.create", "ins")})
       SELECT * FROM ins`,
      [c.tenantId, c.keyId, idemKey, fingerprint, e164, mail, name, email, phone, intent, quality, notes, new Date()],
    );
    return { status: 201, body: toLead(rows[0]), replayed: false };
  } catch (e) {
    if (!idemKey || !isUnique(e, "IdempotencyRecord_tenantId_apiKeyId_endpoint_key_key")) throw e;
    const r = await replay(c, "baseline.leads.create", idemKey, fingerprint);
    return { status: r.status, body: toLead(revive<LeadRow>(r.row, ["createdAt", "updatedAt"])), replayed: true };
  }
}

// POST /appointments — ONE statement: the bookable-user check, the INSERT (the exclusion constraint
// "Appointment_no_overlap" is the overlap check) and the idempotency record. An overlap is 409, with
// the blocker read afterwards (error path only).
const APPT_COLS = `"id","assignedUserId","customerId","conversationId","leadId","title","appointmentType","startsAt","endsAt","status","source","notes","version","createdAt","updatedAt"`;
interface AppointmentRow {
  id: string;
  assignedUserId: string;
  customerId: string | null;
  conversationId: string | null;
  leadId: string | null;
  title: string;
  appointmentType: string;
  startsAt: Date;
  endsAt: Date;
  status: string;
  source: string;
  notes: string | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}
const toAppointment = (a: AppointmentRow) => ({
  id: a.id,
  assignedUserId: a.assignedUserId,
  customerId: a.customerId,
  conversationId: a.conversationId,
  leadId: a.leadId,
  title: a.title,
  appointmentType: a.appointmentType,
  startsAt: a.startsAt.toISOString(),
  endsAt: a.endsAt.toISOString(),
  status: a.status,
  source: a.source,
  notes: a.notes,
  version: a.version,
  createdAt: a.createdAt.toISOString(),
  updatedAt: a.updatedAt.toISOString(),
});
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const instant = (v: unknown, what: string) => {
  const d = typeof v === "string" ? new Date(v) : new Date(NaN);
  if (Number.isNaN(d.getTime())) throw new HttpError(422, "VALIDATION_ERROR", `bad ${what}`);
  return d;
};

async function createAppointment(c: Caller, req: IncomingMessage) {
  need(c, "tenant:appointments.manage");
  const body = parseJsonBody(req, await readBody(req));
  const allowed = new Set(["assignedUserId", "title", "appointmentType", "startsAt", "endsAt", "notes"]);
  for (const k of Object.keys(body))
    if (!allowed.has(k)) throw new HttpError(422, "VALIDATION_ERROR", `unknown field ${k}`);
  const userId = str(body.assignedUserId, 36, "assignedUserId", false)!;
  if (!UUID_RE.test(userId)) throw new HttpError(422, "VALIDATION_ERROR", "bad assignedUserId");
  const title = str(body.title, 255, "title", false)!;
  const type = str(body.appointmentType, 50, "appointmentType", false)!;
  const startsAt = instant(body.startsAt, "startsAt");
  const endsAt = instant(body.endsAt, "endsAt");
  if (endsAt <= startsAt) throw new HttpError(422, "VALIDATION_ERROR", "endsAt must be after startsAt");
  const notes = body.notes === undefined || body.notes === null ? null : String(body.notes);
  const idemKey = idemKeyOf(req);
  const fingerprint = fingerprintOf(body);
  const now = new Date();
  try {
    const { rows } = await pool.query(
      `WITH ins AS (
         INSERT INTO "Appointment" ("tenantId","assignedUserId","customerId","conversationId","leadId","title",
           "appointmentType",
           "startsAt","endsAt","status","source","notes","createdAt","updatedAt")
         SELECT $1::uuid, u."id", NULL, NULL, NULL, $6::text, $7::text, $8::timestamptz, $9::timestamptz, 'scheduled',
           'manual', $10::text,
                $11::timestamptz, $11::timestamptz
           FROM "User" u WHERE u."tenantId" = $1::uuid AND u."id" = $5::uuid AND u."bookable"
         RETURNING ${APPT_COLS}),
       rec AS (${IDEM_INSERT("baseline.appointments.create", "ins")})
       SELECT * FROM ins`,
      [c.tenantId, c.keyId, idemKey, fingerprint, userId, title, type, startsAt, endsAt, notes, now],
    );
    if (!rows[0]) throw new HttpError(404, "NOT_FOUND", "User not found");
    return { status: 201, body: toAppointment(rows[0]), replayed: false };
  } catch (e) {
    if ((e as { code?: string }).code === "23P01") throw new HttpError(409, "APPOINTMENT_OVERLAP", "overlap");
    if (!idemKey || !isUnique(e, "IdempotencyRecord_tenantId_apiKeyId_endpoint_key_key")) throw e;
    const r = await replay(c, "baseline.appointments.create", idemKey, fingerprint);
    return {
      status: r.status,
      body: toAppointment(revive<AppointmentRow>(r.row, ["startsAt", "endsAt", "createdAt", "updatedAt"])),
      replayed: true,
    };
  }
}

// PUT /contacts/by-external-id/{externalId} — the update path in ONE statement: the contact
// holding the external id (cur) and, in the same statement, the UPDATE … RETURNING of the fields
// that differ, only while it is live and the body's phone (E.164) and country are the stored ones.
// Nothing updated: the row read (cur) decides in JS — a deleted contact 409, a phone or country that
// differs 422 (the phone normalised again with the contact's own country first, as PATCH's rules
// do), else unchanged (200, nothing written). No contact: the INSERT of POST /contacts (201). The
// version is the "row_version" trigger's, as for the service.
const CONTACT_COLS = `"id","fullName","phone","email","country","phoneVerifiedAt","emailVerifiedAt","marketingOptOut","marketingOptOutAt","origin","externalId","version","createdAt","updatedAt"`;
interface ContactRow {
  id: string;
  fullName: string | null;
  phone: string | null;
  email: string | null;
  country: string | null;
  phoneVerifiedAt: Date | null;
  emailVerifiedAt: Date | null;
  marketingOptOut: boolean;
  marketingOptOutAt: Date | null;
  origin: string;
  externalId: string | null;
  version: number;
  createdAt: Date;
  updatedAt: Date;
  deletedAt?: Date | null;
}
const toContact = (x: ContactRow) => ({
  id: x.id,
  fullName: x.fullName,
  phone: x.phone,
  email: x.email,
  country: x.country,
  phoneVerifiedAt: iso(x.phoneVerifiedAt),
  emailVerifiedAt: iso(x.emailVerifiedAt),
  marketingOptOut: x.marketingOptOut,
  marketingOptOutAt: iso(x.marketingOptOutAt),
  origin: x.origin,
  externalId: x.externalId,
  version: x.version,
  createdAt: iso(x.createdAt),
  updatedAt: iso(x.updatedAt),
});
const CONTACT_UPDATE = `
  WITH cur AS (SELECT ${CONTACT_COLS}, "deletedAt" FROM "Contact" WHERE "tenantId" = $1::uuid AND "externalId" = $2::text),
  upd AS (
    UPDATE "Contact" x SET "fullName" = CASE WHEN $3::boolean THEN $4::text ELSE x."fullName" END,
                           "email" = CASE WHEN $5::boolean THEN $6::text ELSE x."email" END, "updatedAt" = $9::timestamptz
      FROM cur
     WHERE x."tenantId" = $1::uuid AND x."id" = cur."id" AND x."deletedAt" IS NULL AND x."phone" = $7::text
       AND ($8::text IS NULL OR x."country" = $8::text)
       AND (($3::boolean AND x."fullName" IS DISTINCT FROM $4::text) OR ($5::boolean AND x."email" IS DISTINCT FROM $6::text))
    RETURNING ${CONTACT_COLS.replace(/"(\w+)"/g, 'x."$1"')}, x."deletedAt")
  SELECT true AS "written", upd.* FROM upd
  UNION ALL SELECT false, cur.* FROM cur WHERE NOT EXISTS (SELECT 1 FROM upd)`;
const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const isUniqueOf = (e: unknown, ...names: string[]) =>
  isUnique(e) && names.includes((e as { constraint?: string }).constraint ?? "");

interface ContactItem {
  externalId: string;
  fullName?: string;
  email?: string;
  country?: string;
  rawPhone: string;
  /** E.164 with the body's country, else the tenant's. */
  phone: string;
}

/** A PUT body (or a batch item, with its externalId) → the item, or 422. */
function contactItem(c: Caller, body: any, externalId: unknown): ContactItem {
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new HttpError(422, "VALIDATION_ERROR", "not an object");
  const allowed = new Set(["fullName", "phone", "email", "country"]);
  for (const k of Object.keys(body))
    if (!allowed.has(k)) throw new HttpError(422, "VALIDATION_ERROR", `unknown field ${k}`);
  if (
    typeof externalId !== "string" ||
    externalId.length < 1 ||
    externalId.length > 255 ||
    /[\u0000-\u001f\u007f-\u009f]/.test(externalId)
  )
    throw new HttpError(422, "VALIDATION_ERROR", "bad externalId");
  const fullName = body.fullName === undefined ? undefined : str(body.fullName, 255, "fullName", false)!;
  const email = body.email === undefined ? undefined : str(body.email, 320, "email", false)!;
  if (email !== undefined && !EMAIL_RE.test(email)) throw new HttpError(422, "VALIDATION_ERROR", "bad email");
  const country = body.country === undefined ? undefined : str(body.country, 2, "country", false)!.toUpperCase();
  if (country !== undefined && !/^[A-Z]{2}$/.test(country)) throw new HttpError(422, "VALIDATION_ERROR", "bad country");
  const rawPhone = str(body.phone, 40, "phone", false)!;
  const phone = toE164(rawPhone, country ?? c.defaultCountry);
  if (!phone) throw new HttpError(422, "VALIDATION_ERROR", "bad phone");
  return { externalId, fullName, email, country, rawPhone, phone };
}

/** The contact as read (nothing written by the statement): unchanged, or the 409 / 422 it answers. */
function settleCurrent(it: ContactItem, row: ContactRow): { own: string | null } {
  if (row.deletedAt) throw new HttpError(409, "ALREADY_EXISTS", "A contact with this externalId already exists");
  // Normalised with the contact's own country (the body's, else the stored one, else the tenant's).
  const own = it.country === undefined && row.country ? toE164(it.rawPhone, row.country) : it.phone;
  const differs = [
    ...(own !== row.phone ? ["phone"] : []),
    ...(it.country !== undefined && it.country !== row.country ? ["country"] : []),
  ];
  if (differs.length) throw new HttpError(422, "VALIDATION_ERROR", `may not change: ${differs.join(", ")}`);
  return { own };
}

const duplicate = (e: unknown) => {
  if (isUniqueOf(e, "Contact_tenantId_phone_key", "Contact_tenantId_email_ci_key"))
    return new HttpError(409, "ALREADY_EXISTS", "A contact with this phone or email already exists");
  return e;
};

/** One upsert (PUT; a batch item the batch statement did not settle): 201 created, 200 updated or unchanged. */
async function upsertContactItem(
  c: Caller,
  it: ContactItem,
  now: Date,
): Promise<{ status: 200 | 201; state: "created" | "updated" | "unchanged"; row: ContactRow }> {
  const update = async (e164: string) => {
    const { rows } = await pool.query({
      name: "contact_upsert_update",
      text: CONTACT_UPDATE,
      values: [
        c.tenantId,
        it.externalId,
        it.fullName !== undefined,
        it.fullName ?? null,
        it.email !== undefined,
        it.email ?? null,
        e164,
        it.country ?? null,
        now,
      ],
    });
    return rows[0] as (ContactRow & { written: boolean }) | undefined;
  };
  try {
    let row = await update(it.phone);
    if (!row) {
      // No contact holds it: POST /contacts's INSERT with the external id (a concurrent upsert that
      // won the external id: its row updated instead).
      try {
        const ins = await pool.query(
          `INSERT INTO "Contact" ("tenantId","fullName","phone","email","country","origin","externalId","createdAt",
           "updatedAt")
           VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::text, 'api', $6::text, $7::timestamptz, $7::timestamptz)
             RETURNING ${CONTACT_COLS}`,
          [c.tenantId, it.fullName ?? null, it.phone, it.email ?? null, it.country ?? null, it.externalId, now],
        );
        return { status: 201, state: "created", row: ins.rows[0] as ContactRow };
      } catch (e) {
        if (!isUniqueOf(e, "Contact_tenantId_externalId_key")) throw e;
        row = await update(it.phone);
        if (!row) throw e;
      }
    }
    if (row.written) return { status: 200, state: "updated", row };
    const { own } = settleCurrent(it, row);
    if (own !== it.phone) {
      const again = await update(own!);
      if (again?.written) return { status: 200, state: "updated", row: again };
    }
    return { status: 200, state: "unchanged", row };
  } catch (e) {
    throw duplicate(e);
  }
}

async function upsertContact(c: Caller, req: IncomingMessage, externalId: string) {
  need(c, "tenant:contacts.manage");
  const body = parseJsonBody(req, await readBody(req));
  return upsertContactItem(c, contactItem(c, body, externalId), new Date());
}

// POST /contacts/batch/upsert — every valid item in ONE statement: the contacts holding the
// items' external ids (cur), the INSERT of the others (ON CONFLICT DO NOTHING: an item whose phone,
// email or external id is taken is simply not inserted) and the UPDATE of the held ones whose fields
// differ (the PUT's conditions), each RETURNING its rows. An item that statement did not settle (not
// inserted; a held contact whose phone needs its own country) goes through the PUT's path on its own;
// a failure is that item's own answer. Results in the items' order.
const CONTACT_BATCH = `
  WITH input AS (
    SELECT * FROM jsonb_to_recordset($2::jsonb)
      AS t("i" int, "externalId" text, "setName" boolean, "fullName" text, "setEmail" boolean, "email" text, "phone" text, "country" text)),
  cur AS (
    SELECT input."i", ${CONTACT_COLS.replace(/"(\w+)"/g, 'c."$1"')}, c."deletedAt"
      FROM input JOIN "Contact" c ON c."tenantId" = $1::uuid AND c."externalId" = input."externalId"),
  ins AS (
    INSERT INTO "Contact" ("tenantId","fullName","phone","email","country","origin","externalId","createdAt","updatedAt")
    SELECT $1::uuid, input."fullName", input."phone", input."email", input."country", 'api', input."externalId", $3::timestamptz, $3::timestamptz
      FROM input WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur."i" = input."i") ORDER BY input."i"
    ON CONFLICT DO NOTHING
    RETURNING ${CONTACT_COLS}, "deletedAt"),
  upd AS (
    UPDATE "Contact" x SET "fullName" = CASE WHEN input."setName" THEN input."fullName" ELSE x."fullName" END,
                           "email" = CASE WHEN input."setEmail" THEN input."email" ELSE x."email" END, "updatedAt" = $3::timestamptz
      FROM cur JOIN input ON input."i" = cur."i"
     WHERE x."tenantId" = $1::uuid AND x."id" = cur."id" AND x."deletedAt" IS NULL AND x."phone" = input."phone"
       AND (input."country" IS NULL OR x."country" = input."country")
       AND ((input."setName" AND x."fullName" IS DISTINCT FROM input."fullName") OR (input."setEmail" AND x."email" IS DISTINCT FROM input."email"))
    RETURNING ${CONTACT_COLS.replace(/"(\w+)"/g, 'x."$1"')}, x."deletedAt")
  SELECT 'created' AS "k", NULL::int AS "i", ins.* FROM ins
  UNION ALL SELECT 'updated', NULL, upd.* FROM upd
  UNION ALL SELECT 'current', cur.* FROM cur`;

type BatchResult = {
  index: number;
  status: string;
  id: string | null;
  item: unknown;
  error: { error: string; message: string; details: object } | null;
};
const failed = (index: number, e: unknown): BatchResult => {
  if (!(e instanceof HttpError) || e.status >= 500) throw e;
  return { index, status: "failed", id: null, item: null, error: { error: e.code, message: e.message, details: {} } };
};

async function batchUpsertContacts(c: Caller, req: IncomingMessage) {
  need(c, "tenant:contacts.manage");
  const body = parseJsonBody(req, await readBody(req));
  if (
    Object.keys(body).some((k) => k !== "items") ||
    !Array.isArray(body.items) ||
    body.items.length < 1 ||
    body.items.length > 100
  )
    throw new HttpError(422, "VALIDATION_ERROR", "items: 1 to 100");
  const now = new Date();
  const results: (BatchResult | undefined)[] = new Array(body.items.length);
  const valid: { i: number; it: ContactItem }[] = [];
  const seen = new Set<string>();
  body.items.forEach((raw: any, i: number) => {
    try {
      const { externalId, ...rest } = raw && typeof raw === "object" && !Array.isArray(raw) ? raw : ({} as any);
      const it = contactItem(c, rest, externalId);
      if (seen.has(it.externalId))
        throw new HttpError(422, "VALIDATION_ERROR", "An earlier item of this batch has the same externalId");
      seen.add(it.externalId);
      valid.push({ i, it });
    } catch (e) {
      results[i] = failed(i, e);
    }
  });
  const done = (i: number, state: string, row: ContactRow): BatchResult => ({
    index: i,
    status: state,
    id: row.id,
    item: toContact(row),
    error: null,
  });
  if (valid.length) {
    const input = valid.map(({ i, it }) => ({
      i,
      externalId: it.externalId,
      setName: it.fullName !== undefined,
      fullName: it.fullName ?? null,
      setEmail: it.email !== undefined,
      email: it.email ?? null,
      phone: it.phone,
      country: it.country ?? null,
    }));
    const { rows } = await pool.query({
      name: "contact_batch_upsert",
      text: CONTACT_BATCH,
      values: [c.tenantId, JSON.stringify(input), now],
    });
    const byExternalId = new Map(valid.map((v) => [v.it.externalId, v]));
    const current = new Map<number, ContactRow>();
    for (const r of rows as (ContactRow & { k: string; i: number | null })[]) {
      if (r.k === "current") current.set(r.i!, r);
      else {
        const v = byExternalId.get(r.externalId!)!;
        results[v.i] = done(v.i, r.k, r);
      }
    }
    for (const { i, it } of valid) {
      if (results[i]) continue;
      const row = current.get(i);
      try {
        if (row && settleCurrent(it, row).own === it.phone) results[i] = done(i, "unchanged", row);
        else {
          const r = await upsertContactItem(c, it, now);
          results[i] = done(i, r.state, r.row);
        }
      } catch (e) {
        results[i] = failed(i, e);
      }
    }
  }
  return { results };
}

// ---- the other lists: one statement each — a plain count(*) of the filter (omitted without count)
// and the page by LIMIT/OFFSET over the list's order index.

const iso = (d: Date | null) => (d === null ? null : d.toISOString());
const page = (items: unknown[], total: number, offset: number, limit: number) => ({
  items,
  total,
  pagination: {
    page: Math.floor(offset / limit) + 1,
    pageSize: limit,
    totalItems: total,
    totalPages: Math.ceil(total / limit),
    hasNext: offset + limit < total,
    hasPrev: offset > 0,
  },
});

async function listOf(
  c: Caller,
  url: URL,
  noCount: boolean,
  spec: { table: string; where: string; select: string; order: string; join?: string; extra?: number },
) {
  const offset = int(url.searchParams.get("offset"), 0, 2_147_483_647, 0);
  const limit = int(url.searchParams.get("limit"), 1, 200, 50);
  const take = limit + (spec.extra ?? 0);
  const total = noCount
    ? `NULL::int`
    : `(SELECT count(*)::int FROM "${spec.table}" x WHERE x."tenantId" = $1 AND ${spec.where})`;
  const { rows } = await pool.query(
    `SELECT ${total} AS "total", p.* FROM (SELECT 1) one LEFT JOIN LATERAL (
       ${spec.select} FROM (SELECT * FROM "${spec.table}" x WHERE x."tenantId" = $1 AND ${spec.where}
         ORDER BY ${spec.order} LIMIT $2 OFFSET $3) x
       ${spec.join ?? ""}
     ) p ON true ORDER BY ${spec.order.replace(/x\./g, "p.")}`,
    [c.tenantId, take, offset],
  );
  const items = rows.filter((r) => r.id !== null);
  return { items, total: noCount ? offset + items.length : (rows[0].total as number), offset, limit };
}

async function listContacts(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:contacts.read");
  const r = await listOf(c, url, noCount, {
    table: "Contact",
    where: `x."deletedAt" IS NULL`,
    order: `x."createdAt" DESC, x."id" DESC`,
    select: `SELECT x."id", x."fullName", x."phone", x."email", x."country", x."phoneVerifiedAt", x."emailVerifiedAt", x."marketingOptOut",
                    x."marketingOptOutAt", x."origin", x."externalId", x."version", x."createdAt"`,
    extra: 1,
  });
  const more = r.items.length > r.limit;
  const items = r.items.slice(0, r.limit);
  const last = items[items.length - 1];
  return {
    ...page(
      items.map((x) => ({
        id: x.id,
        fullName: x.fullName,
        phone: x.phone,
        email: x.email,
        country: x.country,
        phoneVerifiedAt: iso(x.phoneVerifiedAt),
        emailVerifiedAt: iso(x.emailVerifiedAt),
        marketingOptOut: x.marketingOptOut,
        marketingOptOutAt: iso(x.marketingOptOutAt),
        origin: x.origin,
        externalId: x.externalId,
        version: x.version,
        createdAt: iso(x.createdAt),
      })),
      r.total,
      r.offset,
      r.limit,
    ),
    nextCursor:
      more && last ? Buffer.from(`${last.createdAt.toISOString()}|${last.id}`, "utf8").toString("base64url") : null,
  };
}

async function listTickets(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:tickets.read");
  const r = await listOf(c, url, noCount, {
    table: "Ticket",
    where: "true",
    order: `x."createdAt" DESC, x."id" DESC`,
    select: `SELECT x."id", x."customerId", x."leadId", x."conversationId", x."subject", x."status", x."createdById", x."assignedToId",
                    x."externalId", x."version", x."createdAt", x."updatedAt",
                    (SELECT coalesce(json_agg(json_build_object('id', m."id", 'authorUserId', m."authorUserId", 'body', m."body",
                                                                'createdAt', m."createdAt") ORDER BY m."createdAt", m."id"), '[]')
                       FROM "TicketComment" m WHERE m."tenantId" = $1 AND m."ticketId" = x."id") AS "comments"`,
  });
  return page(
    r.items.map((t) => ({
      id: t.id,
      customerId: t.customerId,
      leadId: t.leadId,
      conversationId: t.conversationId,
      subject: t.subject,
      status: t.status,
      createdBy: t.createdById,
      assignedTo: t.assignedToId,
      externalId: t.externalId,
      version: t.version,
      createdAt: iso(t.createdAt),
      updatedAt: iso(t.updatedAt),
      comments: (t.comments as { id: string; authorUserId: string | null; body: string; createdAt: string }[]).map(
        (m) => ({
          id: m.id,
          authorUserId: m.authorUserId,
          body: m.body,
          createdAt: new Date(m.createdAt).toISOString(),
        }),
      ),
    })),
    r.total,
    r.offset,
    r.limit,
  );
}

async function listAppointments(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:appointments.read");
  const r = await listOf(c, url, noCount, {
    table: "Appointment",
    where: "true",
    order: `x."startsAt", x."id"`,
    select: `SELECT x.*`,
  });
  return page(
    r.items.map((a) => toAppointment(a as AppointmentRow)),
    r.total,
    r.offset,
    r.limit,
  );
}

async function listConversations(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:conversations.read");
  const r = await listOf(c, url, noCount, {
    table: "Conversation",
    where: "true",
    order: `x."lastMessageAt" DESC, x."id" DESC`,
    select: `SELECT x."id", x."channelId", x."status", x."subject", x."assignedOperatorId", x."lastMessagePreview", x."lastMessageAt",
                    x."createdAt", ch."kind", cu."id" AS "cuId", cu."name" AS "cuName", cu."email" AS "cuEmail", cu."phone" AS "cuPhone",
                    cu."contactId" AS "cuContactId"`,
    join:
      `JOIN "Channel" ch ON ch."tenantId" = $1 AND ch."id" = x."channelId" JOIN "Customer" cu ON cu."tenantId" = ` +
      `$1 AND cu."id" = x."customerId"`,
  });
  return page(
    r.items.map((v) => ({
      id: v.id,
      channel: v.kind,
      channelId: v.channelId,
      status: v.status,
      subject: v.subject,
      customer: { id: v.cuId, name: v.cuName, email: v.cuEmail, phone: v.cuPhone, customerId: v.cuContactId },
      assignedOperatorId: v.assignedOperatorId,
      lastMessagePreview: v.lastMessagePreview,
      lastMessageAt: iso(v.lastMessageAt),
      createdAt: iso(v.createdAt),
    })),
    r.total,
    r.offset,
    r.limit,
  );
}

const LISTS: Record<string, (c: Caller, url: URL, noCount: boolean) => Promise<unknown>> = {
  "/public/v1/contacts": listContacts,
  "/public/v1/tickets": listTickets,
  "/public/v1/appointments": listAppointments,
  "/public/v1/conversations": listConversations,
};

const server = createServer(async (req, res) => {
  const reqId = randomUUID();
  try {
    const url = new URL(req.url ?? "/", "http://x");
    if (url.pathname === "/healthz") return send(res, 200, { status: "ok" }, reqId);
    const caller = await authenticate(req, res);
    if (req.method === "GET" && url.pathname === "/public/v1/me")
      return send(
        res,
        200,
        {
          tenantId: caller.tenantId,
          keyPrefix: caller.prefix,
          scopes: caller.scopes,
          plan: caller.plan,
          rateLimit: { perMinute: caller.perMinute, perDay: caller.perDay },
        },
        reqId,
      );
    if (req.method === "GET" && url.pathname === "/public/v1/leads") {
      const noCount = process.env.BASELINE_LEADS_NO_COUNT === "1" || req.headers["x-bench-no-count"] === "1";
      return send(res, 200, await listLeads(caller, url, noCount), reqId);
    }
    if (req.method === "POST" && (url.pathname === "/public/v1/leads" || url.pathname === "/public/v1/appointments")) {
      const r =
        url.pathname === "/public/v1/leads" ? await createLead(caller, req) : await createAppointment(caller, req);
      if (r.replayed) res.setHeader("Idempotent-Replayed", "true");
      return send(res, r.status, r.body, reqId);
    }
    const put = req.method === "PUT" ? /^\/public\/v1\/contacts\/by-external-id\/([^/]+)$/.exec(url.pathname) : null;
    if (put) {
      let externalId: string;
      try {
        externalId = decodeURIComponent(put[1]!);
      } catch {
        throw new HttpError(422, "VALIDATION_ERROR", "bad externalId");
      }
      const r = await upsertContact(caller, req, externalId);
      res.setHeader("ETag", `"${r.row.version}"`);
      if (r.status === 201) res.setHeader("Location", `/public/v1/contacts/${r.row.id}`);
      return send(res, r.status, toContact(r.row), reqId);
    }
    if (req.method === "POST" && url.pathname === "/public/v1/contacts/batch/upsert")
      return send(res, 200, await batchUpsertContacts(caller, req), reqId);
    const list = req.method === "GET" ? LISTS[url.pathname] : undefined;
    if (list) return send(res, 200, await list(caller, url, req.headers["x-bench-no-count"] === "1"), reqId);
    throw new HttpError(404, "NOT_FOUND", "No operation");
  } catch (e) {
    const err = e instanceof HttpError ? e : new HttpError(500, "INTERNAL_ERROR", "Internal error");
    if (!(e instanceof HttpError)) process.stderr.write(`baseline error: ${(e as Error).stack}\n`);
    send(res, err.status, { error: err.code, message: err.message, request_id: reqId, details: {} }, reqId);
  }
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT || 3902), "127.0.0.1");
const stop = () => server.close(() => Promise.all([pool.end(), redis.quit()]).finally(() => process.exit(0)));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
