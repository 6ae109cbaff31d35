// The raw baseline (issue 13: the physical limit): the smallest honest server for GET /me, the lists
// (leads, contacts, tickets, appointments, conversations), POST /leads and POST /appointments on
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
import { phoneForMatching } from "../../server/phone.js";

const ALL_SCOPES = ["leads", "contacts", "conversations", "appointments", "tickets"].flatMap((r) => [`tenant:${r}.read`, `tenant:${r}.manage`]);
const KEY_RE = /^(crm_[0-9A-Za-z]{12})_([0-9A-Za-z]{40})$/;


const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 });
let queries = 0;
if (process.env.BENCH_COUNT_QUERIES === "1") {
  pool.on("connect", (c: any) => {
    const q = c.query.bind(c);
    c.query = (...a: unknown[]) => (queries++, q(...a));
  });
  process.on("SIGUSR2", () => process.stderr.write(`bench:queries ${queries}\n`));
}
const redis = new Redis(process.env.REDIS_URL || "redis://127.0.0.1:6379", { enableOfflineQueue: true, maxRetriesPerRequest: 1 });
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
  res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(json), "X-Request-Id": reqId });
  res.end(json);
}

async function authenticate(req: IncomingMessage, res: ServerResponse): Promise<Caller> {
  const raw = String(req.headers["x-api-key"] ?? "").trim();
  const m = KEY_RE.exec(raw);
  if (!m) throw new HttpError(401, "INVALID_CREDENTIALS", "Invalid API key");
  const { rows } = await pool.query({ name: "auth_lookup", text: LOOKUP, values: [m[1]] });
  const row = rows[0];
  const hash = createHash("sha256").update(raw).digest();
  if (!row || !timingSafeEqual(Buffer.from(row.keyHash, "hex"), hash) || row.revokedAt) throw new HttpError(401, "INVALID_CREDENTIALS", "Invalid API key");
  if (row.expiresAt && row.expiresAt.getTime() <= Date.now()) throw new HttpError(401, "TOKEN_EXPIRED", "API key has expired");
  if (row.plan !== "pro" && row.plan !== "enterprise") throw new HttpError(403, "PLAN_NOT_ELIGIBLE", "Plan not eligible");
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
  res.setHeader("X-RateLimit-Remaining", String(Math.max(0, Math.min(caller.perMinute - mUsed!, caller.perDay - dUsed!))));
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
  createdAt: l.createdAt.toISOString(),
  updatedAt: l.updatedAt.toISOString(),
});

const LEAD_COLS = `l."id", l."customerId", l."conversationId", l."customerName", l."customerEmail", l."customerPhone", l."intent",
  l."quality", l."stageId", l."budgetMin", l."budgetMax", l."zones", l."rooms", l."assignedOperatorId", l."source", l."notes",
  l."createdAt", l."updatedAt"`;

function int(v: string | null, min: number, max: number, fallback: number): number {
  if (v === null || v === "") return fallback;
  if (!/^\d{1,15}$/.test(v) || Number(v) < min || Number(v) > max) throw new HttpError(422, "VALIDATION_ERROR", "bad integer");
  return Number(v);
}

