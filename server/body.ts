// The JSON body reader of both API transports (/public/v1 in rest/facade.ts, /trpc in rest/trpc.ts),
// mounted after the guard. A body that cannot be used is not answered here: it is recorded on the
// request (its exchange's inputProblem, server/exchange.ts) and reported as 422 after the scope check
// (routers/trpc.ts scoped()), the documented check order. Only an oversized body is answered at once (413).
//
// What it accepts: a JSON object (UTF-8) under a JSON media type — `application/json` or
// `application/<anything>+json`, any letter case, with any parameters — at most MAX_JSON_DEPTH
// levels deep, with at most MAX_JSON_MEMBERS object members (MAX_BATCH_JSON_MEMBERS for a request
// that names a batch upsert, as the transports tell: rest/facade.ts, rest/trpc.ts), whose text is
// stored as sent (see "Text stored as sent" below). An accepted request's Content-Type is rewritten to plain
// `application/json`, so the adapters behind (trpc-to-openapi, tRPC), which only know that
// spelling, see the same thing for every variant.
//
// Text stored as sent: the one check of the text a request brings, for both transports.
// Text the database would store other than as sent is refused with 422 VALIDATION_ERROR naming the
// field, never altered: U+0000 (PostgreSQL text cannot hold it) and ill-formed UTF-16 — a lone
// surrogate, which only a JSON escape ("\ud800") can make, and which the driver's UTF-8 encoding
// would silently turn into U+FFFD — in any string value or key of a body (textProblems), bytes of a
// body that are not UTF-8 (the decoder would write U+FFFD), and percent-encoded bytes of a query
// string that are not UTF-8 (queryTextProblems; "%ED%A0%80" would decode to U+FFFD). The /trpc query
// `input` (JSON in the URL) gets the body's check (rest/trpc.ts). Headers cannot carry either: node
// reads them as latin1 (every code unit ≤ U+00FF), and the two the service echoes or stores are
// ASCII-only tokens (X-Request-Id, else a new id; Idempotency-Key, else 422).
import { isUtf8 } from "node:buffer";
import type { IncomingMessage, ServerResponse } from "node:http";
import express from "express";
import { AppError, echoed, MAX_DETAIL_FIELDS, type FieldProblem } from "./errors.js";
import { exchangeOf } from "./exchange.js";

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
/**
 * Most object members of a request that names a batch upsert (POST /public/v1/{leads,contacts,
 * tickets}/batch/upsert, or a /trpc request with a `*.batchUpsert` call): 100 items of up to 40
 * members each, then the request's own (a full lead item — every field, a budget — has 16). One
 * such batch fits whole; a /trpc batch naming several batch upserts shares this one bound.
 */
export const MAX_BATCH_JSON_MEMBERS = 5_000;

const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9!#$&^_.+-]+\+)?json[ \t]*(?:;.*)?$/is;

/** Whether a Content-Type header names JSON: application/json or application/*+json, any case, parameters allowed. */
export function isJsonMediaType(header: string | undefined): boolean {
  return header !== undefined && JSON_MEDIA_TYPE.test(header.trim());
}

/**
 * What is wrong with the shape of JSON text: nesting deeper than MAX_JSON_DEPTH, or more than
 * `maxMembers` object members; null when neither. One iterative pass over the text (brackets and
 * colons inside strings do not count), run before JSON.parse, so nothing deep or huge is ever built.
 */
export function jsonShapeProblem(text: string, maxMembers = MAX_JSON_MEMBERS): "too_deep" | "too_many_members" | null {
  let depth = 0;
  let members = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_JSON_DEPTH) return "too_deep";
    } else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === 0x3a && ++members > maxMembers) return "too_many_members";
  }
  return null;
}

/**
 * Whether a parsed JSON value nests arrays/objects deeper than
 * `max` (iterative; for documents not read by jsonBodyReader).
 */
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

/** ES2024's String.prototype.isWellFormed (Node 20), not in the ES2023 library the project compiles against. */
const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();
const toWellFormed = (s: string): string => (s as string & { toWellFormed(): string }).toWellFormed();

