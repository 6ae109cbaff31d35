// Prometheus metrics (prom-client), one registry per service instance, served by a listener of its
// own on METRICS_PORT (never on the public port; off when unset). Labels are bounded: routes are
// templates ("/public/v1/leads/{id}", see rest/routes.ts), statuses are HTTP codes, methods a fixed
// set, channels and outcomes fixed sets.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export interface MetricsSources {
  /** The database pool (PostgreSQL); undefined for the embedded PGlite. */
  pool?: () => PoolStats | undefined;
  /** Redis configured and the quotas' fallback state (true: counting in process memory). */
  quotas?: () => { redis: boolean; fallback: boolean; fallbackCount: number };
  /** Writes that changed no row sent once more on a Citus worker's pool (server/db/client.ts rerunEmptyWrites). */
  emptyWritesRerun?: () => number;
  /** The changes feed's long-poll waiters (server/wakeups.ts). */
  wakeups?: () => { waiters: number; wakeups: number; refused: number };
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

export class Metrics {
  readonly registry = new Registry();
  /**
   * Requests of this instance received and not yet closed (answered, or their connection gone): the
   * crm_http_requests_in_flight gauge, and the load signal of server/auth/guard.ts.
   */
  inFlight = 0;
  readonly requests = new Counter({
    name: "crm_http_requests_total",
    help: "HTTP requests answered, by method, route template and status",
    labelNames: ["method", "route", "status"] as const,
    registers: [this.registry],
  });
  readonly duration = new Histogram({
    name: "crm_http_request_duration_seconds",
    help: "Time from receiving a request to finishing its response, by method, route template and status",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly changesDelivery = new Histogram({
    name: "crm_changes_delivery_seconds",
    help:
      "Commit to delivery of the changes feed's waiters: for a page a wait ended (a long-poll's or a " +
      "subscription's), from its oldest change's time (the database's clock) to the answer, by how",
    labelNames: ["via"] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: "crm_rate_limit_rejections_total",
    help: "Requests refused with 429 RATE_LIMIT_EXCEEDED, by the window that was exhausted",
    labelNames: ["window"] as const,
    registers: [this.registry],
  });
  readonly replays = new Counter({
    name: "crm_idempotent_replays_total",
    help: "Creates answered from a stored Idempotency-Key response (Idempotent-Replayed: true), by route template",
    labelNames: ["route"] as const,
    registers: [this.registry],
  });
  readonly providerSends = new Counter({
    name: "crm_provider_sends_total",
    help: "Outbound messages handed to a channel provider, by channel kind and outcome (sent, failed)",
    labelNames: ["channel", "outcome"] as const,
    registers: [this.registry],
  });

  constructor(sources: MetricsSources = {}, opts: { processMetrics?: boolean } = {}) {
    const registers = [this.registry];
    const self = this;
    new Gauge({
      name: "crm_http_requests_in_flight",
      help: "Requests of this instance received and not yet answered",
      registers,
      collect() {
        this.set(self.inFlight);
      },
    });
    new Gauge({
      name: "crm_db_pool_connections",
      help: "Database pool connections of this instance, by state (in_use, idle)",
      labelNames: ["state"] as const,
      registers,
      collect() {
        const s = sources.pool?.();
        this.set({ state: "in_use" }, s ? s.total - s.idle : 0);
        this.set({ state: "idle" }, s ? s.idle : 0);
      },
    });
    new Gauge({
      name: "crm_db_pool_waiting",
      help: "Queries of this instance waiting for a database pool connection",
      registers,
      collect() {
        this.set(sources.pool?.()?.waiting ?? 0);
      },
    });
    new Gauge({
      name: "crm_redis_fallback",
      help:
        "1 while quotas count in process memory because Redis (or the master of a key's slot) did not answer, " +
        "else 0",
      registers,
      collect() {
        this.set(sources.quotas?.().fallback ? 1 : 0);
      },
    });
    new Gauge({
      name: "crm_redis_configured",
      help: "1 when quotas are shared through Redis (REDIS_URL or REDIS_CLUSTER_NODES), 0 for in-process quotas",
      registers,
      collect() {
        this.set(sources.quotas?.().redis ? 1 : 0);
      },
    });
    new Counter({
      name: "crm_quota_fallback_requests_total",
      help: "Requests counted against in-process quota windows because Redis did not answer",
      registers,
      collect() {
        this.reset();
        this.inc(sources.quotas?.().fallbackCount ?? 0);
      },
    });
    new Counter({
      name: "crm_db_empty_writes_rerun_total",
      help:
        "UPDATEs and DELETEs that changed no row, sent once more on a Citus worker's pool " +
        "(DATABASE_ROUTING=workers): a write rerouted by a shard split",
      registers,
      collect() {
        this.reset();
        this.inc(sources.emptyWritesRerun?.() ?? 0);
      },
    });
    new Gauge({
      name: "crm_changes_waiters",
      help: "Long-polls of the changes feed waiting on this instance (each holds no database connection)",
      registers,
      collect() {
        this.set(sources.wakeups?.().waiters ?? 0);
      },
    });
    new Counter({
      name: "crm_changes_wakeups_total",
      help: "Waiting long-polls woken by a write of their tenant (this instance's, or another's through Redis)",
      registers,
      collect() {
        this.reset();
        this.inc(sources.wakeups?.().wakeups ?? 0);
      },
    });
    new Counter({
      name: "crm_changes_waits_refused_total",
      help: "Long-polls answered at once with `backoff`: past the key's or the instance's cap, or stopping",
      registers,
      collect() {
        this.reset();
        this.inc(sources.wakeups?.().refused ?? 0);
      },
    });
    if (opts.processMetrics) collectDefaultMetrics({ register: this.registry, prefix: "crm_" });
  }

  /** Records one answered request (called when its response has finished). */
  observeRequest(method: string, route: string, status: number, seconds: number, replayed: boolean): void {
    const labels = { method: METHODS.has(method) ? method : "OTHER", route, status: String(status) };
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
    if (replayed) this.replays.inc({ route });
  }
}

/** The metrics listener: GET /metrics in the Prometheus text format, 404 for everything else. */
export async function startMetricsServer(
  metrics: Metrics,
  host: string,
  port: number,
): Promise<Server & { url: string }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if ((req.method === "GET" || req.method === "HEAD") && path === "/metrics") {
      metrics.registry.metrics().then(
        (text) =>
          res
            .writeHead(200, { "Content-Type": metrics.registry.contentType })
            .end(req.method === "HEAD" ? undefined : text),
        () => res.writeHead(500, { "Content-Type": "text/plain" }).end("metrics collection failed\n"),
      );
      return;
    }
    res.writeHead(404, { "Content-Type": "text/plain" }).end("not found\n");
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  return Object.assign(server, {
    url: `http://${addr.address.includes(":") ? `[${addr.address}]` : addr.address}:${addr.port}`,
  });
}
