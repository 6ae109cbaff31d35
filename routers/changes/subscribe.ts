// changes.subscribe — the changes feed as a tRPC subscription for internal apps (server-sent events
// through /trpc and tRPC's httpSubscriptionLink; an async iterable through the in-process core). Each
// event is one page of GET /public/v1/changes, tracked with its `nextSince` as the event id, so a
// client that reconnects with `lastEventId` (httpSubscriptionLink does) resumes exactly after the last
// page it received, on any instance. Between pages the subscription waits as a long-poll does
// (server/wakeups.ts: no database connection held, woken by its tenant's writes, the re-read tick
// behind them). Quota: the connection is one request (the guard's); each page delivered counts one
// more, and a page over a ceiling ends the stream with the RATE_LIMIT_EXCEEDED envelope (resume by
// lastEventId after its retryAfter). The key is checked again before each page after a wait, as a
// long-poll does. A subscription holds one of its key's waiter places (two per key per instance)
// for its life; past the caps it is refused with the envelope's SERVICE_UNAVAILABLE and a retryAfter.
import { tracked } from "@trpc/server";
import { z } from "zod";
import { AppError } from "../../server/errors.js";
import { admittedCaller } from "../../server/auth/guard.js";
import { scopedAny, type AuthedContext } from "../trpc.js";
import {
  BACKOFF_S,
  checkSince,
  DEFAULT_CHANGES_LIMIT,
  headPage,
  MAX_CHANGES_LIMIT,
  observeDelivery,
  readPage,
  recheckCaller,
  SINCE_NOW,
  waiterOf,
} from "./list.js";
import { CHANGE_TYPES, MAX_SINCE_LENGTH, READ_SCOPE, type ChangeType } from "./schemas.js";

export const SubscribeChangesInput = z.object({
  since: z
    .string()
    .max(MAX_SINCE_LENGTH)
    .optional()
    .describe("Where to start: a `nextSince` (event id) of the feed, `now` (the head), or absent (from the beginning)"),
  types: z
    .array(z.enum(CHANGE_TYPES))
    .max(CHANGE_TYPES.length)
    .optional()
    .describe("The types to follow (default: every type the key can read)"),
  limit: z.number().int().min(1).max(MAX_CHANGES_LIMIT).optional(),
  /** Set by httpSubscriptionLink on a reconnect: the id of the last event received (wins over `since`). */
  lastEventId: z.string().max(MAX_SINCE_LENGTH).optional(),
});

/** No deadline: a subscription waits until a wake-up (a signal or the probe), or its end. */
const FOREVER = Number.MAX_SAFE_INTEGER;

export const subscribeChanges = scopedAny(CHANGE_TYPES.map((t) => READ_SCOPE[t]))
  .input(SubscribeChangesInput)
  .subscription(async function* ({ ctx, input, signal }) {
    const readable = CHANGE_TYPES.filter((t) => ctx.caller.scopes.includes(READ_SCOPE[t]));
    const types: readonly ChangeType[] = input.types ? CHANGE_TYPES.filter((t) => input.types!.includes(t)) : readable;
    const denied = types.filter((t) => !readable.includes(t));
    if (denied.length)
      throw new AppError("PERMISSION_DENIED", `This key cannot read ${denied.join(", ")}`, {
        requiredScopes: denied.map((t) => READ_SCOPE[t]),
      });
    const limit = input.limit ?? DEFAULT_CHANGES_LIMIT;
    const wakeups = ctx.services.wakeups;
    const release = wakeups?.admit(waiterOf(ctx));
    if (!wakeups || !release)
      throw new AppError(
        "SERVICE_UNAVAILABLE",
        "Too many waits of this key or of this instance: subscribe again later",
        {
          retryAfter: BACKOFF_S,
        },
      );
    try {
      const start = input.lastEventId ?? input.since;
      const now = () => ctx.services.now().getTime();
      if (start !== undefined && start !== SINCE_NOW) checkSince(start, ctx.tenantId, now());
      let token = start === SINCE_NOW ? (await headPage(ctx, types, now())).nextSince : start;
      let waited = false;
      for (;;) {
        if (signal?.aborted) return;
        if (waited) await recheckCaller(ctx, types);
        const mark = wakeups.mark();
        const page = await readPage(
          ctx,
          types,
          token === undefined ? undefined : checkSince(token, ctx.tenantId, now()),
          limit,
          now(),
        );
        token = page.nextSince;
        if (page.items.length > 0) {
          if (waited) observeDelivery(ctx, page, "subscription");
          await chargePage(ctx);
          yield tracked(page.nextSince, page);
          waited = false;
          if (page.hasMore) continue;
        }
        const why = await wakeups.wait(ctx.tenantId, FOREVER, signal, mark);
        if (why === "closing" || why === "deadline") return;
        waited = true;
      }
    } finally {
      release();
    }
  });

/** One request of the key's quota per page delivered (trusted internal code has none); over a ceiling, the 429 envelope. */
async function chargePage(ctx: AuthedContext) {
  if (ctx.caller.keyHash === "") return;

  const decision = await ctx.services.quotas.admit(undefined, undefined, admittedCaller(ctx.services, ctx.caller));
  if (decision.admitted) return;
  if (decision.quota.window) ctx.services.metrics.rateLimited.inc({ window: decision.quota.window });
  throw decision.refusal;
}
