// What every request can reach: built once at startup, passed to the app and the tRPC context.
import type { Config } from "./config.js";
import type { Database } from "./db/client.js";
import type { TenantRoutes } from "./db/routing.js";
import type { Quotas } from "./limits/quotas.js";
import type { Logger } from "./logger.js";
import type { Providers } from "./channels/index.js";
import type { Metrics } from "./metrics.js";
import type { RedisClient } from "./redis.js";
import type { UnknownPrefixes } from "./auth/unknown-prefixes.js";
import type { Wakeups } from "./wakeups.js";

export interface Services {
  config: Config;
  db: Database;
  /** DATABASE_ROUTING=workers on Citus: each tenant's request on its worker (server/db/routing.ts). */
  routes?: TenantRoutes;
  /** One Redis (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES); unset: in-process quotas. */
  redis?: RedisClient;
  quotas: Quotas;
  logger: Logger;
  providers: Providers;
  /** Prometheus metrics of this instance (served on METRICS_PORT by server/main.ts). */
  metrics: Metrics;
  /** The clock; tests inject a fixed one. */
  now: () => Date;
  /**
   * On the embedded database: this run's token for the admin CLI's calls to /trpc-admin while the
   * service holds the folder (server/admin/live.ts), accepted besides INTERNAL_TOKEN.
   */
  localAdminToken?: string;
  /** The changes feed's long-poll waiters and their wake-ups (server/wakeups.ts). */
  wakeups?: Wakeups;
  /** Key prefixes no key has, remembered a few seconds (server/auth/unknown-prefixes.ts); made by the first guard. */
  unknownPrefixes?: UnknownPrefixes;
}
