// Idempotency-Key for create endpoints (common rule 4), built once.
// The key is claimed by inserting a unique row (API key + endpoint + Idempotency-Key) in the same
// transaction as the write: a concurrent duplicate blocks on that row until the first commits, then
// replays; if the first fails, its transaction (and claim) rolls back and the duplicate runs.
// Only successful responses are stored; records expire after IDEMPOTENCY_TTL_SECONDS and are purged.
// A create that ends with a provider call (AfterCommit) commits its claim unfinished (statusCode 0),
// calls the provider outside the transaction, then stores the response: duplicates wait for it.
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
 * What a create returns when its last step is an outbound provider call. The transaction (the
 * Idempotency-Key claim and the stored, still "pending" message) commits first; then `finish` runs
 * outside any transaction — no connection, transaction or row lock is held while the provider is
 * waited for — and its result is the response body, stored under the key. Until then the claim is
 * unfinished (statusCode 0) and keeps `note`, from which a duplicate can finish the write (with
 * `Finishing.recover`) if the request that started it never did (a crash, a lost database).
 */
export class AfterCommit<T> {
  constructor(
    readonly note: Record<string, unknown>,
    readonly finish: (db: Db) => Promise<T>,
  ) {}
}

export interface Finishing<T> {
  /** How long an unfinished claim is waited for before a duplicate finishes it with recover(). */
  staleAfterMs: number;
  /** Finishes an abandoned write from its note (inside the duplicate's transaction); returns the body. */
  recover: (db: Db, note: any) => Promise<T>;
}

type Step<T> = { kind: "done"; body: T; replayed: boolean } | { kind: "finish"; id: string; after: AfterCommit<T> } | { kind: "wait" };

const POLL_MS = 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `write` in a transaction together with the claim of the key. Without a key, `write` still
 * runs in one transaction. A repeat with the same fingerprint returns the stored body; a duplicate of
 * a write that is still finishing (an AfterCommit) waits for it, polling, and then replays it.
 */
export async function withIdempotency<T>(
  db: Database,
  claim: IdempotencyClaim | undefined,
  write: (tx: Db) => Promise<T | AfterCommit<T>>,
  finishing?: Finishing<T>,
): Promise<Replayable<T>> {
  if (!claim) {
    const out = await db.prisma.$transaction((tx) => write(tx));
    return { body: out instanceof AfterCommit ? await out.finish(db.prisma) : out, replayed: false };
  }
  const staleAfterMs = finishing?.staleAfterMs ?? 60_000;
  const deadline = Date.now() + staleAfterMs + 30_000;
  for (;;) {
    const step = await db.prisma.$transaction(async (tx): Promise<Step<T>> => {
      const claimed = await tx.$queryRaw<{ id: string }[]>`
        INSERT INTO "IdempotencyRecord" ("apiKeyId", "endpoint", "key", "fingerprint", "statusCode", "responseBody", "expiresAt")
        VALUES (${claim.apiKeyId}::uuid, ${claim.endpoint}, ${claim.key}, ${claim.fingerprint}, 0, '{}'::jsonb,
                now() + make_interval(secs => ${claim.ttlSeconds}))
        ON CONFLICT ("apiKeyId", "endpoint", "key") DO NOTHING
        RETURNING "id"`;
      if (claimed.length === 0) {
        const [existing] = await tx.$queryRaw<{ id: string; fingerprint: string; statusCode: number; responseBody: T; expiresAt: Date; stale: boolean }[]>`
          SELECT "id", "fingerprint", "statusCode", "responseBody", "expiresAt",
                 "createdAt" <= now() - make_interval(secs => ${staleAfterMs / 1000}) AS "stale"
            FROM "IdempotencyRecord"
           WHERE "apiKeyId" = ${claim.apiKeyId}::uuid AND "endpoint" = ${claim.endpoint} AND "key" = ${claim.key}`;
        if (!existing) throw new Error("idempotency record vanished");
        if (new Date(existing.expiresAt).getTime() > Date.now()) {
          if (existing.fingerprint !== claim.fingerprint)
            throw new AppError("IDEMPOTENCY_KEY_REUSE_MISMATCH", "This Idempotency-Key was used with a different request body");
          if (existing.statusCode !== 0) return { kind: "done", body: existing.responseBody, replayed: true };
          // Unfinished: still being finished elsewhere (wait), or abandoned (finish it here, once).
          if (!finishing || !existing.stale) return { kind: "wait" };
          const [locked] = await tx.$queryRaw<{ statusCode: number; responseBody: any }[]>`
            SELECT "statusCode", "responseBody" FROM "IdempotencyRecord" WHERE "id" = ${existing.id}::uuid FOR UPDATE`;
          if (!locked) throw new Error("idempotency record vanished");
          if (locked.statusCode !== 0) return { kind: "done", body: locked.responseBody, replayed: true };
          const body = await finishing.recover(tx, locked.responseBody?.pending ?? {});
          await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${JSON.stringify(body)}::jsonb
            WHERE "id" = ${existing.id}::uuid`;
          return { kind: "done", body, replayed: true };
        }
        // Expired but not yet purged: take the key over.
        await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "fingerprint" = ${claim.fingerprint}, "statusCode" = 0, "responseBody" = '{}'::jsonb,
          "createdAt" = now(), "expiresAt" = now() + make_interval(secs => ${claim.ttlSeconds}) WHERE "id" = ${existing.id}::uuid`;
        claimed.push({ id: existing.id });
      }
      const id = claimed[0]!.id;
      const out = await write(tx);
      if (out instanceof AfterCommit) {
        await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "responseBody" = ${JSON.stringify({ pending: out.note })}::jsonb WHERE "id" = ${id}::uuid`;
        return { kind: "finish", id, after: out };
      }
      await tx.$executeRaw`UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${JSON.stringify(out)}::jsonb WHERE "id" = ${id}::uuid`;
      return { kind: "done", body: out, replayed: false };
    });
    if (step.kind === "done") return { body: step.body, replayed: step.replayed };
    if (step.kind === "finish") {
      const body = await step.after.finish(db.prisma);
      const stored = await db.prisma.$queryRaw<{ id: string }[]>`
        UPDATE "IdempotencyRecord" SET "statusCode" = 201, "responseBody" = ${JSON.stringify(body)}::jsonb
         WHERE "id" = ${step.id}::uuid AND "statusCode" = 0 RETURNING "id"`;
      if (stored.length === 0) {
        // A duplicate finished it first (this request outlived staleAfterMs): answer what it stored.
        const [rec] = await db.prisma.$queryRaw<{ responseBody: T }[]>`SELECT "responseBody" FROM "IdempotencyRecord" WHERE "id" = ${step.id}::uuid`;
        if (rec) return { body: rec.responseBody, replayed: false };
      }
      return { body, replayed: false };
    }
    if (Date.now() > deadline) throw new AppError("SERVICE_UNAVAILABLE", "The original request with this Idempotency-Key is still in progress; retry shortly");
    await sleep(POLL_MS);
  }
}

/** Deletes expired records; returns how many. */
export async function purgeExpiredIdempotencyRecords(db: Database): Promise<number> {
  return db.prisma.$executeRaw`DELETE FROM "IdempotencyRecord" WHERE "expiresAt" <= now()`;
}
