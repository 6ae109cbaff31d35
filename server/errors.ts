// AppError, the stable error codes with their HTTP statuses, and the one error envelope.
import { TRPCError } from "@trpc/server";
import { ZodError } from "zod";
import { dbViolation } from "./db/errors.js";
import type { Logger } from "./logger.js";

export const ERROR_STATUS = {
  VALIDATION_ERROR: 422,
  IDEMPOTENCY_KEY_REUSE_MISMATCH: 422,
  INVALID_CREDENTIALS: 401,
  TOKEN_EXPIRED: 401,
  PERMISSION_DENIED: 403,
  PLAN_NOT_ELIGIBLE: 403,
  NOT_FOUND: 404,
  MESSAGING_SESSION_WINDOW_CLOSED: 409,
  APPOINTMENT_OVERLAP: 409,
  ALREADY_EXISTS: 409,
  TICKET_COMMENT_LIMIT_REACHED: 409,
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  REQUEST_HEADERS_TOO_LARGE: 431,
  RATE_LIMIT_EXCEEDED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface Envelope {
  error: ErrorCode;
  message: string;
  request_id: string;
  details: Record<string, unknown>;
}

export class AppError extends Error {
  readonly status: number;
  /** Set when the database refused a value (the backstop in toAppError): logged at warn. */
  sqlState?: string;
  /**
   * What the error log line says besides the error itself (never in
   * the envelope): e.g. the paths of an output that failed its schema.
   */
  logFields?: Record<string, unknown>;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = "AppError";
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what = "Resource") => new AppError("NOT_FOUND", `${what} not found`);
export const validation = (message: string, details: Record<string, unknown> = {}) =>
  new AppError("VALIDATION_ERROR", message, details);

/** Most entries listed in `details.fields`; `fieldCount` counts them all, `truncated` says some were left out. */
export const MAX_DETAIL_FIELDS = 50;

/**
 * Longest field name or path (an unknown key, a zod path, a query parameter's name) that `details`
 * and messages echo, in UTF-16 code units: a longer one is cut and ends with "…". The names are the
 * client's own text: a 900,000-character key would otherwise come back whole in the 422.
 */
export const MAX_ECHOED_NAME = 200;
/** Longest problem message echoed in `details.fields[].message` (zod's and ours are short; this is a bound). */
export const MAX_ECHOED_MESSAGE = 500;

/** `text` cut to at most `max` code units, "…" marking the cut; a surrogate pair is never split. */
export function echoed(text: string, max = MAX_ECHOED_NAME): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1; // a high surrogate whose pair would be cut off
  return `${text.slice(0, end)}…`;
}

export interface FieldProblem {
  field: string;
  code: string;
  message: string;
}

/**
 * Zod issues → `details`: `fields` lists one entry per failing field (dotted path; every unknown key
 * is one entry, code `unknown_field`), at most MAX_DETAIL_FIELDS of them; `fieldCount` is the number
 * of all problems and `truncated` whether some were left out. Work is bounded by the cap: unknown
 * keys beyond it are counted, not turned into entries (a 1 MiB body holds ~120,000 tiny keys).
 * Names and paths are cut to MAX_ECHOED_NAME, messages to MAX_ECHOED_MESSAGE.
 * A custom issue may carry its own code in `params.code`.
 */
export function zodDetails(err: ZodError): Record<string, unknown> {
  // Each segment is cut before the join, so a huge key is never copied whole (MAX_ECHOED_NAME).
  const at = (path: PropertyKey[]) => (path.length ? echoed(path.map((p) => echoed(String(p))).join(".")) : "(body)");
  const fields: FieldProblem[] = [];
  let count = 0;
  for (const i of err.issues) {
    if (i.code === "unrecognized_keys") {
      for (let k = 0; k < i.keys.length && fields.length < MAX_DETAIL_FIELDS; k++)
        fields.push({ field: at([...i.path, i.keys[k]!]), code: "unknown_field", message: "Unknown field" });
      count += i.keys.length;
    } else {
      const code = i.code === "custom" && typeof i.params?.code === "string" ? i.params.code : i.code;
      const message = echoed(i.message, MAX_ECHOED_MESSAGE);
      if (fields.length < MAX_DETAIL_FIELDS) fields.push({ field: at(i.path), code, message });
      count += 1;
    }
  }
  return { fields, fieldCount: count, truncated: count > fields.length };
}

