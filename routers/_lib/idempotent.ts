// The procedure-side wrapper of server/idempotency.ts: every create resolver is written as
// `idempotent(async ({ ctx, input }) => ...)` and runs its writes on ctx.db, which is the
// transaction that also holds the Idempotency-Key claim. A resolver whose last step is a provider
// call returns `new AfterCommit(note, finish)` (the call then happens after the commit) and passes
// `recover`, which finishes an abandoned write from its note for a duplicate. A create whose response
// embeds more than it wrote (a comment answers with the whole thread) passes `record`: what to store
// under the key instead of the body, and how to rebuild the identical body from it on a replay.
// A create that writes one row passes `plan`: the row and its response, computed without a statement
// (what the rules resolve is SQL inside it), written with the key's claim and stored response in ONE statement
// (server/idempotency.ts writeInOneStatement); the resolver stays the transactional path that runs
// whenever the plan does not answer (a replay, a mismatch, an expired key, a 404/409, a refusal).
import type { Db } from "../../server/db/client.js";
import { AfterCommit, fingerprint, withIdempotency, type OneStatement } from "../../server/idempotency.js";
import type { AuthedContext } from "../trpc.js";

export { AfterCommit, type OneStatement };

/** What an Idempotency-Key stores instead of the body, and how the identical body is rebuilt from it. */
export interface ResponseRecord<O> {
  store: (body: O) => unknown;
  /** A method (its parameter bivariant): each record reads its own stored shape. */
  rebuild(ctx: AuthedContext, stored: unknown): Promise<O>;
}

/** The call's Idempotency-Key (undefined: none); a malformed one is its 422, raised here. */
export function idempotencyKeyOf(ctx: AuthedContext): string | undefined {
  if (ctx.request.problems?.idempotencyKey) throw ctx.request.problems.idempotencyKey;
  return ctx.request.idempotencyKey;
}

/** How long an unfinished send (an AfterCommit claim, a pending message) is given before it counts as abandoned. */
export const unfinishedAfterMs = (ctx: { services: { config: { providerTimeoutMs: number } } }) =>
  ctx.services.config.providerTimeoutMs + 10_000;

export function idempotent<I, O>(
  resolve: (opts: { ctx: AuthedContext; input: I }) => Promise<O | AfterCommit<O>>,
  opts: {
    /** A method (its parameter bivariant): each operation reads its own note. */
    recover?(db: Db, note: unknown, ctx: AuthedContext): Promise<O>;
    record?: ResponseRecord<O>;
    plan?: (opts: { ctx: AuthedContext; input: I }) => OneStatement<O> | Promise<OneStatement<O>>;
  } = {},
) {
  return async ({ ctx, input, path }: { ctx: AuthedContext; input: I; path: string }): Promise<O> => {
    const key = idempotencyKeyOf(ctx);
    const claim = key
      ? {
          tenantId: ctx.tenantId,
          apiKeyId: ctx.caller.keyId,
          endpoint: path,
          key,
          fingerprint: fingerprint(input),
          ttlSeconds: ctx.services.config.idempotencyTtlSeconds,
        }
      : undefined;
    const recover = opts.recover;
    const finishing = recover
      ? { staleAfterMs: unfinishedAfterMs(ctx), recover: (db: Db, note: unknown) => recover(db, note, ctx) }
      : undefined;
    const record = opts.record;
    const codec = record && {
      store: record.store,
      rebuild: (db: Db, stored: unknown) => record.rebuild({ ...ctx, db }, stored),
    };
    const plan = opts.plan;
    const oneStatement = plan && (async () => plan({ ctx, input }));
    const { body, replayed } = await withIdempotency(
      ctx.database,
      claim,
      (tx) => resolve({ ctx: { ...ctx, db: tx }, input }),
      finishing,
      codec,
      oneStatement,
    );
    if (replayed) ctx.outcome.replayed = true;
    return body;
  };
}