/** Why a string cannot be stored as sent, or null: U+0000, or a lone surrogate (ill-formed UTF-16). */
export function textProblem(s: string): "nul" | "lone_surrogate" | null {
  if (s.includes("\u0000")) return "nul";
  return isWellFormed(s) ? null : "lone_surrogate";
}

const TEXT_MESSAGE = {
  nul: "must not contain NUL (U+0000) characters",
  lone_surrogate:
    "must be well-formed Unicode: a lone UTF-16 surrogate (e.g. \\ud800 without its pair) cannot be stored",
  not_utf8: "must be UTF-8: these bytes encode no character",
} as const;
type TextIssue = keyof typeof TEXT_MESSAGE;
const textField = (field: string, issue: TextIssue): FieldProblem => ({
  field,
  code: "invalid_string",
  message: TEXT_MESSAGE[issue],
});

/**
 * Every string (value or key) of a parsed JSON value that `test` finds a problem in, as field
 * problems named by dotted path (array items by index, as zod names them; `prefix` goes first).
 * Iterative; stops after MAX_DETAIL_FIELDS findings; the nodes it visits are the value's own (a body
 * ≤ BODY_LIMIT_BYTES, a query ≤ the request line). A key that is itself ill-formed is named in the
 * path with U+FFFD in place of its lone surrogates (the error report stays well-formed); a path is cut
 * to MAX_ECHOED_NAME (server/errors.ts).
 */
function stringProblems(
  root: unknown,
  test: (s: string) => TextIssue | null,
  prefix: string[] = [],
  rootName = "(body)",
): FieldProblem[] {
  const found: FieldProblem[] = [];
  const nodes: { v: unknown; parent: number; key: string }[] = [{ v: root, parent: -1, key: "" }];
  const pathOf = (i: number, last?: string) => {
    const parts: string[] = last === undefined ? [] : [last];
    for (let j = i; j > 0; j = nodes[j]!.parent) parts.unshift(nodes[j]!.key);
    return echoed([...prefix, ...parts].map((p) => toWellFormed(echoed(p))).join(".")) || rootName;
  };
  for (let i = 0; i < nodes.length && found.length < MAX_DETAIL_FIELDS; i++) {
    const v = nodes[i]!.v;
    if (typeof v === "string") {
      const issue = test(v);
      if (issue) found.push(textField(pathOf(i), issue));
    } else if (v && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        const issue = test(k);
        if (issue && found.length < MAX_DETAIL_FIELDS) found.push(textField(pathOf(i, k), issue));
        nodes.push({ v: x, parent: i, key: k });
      }
    }
  }
  return found;
}

/**
 * Where a parsed JSON value (a body, a /trpc query `input`) holds a string, value or key, that
 * cannot be stored as sent: U+0000 or a lone surrogate. `prefix`: the path of the value itself;
 * `rootName`: the field named when the value itself is such a string.
 */
export function textProblems(root: unknown, prefix: string[] = [], rootName = "(body)"): FieldProblem[] {
  return stringProblems(root, textProblem, prefix, rootName);
}

/**
 * Whether JSON text can hold a string textProblems refuses: U+0000 and lone surrogates can only be
 * written as escapes (raw control characters are invalid JSON; a surrogate's raw bytes are not UTF-8
 * and are refused before). A valid surrogate pair written as escapes also matches: then the walk decides.
 */
const ESCAPED_TEXT_PROBLEM = /\\u(?:0000|[dD][89a-fA-F])/;
export const mayHoldTextProblem = (jsonText: string) => ESCAPED_TEXT_PROBLEM.test(jsonText);

/** The 422 of text that cannot be stored as sent (field problems of textProblems / queryTextProblems). */
export function textProblemError(fields: FieldProblem[]): AppError {
  const issues = new Set(fields.map((f) => f.message));
  const message =
    issues.size === 1 && issues.has(TEXT_MESSAGE.nul)
      ? "Text must not contain NUL (U+0000) characters"
      : "Text must be well-formed Unicode (valid UTF-8, no lone surrogate) without NUL (U+0000): it is stored as " +
        "sent or refused";
  return problem(message, fields);
}

