// What every request can reach: built once at startup, passed to the app and the tRPC context.
import type { Redis } from "ioredis";
import type { Config } from "./config.js";
import type { Database } from "./db/client.js";
import type { Quotas } from "./limits/quotas.js";
import type { Logger } from "./logger.js";
import type { Providers } from "./channels/index.js";

export interface Services {
  config: Config;
  db: Database;
  redis?: Redis;
  quotas: Quotas;
  logger: Logger;
  providers: Providers;
  /** The clock; tests inject a fixed one. */
  now: () => Date;
}
