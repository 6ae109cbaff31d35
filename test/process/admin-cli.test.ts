// The admin CLI says why, each command line run as `npm run --silent admin -- …` runs it (server/admin/cli.ts
// execute(): what main() writes and the code it exits with; the process itself, through npm, in
// test/process/admin-cli-pipe.test.ts, test/process/operator.test.ts and test/unit/admin-cli-usage.test.ts):
// every failure prints the first non-empty line of the
// real cause on stderr — the database's own message for a database error (a Prisma error's first
// line is empty) — exits non-zero and changes nothing; a usage error opens no database (the usage
// texts themselves: test/unit/admin-cli-usage.test.ts); create-key refuses an --expires-at in the past or
// unparsable; an unknown tenant is "no such tenant" for create-key, set-plan and set-tenant-limits.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadFixture, type TenantIds } from "../../server/admin/fixture.js";
import { openPglite, openPostgres, type Database } from "../../server/db/client.js";
import { directBaseUrl, freshDatabase, onServer, withDatabase, type TestDb } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { databaseLine, execute } from "../../server/admin/cli.js";
import { PROGRESS_AFTER_MS } from "../../server/admin/progress.js";
import { loadConfig } from "../../server/config.js";
import { wakeupChannel } from "../../server/wakeups.js";
import { Redis } from "ioredis";
import { until } from "../helpers/processes.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-admin-cli-"));
let pgDb: TestDb | undefined;
let env: NodeJS.ProcessEnv;
let acme: TenantIds;
let other: TenantIds;
const NO_TENANT = "00000000-0000-4000-8000-0000000000aa";

/** The CLI's environment: this process's without database settings, then the test database's. */
function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "silent" };
  for (const k of ["DATABASE_URL", "DIRECT_DATABASE_URL", "PGLITE_DATA_DIR", "NODE_OPTIONS"]) delete e[k];
  if (pgDb) Object.assign(e, { DATABASE_URL: pgDb.url, DIRECT_DATABASE_URL: pgDb.directUrl });
  else e.PGLITE_DATA_DIR = path.join(dir, "db");
  return { ...e, ...extra };
}

/**
 * The CLI's command line run as main() runs it (server/admin/cli.ts
 * execute), in this process: its exit code and output.
 */
const admin = async (args: string[], e: NodeJS.ProcessEnv = env) => {
  const r = await execute(args, e);
  return { code: r.code, stdout: r.out, stderr: r.err };
};

/** What a verb that succeeded prints on stderr: the one line naming the database it used. */
const usedLine = (e: NodeJS.ProcessEnv) =>
  e.DATABASE_URL
    ? `database: ${e.DATABASE_URL} (DATABASE_URL)\n`
    : `database: the embedded PGlite folder ${e.PGLITE_DATA_DIR} (DATABASE_URL is not set)\n`;
let databaseUsed: string;

/** Runs a refused verb: exit 1, nothing on stdout, exactly `line` on stderr. */
async function refused(args: string[], line: string, e: NodeJS.ProcessEnv = env) {
  const r = await admin(args, e);
  expect(r.stderr, args.join(" ")).toBe(`${line}\n`);
  expect(r.stdout).toBe("");
  expect(r.code).toBe(1);
}

/** The database the CLI writes (PGlite: opened only while no CLI process holds it). */
async function withDb<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  if (pgDb) return fn(pgDb.db);
  const db = await openPglite(env.PGLITE_DATA_DIR!);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Everything the verbs under test could change. */
const snapshot = () =>
  withDb(async (db) => ({
    tenants: await db.prisma.tenant.findMany({
      orderBy: { id: "asc" },
      select: { id: true, plan: true, rateLimitPerMinute: true, rateLimitPerDay: true, updatedAt: true },
    }),
    keys: await db.prisma.apiKey.findMany({
      orderBy: { id: "asc" },
      select: { id: true, expiresAt: true, revokedAt: true },
    }),
    planLimits: await db.prisma.planLimit.findMany({ orderBy: { plan: "asc" } }),
    messages: await db.prisma.message.count(),
  }));