/**
 * The parameters of a raw query string (what follows "?", still percent-encoded) whose percent-encoded
 * bytes, in the name or the value, are not UTF-8: node's querystring and URLSearchParams would decode
 * them to U+FFFD. Every parameter is checked, read or not (the whole query string must decode, as a
 * body must parse). A malformed escape ("%zz", a lone "%") is left as the text it is, as the parsers
 * do. The loop is bounded by the request line (node's header limit); it stops after
 * MAX_DETAIL_FIELDS findings.
 */
export function queryTextProblems(rawQuery: string): FieldProblem[] {
  if (!rawQuery.includes("%")) return [];
  const found: FieldProblem[] = [];
  for (const part of rawQuery.split("&")) {
    if (found.length >= MAX_DETAIL_FIELDS) break;
    if (!part.includes("%")) continue;
    const eq = part.indexOf("=");
    const name = percentDecoded(eq < 0 ? part : part.slice(0, eq));
    const value = eq < 0 ? null : percentDecoded(part.slice(eq + 1));
    if (!isUtf8(name) || (value && !isUtf8(value)))
      found.push(textField(echoed(Buffer.from(name).toString("utf8")), "not_utf8"));
  }
  return found;
}

const hexValue = (c: number) =>
  c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x41 && c <= 0x46 ? c - 0x37 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1;

/**
 * The bytes a query component stands for, as querystring decodes it: "%XX" → the byte, "+" → space,
 * a malformed escape left as its characters. (A request target is ASCII: node refuses other bytes.)
 */
/**
 * Whether a percent-encoded path parameter decodes to what it says: no malformed escape (`%zz`, a cut
 * `%E0%A4`) and UTF-8 bytes (not a lone surrogate's). Path parameters are decoded
 * (patches/trpc-to-openapi: an external id such as `crm%2F42`); one that is not is a 422
 * (rest/facade.ts), never a value taken as sent.
 */
export function wellEncoded(segment: string): boolean {
  return !segment.includes("%") || (!/%(?![0-9A-Fa-f]{2})/.test(segment) && isUtf8(percentDecoded(segment)));
}

/** The field problem of a parameter whose percent-encoded bytes are not UTF-8. */
export const notUtf8 = (field: string): FieldProblem => textField(field, "not_utf8");

function percentDecoded(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const hi = c === 0x25 && i + 2 < s.length ? hexValue(s.charCodeAt(i + 1)) : -1;
    const lo = hi >= 0 ? hexValue(s.charCodeAt(i + 2)) : -1;
    if (lo >= 0) {
      out[n++] = hi * 16 + lo;
      i += 2;
    } else out[n++] = c === 0x2b ? 0x20 : c > 0x7f ? 0x3f : c;
  }
  return out.subarray(0, n);
}

/** The raw query string of a request target (what follows the first "?"), "" when it has none. */
export function rawQueryOf(url: string | undefined): string {
  const q = url?.indexOf("?") ?? -1;
  return q < 0 ? "" : url!.slice(q + 1);
}

/**
 * Records a problem of the request's input, reported as 422 after the scope check (routers/trpc.ts
 * scoped()): the first one as it is, a later one's fields added to it (one 422 naming every field).
 */
export function recordInputProblem(req: IncomingMessage, err: AppError): void {
  const x = exchangeOf(req);
  const before = x.inputProblem;
  if (!before) {
    x.inputProblem = err;
    return;
  }
  const fields = [
    ...((before.details.fields as FieldProblem[] | undefined) ?? []),
    ...((err.details.fields as FieldProblem[] | undefined) ?? []),
  ];
  x.inputProblem = new AppError("VALIDATION_ERROR", before.message, {
    ...before.details,
    fields: fields.slice(0, MAX_DETAIL_FIELDS),
  });
}

const problem = (message: string, fields: FieldProblem[]) => new AppError("VALIDATION_ERROR", message, { fields });

/** The 422 for a body (or a /trpc query `input`) whose shape is beyond the limits (`maxMembers`: its member cap). */
export function shapeProblem(
  kind: "too_deep" | "too_many_members",
  what: string,
  field = "(body)",
  maxMembers = MAX_JSON_MEMBERS,
): AppError {
  return kind === "too_deep"
    ? problem(`${what} nests deeper than ${MAX_JSON_DEPTH} levels`, [
        { field, code: "too_deep", message: `arrays and objects may nest at most ${MAX_JSON_DEPTH} levels` },
      ])
    : problem(`${what} has more than ${maxMembers} fields`, [
        { field, code: "too_many_fields", message: `at most ${maxMembers} object members in all` },
      ]);
}

