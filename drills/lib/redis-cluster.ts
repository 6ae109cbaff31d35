// A Redis Cluster of our own: `redis-server --cluster-enabled yes` on free ports (masters, and
// replicas when asked), joined with `redis-cli --cluster create … --cluster-yes`, no persistence,
// every file in a temporary folder. killMaster() SIGKILLs the master serving a slot (the failover
// fault); the cluster promotes its replica after cluster-node-timeout.
// Used by the scale drill and, through drills/topology.ts, by the Redis Cluster leg of .ci/run.
import calculateSlot from "cluster-key-slot";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Redis } from "ioredis";
import { exitOf, freePort, portTaken, runOk } from "./proc.js";
import { redisPing } from "./redis.js";
import { sleep, type Scope } from "./scope.js";

export interface ClusterNode {
  port: number;
  child: ChildProcess;
}

export interface OwnRedisCluster {
  nodes: ClusterNode[];
  /** REDIS_CLUSTER_NODES for the service: every node, comma-separated host:port. */
  seeds: string;
  /** The port of the master currently serving a hash slot (asked of a live node). */
  masterOf(slot: number): Promise<number>;
  /**
   * A counter as the cluster holds it, read on the master currently serving its slot: its value (0
   * when absent) and PTTL (-2 absent, -1 no expiry). Rejects while no live node knows a live master.
   */
  readCounter(key: string): Promise<{ n: number; pttlMs: number }>;
  /** SIGKILLs the node on a port (a master lost); resolves once it has exited. */
  kill(port: number): Promise<void>;
  /** Resolves once every slot is served by a live master and the cluster state is ok everywhere. */
  waitHealthy(timeoutMs?: number): Promise<void>;
}

export interface RedisClusterOptions {
  masters?: number;
  replicasPerMaster?: number;
  /** cluster-node-timeout: how long a master may be unreachable before its replica takes over. */
  nodeTimeoutMs?: number;
}

/** A CLUSTER SLOTS entry: first slot, last slot, master [host, port, id], replicas… */
type SlotRange = [number, number, [string, number, ...unknown[]], ...unknown[]];

const ask = async <T>(port: number, fn: (r: Redis) => Promise<T>): Promise<T> => {
  const r = new Redis({
    port,
    host: "127.0.0.1",
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  r.on("error", () => {});
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
};

export async function startRedisCluster(scope: Scope, opts: RedisClusterOptions = {}): Promise<OwnRedisCluster> {
  const masters = opts.masters ?? 3;
  const replicas = opts.replicasPerMaster ?? 0;
  const dir = await mkdtemp(path.join(tmpdir(), "crm-redis-cluster-"));
  scope.defer(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
  const nodes: ClusterNode[] = [];
  const stopAll = async () => {
    await Promise.all(
      nodes.map(async (n) => {
        if (n.child.exitCode !== null || n.child.signalCode !== null) return;
        const exited = exitOf(n.child);
        n.child.kill("SIGKILL");
        await exited;
      }),
    );
  };
  scope.defer("stop redis cluster", stopAll);
  // A node on a port that was free a moment ago (its cluster bus on port + 10000, below 65536, not
  // checked): on another one when either was taken before the node bound it (its log says so).
  const freshPort = async () => {
    let port = await freePort();
    while (port + 10000 > 65535 || nodes.some((n) => n.port === port)) port = await freePort();
    return port;
  };
  const logOf = (port: number) => path.join(dir, `redis-${port}.log`);
  const spawnNode = (port: number): ClusterNode => {
    const child = spawn(
      "redis-server",
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        path.join(dir, `nodes-${port}.conf`),
        "--cluster-node-timeout",
        String(opts.nodeTimeoutMs ?? 2000),
        "--dir",
        dir,
        "--logfile",
        logOf(port),
      ],
      { stdio: "ignore" },
    );
    child.on("error", () => {});
    return { port, child };
  };
  for (let i = 0; i < masters * (1 + replicas); i++) nodes.push(spawnNode(await freshPort()));
  for (let i = 0; i < nodes.length; i++) {
    for (let attempt = 1; ; attempt++) {
      const { port, child } = nodes[i]!;
      let up = false;
      for (let t = 0; t < 100 && !up && child.exitCode === null; t++) {
        up = await redisPing(port);
        if (!up) await sleep(50);
      }
      if (up) break;
      const said = await readFile(logOf(port), "utf8").catch(() => "");
      if (child.exitCode === null || attempt >= 5 || !portTaken(said))
        throw new Error(`redis-server on :${port} did not answer: ${said.trim().split("\n").slice(-3).join(" | ")}`);
      nodes[i] = spawnNode(await freshPort());
    }
  }
  const ports = nodes.map((n) => n.port);
  await runOk(
    "redis-cli",
    [
      "--cluster",
      "create",
      ...ports.map((p) => `127.0.0.1:${p}`),
      "--cluster-replicas",
      String(replicas),
      "--cluster-yes",
    ],
    { timeoutMs: 60_000 },
  );

  const live = () => nodes.filter((n) => n.child.exitCode === null && n.child.signalCode === null);
  const self: OwnRedisCluster = {
    nodes,
    seeds: ports.map((p) => `127.0.0.1:${p}`).join(","),
    async masterOf(slot) {
      for (const n of live()) {
        try {
          const slots = (await ask(n.port, (r) => r.cluster("SLOTS"))) as unknown as SlotRange[];
          const range = slots.find(([from, to]) => slot >= from && slot <= to);
          if (range) return Number(range[2][1]);
        } catch {
          /* ask another node */
        }
      }
      throw new Error(`no live node knows the master of slot ${slot}`);
    },
    async readCounter(key) {
      const port = await self.masterOf(calculateSlot(key));
      return ask(port, async (r) => {
        const [value, pttl] = await Promise.all([r.get(key), r.pttl(key)]);
        return { n: Number(value ?? 0), pttlMs: pttl };
      });
    },
    async kill(port) {
      const n = nodes.find((x) => x.port === port);
      if (!n) throw new Error(`no cluster node on :${port}`);
      const exited = exitOf(n.child);
      n.child.kill("SIGKILL");
      await exited;
    },
    async waitHealthy(timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      let last = "";
      while (Date.now() < deadline) {
        try {
          const states = await Promise.all(live().map((n) => ask(n.port, (r) => r.cluster("INFO")).then(String)));
          const ok = states.every((s) => /cluster_state:ok/.test(s) && /cluster_slots_ok:16384/.test(s));
          // Replicas in sync (a replica that never synced cannot take over: its data is too old).
          const replication = await Promise.all(live().map((n) => ask(n.port, (r) => r.info("replication"))));
          const syncing = replication.filter((s) => /role:slave/.test(s) && !/master_link_status:up/.test(s)).length;
          // Every slot range must have a live master.
          const slots = (await ask(live()[0]!.port, (r) => r.cluster("SLOTS"))) as unknown as SlotRange[];
          const livePorts = new Set(live().map((n) => n.port));
          const covered = slots.reduce(
            (sum, [from, to, master]) => sum + (livePorts.has(Number(master[1])) ? to - from + 1 : 0),
            0,
          );
          if (ok && covered === 16384 && syncing === 0) return;
          last = `covered ${covered}/16384, states ${states.map((s) => /cluster_state:(\w+)/.exec(s)?.[1]).join(",")}, ${syncing} replicas not in sync`;
        } catch (e) {
          last = (e as Error).message;
        }
        await sleep(100);
      }
      throw new Error(`redis cluster not healthy within ${timeoutMs} ms (${last})`);
    },
  };
  await self.waitHealthy();
  return self;
}