// GET /leads — the same statements as routers/leads/list.ts: one statement with the page (keyset of
// ids first, then the rows: a deep offset walks the narrow index only) and the total and newest
// createdAt of every lead matching the filters. BASELINE_LEADS_NO_COUNT=1 (or the header
// x-bench-no-count) skips the count: what a database-kept counter would save.
async function listLeads(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:leads.read");
  const offset = int(url.searchParams.get("offset"), 0, 2_147_483_647, 0);
  const limit = int(url.searchParams.get("limit"), 1, 200, 50);
  const params: unknown[] = [c.tenantId];
  let where = `"tenantId" = $1`;
  const dateFrom = url.searchParams.get("dateFrom");
  if (dateFrom) {
    const d = new Date(dateFrom);
    if (Number.isNaN(d.getTime())) throw new HttpError(422, "VALIDATION_ERROR", "bad dateFrom");
    params.push(d);
    where += ` AND "createdAt" >= $${params.length}`;
  }
  params.push(limit, offset);
  const n = params.length;
  const sql = noCount
    ? `SELECT NULL::int AS "total", NULL::timestamptz AS "newest", p.* FROM (SELECT 1) one LEFT JOIN LATERAL (
         SELECT ${LEAD_COLS} FROM (SELECT "id" FROM "Lead" WHERE ${where} ORDER BY "createdAt" DESC, "id" DESC LIMIT $${n - 1} OFFSET $${n}) ids
           JOIN "Lead" l ON l."tenantId" = $1 AND l."id" = ids."id") p ON true ORDER BY p."createdAt" DESC, p."id" DESC`
    : `SELECT (SELECT count(*)::int FROM "Lead" WHERE ${where}) AS "total", (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest", p.*
         FROM (SELECT 1) one LEFT JOIN LATERAL (
         SELECT ${LEAD_COLS} FROM (SELECT "id" FROM "Lead" WHERE ${where} ORDER BY "createdAt" DESC, "id" DESC LIMIT $${n - 1} OFFSET $${n}) ids
           JOIN "Lead" l ON l."tenantId" = $1 AND l."id" = ids."id") p ON true ORDER BY p."createdAt" DESC, p."id" DESC`;
  const { rows } = await pool.query(sql, params);
  const items = rows.filter((r) => r.id !== null).map(toLead);
  const total: number = noCount ? offset + items.length : rows[0].total;
  return { ...page(items, total, offset, limit), cursor: rows[0].newest ? (rows[0].newest as Date).toISOString() : null };
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
  if (typeof v !== "string" || v.length < 1 || v.length > max) throw new HttpError(422, "VALIDATION_ERROR", `bad ${what}`);
  return v;
};

// POST /leads — ONE statement in the common case: the default-entry stage and the matching contact
// (phone, then email) as subqueries, the INSERT of the lead, and the INSERT of the idempotency record
// holding the response (the lead row as jsonb), all in one implicit transaction. A key already used
// makes the record's INSERT fail on its unique index (the lead's INSERT goes with it); the stored
// response is then read back (the replay path: a second statement).
function parseJsonBody(req: IncomingMessage, text: string): any {
  if (!/^application\/json/i.test(String(req.headers["content-type"] ?? ""))) throw new HttpError(422, "VALIDATION_ERROR", "Content-Type");
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError(422, "VALIDATION_ERROR", "Malformed JSON body");
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new HttpError(422, "VALIDATION_ERROR", "not an object");
  return body;
}

