// A newcomer's first hour: a working key on any later start of the demo (the admin
// verb demo-key, and the start naming it), the next step on a database without tenants, logs for
// people (LOG_FORMAT=pretty, or a terminal) and for machines (JSON), the real Redis state in the
// "listening" line, and `npm run studio` refusing in one line without DATABASE_URL.
// The built service and the admin CLI are spawned as an operator runs them. Embedded leg: temporary
// PGLITE_DATA_DIR folders; PostgreSQL leg (DATABASE_URL set): a fresh database.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuild, ROOT, serviceCommand } from "../../scripts/ensure-build.js";
import { run, USAGE } from "../../server/admin/cli.js";
import {
  curlLine,
  DEMO_IDS,
  DEMO_OWNER_EMAIL,
  DEMO_TENANT_NAME,
  demoFixture,
  findDemoTenant,
  localBaseUrl,
} from "../../server/admin/demo.js";
import { SERVICE_FILE } from "../../server/admin/live.js";
import { loadFixture } from "../../server/admin/fixture.js";
import { NO_DEMO_TENANT } from "../../server/admin/operations.js";
import { ALL_SCOPES } from "../../server/auth/scopes.js";
import { ConfigError, loadConfig } from "../../server/config.js";
import { openPglite, type Database } from "../../server/db/client.js";
import { freshDatabase, seedEmbeddedFolder, type TestDb } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import {
  baseEnv,
  descendants,
  freePort,
  killAll,
  logIntoClosedPipe,
  onFreePort,
  runNpm,
  running,
  spawnNpm,
  until,
  waitReady,
  type Spawned,
} from "../helpers/processes.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-first-hour-"));
const PG = Boolean(process.env.DATABASE_URL);
let testDb: TestDb | undefined;
const leftovers: number[] = [];

