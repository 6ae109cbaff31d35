// AppError, the stable error codes with their HTTP statuses, and the one error envelope.
import { TRPCError } from "@trpc/server";
import { ZodError } from "zod";

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
  PAYLOAD_TOO_LARGE: 413,
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

/** Zod issues → `details.fields`: one entry per failing field, with its dotted path. */
export function zodDetails(err: ZodError): Record<string, unknown> {
  const at = (path: PropertyKey[]) => (path.length ? path.map(String).join(".") : "(body)");
  return {
    fields: err.issues.flatMap((i) =>
      i.code === "unrecognized_keys"
        ? i.keys.map((k) => ({ field: at([...i.path, k]), code: "unknown_field", message: "Unknown field" }))
        : [{ field: at(i.path), code: i.code, message: i.message }],
    ),
  };
}

const UNAVAILABLE_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "P1001", "P1017", "P2024", "53300"]);
// Driver-adapter error kinds (@prisma/adapter-pg) for a lost or unreachable server.
const UNAVAILABLE_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);
const UNAVAILABLE_MESSAGE =
  /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|DatabaseNotReachable|ConnectionClosed|terminating connection due to administrator command|the database system is (?:starting up|shutting down|in recovery)/i;

/**
 * PostgreSQL / driver errors that mean "the database is not reachable right now": SQLSTATE classes
 * 08 (connection exception) and 57P (operator intervention: admin/crash shutdown, cannot connect
 * now), socket errors, and the adapter's connection kinds — wherever they sit in the chain (`cause`,
 * or `meta.driverAdapterError` of a PrismaClientKnownRequestError such as P2010/P2039).
 */
function isUnavailable(err: unknown): boolean {
  const seen = new Set<unknown>();
  const queue: any[] = [err];
  while (queue.length) {
    const e = queue.shift();
    if (!e || typeof e !== "object" || seen.has(e)) continue;
    seen.add(e);
    for (const code of [e.code, e.originalCode]) {
      if (typeof code === "string" && (UNAVAILABLE_CODES.has(code) || /^(?:08[0-9A-Z]{3}|57P0[1-3])$/.test(code))) return true;
    }
    if (typeof e.kind === "string" && UNAVAILABLE_KINDS.has(e.kind)) return true;
    if (UNAVAILABLE_MESSAGE.test(String(e.message ?? ""))) return true;
    queue.push(e.cause, e.meta?.driverAdapterError);
  }
  return false;
}

/** The SQLSTATEs found in an error chain (driver, adapter and Prisma wrappers). */
function sqlStates(err: unknown): string[] {
  const out: string[] = [];
  const seen = new Set<unknown>();
  const queue: any[] = [err];
  while (queue.length) {
    const e = queue.shift();
    if (!e || typeof e !== "object" || seen.has(e)) continue;
    seen.add(e);
    for (const c of [e.code, e.originalCode]) if (typeof c === "string" && /^[0-9A-Z]{5}$/.test(c)) out.push(c);
    queue.push(e.cause, e.meta?.driverAdapterError);
  }
  return out;
}

/** Anything thrown → AppError. Unknown failures become INTERNAL_ERROR without leaking internals. */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof TRPCError) {
    const cause = err.cause as unknown;
    if (cause instanceof AppError) return cause;
    if (cause instanceof ZodError || (cause as any)?.name === "ZodError")
      return validation("Request validation failed", zodDetails(cause as ZodError));
    if (err.code === "PARSE_ERROR") return validation("Malformed JSON body");
    if (err.code === "UNSUPPORTED_MEDIA_TYPE") return validation("Content-Type must be application/json");
    if (err.code === "PAYLOAD_TOO_LARGE") return new AppError("PAYLOAD_TOO_LARGE", "Request body too large");
    if (err.code === "NOT_FOUND") return notFound();
    if (cause !== undefined && cause !== err) return toAppError(cause);
  }
  if (err instanceof ZodError) return validation("Request validation failed", zodDetails(err));
  if (isUnavailable(err)) return new AppError("SERVICE_UNAVAILABLE", "A backing service is temporarily unavailable; retry shortly");
  // A value PostgreSQL text cannot hold (U+0000, e.g. ?search=%00) reached a query: the input's fault.
  if (sqlStates(err).includes("22021"))
    return validation("Text must not contain NUL (U+0000) characters", {
      fields: [{ field: "(query)", code: "invalid_string", message: "must not contain NUL (U+0000) characters" }],
    });
  return new AppError("INTERNAL_ERROR", "Internal server error");
}

export function envelope(err: AppError, requestId: string): Envelope {
  return { error: err.code, message: err.message, request_id: requestId, details: err.details };
}
