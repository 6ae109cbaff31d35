// The REST facade: serves the tRPC procedures at their /public/v1 paths through trpc-to-openapi's
// node-http adapter and turns every failure — from the guard, the body reader, the procedures or an
// unknown path — into the one envelope {error, message, request_id, details}.
//
// It runs on node's own request and response, not as an Express mount (server/app.ts sends every
// path under /public/v1 here and everything else to Express): Express cost ~55 µs of CPU per request
// before any of our code ran (a four-layer Express app answering a constant: 68–71 µs per request
// against 15–16 µs for node:http, measured on this machine), a sixth of GET /me's whole cost. What
// Express did for these paths is done here the same way: its case-insensitive prefix match, the
// OpenAPI document's GET/HEAD route, its "simple" query parser (querystring, which trpc-to-openapi
// reads from req.query; here without its cap of 1,000 parameters, which dropped the later ones and
// the filters among them), `application/json; charset=utf-8` error answers (server/http.ts).
import { ServerResponse, type IncomingMessage } from "node:http";
import { parse as parseQuery } from "node:querystring";
import parseUrl from "parseurl";
import { createOpenApiNodeHttpHandler } from "trpc-to-openapi";
import { guard } from "../server/auth/guard.js";
import {
  jsonBodyReader,
  MAX_BATCH_JSON_MEMBERS,
  MAX_JSON_MEMBERS,
  notUtf8,
  queryTextProblems,
  recordInputProblem,
  textProblemError,
  wellEncoded,
} from "../server/body.js";
import { AppError, echoed, logFailure, toAppError, envelope } from "../server/errors.js";
import { sendEnvelope, sendJson } from "../server/http.js";
import type { Services } from "../server/services.js";
import type { AppRouter } from "../routers/index.js";
import { createContext, type Context, type Meta } from "../routers/trpc.js";
import { etagOf, noneMatch } from "../routers/_lib/sync.js";
import { buildOpenApiDocument } from "./openapi.js";

export const PUBLIC_PREFIX = "/public/v1";

/** Express's match of a mount path: the prefix in any letter case, then "/" or the end. */
const UNDER_PREFIX = /^\/public\/v1(?:\/|$)/i;
/** Express's match of the document's route (any case, one optional trailing slash). */
const OPENAPI_PATH = /^\/public\/v1\/openapi\.json\/?$/i;

