// Platform-admin operations (the admin CLI's verbs). Each validates its arguments, changes nothing
// on failure and returns the JSON document the CLI prints.
import type { Database } from "../db/client.js";
import { transaction } from "../db/transaction.js";
import { generateKey } from "../auth/keys.js";
import { parseScopes } from "../auth/scopes.js";
import { DELIVERY, storeMessage } from "../channels/messages.js";
import { toMessage, type MessageObject } from "../../model/conversation.js";
import { DateTimeInput } from "../../model/instants.js";
import { curlLine, DEMO_KEY_COMMAND, demoFixture, findDemoTenant, LOAD_COMMAND, LOAD_DEMO_COMMAND } from "./demo.js";
import { loadFixture } from "./fixture.js";

/** A refused admin verb: the message is the one-line reason the CLI prints. */
export class AdminError extends Error {}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PLANS = ["starter", "pro", "enterprise"] as const;
type Plan = (typeof PLANS)[number];

/** `value` shown in a message: quoted, cut to 100 characters (an argument may be anything). */
const shown = (value: string) => JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);

function uuid(value: string | undefined, what: string): string {
  if (!value || !UUID.test(value))
    throw new AdminError(`${what} must be a UUID${value === undefined ? "" : `, got ${shown(value)}`}`);
  return value.toLowerCase();
}
function count(value: string | undefined, what: string): number {
  if (!value || !/^\d{1,10}$/.test(value) || Number(value) > 2_147_483_647)
    throw new AdminError(
      `${what} must be an integer from 0 to 2147483647${value === undefined ? "" : `, got ${shown(value)}`}`,
    );
  return Number(value);
}
function plan(value: string | undefined): Plan {
  if (!PLANS.includes(value as Plan))
    throw new AdminError(
      `PLAN must be one of ${PLANS.join(", ")}${value === undefined ? "" : `, got ${shown(value)}`}`,
    );
  return value as Plan;
}

/**
 * The arguments of create-key, checked (without the database): the ids, the scopes, and an
 * `--expires-at` that is an ISO 8601 date-time with an offset (as the API's date-times), storable,
 * and after `now` — a key born expired is refused.
 */
export function createKeyArgs(tenantId: string, ownerId: string, scopes: string, expiresAt?: string, now = new Date()) {
  const tId = uuid(tenantId, "TENANT_ID");
  const oId = uuid(ownerId, "OWNER_USER_ID");
  if (scopes === undefined) throw new AdminError("SCOPES is required (comma-separated, or all)");
  let list: string[];
  try {
    list = parseScopes(scopes);
  } catch (e) {
    throw new AdminError(`SCOPES: ${(e as Error).message}`);
  }
  let expiry: Date | null = null;
  if (expiresAt !== undefined) {
    const parsed = DateTimeInput.safeParse(expiresAt);
    if (!parsed.success)
      throw new AdminError(
        `--expires-at ${parsed.error.issues[0]?.message ?? "is not a date-time"}, got ${shown(expiresAt)}`,
      );
    expiry = parsed.data;
    if (expiry.getTime() <= now.getTime())
      throw new AdminError(`--expires-at must be in the future, got ${shown(expiresAt)}`);
  }
  return { tenantId: tId, ownerId: oId, scopes: list, expiresAt: expiry };
}

export async function createKey(
  db: Database,
  tenantId: string,
  ownerId: string,
  scopes: string,
  expiresAt?: string,
  now = new Date(),
) {
  const a = createKeyArgs(tenantId, ownerId, scopes, expiresAt, now);
  const tenant = await db.prisma.tenant.findUnique({ where: { id: a.tenantId }, select: { id: true } });
  if (!tenant) throw new AdminError("no such tenant");
  const owner = await db.prisma.user.findFirst({
    where: { id: a.ownerId, tenantId: a.tenantId },
    select: { id: true },
  });
  if (!owner) throw new AdminError("no such user in that tenant");
  const g = generateKey();
  const key = await db.prisma.apiKey.create({
    data: {
      tenantId: a.tenantId,
      ownerId: a.ownerId,
      prefix: g.prefix,
      keyHash: g.hash,
      scopes: a.scopes,
      expiresAt: a.expiresAt,
    },
  });
  return { id: key.id, key: g.key, prefix: g.prefix };
}

/** demo-key's refusal where there is no demo tenant (server/admin/demo.ts, findDemoTenant). */
export const NO_DEMO_TENANT =
  `no demo tenant: load it with ${LOAD_DEMO_COMMAND} (the first start on an empty embedded database does it ` +
  `too), or load a fixture of your own with ${LOAD_COMMAND}`;

/**
 * A new key of the demo tenant with every scope, owned by the demo's user (on any database where
 * the demo tenant exists): the key as create-key prints it, with the tenant, the owner and a curl
 * line against `baseUrl` (HOST and PORT as the CLI sees them).
 */
export async function demoKey(db: Database, baseUrl: string) {
  const demo = await findDemoTenant(db);
  if (!demo) throw new AdminError(NO_DEMO_TENANT);
  const key = await createKey(db, demo.tenantId, demo.ownerId, "all");
  return { tenantId: demo.tenantId, ownerId: demo.ownerId, ...key, scopes: "all", curl: curlLine(key.key, baseUrl) };
}

