// The raw baseline: the smallest honest server for GET /me, GET /leads and POST /leads on node:http +
// pg (+ ioredis for the quotas), doing the same work as the service without framework or ORM:
//   auth    one SQL round trip (the same named LOOKUP as server/auth/authenticate.ts: key by prefix, owner
//           grant, tenant plan and limits), SHA-256 of the presented key compared in constant time,
//           revoked / expired / plan gate, effective scopes
//   quotas  the minute and day windows of the key counted in Redis (one round trip: both windows in
//           one Lua script), X-RateLimit-* headers, 429 over a ceiling
//   op      the same SQL statements the service sends (see the comments per route), JSON out
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
           JOIN "Lead" l ON l."id" = ids."id") p ON true ORDER BY p."createdAt" DESC, p."id" DESC`
    : `SELECT (SELECT count(*)::int FROM "Lead" WHERE ${where}) AS "total", (SELECT max("createdAt") FROM "Lead" WHERE ${where}) AS "newest", p.*
         FROM (SELECT 1) one LEFT JOIN LATERAL (
         SELECT ${LEAD_COLS} FROM (SELECT "id" FROM "Lead" WHERE ${where} ORDER BY "createdAt" DESC, "id" DESC LIMIT $${n - 1} OFFSET $${n}) ids
           JOIN "Lead" l ON l."id" = ids."id") p ON true ORDER BY p."createdAt" DESC, p."id" DESC`;
  const { rows } = await pool.query(sql, params);
  const items = rows.filter((r) => r.id !== null).map(toLead);
  const total: number = noCount ? offset + items.length : rows[0].total;
  return {
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
  if (typeof v !== "string" || v.length < 1 || v.length > max) throw new HttpError(422, "VALIDATION_ERROR", `bad ${what}`);
  return v;
};

// POST /leads — the same statements as routers/leads/create.ts inside server/idempotency.ts's
// transaction: claim the Idempotency-Key, default-entry stage, contact by phone then by email,
// insert, store the response, commit.
async function createLead(c: Caller, req: IncomingMessage) {
  need(c, "tenant:leads.manage");
  const text = await readBody(req);
  if (!/^application\/json/i.test(String(req.headers["content-type"] ?? ""))) throw new HttpError(422, "VALIDATION_ERROR", "Content-Type");
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    throw new HttpError(422, "VALIDATION_ERROR", "Malformed JSON body");
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) throw new HttpError(422, "VALIDATION_ERROR", "not an object");
  const allowed = new Set(["customerName", "customerEmail", "customerPhone", "intent", "quality", "notes"]);
  for (const k of Object.keys(body)) if (!allowed.has(k)) throw new HttpError(422, "VALIDATION_ERROR", `unknown field ${k}`);
  const name = str(body.customerName, 255, "customerName", false)!;
  const email = str(body.customerEmail, 320, "customerEmail");
  const phone = str(body.customerPhone, 20, "customerPhone");
  const intent = str(body.intent, 50, "intent") ?? "unknown";
  const quality = str(body.quality, 50, "quality") ?? "unknown";
  const notes = body.notes === undefined || body.notes === null ? null : String(body.notes);
  const key = req.headers["idempotency-key"];
  const idemKey = typeof key === "string" && /^[\x21-\x7e]{1,255}$/.test(key) ? key : undefined;
  const fingerprint = createHash("sha256").update(JSON.stringify(Object.fromEntries(Object.entries(body).sort()))).digest("hex");

  const client = await pool.connect();
  try {
    await client.query("BEGIN");
    let claimId: string | undefined;
    if (idemKey) {
      const claimed = await client.query(
        `INSERT INTO "IdempotencyRecord" ("apiKeyId","endpoint","key","fingerprint","statusCode","responseBody","expiresAt")
         VALUES ($1::uuid, 'baseline.leads.create', $2, $3, 0, '{}'::jsonb, now() + make_interval(secs => 86400))
         ON CONFLICT ("apiKeyId","endpoint","key") DO NOTHING RETURNING "id"`,
        [c.keyId, idemKey, fingerprint],
      );
      if (claimed.rows.length === 0) {
        const ex = await client.query(
          `SELECT "fingerprint","responseBody" FROM "IdempotencyRecord" WHERE "apiKeyId" = $1::uuid AND "endpoint" = 'baseline.leads.create' AND "key" = $2`,
          [c.keyId, idemKey],
        );
        await client.query("COMMIT");
        if (ex.rows[0].fingerprint !== fingerprint) throw new HttpError(409, "IDEMPOTENCY_KEY_REUSE_MISMATCH", "mismatch");
        return { status: 201, body: ex.rows[0].responseBody, replayed: true };
      }
      claimId = claimed.rows[0].id;
    }
    const stage = await client.query(
      `SELECT "id" FROM "PipelineStage" WHERE "tenantId" = $1 ORDER BY "defaultEntry" DESC, "position" ASC, "createdAt" ASC, "id" ASC LIMIT 1`,
      [c.tenantId],
    );
    let customerId: string | null = null;
    const e164 = phoneForMatching(phone, c.defaultCountry);
    if (e164) {
      const r = await client.query(`SELECT "id" FROM "Contact" WHERE "tenantId" = $1 AND "phone" = $2 AND "deletedAt" IS NULL LIMIT 1`, [c.tenantId, e164]);
      customerId = r.rows[0]?.id ?? null;
    }
    if (!customerId && email?.trim()) {
      const r = await client.query(
        `SELECT "id" FROM "Contact" WHERE "tenantId" = $1::uuid AND lower("email") = lower($2) AND "deletedAt" IS NULL LIMIT 1`,
        [c.tenantId, email.trim()],
      );
      customerId = r.rows[0]?.id ?? null;
    }
    const now = new Date();
    const ins = await client.query(
      `INSERT INTO "Lead" ("tenantId","customerId","conversationId","customerName","customerEmail","customerPhone","intent","quality",
         "stageId","budgetMin","budgetMax","zones","rooms","assignedOperatorId","source","notes","createdAt","updatedAt")
       VALUES ($1,$2,NULL,$3,$4,$5,$6,$7,$8,NULL,NULL,'{}',NULL,NULL,'api',$9,$10,$10)
       RETURNING ${LEAD_COLS.replace(/l\./g, "")}`,
      [c.tenantId, customerId, name, email, phone, intent, quality, stage.rows[0].id, notes, now],
    );
    const lead = toLead(ins.rows[0]);
    if (claimId)
      await client.query(`UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = $1::jsonb WHERE "id" = $2::uuid`, [JSON.stringify(lead), claimId]);
    await client.query("COMMIT");
    return { status: 201, body: lead, replayed: false };
  } catch (e) {
    await client.query("ROLLBACK").catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}

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
    if (req.method === "POST" && url.pathname === "/public/v1/leads") {
      const r = await createLead(caller, req);
      if (r.replayed) res.setHeader("Idempotent-Replayed", "true");
      return send(res, r.status, r.body, reqId);
    }
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
