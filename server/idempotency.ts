// Idempotency-Key for create endpoints (common rule 4), built once.
// The key is claimed by inserting a unique row (API key + endpoint + Idempotency-Key) in the same
// transaction as the write: a concurrent duplicate blocks on that row until the first commits, then
// replays; if the first fails, its transaction (and claim) rolls back and the duplicate runs.
// Only successful responses are stored; records expire after IDEMPOTENCY_TTL_SECONDS and are purged.
import { createHash } from "node:crypto";
import type { Database, Db } from "./db/client.js";
import { AppError } from "./errors.js";

const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/** The Idempotency-Key header, validated (1–255 visible ASCII characters), or undefined. */
export function readIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !KEY_RE.test(value))
    throw new AppError("VALIDATION_ERROR", "Idempotency-Key must be 1 to 255 visible ASCII characters", {
      fields: [{ field: "Idempotency-Key", code: "invalid_header", message: "1 to 255 visible ASCII characters" }],
    });
  return value;
}

/** Canonical JSON (sorted keys) → SHA-256: the same body in any key order has the same fingerprint. */
export function fingerprint(value: unknown): string {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v && typeof v === "object" && !(v instanceof Date)
        ? Object.fromEntries(Object.keys(v).sort().filter((k) => (v as any)[k] !== undefined).map((k) => [k, canon((v as any)[k])]))
        : v;
  return createHash("sha256").update(JSON.stringify(canon(value))).digest("hex");
}

export interface IdempotencyClaim {
  apiKeyId: string;
  endpoint: string;
  key: string;
  fingerprint: string;
  ttlSeconds: number;
}

export interface Replayable<T> {
  body: T;
  replayed: boolean;
}

/**
 * Runs `write` in a transaction together with the claim of the key. Without a key, `write` still
 * runs in one transaction. A repeat with the same fingerprint returns the stored body.
 */
export async function withIdempotency<T>(
  db: Database,
  claim: IdempotencyClaim | undefined,
  write: (tx: Db) => Promise<T>,
): Promise<Replayable<T>> {
  if (!claim) return { body: await db.prisma.$transaction((tx) => write(tx)), replayed: false };
  return db.prisma.$transaction(async (tx) => {
    const claimed = await tx.$queryRaw<{ id: string }[]>`
      INSERT INTO "IdempotencyRecord" ("apiKeyId", "endpoint", "key", "fingerprint", "statusCode", "responseBody", "expiresAt")
      VALUES (${claim.apiKeyId}::uuid, ${claim.endpoint}, ${claim.key}, ${claim.fingerprint}, 0, '{}'::jsonb,
              now() + make_interval(secs => ${claim.ttlSeconds}))
      ON CONFLICT ("apiKeyId", "endpoint", "key") DO NOTHING
      RETURNING "id"`;
    if (claimed.length === 0) {
      const [existing] = await tx.$queryRaw<{ id: string; fingerprint: string; responseBody: T; expiresAt: Date }[]>`
        SELECT "id", "fingerprint", "responseBody", "expiresAt" FROM "IdempotencyRecord"
         WHERE "apiKeyId" = ${claim.apiKeyId}::uuid AND "endpoint" = ${claim.endpoint} AND "key" = ${claim.key}`;
      if (!existing) throw new Error("idempotency record vanished");
      if (new Date(existing.expiresAt).getTime() > Date.now()) {
        if (existing.fingerprint !== claim.fingerprint)
          throw new AppError("IDEMPOTENCY_KEY_REUSE_MISMATCH", "This Idempotency-Key was used with a different request body");
        return { body: existing.responseBody, replayed: true };
      }
      // Expired but not yet purged: take the key over.
      await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "fingerprint" = ${claim.fingerprint}, "createdAt" = now(),
        "expiresAt" = now() + make_interval(secs => ${claim.ttlSeconds}) WHERE "id" = ${existing.id}::uuid`;
      claimed.push({ id: existing.id });
    }
    const body = await write(tx);
    await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${JSON.stringify(body)}::jsonb
      WHERE "id" = ${claimed[0]!.id}::uuid`;
    return { body, replayed: false };
  });
}

/** Deletes expired records; returns how many. */
export async function purgeExpiredIdempotencyRecords(db: Database): Promise<number> {
  return db.prisma.$executeRaw`DELETE FROM "IdempotencyRecord" WHERE "expiresAt" <= now()`;
}