// 57014: a statement cancelled by statement_timeout
// (DATABASE_STATEMENT_TIMEOUT_MS) — the database is too slow right now.
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "P1001",
  "P1017",
  "P2024",
  "53300",
  "57014",
]);
// Driver-adapter error kinds (@prisma/adapter-pg) for a lost or unreachable server.
const UNAVAILABLE_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);
// Citus, while an operator moves, splits or isolates a shard: a statement planned against the old
// placement (SQLSTATE XX000, Citus's generic code: only the message tells) or an intermediate result
// lost with it. Transient (the next attempt finds the new placement): 503, like an unreachable server.
const UNAVAILABLE_MESSAGE =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|DatabaseNotReachable|ConnectionClosed|terminating connection due to administrator command|the database system is (?:starting up|shutting down|in recovery)|could not find valid entry for shard|could not find the intermediate result file/i;

/** One error of a chain as the walk reads it: the fields the driver, the adapter and Prisma set. */
interface ChainLink {
  code?: unknown;
  originalCode?: unknown;
  kind?: unknown;
  message?: unknown;
  cause?: unknown;
  meta?: { driverAdapterError?: unknown } | null;
}

/**
 * Each object of an error's chain once, outermost first: its `cause`, and the
 * `meta.driverAdapterError` of a PrismaClientKnownRequestError such as P2010/P2039.
 */
function* errorChain(err: unknown): Generator<ChainLink> {
  const seen = new Set<unknown>();
  const queue: unknown[] = [err];
  while (queue.length) {
    const e = queue.shift();
    if (!e || typeof e !== "object" || seen.has(e)) continue;
    seen.add(e);
    const link: ChainLink = e;
    yield link;
    queue.push(link.cause, link.meta?.driverAdapterError);
  }
}

/**
 * PostgreSQL / driver errors that mean "the database is not reachable right now": SQLSTATE classes
 * 08 (connection exception) and 57P (operator intervention: admin/crash shutdown, cannot connect
 * now), socket errors, and the adapter's connection kinds, wherever they sit in the chain.
 */
function isUnavailable(err: unknown): boolean {
  for (const e of errorChain(err)) {
    for (const code of [e.code, e.originalCode]) {
      if (typeof code === "string" && (UNAVAILABLE_CODES.has(code) || /^(?:08[0-9A-Z]{3}|57P0[1-3])$/.test(code)))
        return true;
    }
    if (typeof e.kind === "string" && UNAVAILABLE_KINDS.has(e.kind)) return true;
    if (UNAVAILABLE_MESSAGE.test(String(e.message ?? ""))) return true;
  }
  return false;
}

/** The SQLSTATEs found in an error chain (driver, adapter and Prisma wrappers). */
export function sqlStates(err: unknown): string[] {
  const out: string[] = [];
  for (const e of errorChain(err))
    for (const c of [e.code, e.originalCode]) if (typeof c === "string" && /^[0-9A-Z]{5}$/.test(c)) out.push(c);
  return out;
}

const built = new WeakMap<object, AppError>();

/**
 * Anything thrown → AppError. Unknown failures become INTERNAL_ERROR without leaking internals.
 * Built once per thrown error: the transports ask several times (status, log, envelope).
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError || !err || typeof err !== "object") return convert(err);
  let app = built.get(err);
  if (!app) {
    app = convert(err);
    built.set(err, app);
  }
  return app;
}

/** A zod error (zod's own class, or one from another copy of zod: by name and issues). */
const isZodError = (e: unknown): e is ZodError => {
  if (e instanceof ZodError) return true;
  const other = e as { name?: unknown; issues?: unknown } | null | undefined;
  return other?.name === "ZodError" && Array.isArray(other?.issues);
};

/** Most output issues named in the log line of an output that failed its schema. */
const MAX_LOGGED_OUTPUT_ISSUES = 10;

/**
 * tRPC's signal that a procedure's result failed its own `.output()` schema: the output middleware
 * throws TRPCError INTERNAL_SERVER_ERROR "Output validation failed" with the schema's error as cause.
 * A server bug, not the client's input: 500 INTERNAL_ERROR (the envelope says nothing of it), the
 * failing paths in the error log line.
 */