const idemKeyOf = (req: IncomingMessage) => {
  const key = req.headers["idempotency-key"];
  return typeof key === "string" && /^[\x21-\x7e]{1,255}$/.test(key) ? key : null;
};
const fingerprintOf = (body: object) => createHash("sha256").update(JSON.stringify(Object.fromEntries(Object.entries(body).sort()))).digest("hex");

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
  (e as { code?: string }).code === "23505" && (!constraint || (e as { constraint?: string }).constraint === constraint);

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
  for (const k of Object.keys(body)) if (!allowed.has(k)) throw new HttpError(422, "VALIDATION_ERROR", `unknown field ${k}`);
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
         INSERT INTO "Lead" ("tenantId","customerId","conversationId","customerName","customerEmail","customerPhone","intent","quality",
           "stageId","budgetMin","budgetMax","zones","rooms","assignedOperatorId","source","notes","createdAt","updatedAt")
         VALUES ($1::uuid,
           coalesce((SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND "phone" = $5::text AND "deletedAt" IS NULL LIMIT 1),
                    (SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND lower("email") = lower($6::text) AND "deletedAt" IS NULL LIMIT 1)),
           NULL, $7::text, $8::text, $9::text, $10::text, $11::text,
           (SELECT "id" FROM "PipelineStage" WHERE "tenantId" = $1::uuid ORDER BY "defaultEntry" DESC, "position", "createdAt", "id" LIMIT 1),
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
const APPT_COLS = `"id","assignedUserId","customerId","conversationId","leadId","title","appointmentType","startsAt","endsAt","status","source","notes","createdAt","updatedAt"`;
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
  for (const k of Object.keys(body)) if (!allowed.has(k)) throw new HttpError(422, "VALIDATION_ERROR", `unknown field ${k}`);
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
         INSERT INTO "Appointment" ("tenantId","assignedUserId","customerId","conversationId","leadId","title","appointmentType",
           "startsAt","endsAt","status","source","notes","createdAt","updatedAt")
         SELECT $1::uuid, u."id", NULL, NULL, NULL, $6::text, $7::text, $8::timestamptz, $9::timestamptz, 'scheduled', 'manual', $10::text,
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
    return { status: r.status, body: toAppointment(revive<AppointmentRow>(r.row, ["startsAt", "endsAt", "createdAt", "updatedAt"])), replayed: true };
  }
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
  const total = noCount ? `NULL::int` : `(SELECT count(*)::int FROM "${spec.table}" x WHERE x."tenantId" = $1 AND ${spec.where})`;
  const { rows } = await pool.query(
    `SELECT ${total} AS "total", p.* FROM (SELECT 1) one LEFT JOIN LATERAL (
       ${spec.select} FROM (SELECT * FROM "${spec.table}" x WHERE x."tenantId" = $1 AND ${spec.where} ORDER BY ${spec.order} LIMIT $2 OFFSET $3) x
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
                    x."marketingOptOutAt", x."origin", x."createdAt"`,
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
        createdAt: iso(x.createdAt),
      })),
      r.total,
      r.offset,
      r.limit,
    ),
    nextCursor: more && last ? Buffer.from(`${last.createdAt.toISOString()}|${last.id}`, "utf8").toString("base64url") : null,
  };
}

async function listTickets(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:tickets.read");
  const r = await listOf(c, url, noCount, {
    table: "Ticket",
    where: "true",
    order: `x."createdAt" DESC, x."id" DESC`,
    select: `SELECT x."id", x."customerId", x."leadId", x."conversationId", x."subject", x."status", x."createdById", x."assignedToId",
                    x."createdAt", x."updatedAt",
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
      createdAt: iso(t.createdAt),
      updatedAt: iso(t.updatedAt),
      comments: (t.comments as { id: string; authorUserId: string | null; body: string; createdAt: string }[]).map((m) => ({
        id: m.id,
        authorUserId: m.authorUserId,
        body: m.body,
        createdAt: new Date(m.createdAt).toISOString(),
      })),
    })),
    r.total,
    r.offset,
    r.limit,
  );
}

async function listAppointments(c: Caller, url: URL, noCount: boolean) {
  need(c, "tenant:appointments.read");
  const r = await listOf(c, url, noCount, { table: "Appointment", where: "true", order: `x."startsAt", x."id"`, select: `SELECT x.*` });
  return page(r.items.map((a) => toAppointment(a as AppointmentRow)), r.total, r.offset, r.limit);
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
    join: `JOIN "Channel" ch ON ch."tenantId" = $1 AND ch."id" = x."channelId" JOIN "Customer" cu ON cu."tenantId" = $1 AND cu."id" = x."customerId"`,
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
      return send(res, 200, { tenantId: caller.tenantId, keyPrefix: caller.prefix, scopes: caller.scopes, plan: caller.plan, rateLimit: { perMinute: caller.perMinute, perDay: caller.perDay } }, reqId);
    if (req.method === "GET" && url.pathname === "/public/v1/leads") {
      const noCount = process.env.BASELINE_LEADS_NO_COUNT === "1" || req.headers["x-bench-no-count"] === "1";
      return send(res, 200, await listLeads(caller, url, noCount), reqId);
    }
    if (req.method === "POST" && (url.pathname === "/public/v1/leads" || url.pathname === "/public/v1/appointments")) {
      const r = url.pathname === "/public/v1/leads" ? await createLead(caller, req) : await createAppointment(caller, req);
      if (r.replayed) res.setHeader("Idempotent-Replayed", "true");
      return send(res, r.status, r.body, reqId);
    }
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
