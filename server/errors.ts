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

/** PostgreSQL / driver errors that mean "the database is not reachable right now". */
function isUnavailable(err: unknown): boolean {
  const seen = new Set<unknown>();
  let e: any = err;
  while (e && !seen.has(e)) {
    seen.add(e);
    const code = e.code ?? e.cause?.code;
    const msg = String(e.message ?? "");
    if (
      ["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "57P01", "57P02", "57P03", "08006", "08001", "08003", "P1001", "P1017", "P2024"].includes(code) ||
      /Connection terminated|connection timeout|timeout exceeded when trying to connect|Client has encountered a connection error|DatabaseNotReachable|ConnectionClosed/i.test(msg)
    )
      return true;
    e = e.cause;
  }
  return false;
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
  return new AppError("INTERNAL_ERROR", "Internal server error");
}

export function envelope(err: AppError, requestId: string): Envelope {
  return { error: err.code, message: err.message, request_id: requestId, details: err.details };
}
