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
import type { IncomingMessage, ServerResponse } from "node:http";
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
import { createContext, operations, type Context, type Meta, type Outcome } from "../routers/trpc.js";
import { exchangeOf } from "../server/exchange.js";
import { factsOf } from "./facts.js";
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

/** trpc-to-openapi's options, with the failure body our patch adds (patches/trpc-to-openapi+3.3.0.patch). */
type OpenApiHandlerOptions = Parameters<typeof createOpenApiNodeHttpHandler>[0] & {
  errorBody?: (opts: { error: unknown; req: IncomingMessage }) => unknown;
};

/** The `version` of an answer that is one object (an id and a version at its top level). */
function versionOf(data: unknown): number | undefined {
  if (!data || typeof data !== "object") return undefined;
  const o = data as { id?: unknown; version?: unknown };
  return typeof o.id === "string" && typeof o.version === "number" ? o.version : undefined;
}

const idOf = (data: unknown) =>
  data && typeof data === "object" && typeof (data as { id?: unknown }).id === "string"
    ? (data as { id: string }).id
    : undefined;

/**
 * The REST answer of a call from its operation's meta and the call's outcome (routers/trpc.ts
 * Outcome), in one place: the status (meta's, or an upsert's 201/200), `Location` of a created object,
 * `Idempotent-Replayed`, the `ETag` of an answer that is one versioned object, and a GET-one's 304
 * when If-None-Match names its version.
 */
export function answerMeta(
  meta: Meta | undefined,
  outcome: Outcome | undefined,
  data: unknown,
  query: boolean,
  ifNoneMatch: string | undefined,
) {
  const status = outcome?.upserted ? (outcome.upserted === "created" ? 201 : 200) : (meta?.successStatus ?? 200);
  const headers: Record<string, string> = {};
  if (outcome?.replayed) headers["Idempotent-Replayed"] = "true";
  const id = idOf(data);
  if (status === 201 && meta?.location && id) headers.Location = meta.location.replace("{id}", encodeURIComponent(id));
  const version = versionOf(data);
  if (version === undefined) return { status, headers };
  headers.ETag = etagOf(version);
  if (query && noneMatch(ifNoneMatch, version)) return { status: 304, headers };
  return { status, headers };
}

export function publicApi(services: Services, router: AppRouter): Handler {
  // Success statuses and other per-operation facts come from the procedures' meta.
  const metaByPath = new Map(operations(router).map((o) => [o.path, o.meta]));

  const handler = createOpenApiNodeHttpHandler({
    router,
    createContext: ({ req }: { req: IncomingMessage }) => {
      const x = exchangeOf(req);
      return createContext(services, {
        requestId: x.id,
        caller: x.caller,
        request: factsOf(req, "rest", shadowedOf(req)),
      });
    },
    responseMeta: ({
      type,
      paths,
      errors,
      data,
      ctx,
    }: {
      type: string;
      paths?: string[];
      errors: unknown[];
      data?: unknown[];
      ctx?: Context;
    }) => {
      const meta = paths?.[0] ? metaByPath.get(paths[0]) : undefined;
      // A polled operation's every answer says how long to leave before the next call.
      const poll = meta?.pollInterval === undefined ? {} : { "X-Poll-Interval": String(meta.pollInterval) };
      if (errors.length) {
        const app = toAppError(errors[0]);
        // A 412 names the object's current version (when there is one) as its ETag.
        const current = app.code === "PRECONDITION_FAILED" ? app.details.currentVersion : undefined;
        return typeof current === "number"
          ? { status: app.status, headers: { ...poll, ETag: etagOf(current) } }
          : { status: app.status, headers: poll };
      }
      const answer = answerMeta(meta, ctx?.outcomes[0], data?.[0], type === "query", ctx?.request.ifNoneMatch);
      return meta?.pollInterval === undefined ? answer : { ...answer, headers: { ...poll, ...answer.headers } };
    },
    onError: ({ error, req, path }: { error: unknown; req: IncomingMessage; path?: string }) => {
      const x = exchangeOf(req);
      x.appError = toAppError(error);
      logFailure(services.logger, x.id, error, x.appError, path);
    },
    // The body of a failure: the one envelope (trpc-to-openapi's own shape otherwise; patches/).
    errorBody: ({ req }: { req: IncomingMessage }) => {
      const x = exchangeOf(req);
      x.errorCode ??= x.appError!.code;
      return envelope(x.appError!, x.id);
    },
    maxBodySize: services.config.bodyLimitBytes,
  } as OpenApiHandlerOptions) as unknown as (
    req: IncomingMessage,
    res: ServerResponse,
    next: () => void,
  ) => Promise<void>;

  // The OpenAPI document: no key, not rate-limited — for GET and HEAD only; any other method on the
  // path goes through the guard like every other request.
  const openapi = JSON.stringify(buildOpenApiDocument(router));
  // The path templates, to name a path parameter whose encoding does not decode (wellEncoded).
  const templates = operations(router).flatMap(({ meta }) => {
    const o = meta.openapi;
    if (!o) return [];
    const names = [...o.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
    return names.length
      ? [{ method: o.method, names, re: new RegExp(`^${o.path.replace(/\{\w+\}/g, "([^/]+)")}/?$`, "i") }]
      : [];
  });
  // Body fields that a path parameter of the route also names (the path's value is the one used): a
  // fact for the operation (a PUT refuses a body naming its path's externalId).
  const shadowedOf = (req: IncomingMessage): string[] | undefined => {
    const body = (req as IncomingMessage & { body?: unknown }).body;
    if (!body || typeof body !== "object") return undefined;
    const pathname = parseUrl(req)?.pathname ?? "";
    const t = templates.find((x) => x.method === req.method && x.re.test(pathname));
    const hit = t?.names.filter((n) => n in body);
    return hit?.length ? hit : undefined;
  };
  const pathProblems = (method: string | undefined, pathname: string) => {
    if (!pathname.includes("%")) return [];
    const t = templates.find((x) => x.method === method && x.re.test(pathname));
    const m = t?.re.exec(pathname);
    return t && m ? t.names.filter((_, i) => !wellEncoded(m[i + 1]!)).map(notUtf8) : [];
  };
  // The batch upserts' routes (`*.batchUpsert`), matched as trpc-to-openapi matches a path (the URL
  // parser's path, any case, one optional trailing slash): their bodies have the larger member cap
  // (server/body.ts).
  const batchRoutes = operations(router).flatMap(({ path: name, meta }) => {
    const o = meta.openapi;
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
      logFailure(services.logger, exchangeOf(req).id, err, app);
      sendEnvelope(req, res, app);
    };
    try {
      if ((req.method === "GET" || req.method === "HEAD") && OPENAPI_PATH.test(pathname))
        return sendJson(req, res, 200, openapi);
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
