// The REST facade: mounts the tRPC procedures at their /public/v1 paths through trpc-to-openapi and
// turns every failure — from the guard, the body reader, the procedures or an unknown path — into
// the one envelope {error, message, request_id, details}.
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { createOpenApiNodeHttpHandler } from "trpc-to-openapi";
import { AppError, envelope, toAppError } from "../server/errors.js";
import type { Services } from "../server/services.js";
import { guard } from "../server/auth/guard.js";
import type { AppRouter } from "../routers/index.js";
import { createContext, type Meta } from "../routers/trpc.js";
import { buildOpenApiDocument } from "./openapi.js";

export const PUBLIC_PREFIX = "/public/v1";

export function sendError(req: Request, res: Response, err: AppError): void {
  if (res.headersSent) return;
  res.status(err.status).type("application/json").send(JSON.stringify(envelope(err, req.id)));
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;.*)?$/i;

/**
 * Where a parsed body holds a string (value or key) with U+0000, which PostgreSQL text cannot store
 * (the query fails). Reported as 422 with the body's other problems. Iterative: bodies may nest deeply.
 */
export function nulCharacterPaths(root: unknown): string[] {
  const found: string[] = [];
  const nodes: { v: unknown; parent: number; key: string }[] = [{ v: root, parent: -1, key: "" }];
  const pathOf = (i: number, last?: string) => {
    const parts: string[] = last === undefined ? [] : [last];
    for (let j = i; j > 0; j = nodes[j]!.parent) parts.unshift(nodes[j]!.key);
    return parts.join(".") || "(body)";
  };
  for (let i = 0; i < nodes.length && found.length < 20; i++) {
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

function nulProblem(paths: string[]): AppError {
  return new AppError("VALIDATION_ERROR", "Text must not contain NUL (U+0000) characters", {
    fields: paths.map((field) => ({ field, code: "invalid_string", message: "must not contain NUL (U+0000) characters" })),
  });
}

/**
 * Reads write bodies. A body that cannot be used is not answered here: it is recorded on the request
 * and reported as 422 after authentication, quotas and the scope check (the documented check order).
 * Only an oversized body is answered at once (413).
 */
function bodyReader(limitBytes: number): RequestHandler {
  const raw = express.raw({ type: () => true, limit: limitBytes });
  return (req, res, next) => {
    if (req.method === "GET" || req.method === "HEAD" || req.method === "DELETE" || req.method === "OPTIONS") return next();
    raw(req, res, (err?: any) => {
      if (err) {
        if (err.type === "entity.too.large")
          return sendError(req, res, new AppError("PAYLOAD_TOO_LARGE", `Request body exceeds ${limitBytes} bytes`, { limitBytes }));
        req.bodyProblem = new AppError("VALIDATION_ERROR", "Request body could not be read");
      } else {
        const type = req.headers["content-type"];
        const text = Buffer.isBuffer(req.body) ? req.body.toString("utf8") : "";
        if (!type || !JSON_TYPE.test(type)) {
          req.bodyProblem = new AppError("VALIDATION_ERROR", "Content-Type must be application/json", {
            fields: [{ field: "Content-Type", code: "invalid_header", message: "must be application/json" }],
          });
        } else {
          try {
            const parsed = JSON.parse(text);
            if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
              req.bodyProblem = new AppError("VALIDATION_ERROR", "Request body must be a JSON object", {
                fields: [{ field: "(body)", code: "invalid_type", message: "expected a JSON object" }],
              });
            else {
              req.body = parsed;
              const nul = nulCharacterPaths(parsed);
              if (nul.length) req.bodyProblem = nulProblem(nul);
            }
          } catch {
            req.bodyProblem = new AppError("VALIDATION_ERROR", "Malformed JSON body", {
              fields: [{ field: "(body)", code: "invalid_json", message: "not valid JSON" }],
            });
          }
        }
      }
      if (req.bodyProblem) {
        req.body = {};
        req.headers["content-type"] = "application/json";
      }
      next();
    });
  };
}

export function publicApi(services: Services, router: AppRouter): express.Router {
  // Success statuses and other per-operation facts come from the procedures' meta.
  const metaByPath = new Map<string, Meta>();
  for (const [path, proc] of Object.entries(router._def.procedures)) metaByPath.set(path, (proc as any)._def.meta ?? {});

  const handler = createOpenApiNodeHttpHandler({
    router,
    createContext: ({ req, res }: { req: Request; res: Response }) => createContext(services, req, res),
    responseMeta: ({ paths, errors }: { paths?: string[]; errors: unknown[] }) => {
      if (errors.length) return { status: toAppError(errors[0]).status };
      const meta = paths?.[0] ? metaByPath.get(paths[0]) : undefined;
      return { status: meta?.successStatus ?? 200 };
    },
    onError: ({ error, req }: { error: unknown; req: Request }) => {
      const app = toAppError(error);
      if (app.status >= 500)
        services.logger.error({ reqId: req.id, err: (error as any)?.cause ?? error }, "request failed");
    },
    maxBodySize: services.config.bodyLimitBytes,
  } as any) as unknown as (req: Request, res: Response, next: NextFunction) => Promise<void>;

  const api = express.Router();
  // The OpenAPI document: no key, not rate-limited.
  const openapi = JSON.stringify(buildOpenApiDocument(router));
  api.get(`${PUBLIC_PREFIX}/openapi.json`, (_req, res) => {
    res.type("application/json").send(openapi);
  });
  api.use(PUBLIC_PREFIX, guard(services));
  api.use(PUBLIC_PREFIX, bodyReader(services.config.bodyLimitBytes));
  api.use(PUBLIC_PREFIX, (req, res, next) => {
    // trpc-to-openapi sends {...errorShape, message, code, issues}; keep only the envelope that
    // the error formatter (routers/trpc.ts) put in errorShape.envelope.
    const end = res.end.bind(res) as (...a: any[]) => Response;
    (res as any).end = (chunk: any, ...rest: any[]) => {
      if (res.statusCode >= 400 && typeof chunk === "string") {
        try {
          const body = JSON.parse(chunk);
          if (body && body.envelope) chunk = JSON.stringify({ ...body.envelope, request_id: req.id });
        } catch {
          /* not JSON: leave it */
        }
      }
      return end(chunk, ...rest);
    };
    // The adapter reads req.url relative to the mount point: give it the full path back.
    req.url = req.originalUrl;
    handler(req, res, next).catch(next);
  });
  api.use(PUBLIC_PREFIX, (req, res) => sendError(req, res, new AppError("NOT_FOUND", `No operation ${req.method} ${req.path}`)));
  api.use(PUBLIC_PREFIX, ((err, req, res, _next) => {
    const app = toAppError(err);
    if (app.status >= 500) services.logger.error({ reqId: req.id, err }, "request failed");
    sendError(req, res, app);
  }) as express.ErrorRequestHandler);
  return api;
}
