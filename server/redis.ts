// Redis for the shared quotas: one server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES, ioredis'
// Cluster client). Either way the client fails fast while Redis (or the master of a key's slot) is
// unreachable — quotas then fall back to per-instance memory — and reconnects by itself.
// Every multi-key command or script must keep its keys in one hash slot (hash tags: "{...}"), or a
// cluster answers CROSSSLOT (see server/limits/quotas.ts).
import { Cluster, Redis } from "ioredis";
import type { Config } from "./config.js";
import type { Logger } from "./logger.js";

export type RedisClient = Redis | Cluster;

const nodeOptions = {
  connectTimeout: 2000,
  commandTimeout: 1000,
  maxRetriesPerRequest: 1,
};
const retryDelay = (times: number) => Math.min(200 + times * 100, 1000);

/** The configured Redis (REDIS_URL or REDIS_CLUSTER_NODES), or undefined for in-process quotas. */
export function connectRedisFromConfig(
  config: Pick<Config, "redisUrl" | "redisClusterNodes">,
  logger: Logger,
): RedisClient | undefined {
  if (config.redisClusterNodes) return connectRedisCluster(config.redisClusterNodes, logger);
  if (config.redisUrl) return connectRedis(config.redisUrl, logger);
  return undefined;
}

/**
 * The configured Redis, once connected (bounded by `readyMs`): a request counted before the
 * connection is ready would fall back to this process's memory and be admitted beyond the shared
 * ceiling (a drill's three fresh instances admitted 61 of a ceiling of 60 this way). Not ready in
 * time: a warning, and the client keeps connecting while quotas count in memory.
 */
export async function openRedis(
  config: Pick<Config, "redisUrl" | "redisClusterNodes">,
  logger: Logger,
  readyMs = 3000,
): Promise<RedisClient | undefined> {
  const client = connectRedisFromConfig(config, logger);
  if (client && !(await redisReady(client, readyMs)))
    logger.warn("redis not ready at start: quotas count in process memory until it connects");
  return client;
}

/** Resolves true once the client is ready (connected; for a cluster, its slot map loaded), false after `ms`. */
export function redisReady(client: RedisClient, ms: number): Promise<boolean> {
  if (client.status === "ready") return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      client.off("ready", onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), ms);
    client.on("ready", onReady);
  });
}

/** A Redis client that fails fast while Redis is down (quotas then fall back to memory) and reconnects by itself. */
export function connectRedis(url: string, logger: Logger): Redis {
  const redis = new Redis(url, { ...nodeOptions, enableOfflineQueue: false, retryStrategy: retryDelay });
  watchOutages(redis, logger);
  return redis;
}

/**
 * ioredis' Cluster client over the seed nodes. It learns the slot map from them, follows MOVED/ASK,
 * refreshes the map every 2 s and after connection errors, so a replica promoted by a failover is
 * used without a restart. While a master is down (before its replica is promoted) the commands for
 * its slots fail after a few quick redirections and those quotas count in process memory.
 */
export function connectRedisCluster(nodes: { host: string; port: number }[], logger: Logger): Cluster {
  const cluster = new Cluster(nodes, {
    enableOfflineQueue: false,
    clusterRetryStrategy: retryDelay,
    slotsRefreshInterval: 2000,
    slotsRefreshTimeout: 1000,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    maxRedirections: 4,
    redisOptions: nodeOptions,
  });
  watchOutages(cluster, logger);
  // A node lost (a master killed): the client retries it on every redirection until the slot map
  // drops it, so its errors are logged at most once per node per 30 s, with the number left out.
  const lastLogged = new Map<string, { at: number; suppressed: number }>();
  cluster.on("node error", (err: Error, address: string) => {
    const seen = lastLogged.get(address);
    if (seen && Date.now() - seen.at < 30_000) {
      seen.suppressed += 1;
      return;
    }
    lastLogged.set(address, { at: Date.now(), suppressed: 0 });
    logger.warn(
      { node: address, err: err.message, suppressed: seen?.suppressed ?? 0 },
      "redis cluster node unavailable",
    );
  });
  return cluster;
}

function watchOutages(client: RedisClient, logger: Logger): void {
  let down = false;
  client.on("error", (err: Error) => {
    if (!down) logger.warn({ err: err.message }, "redis unavailable: quotas fall back to per-instance memory");
    down = true;
  });
  client.on("ready", () => {
    if (down) logger.info("redis back: quotas shared again");
    down = false;
  });
}

/**
 * Readiness: one Redis answers PING; for a cluster, every slot has a master in the client's slot map
 * and each of those masters answers PING — a master lost before its replica is promoted (and the
 * map refreshed) makes this fail, exactly while the quotas of its slots count in memory.
 */
export async function pingRedis(client: RedisClient): Promise<void> {
  if (!(client instanceof Cluster)) {
    await client.ping();
    return;
  }
  if (client.status !== "ready") throw new Error(`redis cluster ${client.status}`);
  const masterKeys = new Set<string>();
  let covered = 0;
  for (const nodes of client.slots) {
    if (!nodes?.[0]) continue;
    covered += 1;
    masterKeys.add(nodes[0]);
  }
  if (covered < 16384) throw new Error(`redis cluster slot map covers ${covered} of 16384 slots`);
  const byKey = new Map(client.nodes("all").map((n) => [`${n.options.host}:${n.options.port}`, n]));
  await Promise.all(
    [...masterKeys].map((key) => {
      const node = byKey.get(key);
      if (!node) throw new Error(`redis cluster master ${key} is not connected`);
      return node.ping();
    }),
  );
}