beforeAll(async () => {
  await ensureBuild();
  if (PG) testDb = await freshDatabase();
}, 120_000);
afterAll(async () => {
  killAll(leftovers);
  await testDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** An operator's environment: no database, Redis or log settings of this process; the test database or `folder`. */
function opEnv(folder: string | undefined, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = baseEnv();
  delete env.LOG_FORMAT;
  delete env.NODE_OPTIONS;
  if (testDb) Object.assign(env, { DATABASE_URL: testDb.url, DIRECT_DATABASE_URL: testDb.directUrl });
  else if (folder) env.PGLITE_DATA_DIR = path.join(dir, folder);
  return { ...env, ...extra };
}

const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

/** The JSON log records among `out`'s lines (the demo banner is plain text). */
const records = (out: string) =>
  out
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown> & { msg: string; level: number });

/** The built service (what `npm start` runs), ready; stop() sends SIGTERM and waits for the exit. */
async function startService(env: NodeJS.ProcessEnv): Promise<Service> {
  // On another port when the one picked was taken before the service bound it.
  return onFreePort((port) => startOn(env, port));
}

type Service = Spawned & { url: string; port: number; stop(): Promise<number | null> };

async function startOn(env: NodeJS.ProcessEnv, port: number): Promise<Service> {
  const { command, args } = serviceCommand();
  const child: ChildProcess = spawn(command, args, {
    cwd: ROOT,
    env: { ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  leftovers.push(child.pid!);
  let out = "";
  let err = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((r) =>
    child.on("exit", (code, signal) => r({ code, signal, at: Date.now() })),
  );
  const svc = { child, out: () => out, err: () => err, exited };
  const url = `http://127.0.0.1:${port}`;
  // /healthz: /readyz answers 503 while a configured Redis is down.
  const ready = await waitReady(`${url}/healthz`, svc, 90_000);
  if (!ready) child.kill("SIGKILL");
  expect(ready, `${out}\n${err}`).toBe(true);
  return {
    ...svc,
    url,
    port,
    async stop() {
      child.kill("SIGTERM");
      return (await exited).code;
    },
  };
}

/** `npm run --silent admin -- …` as an operator runs it. */
const admin = (args: string[], env: NodeJS.ProcessEnv) =>
  runNpm(["run", "--silent", "admin", "--", ...args], env, { cwd: ROOT, pids: leftovers });

/** stderr without npm's own warnings about the machine's npm configuration. */
const ownLines = (stderr: string) => stderr.split("\n").filter((l) => l && !l.startsWith("npm warn"));

/** The database a CLI or a service wrote, opened once they are gone (PGlite allows one process). */
async function withDb<T>(folder: string, fn: (db: Database) => Promise<T>): Promise<T> {
  if (testDb) return fn(testDb.db);
  const db = await openPglite(path.join(dir, folder));
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}
const counts = (folder: string) =>
  withDb(folder, async (db) => ({
    tenants: await db.prisma.tenant.count(),
    keys: await db.prisma.apiKey.count(),
    users: await db.prisma.user.count(),
  }));

interface DemoKey {
  tenantId: string;
  ownerId: string;
  id: string;
  key: string;
  prefix: string;
  scopes: string;
  curl: string;
}

/** GET /public/v1/me with `key`: 200 on the demo tenant, every scope. */
async function expectWorks(url: string, key: string, tenantId: string) {
  const res = await fetch(`${url}/public/v1/me`, { headers: { "X-API-Key": key } });
  expect(res.status).toBe(200);
  const me = (await res.json()) as { tenantId: string; scopes: string[]; plan: string; keyPrefix: string };
  expect(me).toMatchObject({ tenantId, plan: "pro", keyPrefix: key.slice(0, me.keyPrefix.length) });
  expect([...me.scopes].sort()).toEqual([...ALL_SCOPES].sort());
}

const LISTENING_NO_REDIS = "Redis not configured: quotas in process memory";
const UNREACHABLE = "Redis configured but unreachable: quotas in process memory until it connects";
const PRETTY_LINE = /^\[\d\d:\d\d:\d\d\.\d{3}\] (INFO|WARN|ERROR|DEBUG): /;

describe.skipIf(PG)("embedded database: start lines, demo-key, log formats", { timeout: 240_000 }, () => {
  it("an empty database with NO_DEMO: the start says the next step (admin load), in JSON on a pipe; demo-key refuses, changing nothing", async () => {
    // Migrated already (no tenant): the start's lines are the subject; the first start on an empty
    // folder is the demo's test below.
    await seedEmbeddedFolder(path.join(dir, "empty"));
    const svc = await startService(opEnv("empty", { NO_DEMO: "1" })); // LOG_FORMAT unset, stdout a pipe
    await until(() => svc.out().includes("no tenant yet"), 5_000);
    expect(await svc.stop()).toBe(0);
    // Every line is JSON (no banner, no pretty line).
    const lines = svc.out().trim().split("\n");
    expect(lines.length).toBeGreaterThan(1);
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    const log = records(svc.out());
    expect(log.find((r) => r.msg.startsWith("listening on"))).toMatchObject({
      msg: `listening on http://127.0.0.1:${svc.port} (database: pglite; ${LISTENING_NO_REDIS})`,
      redis: "not configured",
      quotas: "in process",
      database: "pglite",
    });
    expect(log.find((r) => r.msg.includes("no tenant yet"))).toMatchObject({
      level: 30,
      msg:
        "the embedded database has no tenant yet: for the demo tenant, stop the service (the embedded database " +
        "allows one process), then run npm run --silent admin -- load-demo; for your own tenants, users and API " +
        'keys, npm run --silent admin -- load FILE (README.md, "Admin CLI")',
    });
    expect(svc.out()).not.toContain("demo-key");
    expect(log.find((r) => String(r.msg).startsWith("API reference: "))).toMatchObject({
      docs: `http://127.0.0.1:${svc.port}/docs`,
    });

    const r = await admin(["demo-key"], opEnv("empty"));
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(ownLines(r.stderr)).toEqual([NO_DEMO_TENANT]);
    expect(NO_DEMO_TENANT).toBe(
      "no demo tenant: load it with npm run --silent admin -- load-demo (the first start on an empty embedded " +
        "database does it too), or load a fixture of your own with npm run --silent admin -- load FILE",
    );
    expect(await counts("empty")).toEqual({ tenants: 0, keys: 0, users: 0 });
  });

  let demoId: string;
  let firstKey: string;
  it("the first start loads the demo (key shown once); with REDIS_URL at a closed port the listening line says unreachable, quotas in memory; LOG_FORMAT=json", async () => {
    const closed = await freePort();
    const svc = await startService(opEnv("demo", { LOG_FORMAT: "json", REDIS_URL: `redis://127.0.0.1:${closed}` }));
    await until(() => svc.out().includes("listening on"), 5_000);
    expect(await svc.stop()).toBe(0);
    const out = svc.out();
    demoId = /Demo tenant loaded \(([0-9a-f-]{36})\)/.exec(out)![1]!;
    firstKey = /API key \(shown once\): (crm_\S+)/.exec(out)![1]!;
    expect(out).toContain(`  curl -s -H 'X-API-Key: ${firstKey}' http://127.0.0.1:${svc.port}/public/v1/me\n`);
    expect(out).toContain(
      `API reference: http://127.0.0.1:${svc.port}/docs\nLater, for a new key: npm run --silent admin -- demo-key\n`,
    );
    const log = records(out);
    // The banner is the only plain text: every other line is JSON.
    expect(out.split("\n").filter((l) => l.startsWith("[") || / INFO: /.test(l))).toEqual([]);
    expect(log.find((r) => r.msg.startsWith("listening on"))).toMatchObject({
      msg: `listening on http://127.0.0.1:${svc.port} (database: pglite; ${UNREACHABLE})`,
      redis: "unreachable",
      quotas: "in process",
    });
    expect(log.some((r) => /no tenant yet|demo tenant [0-9a-f]/.test(r.msg))).toBe(false); // the banner said it all
  });

  let fresh: DemoKey;
  it("demo-key (service stopped): a new key of the demo tenant, every scope, owner the demo's user, with a curl line", async () => {
    const before = await counts("demo");
    const r = await admin(["demo-key"], opEnv("demo", { PORT: "4321" }));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.endsWith("}\n")).toBe(true);
    expect(r.stdout.trim().split("\n")).toHaveLength(1); // one JSON document
    fresh = JSON.parse(r.stdout) as DemoKey;
    expect(Object.keys(fresh)).toEqual(["tenantId", "ownerId", "id", "key", "prefix", "scopes", "curl"]);
    expect(fresh).toMatchObject({ tenantId: demoId, scopes: "all", key: expect.stringMatching(/^crm_/) });
    expect(fresh.key).not.toBe(firstKey);
    expect(fresh.key.startsWith(fresh.prefix)).toBe(true);
    expect(fresh.curl).toBe(`curl -s -H 'X-API-Key: ${fresh.key}' http://127.0.0.1:4321/public/v1/me`);
    expect(await counts("demo")).toEqual({ ...before, keys: before.keys + 1 });
    await withDb("demo", async (db) => {
      const row = await db.prisma.apiKey.findFirstOrThrow({ where: { id: fresh.id }, include: { owner: true } });
      expect(row).toMatchObject({
        tenantId: demoId,
        ownerId: fresh.ownerId,
        prefix: fresh.prefix,
        expiresAt: null,
        revokedAt: null,
      });
      expect(row.owner.email).toBe(DEMO_OWNER_EMAIL);
      expect([...row.scopes].sort()).toEqual([...ALL_SCOPES].sort());
    });
  });

  it("a later start names the demo tenant and demo-key (LOG_FORMAT=pretty: lines for people); both keys work for GET /me", async () => {
    const svc = await startService(opEnv("demo", { LOG_FORMAT: "pretty" }));
    await expectWorks(svc.url, fresh.key, demoId);
    await expectWorks(svc.url, firstKey, demoId);
    await until(() => svc.out().includes("GET /public/v1/me 200"), 5_000);
    expect(await svc.stop()).toBe(0);
    const lines = stripAnsi(svc.out()).trim().split("\n");
    expect(svc.out()).not.toContain("shown once");
    // Every line a pretty record (an error's stack would follow its line, indented): no JSON.
    for (const line of lines) expect(line).toMatch(PRETTY_LINE);
    expect(lines).toContainEqual(
      `${lines.find((l) => l.includes("listening on"))!.slice(0, 15)}INFO: listening on ` +
        `http://127.0.0.1:${svc.port} (database: pglite; ${LISTENING_NO_REDIS}) ` +
        `{"host":"127.0.0.1","port":${svc.port},"database":"pglite","redis":"not configured","quotas":"in process"}`,
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        new RegExp(
          `INFO: demo tenant ${demoId}: for a new API key, run npm run --silent admin -- demo-key ` +
            `\\{"tenantId":"${demoId}"\\}$`,
        ),
      ),
    );
    // The access log line: "GET /path status ms", the request id kept.
    expect(lines).toContainEqual(
      expect.stringMatching(/INFO: GET \/public\/v1\/me 200 \d+\.\d ms \{"reqId":"[0-9a-f-]{36}"\}$/),
    );
    // The listening line comes before the demo line (the last thing a person reads at start).
    expect(lines.findIndex((l) => l.includes("listening on"))).toBeLessThan(
      lines.findIndex((l) => l.includes("demo tenant")),
    );
  });

  it("demo-key while the embedded service runs: through that service (its admin transport), the curl line at the port it listens on", async () => {
    const svc = await startService(opEnv("demo", { LOG_FORMAT: "json" }));
    try {
      expect(existsSync(path.join(dir, "demo", SERVICE_FILE))).toBe(true);
      // The CLI's own PORT says 4321; the service listens elsewhere: the line names the service's.
      const r = await admin(["demo-key"], opEnv("demo", { PORT: "4321" }));
      expect(r.code, r.stderr).toBe(0);
      const live = JSON.parse(r.stdout) as DemoKey;
      expect(live).toMatchObject({ tenantId: demoId, scopes: "all" });
      expect(live.curl).toBe(curlLine(live.key, svc.url));
      await expectWorks(svc.url, live.key, demoId);
      // Any other verb still refuses while the service holds the folder (one owner).
      const other = await admin(["set-plan", demoId, "pro"], opEnv("demo"));
      expect(other.code).toBe(1);
      expect(ownLines(other.stderr)[0]).toMatch(/^embedded database .* is in use by pid \d+/);
    } finally {
      expect(await svc.stop()).toBe(0);
    }
    expect(existsSync(path.join(dir, "demo", SERVICE_FILE))).toBe(false); // removed at the stop
  });

  it("demo-key where there are tenants but no demo tenant: refused, nothing changed", async () => {
    // The folder of the first test (migrated by its start, no tenant yet).
    await withDb("empty", async (db) => {
      // The demo's name without its owner, and a tenant with the owner's e-mail under another name.
      const f = fixture(tenant("acme"), tenant("lookalike"));
      f.tenants[1]!.name = DEMO_TENANT_NAME;
      f.tenants[0]!.users![0]!.email = DEMO_OWNER_EMAIL;
      await loadFixture(db, f);
    });
    const before = await counts("empty");
    expect(before.tenants).toBe(2);
    const r = await admin(["demo-key"], opEnv("empty"));
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(ownLines(r.stderr)).toEqual([NO_DEMO_TENANT]);
    expect(await counts("empty")).toEqual(before);
  });
});

describe.skipIf(!PG)("PostgreSQL: start lines, demo-key, log formats", { timeout: 240_000 }, () => {
  it("an empty database: the start says the next step (admin load); the listening line states the real Redis state; demo-key refuses, changing nothing", async () => {
    const redis = process.env.REDIS_URL;
    const svc = await startService(opEnv(undefined, { LOG_FORMAT: "json", ...(redis ? { REDIS_URL: redis } : {}) }));
    await until(() => svc.out().includes("no tenant yet"), 5_000);
    expect(await svc.stop()).toBe(0);
    const log = records(svc.out());
    expect(log.find((r) => r.msg.includes("no tenant yet"))).toMatchObject({
      msg:
        "the database has no tenant yet: for the demo tenant, run npm run --silent admin -- load-demo; for your " +
        'own tenants, users and API keys, npm run --silent admin -- load FILE (README.md, "Admin CLI")',
    });
    expect(log.find((r) => r.msg.startsWith("listening on"))).toMatchObject(
      redis
        ? {
            msg: `listening on http://127.0.0.1:${svc.port} (database: postgres; Redis connected: quotas shared)`,
            redis: "connected",
            quotas: "shared",
          }
        : {
            msg: `listening on http://127.0.0.1:${svc.port} (database: postgres; ${LISTENING_NO_REDIS})`,
            redis: "not configured",
            quotas: "in process",
          },
    );

    const r = await admin(["demo-key"], opEnv(undefined));
    expect(r).toMatchObject({ code: 1, stdout: "" });
    expect(ownLines(r.stderr)).toEqual([NO_DEMO_TENANT]);
    expect(await counts("")).toEqual({ tenants: 0, keys: 0, users: 0 });
  });

  it("load-demo: the demo tenant (fixed ids) and a working key with its curl line; a second load-demo is refused, nothing changed", async () => {
    const r = await admin(["load-demo"], opEnv(undefined, { PORT: "4321" }));
    expect(r.code, r.stderr).toBe(0);
    const loaded = JSON.parse(r.stdout) as DemoKey;
    expect(Object.keys(loaded)).toEqual(["tenantId", "ownerId", "id", "key", "prefix", "scopes", "curl"]);
    expect(loaded).toMatchObject({ ownerId: DEMO_IDS.users.ana, scopes: "all" });
    expect(loaded.curl).toBe(`curl -s -H 'X-API-Key: ${loaded.key}' http://127.0.0.1:4321/public/v1/me`);
    expect(await testDb!.db.prisma.lead.count({ where: { id: DEMO_IDS.leads.l1 } })).toBe(1);
    const before = await counts("");
    const again = await admin(["load-demo"], opEnv(undefined));
    expect(again).toMatchObject({ code: 1, stdout: "" });
    expect(ownLines(again.stderr)).toEqual([
      `the demo tenant is loaded already (${loaded.tenantId}): for a new key, npm run --silent admin -- demo-key`,
    ]);
    expect(await counts("")).toEqual(before);
    const svc = await startService(opEnv(undefined, { LOG_FORMAT: "json" }));
    try {
      await expectWorks(svc.url, loaded.key, loaded.tenantId);
    } finally {
      expect(await svc.stop()).toBe(0);
    }
  });

  it("with the demo tenant: the start names it (pretty); demo-key while the service runs prints a key that works at once; Redis at a closed port: unreachable", async () => {
    const ids = await loadFixture(testDb!.db, fixture(tenant("acme")));
    const demoId =
      (await findDemoTenant(testDb!.db))?.tenantId ?? (await loadFixture(testDb!.db, demoFixture())).tenants.demo!.id;
    const closed = await freePort();
    const svc = await startService(
      opEnv(undefined, { LOG_FORMAT: "pretty", REDIS_URL: `redis://127.0.0.1:${closed}` }),
    );
    try {
      const before = await counts("");
      const r = await admin(["demo-key"], opEnv(undefined, { PORT: String(svc.port) }));
      expect(r.code, r.stderr).toBe(0);
      const fresh = JSON.parse(r.stdout) as DemoKey;
      expect(fresh).toMatchObject({ tenantId: demoId, scopes: "all" });
      expect(fresh.tenantId).not.toBe(ids.tenants.acme!.id);
      expect(fresh.curl).toBe(curlLine(fresh.key, svc.url));
      await expectWorks(svc.url, fresh.key, demoId);
      expect(await counts("")).toEqual({ ...before, keys: before.keys + 1 });
      await until(() => svc.out().includes("GET /public/v1/me 200"), 5_000);
    } finally {
      expect(await svc.stop()).toBe(0);
    }
    const lines = stripAnsi(svc.out()).trim().split("\n");
    for (const line of lines) expect(line).toMatch(PRETTY_LINE);
    expect(lines).toContainEqual(
      expect.stringContaining(`INFO: listening on http://127.0.0.1:${svc.port} (database: postgres; ${UNREACHABLE}) {`),
    );
    expect(lines).toContainEqual(
      expect.stringContaining(
        `INFO: demo tenant ${demoId}: for a new API key, run npm run --silent admin -- demo-key ` +
          `{"tenantId":"${demoId}"}`,
      ),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/WARN: redis not ready at start: quotas count in process memory until it connects$/),
    );
  });
});

describe("demo-key in process (both backends): which tenant, what key", { timeout: 60_000 }, () => {
  it("the oldest demo tenant when there are several; its owner; every scope", async () => {
    const db = testDb ? testDb.db : (await freshDatabase()).db;
    const scratch = PG ? undefined : db;
    try {
      // A fresh tenant set of its own on PostgreSQL (the describe blocks above share the database):
      // the CLI's run() picks the oldest demo tenant of the whole database.
      const a = (await loadFixture(db, demoFixture())).tenants.demo!;
      const b = (await loadFixture(db, demoFixture())).tenants.demo!;
      await db.prisma.tenant.update({ where: { id: b.id }, data: { createdAt: new Date("2000-01-01T00:00:00Z") } });
      // Older still, but not the demo: its name without the demo's owner, and the owner's e-mail under another name.
      const f = fixture(tenant("acme"), tenant("lookalike"));
      f.tenants[1]!.name = DEMO_TENANT_NAME;
      f.tenants[0]!.users![0]!.email = DEMO_OWNER_EMAIL;
      const look = await loadFixture(db, f);
      await db.prisma.tenant.updateMany({
        where: { id: { in: [look.tenants.acme!.id, look.tenants.lookalike!.id] } },
        data: { createdAt: new Date("1999-01-01T00:00:00Z") },
      });
      const keys = await db.prisma.apiKey.count();
      const out = (await run(db, ["demo-key"])) as DemoKey;
      expect(out.tenantId).toBe(b.id);
      expect(out.ownerId).toBe(b.users.ana);
      expect(out.curl).toBe(curlLine(out.key, localBaseUrl(loadConfig().host, loadConfig().port)));
      expect(await db.prisma.apiKey.count()).toBe(keys + 1);
      const row = await db.prisma.apiKey.findFirstOrThrow({ where: { id: out.id } });
      expect(row).toMatchObject({ tenantId: b.id, ownerId: b.users.ana, expiresAt: null, revokedAt: null });
      expect([...row.scopes].sort()).toEqual([...ALL_SCOPES].sort());
      expect(a.id).not.toBe(b.id);
    } finally {
      await scratch?.close();
    }
  });

  it("demo-key takes no argument (a usage error, exit 2) and is listed in help", async () => {
    expect(USAGE).toContain("\n  demo-key\n");
    const r = await admin(["demo-key", "extra"], opEnv("usage"));
    expect(r).toMatchObject({ code: 2, stdout: "" });
    expect(ownLines(r.stderr).join("\n")).toBe(`demo-key: wrong number of arguments (1 given, 0 expected)\n${USAGE}`);
  });

  it("the base URL of the curl line: a wildcard HOST as loopback, IPv6 in brackets", () => {
    expect(localBaseUrl("127.0.0.1", 3000)).toBe("http://127.0.0.1:3000");
    expect(localBaseUrl("0.0.0.0", 8080)).toBe("http://127.0.0.1:8080");
    expect(localBaseUrl("::", 3000)).toBe("http://[::1]:3000");
    expect(localBaseUrl("::1", 3000)).toBe("http://[::1]:3000");
    expect(localBaseUrl("api.internal", 3000)).toBe("http://api.internal:3000");
  });
});

describe("LOG_FORMAT", { timeout: 60_000 }, () => {
  it("is validated like the other variables: a bad value stops the start with one line naming it, exit 1", async () => {
    expect(loadConfig({ LOG_FORMAT: "pretty" }).logFormat).toBe("pretty");
    expect(loadConfig({ LOG_FORMAT: "json" }).logFormat).toBe("json");
    expect(loadConfig({}).logFormat).toBeUndefined();
    expect(() => loadConfig({ LOG_FORMAT: "JSON" })).toThrow(ConfigError);
    const { command, args } = serviceCommand();
    const child = spawn(command, args, {
      cwd: ROOT,
      env: opEnv("bad-format", { LOG_FORMAT: "xml" }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    leftovers.push(child.pid!);
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((r) => child.on("close", r));
    expect(err).toBe(
      'LOG_FORMAT must be one of pretty, json (unset: pretty on a terminal, JSON otherwise), got "xml"\n',
    );
    expect(out).toBe("");
    expect(code).toBe(1);
  });

  /**
   * A script logging three records through createLogger(format), its stdout a pipe or (through script(1)) a terminal.
   */
  function logScript(
    format: string | undefined,
    terminal: boolean,
  ): Promise<{ out: string; err: string; code: number | null }> {
    const script = `import { createRequire } from "node:module";
      import { createLogger } from ${JSON.stringify(path.join(ROOT, "server/logger.ts"))};
      const logger = createLogger("info", ${JSON.stringify(format)});
      logger.info({ n: 1 }, "hello");
      logger.error({ err: new Error("boom") }, "failed");
      logger.warn({ err: "just a string" }, "warned");
      const loaded = Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes("/node_modules/pino-pretty/"));
      process.stderr.write("pino-pretty loaded: " + loaded + "\\n");`;
    const argv = [process.execPath, "--import", "tsx", "--input-type=module", "-e", script];
    const quoted = argv.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" ");
    const child = terminal
      ? spawn("script", ["-qec", `${quoted} 2>${path.join(dir, "tty-stderr")}`, "/dev/null"], {
          cwd: ROOT,
          env: opEnv(undefined),
          stdio: ["ignore", "pipe", "pipe"],
        })
      : spawn(argv[0]!, argv.slice(1), { cwd: ROOT, env: opEnv(undefined), stdio: ["ignore", "pipe", "pipe"] });
    leftovers.push(child.pid!);
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    return new Promise((resolve) =>
      child.on("close", async (code) => {
        if (terminal)
          err = await import("node:fs/promises").then((fs) => fs.readFile(path.join(dir, "tty-stderr"), "utf8"));
        resolve({ out: stripAnsi(out).replace(/\r/g, ""), err, code });
      }),
    );
  }

  it("pretty goes through the same destination: a closed pipe ends logging with one notice, never a hang at exit", async () => {
    const { exit, stderr } = await logIntoClosedPipe(`"info", "pretty"`, leftovers);
    expect(exit, stderr).toBe(0);
    expect(stderr).toContain("log output closed (EPIPE): no more log lines are written");
  });

  it("json (and unset on a pipe): one JSON object a line, pino-pretty not even loaded", async () => {
    for (const format of ["json", undefined]) {
      const r = await logScript(format, false);
      expect(r.code, r.err).toBe(0);
      const lines = r.out
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines.map((l) => l.msg)).toEqual(["hello", "failed", "warned"]);
      expect(lines[0]).toMatchObject({ level: 30, n: 1, time: expect.any(Number) });
      expect(lines[1]).toMatchObject({
        level: 50,
        err: { type: "Error", message: "boom", stack: expect.stringContaining("Error: boom\n") },
      });
      expect(r.err).toContain("pino-pretty loaded: false");
    }
  });

  it("pretty (and unset on a terminal): one line a record — local time, level, message, fields — an error's stack indented below", async () => {
    for (const [format, terminal] of [
      ["pretty", false],
      [undefined, true],
    ] as const) {
      const r = await logScript(format, terminal);
      expect(r.code, r.err).toBe(0);
      const lines = r.out.trim().split("\n");
      expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: hello \{"n":1\}$/);
      expect(lines[1]).toMatch(
        /^\[\d\d:\d\d:\d\d\.\d{3}\] ERROR: failed \{"err":\{"type":"Error","message":"boom"\}\}$/,
      );
      expect(lines[2]).toBe("    Error: boom");
      expect(lines[3]).toMatch(/^ {8}at /);
      expect(lines.at(-1)).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] WARN: warned \{"err":"just a string"\}$/);
      expect(r.err).toContain("pino-pretty loaded: true");
    }
  });
});

