import type { Caller } from "./auth/authenticate.js";
import type { AppError } from "./errors.js";
import type { QuotaState } from "./limits/quotas.js";

// What the request pipeline keeps on a request. On node's IncomingMessage, so that the public API
// (served without Express, rest/facade.ts) and the Express mounts (Express's Request extends it)
// share one declaration.
declare module "http" {
  interface IncomingMessage {
    /** Request id: the client's X-Request-Id when it is a sane token, else a new UUID. */
    id: string;
    caller?: Caller;
    /** A body that could not be used (malformed JSON, not an object, wrong Content-Type); reported as 422 after the scope check. */
    bodyProblem?: AppError;
    quota?: QuotaState;
    /** The failure of this request, kept by the REST facade's onError and written by it as the envelope. */
    appError?: AppError;
    /** The envelope's `error` code this request answered with (the first, for a /trpc batch): for the request log line. */
    errorCode?: string;
  }
}
export {};
