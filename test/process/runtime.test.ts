// The compiled production runtime: what `npm start` runs — `node --enable-source-maps
// dist/server/main.js`, built by scripts/build.mjs (rebuilt here when missing or stale; the operator's
// commands are entry points of the same build, run by `npm run admin` etc.) — starts as
// a process, migrates its database from the checkout's prisma/migrations, answers with a seeded key
// (embedded: the demo tenant it loads itself into an in-memory PGlite; with DATABASE_URL: a fresh
// PostgreSQL database loaded with the demo fixture), and its stack traces name the .ts sources.
import { spawn, spawnSync } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { commandLine, COMMANDS, ensureBuild, serviceCommand, ROOT, RUNTIME_FLAGS } from "../../scripts/ensure-build.js";
import { USAGE } from "../../server/admin/cli.js";
import { demoFixture } from "../../server/admin/demo.js";
import { loadFixture } from "../../server/admin/fixture.js";
import { freshDatabase, type TestDb } from "../helpers/app.js";
import { onFreePort } from "../helpers/processes.js";

/** Environment of the child: this test process's, without its database/Redis settings. */
function baseEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of [
    "DATABASE_URL",
    "DIRECT_DATABASE_URL",
    "REDIS_URL",
    "REDIS_CLUSTER_NODES",
    "PGLITE_DATA_DIR",
    "METRICS_PORT",
    "PORT",
    "NO_DEMO",
  ])
    delete env[k];
  return { ...env, HOST: "127.0.0.1", LOG_LEVEL: "warn", NODE_ENV: "production" };
}

/** Runs the compiled service; resolves with its output when it exits (or is stopped). */
function run(env: NodeJS.ProcessEnv) {
  const { command, args } = serviceCommand();
  const child = spawn(command, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, exited, out: () => ({ stdout, stderr }) };
}

let testDb: TestDb | undefined;
beforeAll(async () => {
  await ensureBuild();
  if (process.env.DATABASE_URL) testDb = await freshDatabase();
}, 120_000);
afterAll(async () => {
  await testDb?.drop();
});

describe("the compiled service (dist/server/main.js)", () => {
  it("npm start runs the same command as serviceCommand() (drills, benchmark, this test)", () => {
    const pkg = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8"));
    // `exec`: npm's signals reach node
    expect(pkg.scripts.start).toBe(`exec node ${RUNTIME_FLAGS.join(" ")} dist/server/main.js`);
    expect(serviceCommand(["--cpu-prof"]).args).toEqual([
      ...RUNTIME_FLAGS,
      "--cpu-prof",
      `${ROOT}/dist/server/main.js`,
    ]);
  });

  it("the operator's commands run their built entry points with the same flags, each rebuilt first when stale", () => {
    const pkg = JSON.parse(readFileSync(`${ROOT}/package.json`, "utf8"));
    for (const [name, file] of Object.entries(COMMANDS)) {
      expect(pkg.scripts[name], name).toBe(`exec node ${RUNTIME_FLAGS.join(" ")} ${file}`);
      expect(pkg.scripts[`pre${name}`], name).toBe("node scripts/build.mjs --if-stale");
      expect(commandLine(name as keyof typeof COMMANDS, ["x"]).args).toEqual([
        ...RUNTIME_FLAGS,
        `${ROOT}/${file}`,
        "x",
      ]);
    }
  });

  it("each built command runs as a program (not only when imported): a usage error exits 2 with its line, a bad variable 1 with its line", async () => {
    const env = { ...baseEnv(), PGLITE_DATA_DIR: "memory://" };
    const admin = spawnSync(process.execPath, commandLine("admin", ["frobnicate"]).args, {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(admin.status).toBe(2);
    expect(admin.stderr.split("\n")[0]).toBe('unknown verb "frobnicate"');
    const help = spawnSync(process.execPath, commandLine("admin", ["help"]).args, {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect([help.status, help.stdout]).toEqual([0, `${USAGE}\n`]);
    const distribute = spawnSync(process.execPath, commandLine("db:distribute", ["--shard-count", "0"]).args, {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 60_000,
    });
    expect([distribute.status, distribute.stderr]).toEqual([
      2,
      '--shard-count must be an integer from 1 to 64000, got "0"\n',
    ]);
    const migrate = spawnSync(process.execPath, commandLine("db:migrate").args, {
      cwd: ROOT,
      env: { ...env, LOG_LEVEL: "verbose" },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect([migrate.status, migrate.stderr]).toEqual([
      1,
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"\n',
    ]);
  });

  it("starts, migrates, and answers GET /public/v1/me with a seeded key", async () => {
    const env: NodeJS.ProcessEnv = baseEnv();
    let key: string | undefined;
    if (testDb) {
      const ids = await loadFixture(testDb.db, demoFixture());
      key = ids.tenants.demo!.apiKeys.demo!.key;
      Object.assign(env, { DATABASE_URL: testDb.url, DIRECT_DATABASE_URL: testDb.directUrl, NO_DEMO: "1" });
      for (const k of ["REDIS_URL", "REDIS_CLUSTER_NODES"]) if (process.env[k]) env[k] = process.env[k];
    } else {
      env.PGLITE_DATA_DIR = "memory://"; // empty: the service migrates it and loads the demo tenant
    }
    // On another port when the one picked was taken before the service bound it.
    const { svc, url } = await onFreePort(async (port) => {
      const svc = run({ ...env, PORT: String(port) });
      const url = `http://127.0.0.1:${port}`;
      const deadline = Date.now() + 150_000;
      let ready = false;
      while (!ready && Date.now() < deadline && svc.child.exitCode === null) {
        ready = await fetch(`${url}/readyz`).then(
          (r) => r.ok,
          () => false,
        );
        if (!ready) await new Promise((r) => setTimeout(r, 200));
      }
      if (!ready) svc.child.kill("SIGKILL");
      expect(ready, svc.out().stderr).toBe(true);
      return { svc, url };
    });
    try {
      key ??= /API key \(shown once\): (crm_\S+)/.exec(svc.out().stdout)?.[1];
      expect(key, svc.out().stdout).toBeDefined();

      const me = await fetch(`${url}/public/v1/me`, { headers: { "X-API-Key": key! } });
      expect(me.status).toBe(200);
      const body = (await me.json()) as { tenantId: string; scopes: string[] };
      expect(body.tenantId).toMatch(/^[0-9a-f-]{36}$/);
      expect(body.scopes.length).toBeGreaterThan(0);
      expect((await fetch(`${url}/public/v1/me`)).status).toBe(401);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
    } finally {
      svc.child.kill("SIGTERM");
      expect(await svc.exited).toBe(0); // graceful shutdown works from the bundle too
    }
  }, 180_000);

  it("maps stack traces to the TypeScript sources", async () => {
    // An invalid PORT makes loadConfig throw at start: at LOG_LEVEL=debug the error's stack follows its line.
    const svc = run({ ...baseEnv(), PORT: "not-a-port", PGLITE_DATA_DIR: "memory://", LOG_LEVEL: "debug" });
    const code = await svc.exited;
    const { stderr } = svc.out();
    expect(code).not.toBe(0);
    expect(stderr).toContain('PORT must be 1–65535, got "not-a-port"');
    expect(stderr).toMatch(/at loadConfig \(.*server\/config\.ts:\d+:\d+\)/);
    expect(stderr).toMatch(/server\/main\.ts:\d+:\d+/);
    expect(stderr).not.toMatch(/dist\/server\/main\.js:\d+/);
  }, 60_000);
});
