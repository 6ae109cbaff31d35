// A PostgreSQL cluster of the drill's own: initdb + pg_ctl in a temporary folder on a free port, so
// that stopping or restarting it never touches the machine's shared server. As root, the binaries
// run as the `postgres` OS user (initdb refuses root), in a folder that user owns.
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { onFreePort, runOk, run } from "./proc.js";
import type { Scope } from "./scope.js";

function pgBin(): string {
  const installed = existsSync("/usr/lib/postgresql")
    ? readdirSync("/usr/lib/postgresql")
        .sort((a, b) => Number(b) - Number(a))
        .map((v) => `/usr/lib/postgresql/${v}/bin`)
    : [];
  const dirs = [process.env.PG_BIN, "/usr/lib/postgresql/15/bin", ...installed].filter(Boolean) as string[];
  for (const d of dirs) if (existsSync(path.join(d, "initdb"))) return d;
  throw new Error(`initdb not found (looked in ${dirs.join(", ")}; set PG_BIN)`);
}

async function idOf(user: string): Promise<{ uid: number; gid: number }> {
  const uid = Number((await runOk("id", ["-u", user])).stdout.trim());
  const gid = Number((await runOk("id", ["-g", user])).stdout.trim());
  return { uid, gid };
}

export interface OwnPostgres {
  port: number;
  dir: string;
  /** Connection URL of a database (default "postgres"). */
  url(db?: string): string;
  createDatabase(name: string): Promise<string>;
  /** pg_ctl stop -m fast (waits until it is down). */
  stopFast(): Promise<void>;
  /** pg_ctl start (waits until it accepts connections). */
  start(): Promise<void>;
  log(): Promise<string>;
}

export async function startPostgres(scope: Scope, opts: { maxConnections?: number } = {}): Promise<OwnPostgres> {
  const bin = pgBin();
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(path.join(tmpdir(), "crm-drill-pg-"));
  scope.defer(`remove ${dir}`, () => rm(dir, { recursive: true, force: true }));
  if (asRoot) {
    const { uid, gid } = await idOf("postgres");
    await chown(dir, uid, gid);
  }
  const data = path.join(dir, "data");
  const logFile = path.join(dir, "server.log");
  const exec = (tool: string, args: string[], timeoutMs = 60_000) =>
    asRoot
      ? runOk("runuser", ["-u", "postgres", "--", path.join(bin, tool), ...args], { cwd: dir, timeoutMs })
      : runOk(path.join(bin, tool), args, { cwd: dir, timeoutMs });

  await exec("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
  // On another port when the one picked was taken before the server bound it (its log says so).
  return onFreePort(async (port) => {
    await rm(logFile, { force: true });
    return startOn(scope, { data, dir, logFile, exec }, port, opts);
  });
}

/** An initdb'd data folder and how to run its tools. */
interface DataFolder {
  data: string;
  dir: string;
  logFile: string;
  exec: (tool: string, args: string[]) => Promise<unknown>;
}

async function startOn(scope: Scope, folder: DataFolder, port: number, opts: { maxConnections?: number }) {
  const { data, dir, logFile, exec } = folder;
  const options = `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c max_connections=${opts.maxConnections ?? 200}`;
  let running = false;
  const self: OwnPostgres = {
    port,
    dir,
    url: (db = "postgres") => `postgresql://postgres@127.0.0.1:${port}/${db}`,
    async createDatabase(name) {
      const c = new pg.Client({ connectionString: self.url() });
      await c.connect();
      try {
        await c.query(`CREATE DATABASE "${name}"`);
      } finally {
        await c.end();
      }
      return self.url(name);
    },
    async stopFast() {
      await exec("pg_ctl", ["-D", data, "-m", "fast", "-w", "-t", "30", "stop"]);
      running = false;
    },
    async start() {
      try {
        await exec("pg_ctl", ["-D", data, "-o", options, "-l", logFile, "-w", "-t", "30", "start"]);
      } catch (err) {
        // pg_ctl says only "could not start server": the reason is in the server's log.
        throw new Error(`${(err as Error).message}\n${(await self.log()).slice(-1500)}`);
      }
      running = true;
    },
    async log() {
      const r = await run("cat", [logFile]);
      return r.stdout;
    },
  };
  // Registered before start so that a start that half-succeeded is still stopped.
  scope.defer(`stop postgres :${port}`, async () => {
    if (running || existsSync(path.join(data, "postmaster.pid")))
      await exec("pg_ctl", ["-D", data, "-m", "immediate", "-w", "-t", "30", "stop"]).catch(() => {});
  });
  await self.start();
  return self;
}
