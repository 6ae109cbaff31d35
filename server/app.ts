// Builds the request listener: request ids, logs and metrics for every request; the /public/v1
// facade on node's own request/response (rest/facade.ts); an Express app for the rest — health,
// the docs page, the internal tRPC mounts (/trpc, /trpc-admin). An absolute-form request target
// (`PUT http://host/public/v1/…`) is made origin-form first, so routing, logs, metrics and the
// procedures see one spelling; every /public/v1 and /trpc answer carries the API's cache headers.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import express from "express";
import { docsPage } from "../rest/docs.js";
import { isPublicRequest, publicApi } from "../rest/facade.js";
import { routeTemplates } from "../rest/routes.js";
import { adminTrpc, internalTrpc } from "../rest/trpc.js";
import { appRouter } from "../routers/index.js";
import { tenantDelegation } from "./db/delegate.js";
import { loadColumnTypes } from "./db/insert.js";
import { AppError, echoed } from "./errors.js";
import { API_CACHE_HEADERS, headerOf, originForm, sendEnvelope } from "./http.js";
import { writeHeadClosing } from "./lifecycle.js";
import { pingRedis } from "./redis.js";
import { exchangeOf, requestIdOf } from "./exchange.js";
import type { Services } from "./services.js";

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/** Paths of the internal tRPC mount (Express's match of `/trpc`: any case, then "/" or the end). */
const TRPC_PATH = /^\/trpc(?:\/|$)/i;

/**
 * Express's writeHead (the /trpc answers): tRPC sets its own `Vary` ("trpc-accept, accept") over the
 * one set at arrival, so an API answer (marked by its nosniff header) gets X-API-Key added back.
 */
function writeHeadVaryingOnKey(this: ServerResponse, ...args: unknown[]): ServerResponse {
  if (!this.headersSent && this.getHeader("X-Content-Type-Options") === "nosniff") {
    const vary = String(this.getHeader("Vary") ?? "");
    if (!/(?:^|,)\s*x-api-key\s*(?:,|$)/i.test(vary)) this.setHeader("Vary", vary ? `${vary}, X-API-Key` : "X-API-Key");
  }
  return (writeHeadClosing as (this: ServerResponse, ...a: unknown[]) => ServerResponse).apply(this, args);
}

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, rej) => (timer = setTimeout(() => rej(new Error("timeout")), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export type App = (req: IncomingMessage, res: ServerResponse) => void;

const CACHE_HEADERS = new Map(Object.entries(API_CACHE_HEADERS));

export function createApp(services: Services): App {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "simple");
  // Express gives its responses a prototype of its own: "Connection: close" once stopping, here too
  // (and the API answers' Vary kept).
  (app.response as { writeHead: unknown }).writeHead = writeHeadVaryingOnKey;
  const routeOf = routeTemplates(appRouter);
  // Column types for the one-statement creates (server/db/insert.ts) and whether they go through the
  // distributed "tenant_exec" (server/db/delegate.ts): read now rather than by a request.
  loadColumnTypes(services.db.prisma).catch(() => {});
  tenantDelegation(services.db).catch(() => {});

  // Every request: its id (X-Request-Id), a debug line when it arrives, a log line and the metrics
  // when it is answered; in flight from its arrival until its response closes ('close' comes once,
  // after 'finish' or when the connection went first).
  const closed = () => {
    services.metrics.inFlight -= 1;
  };
  const track = (req: IncomingMessage, res: ServerResponse) => {
    services.metrics.inFlight += 1;
    res.on("close", closed);
    const given = headerOf(req, "x-request-id");
    const x = exchangeOf(req);
    x.id = given && REQUEST_ID_RE.test(given) ? given : randomUUID();
    res.setHeader("X-Request-Id", x.id);
    const path = (req.url ?? "/").split("?")[0]!;
    services.logger.debug({ reqId: x.id, method: req.method, path }, "request received");
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const status = res.statusCode;
      // A refused or failed request says why (its envelope's code); a 5xx is an error, a 429 a warning.
      const line =
        status >= 400
          ? { reqId: x.id, method: req.method, path, status, ms, error: x.errorCode ?? "" }
          : { reqId: x.id, method: req.method, path, status, ms };
      if (status >= 500) services.logger.error(line, "request");
      else if (status === 429) services.logger.warn(line, "request");
      else services.logger.info(line, "request");
      services.metrics.observeRequest(
        req.method!,
        routeOf(req.method!, path),
        res.statusCode,
        ms / 1000,
        res.getHeader("Idempotent-Replayed") === "true",
      );
    });
  };

  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.get("/readyz", async (req, res) => {
    const checks: Record<string, string> = {};
    // Why a check failed, for the log line of a 503 (the answer itself says only "unavailable").
    const causes: Record<string, string> = {};
    const failed = (what: string, err: unknown) => {
      checks[what] = "unavailable";
      causes[what] = echoed(err instanceof Error ? err.message || err.name : String(err), 500);
    };
    try {
      await withTimeout(services.db.ping(), 2000);
      checks.database = "ok";
    } catch (err) {
      failed("database", err);
    }
    if (services.redis) {
      try {
        await withTimeout(pingRedis(services.redis), 1000);
        checks.redis = "ok";
      } catch (err) {
        failed("redis", err);
      }
    }
    const ok = Object.values(checks).every((v) => v === "ok");
    if (!ok) {
      const why = Object.entries(causes).map(([k, v]) => `${k}: ${v}`);
      services.logger.warn({ reqId: requestIdOf(req), checks, causes }, `not ready (503): ${why.join("; ")}`);
    }
    res.status(ok ? 200 : 503).json({ status: ok ? "ok" : "unavailable", checks });
  });

  app.use(docsPage());
  app.use(internalTrpc(services, appRouter));
  app.use(adminTrpc(services));
  // The front door: what this service is and where its reference lives; anything else outside
  // /public/v1 is a JSON 404 in the API's envelope (never Express's HTML page).
  app.get("/", (_req, res) => {
    res.json({
      service: "CRM public API",
      docs: "/docs",
      openapi: "/public/v1/openapi.json",
      api: "/public/v1",
      health: "/healthz",
      ready: "/readyz",
    });
  });
  app.use((req, res) => {
    const hint = /^\/openapi\.json$/i.test(req.path)
      ? ": the OpenAPI document is at /public/v1/openapi.json"
      : ": the API is under /public/v1, its reference at /docs";
    sendEnvelope(req, res, new AppError("NOT_FOUND", `No such path ${req.method} ${echoed(req.path)}${hint}`));
  });

  const publicV1 = publicApi(services, appRouter);
  return (req, res) => {
    req.url = originForm(req.url ?? "/");
    track(req, res);
    if (isPublicRequest(req)) {
      res.setHeaders(CACHE_HEADERS);
      publicV1(req, res);
    } else {
      if (TRPC_PATH.test(req.url)) res.setHeaders(CACHE_HEADERS);
      app(req, res);
    }
  };
}