function outputFailure(err: TRPCError): AppError | undefined {
  if (err.code !== "INTERNAL_SERVER_ERROR" || err.message !== "Output validation failed") return undefined;
  const app = new AppError("INTERNAL_ERROR", "Internal server error");
  const issues = isZodError(err.cause) ? err.cause.issues : [];
  app.logFields = {
    failure: "output validation",
    outputIssues: issues
      .slice(0, MAX_LOGGED_OUTPUT_ISSUES)
      .map((i) => ({ path: i.path.map(String).join(".") || "(output)", code: i.code, message: i.message })),
    outputIssueCount: issues.length,
  };
  return app;
}

function convert(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof TRPCError) {
    const cause = err.cause as unknown;
    if (cause instanceof AppError) return cause;
    const output = outputFailure(err);
    if (output) return output;
    if (isZodError(cause)) return validation("Request validation failed", zodDetails(cause));
    if (err.code === "PARSE_ERROR") return validation("Malformed JSON body");
    if (err.code === "UNSUPPORTED_MEDIA_TYPE") return validation("Content-Type must be application/json");
    if (err.code === "PAYLOAD_TOO_LARGE") return new AppError("PAYLOAD_TOO_LARGE", "Request body too large");
    if (err.code === "NOT_FOUND") return notFound();
    // tRPC's own protocol refusals on /trpc: a query called with POST or a mutation with GET (the
    // procedure does not exist for that method → 404, as in the facade); a malformed `input` → 422.
    if (err.code === "METHOD_NOT_SUPPORTED") return new AppError("NOT_FOUND", err.message);
    if (err.code === "BAD_REQUEST")
      return validation(cause instanceof SyntaxError ? "Malformed JSON input" : err.message);
    if (cause !== undefined && cause !== err) return toAppError(cause);
  }
  if (err instanceof ZodError) return validation("Request validation failed", zodDetails(err));
  if (isUnavailable(err))
    return new AppError("SERVICE_UNAVAILABLE", "A backing service is temporarily unavailable; retry shortly");
  const states = sqlStates(err);
  // A deadlock or serialization failure: the transaction was rolled back whole; retrying helps.
  if (states.some((c) => TRANSIENT_STATES.has(c)))
    return new AppError(
      "SERVICE_UNAVAILABLE",
      "The request conflicted with a concurrent one and was rolled back; retry shortly",
    );
  // Backstop: a value the database refused (class 22 data exception, 23514 check violation) can only
  // come from input that the schemas let through. It is the client's: 422, logged at warn.
  const refused = states.find((c) => c.startsWith("22") || c === "23514");
  if (refused) {
    const app =
      refused === "22021" // U+0000, which PostgreSQL text cannot hold (e.g. ?search=%00)
        ? validation("Text must not contain NUL (U+0000) characters", {
            fields: [{ field: "(query)", code: "invalid_string", message: "must not contain NUL (U+0000) characters" }],
          })
        : validation("A value is outside what the service can store", {
            fields: [
              {
                field: "(input)",
                code: refused === "23514" ? "check_violation" : "invalid_value",
                message: "refused by the database",
              },
            ],
          });
    app.sqlState = refused;
    return app;
  }
  return new AppError("INTERNAL_ERROR", "Internal server error");
}

/** SQLSTATEs of a transaction PostgreSQL rolled back to resolve a conflict: deadlock, serialization failure. */
const TRANSIENT_STATES = new Set(["40P01", "40001"]);

/** What an error log needs: the innermost cause tRPC or the adapter wrapped. */
const causeOf = (err: unknown): unknown => {
  const cause = (err as { cause?: unknown } | null | undefined)?.cause;
  return cause instanceof Error ? cause : err;
};

/**
 * The one place request failures are logged (facade, /trpc, the guard): a 5xx at error level with
 * the error chain (a bug or an outage) and the procedure's path when known (and, for an output that
 * failed its schema, the failing output paths), input the database refused (the toAppError
 * backstop) at warn with its SQLSTATE, anything else (the client's 4xx) not at all.
 */
export function logFailure(
  logger: Logger,
  reqId: string,
  err: unknown,
  app: AppError = toAppError(err),
  procedure?: string,
): void {
  if (app.status >= 500)
    logger.error({ reqId, ...(procedure ? { procedure } : {}), ...app.logFields, err: causeOf(err) }, "request failed");
  else if (app.sqlState) {
    const v = dbViolation(causeOf(err));
    logger.warn({ reqId, sqlState: app.sqlState, constraint: v?.constraint }, "input refused by the database");
  }
}

export function envelope(err: AppError, requestId: string): Envelope {
  return { error: err.code, message: err.message, request_id: requestId, details: err.details };
}