/** Whether a request belongs to the public API (its path as Express reads it: parseurl's pathname). */
export function isPublicRequest(req: IncomingMessage): boolean {
  return UNDER_PREFIX.test(parseUrl(req)?.pathname ?? "");
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

const nodeEnd = ServerResponse.prototype.end as (this: ServerResponse, ...a: unknown[]) => ServerResponse;

/**
 * res.end for the procedures' answers: trpc-to-openapi sends {...errorShape, message, code, issues};
 * what goes out instead is the envelope of the request's AppError (kept by onError), serialized once.
 * One function for every response, reading the request from `this`: a closure (and a bound end) made
 * per request and stored on the response kept requests alive through young-generation collections
 * (docs/decisions/performance.md, "No per-request object kept by a long-lived one").
 */
function endWithEnvelope(this: ServerResponse, chunk?: unknown, ...rest: unknown[]): ServerResponse {
  const req = this.req;
  if (this.statusCode === 304) {
    // Not modified: no body, so no body's headers (node drops a 304's body itself).
    this.removeHeader("Content-Type");
    this.removeHeader("Content-Length");
    return nodeEnd.call(this);
  }
  if (this.statusCode >= 400 && req.appError) {
    req.errorCode ??= req.appError.code;
    chunk = JSON.stringify(envelope(req.appError, req.id));
  }
  return nodeEnd.call(this, chunk, ...rest);
}

/** The `version` of an answer that is one object (an id and a version at its top level). */
function versionOf(data: unknown): number | undefined {
  if (!data || typeof data !== "object") return undefined;
  const o = data as { id?: unknown; version?: unknown };
  return typeof o.id === "string" && typeof o.version === "number" ? o.version : undefined;
}

export function publicApi(services: Services, router: AppRouter): Handler {
  // Success statuses and other per-operation facts come from the procedures' meta.
  const metaByPath = new Map<string, Meta>();
  for (const [path, proc] of Object.entries(router._def.procedures)) metaByPath.set(path, (proc as any)._def.meta ?? {});

  const handler = createOpenApiNodeHttpHandler({
    router,
    createContext: ({ req, res }: { req: IncomingMessage; res: ServerResponse }) => createContext(services, req, res),
    responseMeta: ({ paths, errors, data, ctx }: { paths?: string[]; errors: unknown[]; data?: unknown[]; ctx?: Context }) => {
      if (errors.length) {
        const app = toAppError(errors[0]);
        // A 412 names the object's current version (when there is one) as its ETag.
        const current = app.code === "PRECONDITION_FAILED" ? app.details.currentVersion : undefined;
        return typeof current === "number" ? { status: app.status, headers: { ETag: etagOf(current) } } : { status: app.status };
      }
      const meta = paths?.[0] ? metaByPath.get(paths[0]) : undefined;
      const status = ctx?.req.successStatus ?? meta?.successStatus ?? 200;
      // An answer carrying one versioned object (GET one, create, PATCH, PUT, a comment) sends its
      // version as the ETag; a GET whose If-None-Match names it answers 304 without a body.
      const version = versionOf(data?.[0]);
      if (version === undefined) return { status };
      const headers = { ETag: etagOf(version) };
      if (ctx?.req.method === "GET" && noneMatch(ctx.req.headers["if-none-match"], version)) return { status: 304, headers };
      return { status, headers };
    },
    onError: ({ error, req, path }: { error: unknown; req: IncomingMessage; path?: string }) => {
      req.appError = toAppError(error);
      logFailure(services.logger, req.id, error, req.appError, path);
    },
    maxBodySize: services.config.bodyLimitBytes,
  } as any) as unknown as (req: IncomingMessage, res: ServerResponse, next: () => void) => Promise<void>;

  // The OpenAPI document: no key, not rate-limited — for GET and HEAD only; any other method on the
  // path goes through the guard like every other request.
  const openapi = JSON.stringify(buildOpenApiDocument(router));
  // The path templates, to name a path parameter whose encoding does not decode (wellEncoded).
  const templates = Object.values(router._def.procedures).flatMap((proc) => {
    const o = ((proc as any)._def.meta as Meta | undefined)?.openapi;
    if (!o) return [];
    const names = [...o.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
    return names.length ? [{ method: o.method, names, re: new RegExp(`^${o.path.replace(/\{\w+\}/g, "([^/]+)")}/?$`, "i") }] : [];
  });
  const pathProblems = (method: string | undefined, pathname: string) => {
    if (!pathname.includes("%")) return [];
    const t = templates.find((x) => x.method === method && x.re.test(pathname));
    const m = t?.re.exec(pathname);
    return t && m ? t.names.filter((_, i) => !wellEncoded(m[i + 1]!)).map(notUtf8) : [];
  };
  // The batch upserts' routes (`*.batchUpsert`), matched as trpc-to-openapi matches a path (the URL
  // parser's path, any case, one optional trailing slash): their bodies have the larger member cap
  // (server/body.ts).
  const batchRoutes = Object.entries(router._def.procedures).flatMap(([name, proc]) => {
    const o = ((proc as any)._def.meta as Meta | undefined)?.openapi;
    if (!o || !name.endsWith(".batchUpsert")) return [];
    return [{ method: o.method, re: new RegExp(`^${o.path.replace(/\{\w+\}/g, "[^/]+")}/?$`, "i") }];
  });
  const membersOf = (req: IncomingMessage) => {
    let pathname: string;
    try {
      pathname = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    } catch {
      return MAX_JSON_MEMBERS;
    }
    const batch = batchRoutes.some((r) => r.method === req.method && r.re.test(pathname));
    return batch ? MAX_BATCH_JSON_MEMBERS : MAX_JSON_MEMBERS;
  };
  const checkKey = guard(services);
  const readBody = jsonBodyReader(services.config.bodyLimitBytes, sendEnvelope, membersOf);

  return (req, res) => {
    const url = parseUrl(req)!;
    const pathname = url.pathname ?? "";
    const fail = (err: unknown) => {
      const app = toAppError(err);
      logFailure(services.logger, req.id, err, app);
      sendEnvelope(req, res, app);
    };
    try {
      if ((req.method === "GET" || req.method === "HEAD") && OPENAPI_PATH.test(pathname)) return sendJson(req, res, 200, openapi);
      // Express's "simple" query parser, reading every parameter (maxKeys 0: its default of 1,000
      // dropped the rest silently, filters included); the request line bounds them (Node's 16 KiB
      // head). trpc-to-openapi takes the query from req.query when set.
      const rawQuery = typeof url.query === "string" ? url.query : "";
      (req as IncomingMessage & { query?: unknown }).query = parseQuery(rawQuery, undefined, undefined, { maxKeys: 0 });
      // Percent-encoded bytes that are not UTF-8 (the parser made U+FFFD of them): 422 after the scope check.
      const unstorable = [...pathProblems(req.method, pathname), ...queryTextProblems(rawQuery)];
      if (unstorable.length) recordInputProblem(req, textProblemError(unstorable));
      checkKey(req, res, (err) => {
        if (err) return fail(err);
        readBody(req, res, (err2) => {
          if (err2) return fail(err2);
          (res as { end: unknown }).end = endWithEnvelope;
          const none = () =>
            sendEnvelope(req, res, new AppError("NOT_FOUND", `No operation ${req.method} ${echoed(pathname)}`));
          handler(req, res, none).catch(fail);
        });
      }).catch(fail);
    } catch (err) {
      fail(err);
    }
  };
}
