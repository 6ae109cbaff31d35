// Builds the request listener: request ids, logs and metrics for every request; the /public/v1
// facade on node's own request/response (rest/facade.ts); an Express app for the rest — health,
// the docs page, the internal tRPC mounts (/trpc, /trpc-admin).
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
import { AppError } from "./errors.js";
import { headerOf, sendEnvelope } from "./http.js";
import { writeHeadClosing } from "./lifecycle.js";
import "./http-types.js";
import { pingRedis } from "./redis.js";
import type { Services } from "./services.js";

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((_, rej) => (timer = setTimeout(() => rej(new Error("timeout")), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

export type App = (req: IncomingMessage, res: ServerResponse) => void;

export function createApp(services: Services): App {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "simple");
  // Express gives its responses a prototype of its own: "Connection: close" once stopping, here too.
  (app.response as { writeHead: unknown }).writeHead = writeHeadClosing;
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
    req.id = given && REQUEST_ID_RE.test(given) ? given : randomUUID();
    res.setHeader("X-Request-Id", req.id);
    const path = (req.url ?? "/").split("?")[0]!;
    services.logger.debug({ reqId: req.id, method: req.method, path }, "request received");
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const status = res.statusCode;
      // A refused or failed request says why (its envelope's code); a 5xx is an error, a 429 a warning.
      const line = status >= 400 ? { reqId: req.id, method: req.method, path, status, ms, error: req.errorCode ?? "" } : { reqId: req.id, method: req.method, path, status, ms };
      if (status >= 500) services.logger.error(line, "request");
      else if (status === 429) services.logger.warn(line, "request");
      else services.logger.info(line, "request");
      services.metrics.observeRequest(req.method!, routeOf(req.method!, path), res.statusCode, ms / 1000, res.getHeader("Idempotent-Replayed") === "true");
    });
  };

  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.get("/readyz", async (_req, res) => {
    const checks: Record<string, string> = {};
    try {
      await withTimeout(services.db.ping(), 2000);
      checks.database = "ok";
    } catch {
      checks.database = "unavailable";
    }
    if (services.redis) {
      try {
        await withTimeout(pingRedis(services.redis), 1000);
        checks.redis = "ok";
      } catch {
        checks.redis = "unavailable";
      }
    }
    const ok = Object.values(checks).every((v) => v === "ok");
    res.status(ok ? 200 : 503).json({ status: ok ? "ok" : "unavailable", checks });
  });

  app.use(docsPage());
  app.use(internalTrpc(services, appRouter));
  app.use(adminTrpc(services));
  // The front door: what this service is and where its reference lives; anything else outside
  // /public/v1 is a JSON 404 in the API's envelope (never Express's HTML page).
  app.get("/", (req, res) => {
    res.json({ service: "CRM public API", docs: "/docs", openapi: "/public/v1/openapi.json", api: "/public/v1", health: "/healthz", ready: "/readyz" });
  });
  app.use((req, res) => {
    const hint = /^\/openapi\.json$/i.test(req.path) ? ": the OpenAPI document is at /public/v1/openapi.json" : ": the API is under /public/v1, its reference at /docs";
    sendEnvelope(req, res, new AppError("NOT_FOUND", `No such path ${req.method} ${req.path}${hint}`));
  });

  const publicV1 = publicApi(services, appRouter);
  return (req, res) => {
    track(req, res);
    if (isPublicRequest(req)) publicV1(req, res);
    else app(req, res);
  };
}
