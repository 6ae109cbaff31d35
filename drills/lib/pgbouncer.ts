// A PgBouncer of our own (Debian's `pgbouncer`, 1.18) in transaction pooling mode in front of a
// PostgreSQL server: its own config, auth file, log and pid in a temporary folder, on a free port,
// as a child process (as the `postgres` OS user when run as root: PgBouncer refuses root).
// A wildcard [databases] entry forwards every database name to the server, so per-test databases
// created on the server are reachable through it at once.
// Used by the scale drill and, through drills/topology.ts, by the PgBouncer leg of .ci/run.
import { spawn, type ChildProcess } from "node:child_process";
import { chown, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { onFreePort, runOk, terminate } from "./proc.js";
import { sleep, type Scope } from "./scope.js";

export interface PgBouncerOptions {
  /** The PostgreSQL server behind it. */
  serverHost?: string;
  serverPort: number;
  /** Server connections per (database, user) pool. */
  poolSize?: number;
  maxClientConnections?: number;
  /**
   * statement_timeout applied to every server connection (connect_query), in ms; 0 = none. The
   * service's pool-level statement_timeout is a startup parameter, which PgBouncer would refuse:
   * it is listed in ignore_startup_parameters and applied here instead (docs/scaling.md).
   */
  statementTimeoutMs?: number;
  poolMode?: "transaction" | "session" | "statement";
  /**
   * PgBouncer's ignore_startup_parameters (default "extra_float_digits,statement_timeout", as
   * docs/scaling.md recommends). A list without statement_timeout (e.g. "extra_float_digits,options",
   * a common config) makes PgBouncer refuse the service's startup parameter: the service then sets
   * the timeout with SET LOCAL itself (server/db/pooler-timeout.ts).
   */
  ignoreStartupParameters?: string;
}

export interface OwnPgBouncer {
  port: number;
  dir: string;
  /** A URL through PgBouncer for a database (default "postgres"). */
  url(db?: string): string;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Rows of an admin console command (SHOW POOLS, SHOW CLIENTS, …). */
  admin(command: string): Promise<Record<string, unknown>[]>;
  log(): Promise<string>;
}

export function pgbouncerConfig(o: PgBouncerOptions & { port: number; dir: string }): string {
  const entry = [`host=${o.serverHost ?? "127.0.0.1"}`, `port=${o.serverPort}`];
  if (o.ignoreStartupParameters !== undefined && !/^[a-z_]*(,[a-z_]+)*$/.test(o.ignoreStartupParameters))
    throw new Error(
      `ignore_startup_parameters wants names separated by commas, got ${JSON.stringify(o.ignoreStartupParameters)}`,
    );
  if (o.statementTimeoutMs) entry.push(`connect_query='SET statement_timeout = ${Math.trunc(o.statementTimeoutMs)}'`);
  return `[databases]
* = ${entry.join(" ")}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${o.port}
unix_socket_dir =
auth_type = trust
auth_file = ${path.join(o.dir, "userlist.txt")}
admin_users = postgres
stats_users = postgres
pool_mode = ${o.poolMode ?? "transaction"}
default_pool_size = ${o.poolSize ?? 20}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = ${o.maxClientConnections ?? 1000}
max_db_connections = 0
; pg sends the pool's statement_timeout as a startup parameter: ignored here, applied by connect_query.
ignore_startup_parameters = ${o.ignoreStartupParameters ?? "extra_float_digits,statement_timeout"}
; PostgreSQL down: answer waiting clients within seconds instead of queueing them for minutes.
server_login_retry = 1
query_wait_timeout = 5
server_connect_timeout = 3
; Autocreated pools of dropped test databases are freed after a minute.
autodb_idle_timeout = 60
logfile = ${path.join(o.dir, "pgbouncer.log")}
pidfile = ${path.join(o.dir, "pgbouncer.pid")}
log_connections = 0
log_disconnections = 0
`;
}

export async function startPgBouncer(scope: Scope, opts: PgBouncerOptions): Promise<OwnPgBouncer> {
  const dir = await mkdtemp(path.join(tmpdir(), "crm-pgbouncer-"));
  scope.defer(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
  // On another port when the one picked was taken before PgBouncer bound it (its log says so).
  return onFreePort(async (port) => {
    await rm(path.join(dir, "pgbouncer.log"), { force: true });
    return startOn(scope, opts, dir, port);
  });
}

async function startOn(scope: Scope, opts: PgBouncerOptions, dir: string, port: number): Promise<OwnPgBouncer> {
  const asRoot = process.getuid?.() === 0;
  const ini = path.join(dir, "pgbouncer.ini");
  await writeFile(ini, pgbouncerConfig({ ...opts, port, dir }));
  await writeFile(path.join(dir, "userlist.txt"), `"postgres" ""\n`);
  if (asRoot) {
    const uid = Number((await runOk("id", ["-u", "postgres"])).stdout.trim());
    const gid = Number((await runOk("id", ["-g", "postgres"])).stdout.trim());
    for (const f of [dir, ini, path.join(dir, "userlist.txt")]) await chown(f, uid, gid);
  }
  let child: ChildProcess | undefined;
  const url = (db = "postgres") => `postgresql://postgres@127.0.0.1:${port}/${db}`;
  const self: OwnPgBouncer = {
    port,
    dir,
    url,
    async start() {
      const args = asRoot ? ["-u", "postgres", ini] : [ini];
      child = spawn("pgbouncer", args, { stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr?.on("data", (d) => (stderr += d));
      let failed: Error | undefined;
      child.on("error", (e) => (failed = e));
      for (let i = 0; i < 200; i++) {
        if (failed) throw new Error(`pgbouncer: ${failed.message}`);
        if (child.exitCode !== null)
          throw new Error(
            `pgbouncer exited ${child.exitCode}: ${stderr.trim().slice(0, 400)} ${(await self.log()).slice(-400)}`,
          );
        try {
          await self.admin("SHOW VERSION");
          return;
        } catch {
          await sleep(50);
        }
      }
      throw new Error(`pgbouncer on :${port} did not answer`);
    },
    async stop() {
      // SIGTERM: immediate shutdown (client connections are closed at once).
      if (child) await terminate(child);
    },
    async admin(command: string) {
      // The admin console speaks the simple query protocol only (pg uses it for a query without parameters).
      const c = new pg.Client({ connectionString: url("pgbouncer"), connectionTimeoutMillis: 1000 });
      c.on("error", () => {});
      await c.connect();
      try {
        return (await c.query(command)).rows;
      } finally {
        await c.end().catch(() => {});
      }
    },
    async log() {
      return readFile(path.join(dir, "pgbouncer.log"), "utf8").catch(() => "");
    },
  };
  scope.defer(`stop pgbouncer :${port}`, () => self.stop());
  await self.start();
  return self;
}