// `npm run studio` without DATABASE_URL: Prisma Studio on the embedded database, through the SQL socket
// of the process that owns the folder (server/db/sql-socket.ts, server/admin/studio.ts). Studio's own
// backend is asked (POST /bff, its query procedure), as its page asks it.
describe.skipIf(PG)("npm run studio on the embedded database", { timeout: 240_000 }, () => {
  const studioCount = async (port: number, table: string) => {
    const r = await fetch(`http://127.0.0.1:${port}/bff`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        procedure: "query",
        query: { sql: `SELECT count(*)::int AS n FROM "${table}"`, parameters: [] },
      }),
    });
    const [error, rows] = (await r.json()) as [unknown, { n: number }[]];
    expect(error).toBeNull();
    return rows[0]!.n;
  };
  const startStudio = async (env: NodeJS.ProcessEnv) =>
    onFreePort(async (port) => {
      const studio = spawnNpm(["run", "--silent", "studio", "--", "--port", String(port), "--browser", "none"], env);
      leftovers.push(studio.child.pid!);
      expect(await waitReady(`http://127.0.0.1:${port}/`, studio, 90_000), `${studio.out()}\n${studio.err()}`).toBe(
        true,
      );
      return { studio, port };
    });
  const stopStudio = async (studio: Spawned) => {
    const tree = descendants(studio.child.pid!);
    studio.child.kill("SIGTERM");
    await studio.exited;
    expect(await until(() => tree.every((p) => !running(p.pid)), 20_000)).toBe(true);
  };

  it("while the service runs: Studio and psql through its SQL socket, the service writing meanwhile", async () => {
    await seedEmbeddedFolder(path.join(dir, "studio"));
    const svc = await startService(opEnv("studio", { CHECKPOINT_DISABLE: "1" }));
    try {
      const key = /API key \(shown once\): (crm_\S+)/.exec(svc.out())![1]!;
      await until(() => svc.out().includes("embedded database over SQL"), 5_000);
      const line = records(svc.out()).find((r) => r.msg.startsWith("embedded database over SQL"))!;
      const psqlUrl = line.sql as string;
      expect(line.msg).toBe(`embedded database over SQL: npm run studio, or psql '${psqlUrl}' (one client at a time)`);
      expect(psqlUrl).toMatch(
        /^postgresql:\/\/postgres@127\.0\.0\.1:\d+\/postgres\?sslmode=disable&gssencmode=disable$/,
      );
      const total = async () =>
        (
          (await (await fetch(`${svc.url}/public/v1/leads?limit=1`, { headers: { "X-API-Key": key } })).json()) as {
            total: number;
          }
        ).total;
      const leads = await total();
      expect(leads).toBeGreaterThan(0);
      // psql, with the URL the service printed.
      const psql = spawnSync("psql", [psqlUrl, "-Atc", 'SELECT count(*) FROM "Lead"'], {
        encoding: "utf8",
        timeout: 30_000,
      });
      expect(psql.status, psql.stderr).toBe(0);
      expect(Number(psql.stdout.trim())).toBe(leads);

      const { studio, port } = await startStudio(opEnv("studio", { CHECKPOINT_DISABLE: "1" }));
      expect(studio.err()).toContain(`through the service holding it (pid ${svc.child.pid})`);
      expect(await studioCount(port, "Lead")).toBe(leads);
      // The service writes while Studio is connected; Studio reads the write.
      const created = await fetch(`${svc.url}/public/v1/leads`, {
        method: "POST",
        headers: { "X-API-Key": key, "Content-Type": "application/json" },
        body: JSON.stringify({ customerName: "Seen In Studio", customerPhone: "+34600000099" }),
      });
      expect(created.status).toBe(201);
      expect(await studioCount(port, "Lead")).toBe(leads + 1);
      expect(await total()).toBe(leads + 1);
      await stopStudio(studio);
      expect((await fetch(`${svc.url}/healthz`)).status).toBe(200);
    } finally {
      expect(await svc.stop()).toBe(0);
    }
  });

  it("with no service running: Studio opens the folder itself, and frees it when it ends", async () => {
    const env = opEnv("studio", { CHECKPOINT_DISABLE: "1" });
    const { studio, port } = await startStudio(env);
    expect(studio.err()).toContain("held by this process until Studio ends");
    expect(await studioCount(port, "Tenant")).toBe(1);
    await stopStudio(studio);
    // The folder is free again: the admin CLI opens it.
    const r = await admin(["demo-key"], env);
    expect(r.code, r.stderr).toBe(0);
  });
});
