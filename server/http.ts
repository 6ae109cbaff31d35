// Writing a JSON answer on node's own request/response objects, exactly as Express's
// `res.status(s).type("application/json").send(text)` did (the public API is served without
// Express: rest/facade.ts): `Content-Type: application/json; charset=utf-8`, a Content-Length, no
// body on HEAD. One helper for every envelope the guard, the body reader and the facade write.
import type { IncomingMessage, ServerResponse } from "node:http";
import { envelope, type AppError } from "./errors.js";
import "./http-types.js";

export function sendJson(req: IncomingMessage, res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return;
  res.statusCode = status;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  res.setHeader("Content-Length", Buffer.byteLength(text));
  res.end(req.method === "HEAD" ? undefined : text);
}

/** The error envelope {error, message, request_id, details} of `err`, with its status. */
export function sendEnvelope(req: IncomingMessage, res: ServerResponse, err: AppError): void {
  req.errorCode ??= err.code;
  sendJson(req, res, err.status, JSON.stringify(envelope(err, req.id)));
}

/** One request header as a string (node joins repeated ones with ", "). */
export function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}
