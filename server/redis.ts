import { Redis } from "ioredis";
import type { Logger } from "./logger.js";

/** A Redis client that fails fast while Redis is down (quotas then fall back to memory) and reconnects by itself. */
export function connectRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: 2000,
    commandTimeout: 1000,
    retryStrategy: (times) => Math.min(200 + times * 100, 1000),
  });
  let down = false;
  redis.on("error", (err) => {
    if (!down) logger.warn({ err: err.message }, "redis unavailable: quotas fall back to per-instance memory");
    down = true;
  });
  redis.on("ready", () => {
    if (down) logger.info("redis back: quotas shared again");
    down = false;
  });
  return redis;
}