beforeAll(async () => {
  if (process.env.DATABASE_URL) pgDb = await freshDatabase();
  env = cliEnv();
  databaseUsed = usedLine(env);
  const ids = await withDb(async (db) => {
    if (!pgDb) {
      const { migrate } = await import("../../server/db/migrate.js");
      await migrate(db.sql);
    }
    return loadFixture(db, fixture(tenant("acme"), tenant("other")));
  });
  acme = ids.tenants.acme!;
  other = ids.tenants.other!;
}, 120_000);
afterAll(async () => {
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe("admin CLI: usage", { timeout: 120_000 }, () => {
  it("a usage or argument error does not open (or migrate, or create) the database", async () => {
    let e: NodeJS.ProcessEnv;
    let untouched: () => Promise<boolean>;
    let drop = async () => {};
    if (pgDb) {
      const name = `empty_${Date.now().toString(36)}`;
      await onServer(`CREATE DATABASE ${name}`);
      const url = withDatabase(directBaseUrl()!, name);
      e = cliEnv({ DATABASE_URL: url, DIRECT_DATABASE_URL: url });
      untouched = async () => {
        const db = await openPostgres(url, { max: 1 });
        try {
          return (
            (
              await db.sql.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")
            )[0]!.n === 0
          );
        } finally {
          await db.close();
        }
      };
      drop = () => onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } else {
      const folder = path.join(dir, "never-created");
      e = cliEnv({ PGLITE_DATA_DIR: folder });
      untouched = async () => !existsSync(folder);
    }
    try {
      expect((await admin(["frobnicate"], e)).code).toBe(2);
      await refused(["set-plan", "not-a-uuid", "pro"], 'TENANT_ID must be a UUID, got "not-a-uuid"', e);
      await refused(
        ["create-key", NO_TENANT, NO_TENANT, "all", "--expires-at", "2001-01-01T00:00:00Z"],
        '--expires-at must be in the future, got "2001-01-01T00:00:00Z"',
        e,
      );
      expect(await untouched()).toBe(true);
    } finally {
      await drop();
    }
  });
});

describe("admin CLI: refusals say why and change nothing", { timeout: 180_000 }, () => {
  it("create-key refuses an --expires-at in the past or unparsable", async () => {
    const before = await snapshot();
    const k = ["create-key", acme.id, acme.users.ana!, "all"];
    await refused(
      [...k, "--expires-at", "2020-01-01T00:00:00Z"],
      '--expires-at must be in the future, got "2020-01-01T00:00:00Z"',
    );
    await refused(
      [...k, "--expires-at=tomorrow"],
      '--expires-at must be an ISO 8601 date-time with an offset (e.g. 2026-11-20T08:00:00Z), got "tomorrow"',
    );
    await refused(
      [...k, "--expires-at", "2030-01-01T00:00:00"],
      "--expires-at must be an ISO 8601 date-time with an offset (e.g. 2026-11-20T08:00:00Z), got " +
        '"2030-01-01T00:00:00"',
    );
    expect(await snapshot()).toEqual(before);
  });

  it("an unknown tenant is 'no such tenant' (create-key, set-plan, set-tenant-limits); a user of another tenant is 'no such user in that tenant'", async () => {
    const before = await snapshot();
    await refused(["create-key", NO_TENANT, acme.users.ana!, "all"], "no such tenant");
    await refused(["set-plan", NO_TENANT, "starter"], "no such tenant");
    await refused(["set-tenant-limits", NO_TENANT, "10", "100"], "no such tenant");
    await refused(["set-tenant-limits", NO_TENANT, "clear"], "no such tenant");
    await refused(["create-key", acme.id, other.users.ana!, "all"], "no such user in that tenant");
    await refused(["revoke-key", NO_TENANT], "no such key");
    expect(await snapshot()).toEqual(before);
  });

  it("a database error prints the database's message (not 'failed'), exit 1, nothing changed", async () => {
    // One statement per exec: Citus refuses DDL in a multi-statement string.
    await withDb(async (db) => {
      await db.sql.exec(
        `CREATE FUNCTION h9_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'tablespace ` +
          `quota exceeded (test)'; END $$`,
      );
      await db.sql.exec(`CREATE TRIGGER h9_refuse BEFORE UPDATE ON "Tenant" FOR EACH ROW EXECUTE FUNCTION h9_refuse()`);
      await db.sql.exec(`CREATE TRIGGER h9_refuse BEFORE INSERT ON "ApiKey" FOR EACH ROW EXECUTE FUNCTION h9_refuse()`);
    });
    try {
      const before = await snapshot();
      await refused(["set-plan", acme.id, "starter"], "tablespace quota exceeded (test)");
      await refused(
        ["create-key", acme.id, acme.users.ana!, "all", "--expires-at", "2099-01-01T00:00:00Z"],
        "tablespace quota exceeded (test)",
      );
      await refused(["set-tenant-limits", acme.id, "10", "100"], "tablespace quota exceeded (test)");
      expect(await snapshot()).toEqual(before);
      // At LOG_LEVEL=debug the same line comes first, then the error with its stack.
      const r = await admin(["set-plan", acme.id, "starter"], { ...env, LOG_LEVEL: "debug" });
      expect(r.code).toBe(1);
      expect(r.stderr.split("\n")[0]).toBe("tablespace quota exceeded (test)");
      expect(r.stderr).toMatch(/PrismaClientKnownRequestError[\s\S]*\n\s+at /);
    } finally {
      await withDb(async (db) => {
        for (const drop of [
          `DROP TRIGGER h9_refuse ON "Tenant"`,
          `DROP TRIGGER h9_refuse ON "ApiKey"`,
          `DROP FUNCTION h9_refuse()`,
        ])
          await db.sql.exec(drop);
      });
    }
  });

  it("configuration and connection errors: the variable and the cause, as at the service's start", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    await refused(
      ["set-plan", acme.id, "pro"],
      `cannot connect to DATABASE_URL (127.0.0.1:${port}): connection refused`,
      cliEnv({ DATABASE_URL: `postgresql://postgres:pw@127.0.0.1:${port}/x`, DIRECT_DATABASE_URL: "" }),
    );
    await refused(
      ["set-plan", acme.id, "pro"],
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"',
      cliEnv({ LOG_LEVEL: "verbose" }),
    );
  });

  it("the accepted forms still work: a future --expires-at, then the refusals above left the data as it was", async () => {
    const before = await snapshot();
    const r = await admin([
      "create-key",
      acme.id,
      acme.users.ana!,
      "tenant:leads.read",
      "--expires-at",
      "2099-01-01T00:00:00+02:00",
    ]);
    expect(r.stderr).toBe(databaseUsed);
    expect(r.code).toBe(0);
    const made = JSON.parse(r.stdout);
    expect(Object.keys(made).sort()).toEqual(["id", "key", "prefix"]);
    const after = await snapshot();
    expect(after.keys).toHaveLength(before.keys.length + 1);
    expect(after.keys.find((k) => k.id === made.id)!.expiresAt!.toISOString()).toBe("2098-12-31T22:00:00.000Z");
    expect(after.tenants).toEqual(before.tenants);
  });
});

describe("admin CLI: which database it used, and a long load's progress", { timeout: 180_000 }, () => {
  it("a verb that succeeded names on stderr, in one line, the database it used; stdout keeps its JSON", async () => {
    const r = await admin(["set-plan", acme.id, "pro"]);
    const document = `${JSON.stringify({ id: acme.id, plan: "pro" })}\n`;
    expect([r.code, r.stdout, r.stderr]).toEqual([0, document, databaseUsed]);
    // The password of DATABASE_URL (userinfo or query) never shows.
    const databaseUrl = "postgresql://app:s3cret@db.internal:5432/crm?sslpassword=k3y";
    expect(databaseLine({ ...loadConfig(cliEnv()), databaseUrl })).toBe(
      "database: postgresql://app:***@db.internal:5432/crm?sslpassword=*** (DATABASE_URL)",
    );
    const embedded = { ...loadConfig(cliEnv()), databaseUrl: undefined, dataDir: "rel/db" };
    expect(databaseLine(embedded)).toBe(
      `database: the embedded PGlite folder ${path.resolve("rel/db")} (DATABASE_URL is not set)`,
    );
    // A failure keeps its one line: no database line.
    const failed = await admin(["set-plan", NO_TENANT, "pro"]);
    expect([failed.code, failed.stderr]).toEqual([1, "no such tenant\n"]);
  });

  // Not a terminal, nothing but the database line: test/process/admin-cli-pipe.test.ts, test/unit/edge-bounds.test.ts.
  it("load: its progress (rows, rate) on a terminal once it has run PROGRESS_AFTER_MS", async () => {
    const file = path.join(dir, "progress.json");
    const t = tenant("progress", {
      contacts: Array.from({ length: 30 }, (_, i) => ({ ref: `c${i}`, phone: `+3461${1_000_000 + i}` })),
      leads: Array.from({ length: 40 }, (_, i) => ({ ref: `l${i}`, customerName: `L ${i}` })),
    });
    writeFileSync(file, JSON.stringify(fixture(t)));
    // A clock that moves PROGRESS_AFTER_MS at each reading: the first statement's rows are shown.
    let clock = 0;
    const now = () => (clock += PROGRESS_AFTER_MS);
    const written: string[] = [];
    const terminal = { isTTY: true, write: (s: string) => written.push(s) };
    const r = await execute(["load", file], env, { stderr: terminal, now });
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out).tenants.progress.leads).toHaveProperty("l39");
    expect(r.err).toBe(databaseUsed);
    expect(written.length).toBeGreaterThanOrEqual(2);
    expect(written[0]).toMatch(/^\r\x1b\[2Kload: 30 rows in \d+ s \(\d+ rows\/s\)$/); // the contacts' statement
    expect(written.at(-1)).toMatch(/^\r\x1b\[2Kload: 70 rows in \d+ s \(\d+ rows\/s\)\n$/);
  });
});

// A verb that changes a tenant's objects, or what a waiting key is checked against, wakes the
// tenant's long-polls and subscriptions on every instance through Redis, as the service's writes do
// (server/wakeups.ts): heard here as a subscriber of the tenants' channels.
describe.runIf(process.env.DATABASE_URL && process.env.REDIS_URL)(
  "admin CLI: wake-ups of the changes feed's waiters",
  { timeout: 120_000 },
  () => {
    it("load wakes each loaded tenant; set-plan and revoke-key wake the key's tenant", async () => {
      const heard: string[] = [];
      const sub = new Redis(process.env.REDIS_URL!);
      try {
        await sub.psubscribe(wakeupChannel("*"));
        sub.on("pmessage", (_p: string, channel: string) => heard.push(channel));
        const file = path.join(dir, "wake.json");
        writeFileSync(file, JSON.stringify(fixture(tenant("woken"))));
        const loaded = await execute(["load", file], env);
        expect(loaded.code, loaded.err).toBe(0);
        const woken = JSON.parse(loaded.out).tenants.woken.id as string;
        expect(await until(() => heard.includes(wakeupChannel(woken)), 5_000, 20)).toBe(true);
        const plan = await execute(["set-plan", other.id, "enterprise"], env);
        expect(plan.code, plan.err).toBe(0);
        expect(await until(() => heard.includes(wakeupChannel(other.id)), 5_000, 20)).toBe(true);
        heard.length = 0;
        const revoked = await execute(["revoke-key", acme.apiKeys.full!.id], env);
        expect(revoked.code, revoked.err).toBe(0);
        expect(await until(() => heard.includes(wakeupChannel(acme.id)), 5_000, 20)).toBe(true);
        // A verb that changes nothing a waiter reads wakes no one: a new key of acme's, then a verb
        // that wakes `other` (one subscriber connection: messages arrive in the order published).
        heard.length = 0;
        expect((await execute(["create-key", acme.id, acme.users.ana!, "all"], env)).code).toBe(0);
        expect((await execute(["set-tenant-limits", other.id, "100", "1000"], env)).code).toBe(0);
        expect(await until(() => heard.includes(wakeupChannel(other.id)), 5_000, 20)).toBe(true);
        expect(heard).toEqual([wakeupChannel(other.id)]);
      } finally {
        sub.disconnect();
      }
    });
  },
);
