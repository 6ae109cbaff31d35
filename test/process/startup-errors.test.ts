// One-line start-up errors on the leg's own PostgreSQL (test/unit/startup-errors.test.ts has every
// error of a configuration of the process's own): every configuration or connection error at the start of
// the service (the built dist/server/main.js that `npm start` runs, and server/main.ts under tsx as
// `npm run dev` runs it) and of `db:migrate` prints exactly one line on stderr naming the variable
// and the cause, and exits 1; the stack follows only at LOG_LEVEL=debug. No password is printed.
// The mapping itself (server/startup-error.ts) is also checked on errors that this machine's
// PostgreSQL (trust authentication) cannot produce.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commandLine, ensureBuild, serviceCommand, ROOT } from "../../scripts/ensure-build.js";
import { freshDatabase, withDatabase, type TestDb } from "../helpers/app.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-startup-"));
let testDb: TestDb | undefined;

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });

/** A port held by this process for the duration of a test. */
const holdPort = () =>
  new Promise<{ port: number; server: Server }>((resolve, reject) => {
    const server = createServer().listen(0, "127.0.0.1", () =>
      resolve({ port: (server.address() as { port: number }).port, server }),
    );
    server.on("error", reject);
  });

/** The child's environment: this process's without database/Redis/port settings, demo off, LOG_LEVEL warn. */
function baseEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of [
    "DATABASE_URL",
    "DIRECT_DATABASE_URL",
    "REDIS_URL",
    "REDIS_CLUSTER_NODES",
    "PGLITE_DATA_DIR",
    "METRICS_PORT",
    "METRICS_HOST",
    "PORT",
    "HOST",
    "LOG_LEVEL",
    "NODE_OPTIONS",
    "DATABASE_STATEMENT_TIMEOUT_MS",
    "BODY_LIMIT_BYTES",
    "IDEMPOTENCY_TTL_SECONDS",
    "ANONYMOUS_RATE_LIMIT_PER_MINUTE",
    "PROVIDER_TIMEOUT_MS",
  ])
    delete env[k];
  return { ...env, NO_DEMO: "1", LOG_LEVEL: "warn", PGLITE_DATA_DIR: "memory://", ...extra };
}

type Entry = "built" | "tsx" | "migrate";

/** Runs an entry point until it exits (at most `ms`): exit code, stdout, stderr. */
function start(
  env: NodeJS.ProcessEnv,
  entry: Entry = "built",
  ms = 120_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { command, args } =
    entry === "built"
      ? serviceCommand()
      : entry === "migrate"
        ? commandLine("db:migrate")
        : { command: process.execPath, args: ["--import", "tsx", "server/main.ts"] };
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), ms);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Starts `entry` with `env` and expects exit 1 with exactly `line` on stderr. */
async function expectLine(env: NodeJS.ProcessEnv, line: string, entry: Entry = "built") {
  const r = await start(env, entry);
  expect(r.stderr).toBe(`${line}\n`);
  expect(r.code).toBe(1);
  return r;
}

beforeAll(async () => {
  await ensureBuild();
  if (process.env.DATABASE_URL) testDb = await freshDatabase();
}, 180_000);
afterAll(async () => {
  await testDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe.runIf(process.env.DATABASE_URL)(
  "start-up errors of the built service on the leg's PostgreSQL: one line, exit 1",
  { timeout: 120_000 },
  () => {
    it("a missing database and a missing role (PostgreSQL's own message), no password", async () => {
      const base = new URL(testDb!.url!);
      const target = `${base.hostname}:${base.port || "5432"}`;
      await expectLine(
        baseEnv({ DATABASE_URL: withDatabase(testDb!.url!, "no_such_db_h9") }),
        `cannot connect to DATABASE_URL (${target}): database "no_such_db_h9" does not exist`,
      );
      const role = new URL(testDb!.url!);
      role.username = "no_such_role_h9";
      role.password = "s3cret-pw";
      const r = await expectLine(
        baseEnv({ DATABASE_URL: role.toString() }),
        `cannot connect to DATABASE_URL (${target}): role "no_such_role_h9" does not exist`,
      );
      expect(r.stderr).not.toContain("s3cret-pw");
    });

    it("an unreachable DIRECT_DATABASE_URL is named as such (DATABASE_URL reachable)", async () => {
      const port = await freePort();
      await expectLine(
        baseEnv({
          DATABASE_URL: testDb!.url!,
          DIRECT_DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/postgres`,
        }),
        `cannot connect to DIRECT_DATABASE_URL (127.0.0.1:${port}): connection refused`,
      );
    });

    it("PORT in use, METRICS_PORT in use (the database started, then listen failed)", async () => {
      const held = await holdPort();
      try {
        const db: Record<string, string> = testDb
          ? { DATABASE_URL: testDb.url!, DIRECT_DATABASE_URL: testDb.directUrl! }
          : {};
        await expectLine(baseEnv({ ...db, PORT: String(held.port) }), `port ${held.port} is already in use (PORT)`);
        await expectLine(
          baseEnv({ ...db, PORT: String(await freePort()), METRICS_PORT: String(held.port) }),
          `port ${held.port} is already in use (METRICS_PORT)`,
        );
      } finally {
        held.server.close();
      }
    });

    it("a HOST that is not an address of this machine", async () => {
      const db: Record<string, string> = testDb
        ? { DATABASE_URL: testDb.url!, DIRECT_DATABASE_URL: testDb.directUrl! }
        : {};
      const port = await freePort();
      // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never assigned to a host.
      await expectLine(
        baseEnv({ ...db, HOST: "192.0.2.1", PORT: String(port) }),
        `cannot listen on HOST 192.0.2.1 (port ${port}): address not available on this machine`,
      );
    });

    it("db:migrate through a pooler needs only DIRECT_DATABASE_URL: an unreachable DATABASE_URL does not stop it", async () => {
      const port = await freePort();
      const r = await start(
        baseEnv({
          DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/postgres`,
          DIRECT_DATABASE_URL: testDb!.directUrl!,
        }),
        "migrate",
      );
      expect(r.stderr).toBe("");
      expect(JSON.parse(r.stdout)).toEqual({ applied: [] });
      expect(r.code).toBe(0);
    });
  },
);
