// The procedure-side wrapper of server/idempotency.ts: every create resolver is written as
// `idempotent(async ({ ctx, input }) => ...)` and runs its writes on ctx.db, which is the
// transaction that also holds the Idempotency-Key claim.
import { fingerprint, readIdempotencyKey, withIdempotency } from "../../server/idempotency.js";
import type { AuthedContext } from "../trpc.js";

export function idempotent<I, O>(resolve: (opts: { ctx: AuthedContext; input: I }) => Promise<O>) {
  return async ({ ctx, input, path }: { ctx: AuthedContext; input: I; path: string }): Promise<O> => {
    const key = readIdempotencyKey(ctx.req.headers["idempotency-key"]);
    const claim = key
      ? {
          apiKeyId: ctx.caller.keyId,
          endpoint: path,
          key,
          fingerprint: fingerprint(input),
          ttlSeconds: ctx.services.config.idempotencyTtlSeconds,
        }
      : undefined;
    const { body, replayed } = await withIdempotency(ctx.services.db, claim, (tx) => resolve({ ctx: { ...ctx, db: tx }, input }));
    if (replayed) ctx.res.setHeader("Idempotent-Replayed", "true");
    return body;
  };
}
