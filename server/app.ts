// Builds the Express app: request ids and logs, health, the /public/v1 facade, the internal tRPC
// mounts (/trpc, /trpc-admin).
import { randomUUID } from "node:crypto";
import express from "express";
import { docsPage } from "../rest/docs.js";
import { publicApi } from "../rest/facade.js";
import { adminTrpc, internalTrpc } from "../rest/trpc.js";
import { appRouter } from "../routers/index.js";
import "./http-types.js";
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

export function createApp(services: Services): express.Express {
  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  app.set("query parser", "simple");

  app.use((req, res, next) => {
    const given = req.header("x-request-id");
    req.id = given && REQUEST_ID_RE.test(given) ? given : randomUUID();
    res.setHeader("X-Request-Id", req.id);
    services.logger.debug({ reqId: req.id, method: req.method, path: req.originalUrl.split("?")[0] }, "request received");
    const started = process.hrtime.bigint();
    res.on("finish", () => {
      services.logger.info(
        { reqId: req.id, method: req.method, path: req.originalUrl.split("?")[0], status: res.statusCode, ms: Number(process.hrtime.bigint() - started) / 1e6 },
        "request",
      );
    });
    next();
  });

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
        await withTimeout(services.redis.ping(), 1000);
        checks.redis = "ok";
      } catch {
        checks.redis = "unavailable";
      }
    }
    const ok = Object.values(checks).every((v) => v === "ok");
    res.status(ok ? 200 : 503).json({ status: ok ? "ok" : "unavailable", checks });
  });

  app.use(docsPage());
  app.use(publicApi(services, appRouter));
  app.use(internalTrpc(services, appRouter));
  app.use(adminTrpc(services));
  return app;
}