/**
 * load-demo: the demo tenant (fixed ids, as the embedded first start loads it) into the configured
 * database, and a key of it as demo-key prints one; refused, changing nothing, where it is loaded already.
 */
export async function loadDemo(db: Database, baseUrl: string) {
  const existing = await findDemoTenant(db);
  if (existing)
    throw new AdminError(
      `the demo tenant is loaded already (${existing.tenantId}): for a new key, ${DEMO_KEY_COMMAND}`,
    );
  const ids = await loadFixture(db, demoFixture(new Date(), { fixedIds: true }));
  const demo = ids.tenants.demo!;
  const key = demo.apiKeys.demo!;
  return {
    tenantId: demo.id,
    ownerId: demo.users.ana!,
    id: key.id,
    key: key.key,
    prefix: key.prefix,
    scopes: "all",
    curl: curlLine(key.key, baseUrl),
  };
}

export function revokeKeyArgs(keyId: string) {
  return { id: uuid(keyId, "KEY_ID") };
}

export async function revokeKey(db: Database, keyId: string) {
  const { id } = revokeKeyArgs(keyId);
  // The contract names a key by its id alone; ApiKey is a reference table (docs/decisions/scale-out.md),
  // so this lookup reads one replicated table, and the update then uses the full key.
  const existing = await db.prisma.apiKey.findFirst({ where: { id }, select: { tenantId: true, revokedAt: true } });
  if (!existing) throw new AdminError("no such key");
  const revokedAt =
    existing.revokedAt ??
    (
      await db.prisma.apiKey.update({
        where: { tenantId_id: { tenantId: existing.tenantId, id } },
        data: { revokedAt: new Date() },
      })
    ).revokedAt!;
  return { id, revokedAt: revokedAt.toISOString() };
}

export function setPlanArgs(tenantId: string, planName: string) {
  return { id: uuid(tenantId, "TENANT_ID"), plan: plan(planName) };
}

export async function setPlan(db: Database, tenantId: string, planName: string) {
  const { id, plan: p } = setPlanArgs(tenantId, planName);
  const n = await db.prisma.tenant.updateMany({ where: { id }, data: { plan: p, updatedAt: new Date() } });
  if (n.count === 0) throw new AdminError("no such tenant");
  return { id, plan: p };
}

export function setPlanLimitsArgs(planName: string, perMinute: string, perDay: string) {
  return { plan: plan(planName), perMinute: count(perMinute, "PER_MINUTE"), perDay: count(perDay, "PER_DAY") };
}

export async function setPlanLimits(db: Database, planName: string, perMinute: string, perDay: string) {
  const { plan: p, perMinute: m, perDay: d } = setPlanLimitsArgs(planName, perMinute, perDay);
  await db.prisma.planLimit.upsert({
    where: { plan: p },
    create: { plan: p, perMinute: m, perDay: d },
    update: { perMinute: m, perDay: d },
  });
  return { plan: p, perMinute: m, perDay: d };
}

/** PER_MINUTE "clear" removes the override (PER_DAY must then be absent); else both are counts. */
export function setTenantLimitsArgs(tenantId: string, perMinute: string, perDay?: string) {
  const id = uuid(tenantId, "TENANT_ID");
  if (perMinute === "clear") {
    if (perDay !== undefined) throw new AdminError(`PER_DAY must be absent with clear, got ${shown(perDay)}`);
    return { id, perMinute: null, perDay: null };
  }
  if (perDay === undefined) throw new AdminError("PER_DAY is required unless PER_MINUTE is clear");
  return {
    id,
    perMinute: count(perMinute, "PER_MINUTE") as number | null,
    perDay: count(perDay, "PER_DAY") as number | null,
  };
}

export async function setTenantLimits(db: Database, tenantId: string, perMinute: string, perDay?: string) {
  const { id, perMinute: m, perDay: d } = setTenantLimitsArgs(tenantId, perMinute, perDay);
  const n = await db.prisma.tenant.updateMany({
    where: { id },
    data: { rateLimitPerMinute: m, rateLimitPerDay: d, updatedAt: new Date() },
  });
  if (n.count === 0) throw new AdminError("no such tenant");
  return { id, perMinute: m, perDay: d };
}

/** Records a customer message (role user, now) as the channel would; reopens the 24-hour window. */
export function inboundMessageArgs(conversationId: string, text: string) {
  const id = uuid(conversationId, "CONVERSATION_ID");
  if (text === undefined || text === "") throw new AdminError("TEXT must not be empty");
  return { id, text };
}

export async function inboundMessage(
  db: Database,
  conversationId: string,
  text: string,
  now = new Date(),
): Promise<MessageObject> {
  const { id } = inboundMessageArgs(conversationId, text);
  return transaction(db.prisma, async (tx) => {
    // The contract names the conversation by its id alone: finding its tenant is the one lookup
    // without "tenantId" (on Citus a query of every shard; an operator command, not the API).
    const conv = await tx.conversation.findFirst({ where: { id }, select: { id: true, tenantId: true } });
    if (!conv) throw new AdminError("no such conversation");
    const message = await storeMessage(tx, {
      tenantId: conv.tenantId,
      conversationId: id,
      role: "user",
      content: text,
      deliveryStatus: DELIVERY.received,
      at: now,
    });
    return toMessage(message);
  });
}
