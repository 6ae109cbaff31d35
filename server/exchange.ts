// What the HTTP edge keeps about one request while it is answered: its id, the caller the guard
// admitted, a problem of its input found before the procedure ran, the failure it answered, and a
// /trpc batch's shares. Kept in a WeakMap keyed by node's request, so nothing is added to
// IncomingMessage and nothing outlives the request; only the transports (server/, rest/) read it.
// The procedures see none of it: a transport turns it into the typed context (routers/trpc.ts).
import type { IncomingMessage } from "node:http";
import type { Caller } from "./auth/authenticate.js";
import type { AppError } from "./errors.js";
import type { QuotaState } from "./limits/quotas.js";

export interface Exchange {
  /** Request id: the client's X-Request-Id when it is a sane token, else a new UUID. */
  id: string;
  caller?: Caller;
  /** The quota's state after the guard counted this request (its RateLimit windows; GET /me's use). */
  quota?: QuotaState;
  /**
   * A problem of the request's input (a body that could not be
   * used, text that cannot be stored): 422 after the scope check.
   */
  inputProblem?: AppError;
  /** The failure this request answered (the REST facade writes its envelope). */
  appError?: AppError;
  /** The envelope's `error` code this request answered with (the first, for a /trpc batch): for the log line. */
  errorCode?: string;
  /**
   * A /trpc batch: each call's share of the page budget, its one
   * allowance for a larger item, the quota's refusals by call.
   */
  batch?: { pageBudget: number; oversized: { taken: boolean }; refusals: (AppError | undefined)[] };
}

const exchanges = new WeakMap<IncomingMessage, Exchange>();

/** The request's exchange, made on first use (server/app.ts makes it on arrival, with the request id). */
export function exchangeOf(req: IncomingMessage): Exchange {
  let x = exchanges.get(req);
  if (!x) {
    x = { id: "" };
    exchanges.set(req, x);
  }
  return x;
}

/** The request id (server/app.ts sets it first thing). */
export const requestIdOf = (req: IncomingMessage) => exchangeOf(req).id;
