// The one way the service runs a write transaction: Prisma's interactive transaction, retried as a
// whole when PostgreSQL aborted it as a deadlock victim (40P01) or a serialization failure (40001).
// Both mean "nothing of this transaction happened; run it again": the retry is safe because a
// transaction callback only touches the database (a provider call happens after the commit, see
// AfterCommit in server/idempotency.ts). Bounded: TRANSACTION_ATTEMPTS tries with a jittered pause,
// then the error propagates (503 through server/errors.ts, never a 500).
import type { PrismaClient } from "../../generated/prisma/client.js";
import { sqlStates } from "../errors.js";
import type { Db } from "./client.js";

export const TRANSACTION_ATTEMPTS = 3;

/** SQLSTATEs (and Prisma's code for them) that abort a transaction which may simply be run again. */
const RETRYABLE = new Set(["40P01", "40001", "P2034"]);

export const isTransactionConflict = (err: unknown): boolean => sqlStates(err).some((c) => RETRYABLE.has(c));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function transaction<T>(
  prisma: PrismaClient,
  fn: (tx: Db) => Promise<T>,
  opts: {
    attempts?: number;
    /** Prisma's interactive-transaction timeout in ms (default: the client's, TRANSACTION_TIMEOUT_MS). */
    timeoutMs?: number;
    onRetry?: (attempt: number, err: unknown) => void;
  } = {},
): Promise<T> {
  const attempts = opts.attempts ?? TRANSACTION_ATTEMPTS;
  const options = opts.timeoutMs ? { timeout: opts.timeoutMs } : undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      return await prisma.$transaction((tx) => fn(tx), options);
    } catch (err) {
      if (attempt >= attempts || !isTransactionConflict(err)) throw err;
      opts.onRetry?.(attempt, err);
      // 10–50 ms, then 20–100 ms: the other party of a deadlock gets to finish first.
      await sleep(attempt * (10 + Math.random() * 40));
    }
  }
}
