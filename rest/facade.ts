// The REST facade: mounts the tRPC procedures at their /public/v1 paths through trpc-to-openapi and
// turns every failure — from the guard, the body reader, the procedures or an unknown path — into
// the one envelope {error, message, request_id, details}.
import express, { type NextFunction, type Request, type RequestHandler, type Response } from "express";
import { createOpenApiNodeHttpHandler } from "trpc-to-openapi";
import { AppError, envelope, logFailure, toAppError } from "../server/errors.js";
import type { Services } from "../server/services.js";
import { guard } from "../server/auth/guard.js";
import { jsonBodyReader } from "../server/body.js";
import type { AppRouter } from "../routers/index.js";
import { createContext, type Meta } from "../routers/trpc.js";
import { buildOpenApiDocument } from "./openapi.js";

export const PUBLIC_PREFIX = "/public/v1";

export function sendError(req: Request, res: Response, err: AppError): void {
  if (res.headersSent) return;
  res.status(err.status).type("application/json").send(JSON.stringify(envelope(err, req.id)));
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
      req.appError = toAppError(error);
      logFailure(services.logger, req.id, error, req.appError);
    },
    maxBodySize: services.config.bodyLimitBytes,
  } as any) as unknown as (req: Request, res: Response, next: NextFunction) => Promise<void>;

  const api = express.Router();
  // The OpenAPI document: no key, not rate-limited — for GET and HEAD only (this route answers
  // both); any other method on the path goes through the guard like every other request.
  const openapi = JSON.stringify(buildOpenApiDocument(router));
  api.get(`${PUBLIC_PREFIX}/openapi.json`, (_req, res) => {
    res.type("application/json").send(openapi);
  });
  api.use(PUBLIC_PREFIX, guard(services));
  api.use(PUBLIC_PREFIX, jsonBodyReader(services.config.bodyLimitBytes, sendError));
  api.use(PUBLIC_PREFIX, (req, res, next) => {
    // trpc-to-openapi sends {...errorShape, message, code, issues}; what goes out instead is the
    // envelope of this request's AppError (kept by onError above), serialized here once.
    const end = res.end.bind(res) as (...a: any[]) => Response;
    (res as any).end = (chunk: any, ...rest: any[]) => {
      if (res.statusCode >= 400 && req.appError) chunk = JSON.stringify(envelope(req.appError, req.id));
      return end(chunk, ...rest);
    };
    // The adapter reads req.url relative to the mount point: give it the full path back.
    req.url = req.originalUrl;
    handler(req, res, next).catch(next);
  });
  api.use(PUBLIC_PREFIX, (req, res) => sendError(req, res, new AppError("NOT_FOUND", `No operation ${req.method} ${req.path}`)));
  api.use(PUBLIC_PREFIX, ((err, req, res, _next) => {
    const app = toAppError(err);
    logFailure(services.logger, req.id, err, app);
    sendError(req, res, app);
  }) as express.ErrorRequestHandler);
  return api;
}
