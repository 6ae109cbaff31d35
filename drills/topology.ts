// Runs a command against local scale-out pieces (the CI legs of issue 14), then removes them:
//   node --import tsx drills/topology.ts [OPTIONS] -- COMMAND [ARGS...]
//   --pgbouncer POSTGRES_URL   PgBouncer 1.18 (transaction pooling, wildcard [databases] entry) in
//                              front of the server of POSTGRES_URL; the command gets DATABASE_URL
//                              (the same database through PgBouncer) and DIRECT_DATABASE_URL (POSTGRES_URL)
//   --pool-size N              server connections per database pool (default 10)
//   --statement-timeout-ms N   statement_timeout of PgBouncer's server connections (default 0: none)
//   --ignore-startup-parameters LIST
//                              PgBouncer's ignore_startup_parameters (default
//                              extra_float_digits,statement_timeout); e.g. extra_float_digits,options:
//                              PgBouncer refuses the service's statement_timeout startup parameter
//                              and the service falls back to SET LOCAL (docs/scaling.md)
//   --redis-cluster M[xR]      a Redis Cluster of M masters (and R replicas each); the command gets
//                              REDIS_CLUSTER_NODES (and no REDIS_URL)
// The command's exit status is this script's. Without a command, the variables are printed and
// everything stays up until SIGINT/SIGTERM (for trying things by hand).
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";
import { startPgBouncer } from "./lib/pgbouncer.js";
import { startRedisCluster } from "./lib/redis-cluster.js";
import { Scope } from "./lib/scope.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    pgbouncer: { type: "string" },
    "pool-size": { type: "string" },
    "statement-timeout-ms": { type: "string" },
    "ignore-startup-parameters": { type: "string" },
    "redis-cluster": { type: "string" },
  },
});
if (!values.pgbouncer && !values["redis-cluster"]) {
  process.stderr.write(
    "usage: topology.ts [--pgbouncer POSTGRES_URL [--pool-size N] [--statement-timeout-ms N] [--ignore-startup-parameters LIST]] [--redis-cluster M[xR]] -- COMMAND...\n",
  );
  process.exit(2);
}

const scope = new Scope("topology");
let finishing = false;
async function finish(code: number): Promise<never> {
  if (!finishing) {
    finishing = true;
    for (const p of await scope.close()) process.stderr.write(`topology: ${p}\n`);
  }
  process.exit(code);
}

let child: ReturnType<typeof spawn> | undefined;
for (const sig of ["SIGINT", "SIGTERM"] as const)
  process.on(sig, () => {
    if (child && child.exitCode === null) child.kill(sig);
    else void finish(130);
  });

try {
  const env: Record<string, string> = {};
  if (values.pgbouncer) {
    const direct = new URL(values.pgbouncer);
    const bouncer = await startPgBouncer(scope, {
      serverHost: direct.hostname,
      serverPort: Number(direct.port || 5432),
      poolSize: Number(values["pool-size"] ?? 10),
      statementTimeoutMs: Number(values["statement-timeout-ms"] ?? 0),
      ignoreStartupParameters: values["ignore-startup-parameters"],
    });
    const pooled = new URL(direct);
    pooled.hostname = "127.0.0.1";
    pooled.port = String(bouncer.port);
    env.DATABASE_URL = pooled.toString();
    env.DIRECT_DATABASE_URL = direct.toString();
    process.stderr.write(`topology: pgbouncer on :${bouncer.port} (config and log in ${bouncer.dir})\n`);
  }
  if (values["redis-cluster"]) {
    const m = /^(\d+)(?:x(\d+))?$/.exec(values["redis-cluster"]);
    if (!m) throw new Error(`--redis-cluster wants M or MxR, got ${values["redis-cluster"]}`);
    const cluster = await startRedisCluster(scope, { masters: Number(m[1]), replicasPerMaster: Number(m[2] ?? 0) });
    env.REDIS_CLUSTER_NODES = cluster.seeds;
    process.stderr.write(`topology: redis cluster ${cluster.seeds}\n`);
  }
  if (positionals.length === 0) {
    process.stdout.write(
      Object.entries(env)
        .map(([k, v]) => `${k}=${v}\n`)
        .join(""),
    );
    setInterval(() => {}, 1 << 30); // until a signal
  } else {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    if (env.REDIS_CLUSTER_NODES) delete childEnv.REDIS_URL;
    child = spawn(positionals[0]!, positionals.slice(1), { stdio: "inherit", env: childEnv });
    const code = await new Promise<number>((resolve) => {
      child!.on("error", (e) => {
        process.stderr.write(`topology: ${positionals[0]}: ${e.message}\n`);
        resolve(127);
      });
      child!.on("exit", (c, signal) => resolve(c ?? (signal ? 128 : 1)));
    });
    await finish(code);
  }
} catch (e) {
  process.stderr.write(`topology: ${(e as Error).message}\n`);
  await finish(1);
}