/**
 * The problem of a JSON body, or the parsed object. `raw`: the body's bytes (checked to be UTF-8), or
 * text already decoded; `maxMembers`: the request's member cap.
 */
export function parseJsonBody(
  contentType: string | undefined,
  raw: string | Buffer,
  maxMembers = MAX_JSON_MEMBERS,
): { body: Record<string, unknown> } | { problem: AppError } {
  if (!isJsonMediaType(contentType))
    return {
      problem: problem("Content-Type must be application/json (or application/*+json)", [
        { field: "Content-Type", code: "invalid_header", message: "must be application/json or application/*+json" },
      ]),
    };
  const utf8 = typeof raw === "string" || isUtf8(raw);
  const text = typeof raw === "string" ? raw : raw.toString("utf8");
  const shape = jsonShapeProblem(text, maxMembers);
  if (shape) return { problem: shapeProblem(shape, "Request body", "(body)", maxMembers) };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return utf8
      ? {
          problem: problem("Malformed JSON body", [
            { field: "(body)", code: "invalid_json", message: "not valid JSON" },
          ]),
        }
      : { problem: textProblemError([textField("(body)", "not_utf8")]) };
  }
  if (!utf8) {
    // Bytes that are not UTF-8 were decoded to U+FFFD: the strings holding one name the fields (a
    // U+FFFD the client sent as such is named too, which does no harm in a refusal).
    const fields = stringProblems(parsed, (s) => (s.includes("\ufffd") ? "not_utf8" : null));
    return { problem: textProblemError(fields.length ? fields : [textField("(body)", "not_utf8")]) };
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return {
      problem: problem("Request body must be a JSON object", [
        { field: "(body)", code: "invalid_type", message: "expected a JSON object" },
      ]),
    };
  const unstorable = mayHoldTextProblem(text) ? textProblems(parsed) : [];
  if (unstorable.length) return { problem: textProblemError(unstorable) };
  return { body: parsed as Record<string, unknown> };
}

const WITHOUT_BODY = new Set(["GET", "HEAD", "DELETE", "OPTIONS"]);

/**
 * Reads the body of a write (≤ limitBytes, else `tooLarge` answers 413 at once). Afterwards
 * req.body is the parsed object, or `{}` with the input problem recorded (recordInputProblem); the Content-Type is
 * `application/json` either way. `membersOf`: the request's member cap (MAX_JSON_MEMBERS unless said).
 */
export function jsonBodyReader(
  limitBytes: number,
  tooLarge: (req: IncomingMessage, res: ServerResponse, err: AppError) => void,
  membersOf: (req: IncomingMessage) => number = () => MAX_JSON_MEMBERS,
): (req: IncomingMessage, res: ServerResponse, next: (err?: unknown) => void) => void {
  // body-parser's raw reader (size limit, Content-Encoding, a bounded read); it only needs node's
  // request and response, so the public API (no Express) and /trpc (Express) share it.
  const raw = express.raw({ type: () => true, limit: limitBytes }) as unknown as (
    req: IncomingMessage,
    res: ServerResponse,
    next: (err?: { type?: unknown } | null) => void,
  ) => void;
  return (req, res, next) => {
    if (WITHOUT_BODY.has(req.method!)) return next();
    const withBody = req as IncomingMessage & { body?: unknown };
    raw(req, res, (err) => {
      if (err?.type === "entity.too.large")
        return tooLarge(
          req,
          res,
          new AppError("PAYLOAD_TOO_LARGE", `Request body exceeds ${limitBytes} bytes`, { limitBytes }),
        );
      const read = err
        ? { problem: new AppError("VALIDATION_ERROR", "Request body could not be read") }
        : parseJsonBody(
            req.headers["content-type"],
            Buffer.isBuffer(withBody.body) ? withBody.body : "",
            membersOf(req),
          );
      if ("problem" in read) {
        recordInputProblem(req, read.problem);
        withBody.body = {};
      } else withBody.body = read.body;
      req.headers["content-type"] = "application/json";
      next();
    });
  };
}
