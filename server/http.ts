// Writing a JSON answer on node's own request/response objects, exactly as Express's
// `res.status(s).type("application/json").send(text)` did (the public API is served without
// Express: rest/facade.ts): `Content-Type: application/json; charset=utf-8`, a Content-Length, no
// body on HEAD. One helper for every envelope the guard, the body reader and the facade write.
// Also what server/app.ts applies to every request first: the target in origin form, the API's
// cache headers.
import type { IncomingMessage, ServerResponse } from "node:http";
import { envelope, type AppError } from "./errors.js";
import { exchangeOf } from "./exchange.js";

export function sendJson(req: IncomingMessage, res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return;
  res.statusCode = status;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(text));
  res.end(req.method === "HEAD" ? undefined : text);
}

/** The error envelope {error, message, request_id, details} of `err`, with its status. */
export function sendEnvelope(req: IncomingMessage, res: ServerResponse, err: AppError): void {
  const x = exchangeOf(req);
  x.errorCode ??= err.code;
  sendJson(req, res, err.status, JSON.stringify(envelope(err, x.id)));
}

/** One request header as a string (node joins repeated ones with ", "). */
export function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

/** A scheme and an authority at the start of a request target: the absolute form (RFC 9112 §3.2.2). */
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * A request target in origin form: an absolute-form target (`http://other.example/public/v1/x?q`)
 * without its scheme and authority (`/public/v1/x?q`), the path and query kept exactly as sent (no
 * dot-segment or percent-decoding: the same bytes an origin-form request would have brought). The
 * authority is not used: the service answers for itself whatever host a target names.
 */
export function originForm(target: string): string {
  if (target.charCodeAt(0) === 0x2f) return target; // "/": origin form already
  const m = ABSOLUTE_FORM.exec(target);
  if (!m) return target; // "*" (OPTIONS), or not a target Node would pass on
  const rest = target.slice(m[0].length);
  return rest.charCodeAt(0) === 0x2f ? rest : `/${rest}`;
}

/**
 * The cache headers of every /public/v1 and /trpc answer (docs/decisions/api.md, "Caching"): the
 * answer is the key's own (`private`: no shared cache keeps it, though list URLs are the same for
 * every tenant) and is revalidated before any reuse (`no-cache`, which the ETag/If-None-Match 304s
 * serve); it varies with the key; its type is the declared one (`nosniff`).
 */
export const API_CACHE_HEADERS = {
  "Cache-Control": "private, no-cache",
  Vary: "X-API-Key",
  "X-Content-Type-Options": "nosniff",
} as const;
