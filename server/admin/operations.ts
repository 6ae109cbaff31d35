// Platform-admin operations (the admin CLI's verbs). Each validates its arguments, changes nothing
// on failure and returns the JSON document the CLI prints.
import type { Database } from "../db/client.js";
import { transaction } from "../db/transaction.js";
import { generateKey } from "../auth/keys.js";
import { parseScopes } from "../auth/scopes.js";
import { DELIVERY, storeMessage } from "../channels/messages.js";
import { INSTANT_RANGE, isStorableInstant } from "../../routers/_lib/schemas.js";
import { toMessage, type MessageObject } from "../../routers/conversations/schemas.js";

export class AdminError extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PLANS = ["starter", "pro", "enterprise"] as const;
type Plan = (typeof PLANS)[number];

function uuid(value: string | undefined, what: string): string {
  if (!value || !UUID.test(value)) throw new AdminError(`${what} must be a UUID`);
  return value.toLowerCase();
}
function count(value: string | undefined, what: string): number {
  if (!value || !/^\d{1,10}$/.test(value) || Number(value) > 2_147_483_647) throw new AdminError(`${what} must be a non-negative integer`);
  return Number(value);
}
function plan(value: string | undefined): Plan {
  if (!PLANS.includes(value as Plan)) throw new AdminError(`PLAN must be one of ${PLANS.join(", ")}`);
  return value as Plan;
}

export async function createKey(db: Database, tenantId: string, ownerId: string, scopes: string, expiresAt?: string) {
  const tId = uuid(tenantId, "TENANT_ID");
  const oId = uuid(ownerId, "OWNER_USER_ID");
  let list: string[];
  try {
    list = parseScopes(scopes ?? "");
  } catch (e) {
    throw new AdminError((e as Error).message);
  }
  if (scopes === undefined) throw new AdminError("SCOPES is required (comma-separated, or all)");
  let expiry: Date | null = null;
  if (expiresAt !== undefined) {
    expiry = new Date(expiresAt);
    if (!isStorableInstant(expiry)) throw new AdminError(`--expires-at must be an ISO 8601 date-time ${INSTANT_RANGE}`);
  }
  const owner = await db.prisma.user.findFirst({ where: { id: oId, tenantId: tId }, select: { id: true } });
  if (!owner) throw new AdminError("no such user in that tenant");
  const g = generateKey();
  const key = await db.prisma.apiKey.create({
    data: { tenantId: tId, ownerId: oId, prefix: g.prefix, keyHash: g.hash, scopes: list, expiresAt: expiry },
  });
  return { id: key.id, key: g.key, prefix: g.prefix };
}

export async function revokeKey(db: Database, keyId: string) {
  const id = uuid(keyId, "KEY_ID");
  // The contract names a key by its id alone; ApiKey is a reference table (docs/decisions.md, issue 14),
  // so this lookup reads one replicated table, and the update then uses the full key.
  const existing = await db.prisma.apiKey.findFirst({ where: { id }, select: { tenantId: true, revokedAt: true } });
  if (!existing) throw new AdminError("no such key");
  const revokedAt =
    existing.revokedAt ??
    (await db.prisma.apiKey.update({ where: { tenantId_id: { tenantId: existing.tenantId, id } }, data: { revokedAt: new Date() } })).revokedAt!;
  return { id, revokedAt: revokedAt.toISOString() };
}

export async function setPlan(db: Database, tenantId: string, planName: string) {
  const id = uuid(tenantId, "TENANT_ID");
  const p = plan(planName);
  const n = await db.prisma.tenant.updateMany({ where: { id }, data: { plan: p, updatedAt: new Date() } });
  if (n.count === 0) throw new AdminError("no such tenant");
  return { id, plan: p };
}

export async function setPlanLimits(db: Database, planName: string, perMinute: string, perDay: string) {
  const p = plan(planName);
  const m = count(perMinute, "PER_MINUTE");
  const d = count(perDay, "PER_DAY");
  await db.prisma.planLimit.upsert({ where: { plan: p }, create: { plan: p, perMinute: m, perDay: d }, update: { perMinute: m, perDay: d } });
  return { plan: p, perMinute: m, perDay: d };
}

export async function setTenantLimits(db: Database, tenantId: string, perMinute: string, perDay?: string) {
  const id = uuid(tenantId, "TENANT_ID");
  const clear = perMinute === "clear";
  const m = clear ? null : count(perMinute, "PER_MINUTE");
  const d = clear ? null : count(perDay, "PER_DAY");
  const n = await db.prisma.tenant.updateMany({ where: { id }, data: { rateLimitPerMinute: m, rateLimitPerDay: d, updatedAt: new Date() } });
  if (n.count === 0) throw new AdminError("no such tenant");
  return { id, perMinute: m, perDay: d };
}

/** Records a customer message (role user, now) as the channel would; reopens the 24-hour window. */
export async function inboundMessage(db: Database, conversationId: string, text: string, now = new Date()): Promise<MessageObject> {
  const id = uuid(conversationId, "CONVERSATION_ID");
  if (text === undefined || text === "") throw new AdminError("TEXT must not be empty");
  return transaction(db.prisma, async (tx) => {
    // The contract names the conversation by its id alone: finding its tenant is the one lookup
    // without "tenantId" (on Citus a query of every shard; an operator command, not the API).
    const conv = await tx.conversation.findFirst({ where: { id }, select: { id: true, tenantId: true } });
    if (!conv) throw new AdminError("no such conversation");
    const message = await storeMessage(tx, {
      tenantId: conv.tenantId, conversationId: id, role: "user", content: text, deliveryStatus: DELIVERY.received, at: now,
    });
    return toMessage(message);
  });
}
