// One-line start-up errors: every configuration or connection error at the start of
// the service (the built dist/server/main.js that `npm start` runs, and server/main.ts under tsx as
// `npm run dev` runs it) and of `db:migrate` prints exactly one line on stderr naming the variable
// and the cause, and exits 1; the stack follows only at LOG_LEVEL=debug. No password is printed.
// The mapping itself (server/startup-error.ts) is also checked on errors that this machine's
// PostgreSQL (trust authentication) cannot produce. Each process here gets a configuration of its
// own (nothing of the leg's backend): the test runs once; test/process/startup-errors.test.ts has
// the errors met on the leg's own PostgreSQL.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { commandLine, ensureBuild, serviceCommand, ROOT } from "../../scripts/ensure-build.js";
import { loadConfig } from "../../server/config.js";
import { openPglite } from "../../server/db/client.js";
import { databaseTarget, describeStartupError, prismaCause, startupErrorText } from "../../server/startup-error.js";
import { seedEmbeddedFolder } from "../helpers/app.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-startup-"));

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
}, 180_000);
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
});

describe("start-up errors of the built service: one line, exit 1", { timeout: 120_000 }, () => {
  it("an unreachable DATABASE_URL names the variable, the address and the cause", async () => {
    const port = await freePort();
    await expectLine(
      baseEnv({ DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/postgres` }),
      `cannot connect to DATABASE_URL (127.0.0.1:${port}): connection refused`,
    );
  });

  it("DATABASE_URL=not-a-url says what is expected (not getaddrinfo ENOTFOUND base)", async () => {
    await expectLine(
      baseEnv({ DATABASE_URL: "not-a-url" }),
      'DATABASE_URL must be a URL like postgresql://USER:PASSWORD@HOST:PORT/DATABASE, got "not-a-url"',
    );
  });

  it("a malformed DATABASE_URL is shown with its password masked", async () => {
    const r = await expectLine(
      baseEnv({ DATABASE_URL: "postgresql://app:hunter2@db:99999/crm" }),
      "DATABASE_URL must be a URL like postgresql://USER:PASSWORD@HOST:PORT/DATABASE, got " +
        '"postgresql://app:***@db:99999/crm"',
    );
    expect(r.stderr + r.stdout).not.toContain("hunter2");
  });

  it("a host that does not resolve", async () => {
    await expectLine(
      baseEnv({ DATABASE_URL: "postgresql://app:hunter2@no-such-host.invalid:5432/crm" }),
      'cannot connect to DATABASE_URL (no-such-host.invalid:5432): host "no-such-host.invalid" not found',
    );
  });

  it("PORT=abc, PORT=0, PORT=65536", async () => {
    await expectLine(baseEnv({ PORT: "abc" }), 'PORT must be 1–65535, got "abc"');
    await expectLine(baseEnv({ PORT: "0" }), 'PORT must be 1–65535, got "0"');
    await expectLine(baseEnv({ PORT: "65536" }), 'PORT must be 1–65535, got "65536"');
  });

  it("LOG_LEVEL=verbose names the valid levels", async () => {
    await expectLine(
      baseEnv({ LOG_LEVEL: "verbose" }),
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"',
    );
  });

  it("every other integer variable: its name, its range and the value given", async () => {
    const cases: [string, string, string][] = [
      ["METRICS_PORT", "x", "1–65535"],
      ["DATABASE_STATEMENT_TIMEOUT_MS", "-1", "0–2147483647"],
      ["BODY_LIMIT_BYTES", "0", "1–2147483647"],
      ["IDEMPOTENCY_TTL_SECONDS", "1.5", "1–2147483647"],
      ["ANONYMOUS_RATE_LIMIT_PER_MINUTE", "1e3", "0–2147483647"],
      ["PROVIDER_TIMEOUT_MS", "2147483648", "1–2147483647"],
    ];
    for (const [name, value, range] of cases)
      await expectLine(baseEnv({ [name]: value }), `${name} must be ${range}, got "${value}"`);
  });

  it("a bad REDIS_URL or REDIS_CLUSTER_NODES, or both set", async () => {
    await expectLine(
      baseEnv({ REDIS_URL: "localhost:6379" }),
      'REDIS_URL must be a URL like redis://HOST:PORT (or rediss:// for TLS), got "localhost:6379"',
    );
    const r = await expectLine(
      baseEnv({ REDIS_URL: "http://:pa55word@cache:6379" }),
      'REDIS_URL must be a URL like redis://HOST:PORT (or rediss:// for TLS), got "http://:***@cache:6379"',
    );
    expect(r.stderr).not.toContain("pa55word");
    await expectLine(
      baseEnv({ REDIS_CLUSTER_NODES: "10.0.0.1:7000,10.0.0.2" }),
      'REDIS_CLUSTER_NODES must be a comma-separated list of host:port, got "10.0.0.2"',
    );
    await expectLine(
      baseEnv({ REDIS_URL: "redis://127.0.0.1:6379", REDIS_CLUSTER_NODES: "127.0.0.1:7000" }),
      "set either REDIS_URL (one Redis) or REDIS_CLUSTER_NODES (a Redis Cluster), not both",
    );
  });

  it("a REDIS_URL or a cluster node that does not parse: one line naming the variable, no password", async () => {
    // ioredis percent-decodes the user name and password: a "%" starting no escape was its URIError's stack.
    const bad = await expectLine(
      baseEnv({ REDIS_URL: "redis://:pa%zz55@127.0.0.1:6379" }),
      'REDIS_URL\'s password is not valid percent-encoding (write a "%" as %25), got "redis://:***@127.0.0.1:6379"',
    );
    expect(bad.stderr).not.toContain("pa%zz55");
    // The same rules as the process reads them (loadConfig), each its line as the process prints it.
    const lineOf = (env: NodeJS.ProcessEnv) => {
      try {
        loadConfig(env);
      } catch (err) {
        return startupErrorText(err, undefined, { ...env, LOG_LEVEL: "warn" });
      }
      return "loaded";
    };
    const userName = 'REDIS_URL\'s user name is not valid percent-encoding (write a "%" as %25)';
    const badUser = "redis://us%er:pw@127.0.0.1:6379";
    expect(lineOf({ REDIS_URL: badUser })).toBe(`${userName}, got "redis://us%er:***@127.0.0.1:6379"\n`);
    expect(lineOf({ REDIS_URL: "redis://:p%25w@127.0.0.1:6379" })).toBe("loaded");
    const nodes = "REDIS_CLUSTER_NODES must be a comma-separated list of host:port";
    expect(lineOf({ REDIS_CLUSTER_NODES: "127.0.0.1:7000,redis://:s3cr%zzet@127.0.0.1:7001" })).toBe(
      `${nodes}, got "***@127.0.0.1:7001"\n`,
    );
    expect(lineOf({ REDIS_CLUSTER_NODES: "h%zz:7000" })).toBe(`${nodes}, got "h%zz:7000"\n`);
    expect(lineOf({ REDIS_CLUSTER_NODES: "[::1]:7000,cache-1.internal:7001" })).toBe("loaded");
    // A password in DATABASE_URL's query (password, sslpassword) is masked like the userinfo's.
    expect(lineOf({ DATABASE_URL: "mysql://app@127.0.0.1:1/crm?password=S3cret&sslpassword=K3y" })).toBe(
      "DATABASE_URL must be a URL like postgresql://USER:PASSWORD@HOST:PORT/DATABASE, " +
        'got "mysql://app@127.0.0.1:1/crm?password=***&sslpassword=***"\n',
    );
  });

  it("an embedded database folder that is a file, or under a file", async () => {
    const file = path.join(dir, "a-file");
    writeFileSync(file, "x");
    await expectLine(baseEnv({ PGLITE_DATA_DIR: file }), `PGLITE_DATA_DIR must be a folder, got a file: "${file}"`);
    const under = path.join(file, "db");
    await expectLine(
      baseEnv({ PGLITE_DATA_DIR: under }),
      `cannot open the embedded database in PGLITE_DATA_DIR (${under}): a parent is not a folder`,
    );
  });

  it("the first start on an empty embedded database with a port in use loads no demo and prints no key (it is shown once)", async () => {
    const held = await holdPort();
    const folder = path.join(dir, "first-start-port-in-use");
    // Migrated, no tenant: still a first start (the demo loads when there is no tenant); initdb is not the subject.
    await seedEmbeddedFolder(folder);
    try {
      const first = await expectLine(
        baseEnv({ NO_DEMO: "", PGLITE_DATA_DIR: folder, PORT: String(held.port) }),
        `port ${held.port} is already in use (PORT)`,
      );
      expect(first.stdout).not.toContain("shown once");
      const metrics = await expectLine(
        baseEnv({
          NO_DEMO: "",
          PGLITE_DATA_DIR: folder,
          PORT: String(await freePort()),
          METRICS_PORT: String(held.port),
        }),
        `port ${held.port} is already in use (METRICS_PORT)`,
      );
      expect(metrics.stdout).not.toContain("shown once");
    } finally {
      held.server.close();
    }
    // Nothing loaded: the next start (on a free port) is still the first, and shows the demo's key.
    const db = await openPglite(folder);
    try {
      expect(await db.prisma.tenant.count()).toBe(0);
      expect(await db.prisma.apiKey.count()).toBe(0);
    } finally {
      await db.close();
    }
  });

  it("LOG_LEVEL=debug: the same first line, then the stack (with the cause)", async () => {
    const port = await freePort();
    const r = await start(
      baseEnv({ LOG_LEVEL: "debug", DATABASE_URL: `postgresql://postgres:hunter2@127.0.0.1:${port}/postgres` }),
    );
    expect(r.code).toBe(1);
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines[0]).toBe(`cannot connect to DATABASE_URL (127.0.0.1:${port}): connection refused`);
    expect(lines.length).toBeGreaterThan(3);
    expect(r.stderr).toMatch(/\n\s+at checkDatabaseConnections \(.*server\/startup-error\.ts:\d+:\d+\)/);
    expect(r.stderr).toContain("ECONNREFUSED");
    expect(r.stderr).not.toContain("hunter2");
    const c = await start(baseEnv({ LOG_LEVEL: "debug", PORT: "abc" }));
    expect(c.code).toBe(1);
    expect(c.stderr.split("\n")[0]).toBe('PORT must be 1–65535, got "abc"');
    expect(c.stderr).toMatch(/\n\s+at loadConfig \(.*server\/config\.ts:\d+:\d+\)/);
  });
});

describe("the same lines from `npm run dev` (tsx) and `npm run db:migrate`", { timeout: 120_000 }, () => {
  it("server/main.ts under tsx", async () => {
    const port = await freePort();
    await expectLine(
      baseEnv({ DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/postgres` }),
      `cannot connect to DATABASE_URL (127.0.0.1:${port}): connection refused`,
      "tsx",
    );
    await expectLine(baseEnv({ PORT: "abc" }), 'PORT must be 1–65535, got "abc"', "tsx");
  });

  it("db:migrate", async () => {
    const port = await freePort();
    await expectLine(
      baseEnv({ DATABASE_URL: `postgresql://postgres@127.0.0.1:${port}/postgres` }),
      `cannot connect to DATABASE_URL (127.0.0.1:${port}): connection refused`,
      "migrate",
    );
    await expectLine(
      baseEnv({ LOG_LEVEL: "verbose" }),
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"',
      "migrate",
    );
  });
});

describe("the mapping (server/startup-error.ts)", () => {
  const config = loadConfig({
    DATABASE_URL: "postgresql://app:pw0rd@db.internal:6432/crm",
    DIRECT_DATABASE_URL: "postgresql://app:pw0rd@db.internal:5432/crm",
  });
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: "FATAL" });

  it("PostgreSQL's connection refusals: its message is the cause", () => {
    const single = loadConfig({ DATABASE_URL: "postgresql://app:pw0rd@db.internal/crm" });
    expect(describeStartupError(pgError("28P01", 'password authentication failed for user "app"'), single)).toBe(
      'cannot connect to DATABASE_URL (db.internal:5432): password authentication failed for user "app"',
    );
    expect(describeStartupError(pgError("3D000", 'database "crm" does not exist'), single)).toBe(
      'cannot connect to DATABASE_URL (db.internal:5432): database "crm" does not exist',
    );
    expect(describeStartupError(pgError("53300", "sorry, too many clients already"), single)).toBe(
      "cannot connect to DATABASE_URL (db.internal:5432): sorry, too many clients already",
    );
  });

  it("a socket error goes to the variable whose address it names", () => {
    const refused = (port: number) =>
      Object.assign(new Error(`connect ECONNREFUSED 10.0.0.9:${port}`), {
        code: "ECONNREFUSED",
        address: "10.0.0.9",
        port,
      });
    expect(describeStartupError(refused(5432), config)).toBe(
      "cannot connect to DIRECT_DATABASE_URL (db.internal:5432): connection refused",
    );
    expect(describeStartupError(refused(6432), config)).toBe(
      "cannot connect to DATABASE_URL (db.internal:6432): connection refused",
    );
  });

  it("a listen error names PORT or METRICS_PORT", () => {
    const c = loadConfig({ PORT: "8080", METRICS_PORT: "9464" });
    const inUse = (port: number) =>
      Object.assign(new Error("listen EADDRINUSE"), {
        code: "EADDRINUSE",
        syscall: "listen",
        address: "127.0.0.1",
        port,
      });
    expect(describeStartupError(inUse(8080), c)).toBe("port 8080 is already in use (PORT)");
    expect(describeStartupError(inUse(9464), c)).toBe("port 9464 is already in use (METRICS_PORT)");
  });

  it("any other error: the first non-empty line of its message as is, with configured passwords masked", () => {
    expect(
      describeStartupError(
        new Error("embedded database .data/ is in use by pid 4242 (npm start); stop it, or set DATABASE_URL"),
        config,
      ),
    ).toBe("embedded database .data/ is in use by pid 4242 (npm start); stop it, or set DATABASE_URL");
    expect(
      describeStartupError(
        new Error("\n\n  driver said: bad url postgresql://app:pw0rd@db.internal:6432/crm\nmore"),
        config,
      ),
    ).toBe("driver said: bad url postgresql://app:***@db.internal:6432/crm");
  });

  it("a Prisma error whose message starts with an empty line: the database's message", () => {
    const e = Object.assign(
      new Error(
        "\nInvalid `db.prisma.tenant.updateMany()` invocation in\n/x/operations.ts:87:38\n\n  86 …\n→ 87 const " +
          "n = …\nDatabase error. Code: `P0001`. Message: `disk full`",
      ),
      {
        name: "PrismaClientKnownRequestError",
        code: "P2039",
        meta: {
          driverAdapterError: {
            name: "DriverAdapterError",
            cause: { originalCode: "P0001", originalMessage: "disk full", kind: "postgres", code: "P0001" },
          },
        },
      },
    );
    expect(prismaCause(e)).toBe("disk full");
    expect(describeStartupError(e, config)).toBe("disk full");
    const unique = Object.assign(
      new Error(
        "\nInvalid `prisma.apiKey.create()` invocation:\n\n\nUnique constraint failed on the fields: (`prefix`)",
      ),
      { name: "PrismaClientKnownRequestError" },
    );
    expect(prismaCause(unique)).toBe("Unique constraint failed on the fields: (`prefix`)");
  });

  it("the target of a URL never holds its password", () => {
    expect(databaseTarget("postgresql://app:pw0rd@db.internal:6432/crm")).toBe("db.internal:6432");
    expect(databaseTarget("postgresql:///crm?host=/var/run/postgresql")).toBe("/var/run/postgresql:5432");
  });
});
