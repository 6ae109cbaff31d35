// The procedure-side wrapper of server/idempotency.ts: every create resolver is written as
// `idempotent(async ({ ctx, input }) => ...)` and runs its writes on ctx.db, which is the
// transaction that also holds the Idempotency-Key claim. A resolver whose last step is a provider
// call returns `new AfterCommit(note, finish)` (the call then happens after the commit) and passes
// `recover`, which finishes an abandoned write from its note for a duplicate.
import type { Db } from "../../server/db/client.js";
import { AfterCommit, fingerprint, readIdempotencyKey, withIdempotency } from "../../server/idempotency.js";
import type { AuthedContext } from "../trpc.js";

export { AfterCommit };

/** How long an unfinished send (an AfterCommit claim, a pending message) is given before it counts as abandoned. */
export const unfinishedAfterMs = (ctx: { services: { config: { providerTimeoutMs: number } } }) => ctx.services.config.providerTimeoutMs + 10_000;

export function idempotent<I, O>(
  resolve: (opts: { ctx: AuthedContext; input: I }) => Promise<O | AfterCommit<O>>,
  opts: { recover?: (db: Db, note: any) => Promise<O> } = {},
) {
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
    const finishing = opts.recover ? { staleAfterMs: unfinishedAfterMs(ctx), recover: opts.recover } : undefined;
    const { body, replayed } = await withIdempotency(ctx.services.db, claim, (tx) => resolve({ ctx: { ...ctx, db: tx }, input }), finishing);
    if (replayed) ctx.res.setHeader("Idempotent-Replayed", "true");
    return body;
  };
}
