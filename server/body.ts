// The JSON body reader of both API transports (/public/v1 in rest/facade.ts, /trpc in rest/trpc.ts),
// mounted after the guard. A body that cannot be used is not answered here: it is recorded on the
// request (req.bodyProblem) and reported as 422 after the scope check (routers/trpc.ts scoped()),
// the documented check order. Only an oversized body is answered at once (413).
//
// What it accepts: a JSON object (UTF-8) under a JSON media type — `application/json` or
// `application/<anything>+json`, any letter case, with any parameters — at most MAX_JSON_DEPTH
// levels deep, with at most MAX_JSON_MEMBERS object members, without U+0000 in any string. An
// accepted request's Content-Type is rewritten to plain `application/json`, so the adapters behind
// (trpc-to-openapi, tRPC), which only know that spelling, see the same thing for every variant.
import type { IncomingMessage, ServerResponse } from "node:http";
import express from "express";
import { AppError, MAX_DETAIL_FIELDS, type FieldProblem } from "./errors.js";

/**
 * Deepest nesting of arrays/objects accepted in a body (the body object itself is level 1). The
 * deepest valid body of the API has 3 levels; 32 leaves room and keeps every recursive walk
 * downstream (zod, JSON.stringify in the adapters, the idempotency fingerprint) shallow.
 */
export const MAX_JSON_DEPTH = 32;
/**
 * Most object members (key: value pairs, all levels together) accepted in a body. The largest
 * valid body has about 15; what costs time on a 1 MiB body is an object of ~120,000 tiny keys
 * (parsing it, zod's unknown-key check, the adapters' copies), so such a body is refused from one
 * pass over its text, before anything is parsed.
 */
export const MAX_JSON_MEMBERS = 1_000;

const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9!#$&^_.+-]+\+)?json[ \t]*(?:;.*)?$/is;

/** Whether a Content-Type header names JSON: application/json or application/*+json, any case, parameters allowed. */
export function isJsonMediaType(header: string | undefined): boolean {
  return header !== undefined && JSON_MEDIA_TYPE.test(header.trim());
}

/**
 * What is wrong with the shape of JSON text: nesting deeper than MAX_JSON_DEPTH, or more than
 * MAX_JSON_MEMBERS object members; null when neither. One iterative pass over the text (brackets and
 * colons inside strings do not count), run before JSON.parse, so nothing deep or huge is ever built.
 */
export function jsonShapeProblem(text: string): "too_deep" | "too_many_members" | null {
  let depth = 0;
  let members = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) return "too_deep";
    } else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === 0x3a && ++members > MAX_JSON_MEMBERS) return "too_many_members";
  }
  return null;
}

/** Whether a parsed JSON value nests arrays/objects deeper than `max` (iterative; for documents not read by jsonBodyReader). */
export function valueDepthExceeds(root: unknown, max = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[root, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== "object") continue;
    if (depth > max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) if (x && typeof x === "object") stack.push([x, depth + 1]);
  }
  return false;
}

/**
 * Where a parsed body holds a string (value or key) with U+0000, which PostgreSQL text cannot store
 * (the query fails). Reported as 422 with the body's other problems. Iterative, and stops after
 * MAX_DETAIL_FIELDS findings.
 */
export function nulCharacterPaths(root: unknown): string[] {
  const found: string[] = [];
  const nodes: { v: unknown; parent: number; key: string }[] = [{ v: root, parent: -1, key: "" }];
  const pathOf = (i: number, last?: string) => {
    const parts: string[] = last === undefined ? [] : [last];
    for (let j = i; j > 0; j = nodes[j]!.parent) parts.unshift(nodes[j]!.key);
    return parts.join(".") || "(body)";
  };
  for (let i = 0; i < nodes.length && found.length < MAX_DETAIL_FIELDS; i++) {
    const v = nodes[i]!.v;
    if (typeof v === "string") {
      if (v.includes("\u0000")) found.push(pathOf(i));
    } else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k.includes("\u0000")) found.push(pathOf(i, k));
        nodes.push({ v: x, parent: i, key: k });
      }
    }
  }
  return found;
}

const problem = (message: string, fields: FieldProblem[]) => new AppError("VALIDATION_ERROR", message, { fields });

/** The 422 for a body (or a /trpc query `input`) whose shape is beyond the limits. */
export function shapeProblem(kind: "too_deep" | "too_many_members", what: string, field = "(body)"): AppError {
  return kind === "too_deep"
    ? problem(`${what} nests deeper than ${MAX_JSON_DEPTH} levels`, [
        { field, code: "too_deep", message: `arrays and objects may nest at most ${MAX_JSON_DEPTH} levels` },
      ])
    : problem(`${what} has more than ${MAX_JSON_MEMBERS} fields`, [
        { field, code: "too_many_fields", message: `at most ${MAX_JSON_MEMBERS} object members in all` },
      ]);
}

/** The problem of a JSON body text, or the parsed object. */
export function parseJsonBody(contentType: string | undefined, text: string): { body: Record<string, unknown> } | { problem: AppError } {
  if (!isJsonMediaType(contentType))
    return {
      problem: problem("Content-Type must be application/json (or application/*+json)", [
        { field: "Content-Type", code: "invalid_header", message: "must be application/json or application/*+json" },
      ]),
    };
  const shape = jsonShapeProblem(text);
  if (shape) return { problem: shapeProblem(shape, "Request body") };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { problem: problem("Malformed JSON body", [{ field: "(body)", code: "invalid_json", message: "not valid JSON" }]) };
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return { problem: problem("Request body must be a JSON object", [{ field: "(body)", code: "invalid_type", message: "expected a JSON object" }]) };
  // U+0000 can only be in a JSON string as the escape \u0000 (raw control characters are invalid).
  const nul = text.includes("\\u0000") ? nulCharacterPaths(parsed) : [];
  if (nul.length)
    return {
      problem: problem(
        "Text must not contain NUL (U+0000) characters",
        nul.map((field) => ({ field, code: "invalid_string", message: "must not contain NUL (U+0000) characters" })),
      ),
    };
  return { body: parsed as Record<string, unknown> };
}

const WITHOUT_BODY = new Set(["GET", "HEAD", "DELETE", "OPTIONS"]);

/**
 * Reads the body of a write (≤ limitBytes, else `tooLarge` answers 413 at once). Afterwards
 * req.body is the parsed object, or `{}` with req.bodyProblem set; the Content-Type is
 * `application/json` either way.
 */
export function jsonBodyReader(
  limitBytes: number,
  tooLarge: (req: IncomingMessage, res: ServerResponse, err: AppError) => void,
): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void {
  // body-parser's raw reader (size limit, Content-Encoding, a bounded read); it only needs node's
  // request and response, so the public API (no Express) and /trpc (Express) share it.
  const raw = express.raw({ type: () => true, limit: limitBytes }) as unknown as (req: IncomingMessage, res: ServerResponse, next: (err?: any) => void) => void;
  return (req, res, next) => {
    if (WITHOUT_BODY.has(req.method!)) return next();
    const withBody = req as IncomingMessage & { body?: unknown };
    raw(req, res, (err?: any) => {
      if (err?.type === "entity.too.large")
        return tooLarge(req, res, new AppError("PAYLOAD_TOO_LARGE", `Request body exceeds ${limitBytes} bytes`, { limitBytes }));
      const read = err
        ? { problem: new AppError("VALIDATION_ERROR", "Request body could not be read") }
        : parseJsonBody(req.headers["content-type"], Buffer.isBuffer(withBody.body) ? withBody.body.toString("utf8") : "");
      if ("problem" in read) {
        req.bodyProblem = read.problem;
        withBody.body = {};
      } else withBody.body = read.body;
      req.headers["content-type"] = "application/json";
      next();
    });
  };
}
