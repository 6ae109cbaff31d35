// The operator contract (shared/contracts/operations.md): the admin CLI verbs through
// `npm run --silent admin`, a failing load that persists nothing, and `npm start` on the embedded
// default printing a key that works, then stopping gracefully on SIGTERM.
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuild } from "../../scripts/ensure-build.js";
import { run } from "../../server/admin/cli.js";
import { openPglite, type Database } from "../../server/db/client.js";
import { freshDatabase, seedEmbeddedFolder, type TestDb } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import { onFreePort } from "../helpers/processes.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-op-"));
let pgDb: TestDb | undefined;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  await ensureBuild(); // `npm run admin` would rebuild a stale dist/ and say so on stderr
  env = { ...process.env, LOG_LEVEL: "silent" };
  delete env.DATABASE_URL;
  delete env.DIRECT_DATABASE_URL;
  if (process.env.DATABASE_URL) {
    pgDb = await freshDatabase();
    env.DATABASE_URL = pgDb.url;
    env.DIRECT_DATABASE_URL = pgDb.directUrl;
  } else {
    env.PGLITE_DATA_DIR = path.join(dir, "db");
    await seedEmbeddedFolder(env.PGLITE_DATA_DIR); // migrated already: the verbs are the subject, not initdb
  }
});
afterAll(async () => {
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

function admin(...args: string[]) {
  const r = spawnSync("npm", ["run", "--silent", "admin", "--", ...args], { env, encoding: "utf8", timeout: 60_000 });
  const stdout = r.stdout.trim();
  return { code: r.status, stdout, stderr: r.stderr.trim(), json: r.status === 0 ? JSON.parse(stdout) : undefined };
}

/**
 * The same verbs in-process (run() is what the CLI's main calls), for speed where the spawned path is already covered.
 */
async function adminInProcess(...args: string[]) {
  return withDb(async (db) => {
    try {
      return { code: 0, json: JSON.parse(JSON.stringify(await run(db, args))) };
    } catch (e) {
      return { code: 1, json: undefined, stderr: (e as Error).message };
    }
  });
}

/** Reads the database the CLI wrote (PGlite: only while no CLI process has it open). */
async function withDb<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  if (pgDb) return fn(pgDb.db);
  const db = await openPglite(env.PGLITE_DATA_DIR!);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

describe("admin CLI", { timeout: 180_000 }, () => {
  let ids: any;
  it("load prints the id map with raw keys", () => {
    const file = path.join(dir, "fixture.json");
    writeFileSync(
      file,
      JSON.stringify(
        fixture(
          tenant("acme", {
            contacts: [
              {
                ref: "bea",
                fullName: "Bea",
                phone: "+34600000001",
                email: "bea@example.test",
                country: "ES",
                lists: [],
              },
            ],
            conversations: [
              {
                ref: "c1",
                channel: "wa",
                identity: { externalId: "34600000001", name: "Bea", phone: "+34600000001", contact: "bea" },
                messages: [{ role: "user", content: "Hi!", createdAt: "2026-11-21T10:00:00Z" }],
              },
            ],
            leads: [
              {
                ref: "l1",
                customerName: "Bea",
                stage: "new",
                contact: "bea",
                conversation: "c1",
                createdAt: "2026-11-20T08:00:00Z",
              },
            ],
            appointments: [
              {
                ref: "a1",
                assignedTo: "ana",
                title: "Viewing",
                appointmentType: "visit",
                startsAt: "2026-12-01T10:00:00Z",
                endsAt: "2026-12-01T11:00:00Z",
                contact: "bea",
                lead: "l1",
              },
            ],
            tickets: [
              {
                ref: "t1",
                subject: "Broken",
                createdBy: "ana",
                assignedTo: "ana",
                contact: "bea",
                comments: [{ author: "ana", body: "Looking" }],
              },
            ],
          }),
        ),
      ),
    );
    const r = admin("load", file);
    expect(r.code, r.stderr).toBe(0);
    ids = r.json.tenants.acme;
    expect(ids.id).toMatch(/^[0-9a-f-]{36}$/);
    for (const k of [
      "users",
      "stages",
      "apiKeys",
      "channels",
      "templates",
      "contactLists",
      "contacts",
      "conversations",
      "identities",
      "leads",
      "appointments",
      "tickets",
    ])
      expect(ids).toHaveProperty(k);
    expect(ids.apiKeys.full).toMatchObject({
      id: expect.any(String),
      key: expect.stringMatching(/^crm_/),
      prefix: expect.stringMatching(/^crm_/),
    });
    expect(ids.identities.c1).toMatch(/^[0-9a-f-]{36}$/);
  });
  it("a failing load exits non-zero with a one-line reason and persists nothing", async () => {
    const file = path.join(dir, "bad.json");
    writeFileSync(
      file,
      JSON.stringify(fixture(tenant("broken", { leads: [{ ref: "l1", customerName: "X", stage: "nope" }] }))),
    );
    const r = admin("load", file);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toBe("");
    expect(r.stderr.split("\n")).toHaveLength(1);
    expect(r.stderr).toMatch(/stage/);
    const n = await withDb((db) => db.prisma.tenant.count({ where: { name: "Tenant broken" } }));
    expect(n).toBe(0);
    expect((await adminInProcess("load", path.join(dir, "missing.json"))).code).not.toBe(0);
  });
  it("create-key and revoke-key", async () => {
    const r = admin(
      "create-key",
      ids.id,
      ids.users.ana,
      "tenant:leads.read,tenant:tickets.manage",
      "--expires-at",
      "2030-01-01T00:00:00Z",
    );
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys(r.json).sort()).toEqual(["id", "key", "prefix"]);
    expect(r.json.key.startsWith(r.json.prefix)).toBe(true);
    const stored = await withDb((db) => db.prisma.apiKey.findFirst({ where: { id: r.json.id } }));
    expect(stored!.scopes).toEqual(["tenant:leads.read", "tenant:tickets.manage"]);
    expect(stored!.expiresAt!.toISOString()).toBe("2030-01-01T00:00:00.000Z");
    const v = await adminInProcess("revoke-key", r.json.id);
    expect(v.code, v.stderr).toBe(0);
    expect(v.json.id).toBe(r.json.id);
    expect(new Date(v.json.revokedAt).getTime()).toBeGreaterThan(0);
    expect((await adminInProcess("create-key", ids.id, ids.users.ana, "tenant:bogus.read")).code).not.toBe(0);
    expect((await adminInProcess("create-key", ids.id, "00000000-0000-4000-8000-000000000000", "all")).code).not.toBe(
      0,
    );
    expect((await adminInProcess("revoke-key", "00000000-0000-4000-8000-000000000000")).code).not.toBe(0);
  });
  it("set-plan, set-plan-limits, set-tenant-limits", async () => {
    expect((await adminInProcess("set-plan", ids.id, "enterprise")).json).toEqual({ id: ids.id, plan: "enterprise" });
    expect((await adminInProcess("set-plan", ids.id, "platinum")).code).not.toBe(0);
    expect((await adminInProcess("set-plan-limits", "pro", "200", "60000")).json).toEqual({
      plan: "pro",
      perMinute: 200,
      perDay: 60000,
    });
    expect((await adminInProcess("set-plan-limits", "pro", "-1", "5")).code).not.toBe(0);
    expect((await adminInProcess("set-tenant-limits", ids.id, "10", "100")).json).toEqual({
      id: ids.id,
      perMinute: 10,
      perDay: 100,
    });
    expect((await adminInProcess("set-tenant-limits", ids.id, "clear")).json).toEqual({
      id: ids.id,
      perMinute: null,
      perDay: null,
    });
    const t = await withDb((db) => db.prisma.tenant.findUnique({ where: { id: ids.id } }));
    expect(t).toMatchObject({ plan: "enterprise", rateLimitPerMinute: null, rateLimitPerDay: null });
  });
  it("inbound-message records a user message and prints the message object", async () => {
    const r = admin("inbound-message", ids.conversations.c1, "Still there?");
    expect(r.code, r.stderr).toBe(0);
    expect(Object.keys(r.json).sort()).toEqual([
      "content",
      "conversationId",
      "createdAt",
      "deliveryStatus",
      "id",
      "role",
      "updatedAt",
    ]);
    expect(r.json).toMatchObject({ conversationId: ids.conversations.c1, role: "user", content: "Still there?" });
    expect(Math.abs(new Date(r.json.createdAt).getTime() - Date.now())).toBeLessThan(60_000);
    const conv = await withDb((db) => db.prisma.conversation.findFirst({ where: { id: ids.conversations.c1 } }));
    expect(conv!.lastMessagePreview).toBe("Still there?");
    expect((await adminInProcess("inbound-message", "00000000-0000-4000-8000-000000000000", "x")).code).not.toBe(0);
  });
  it("unknown verb → non-zero", async () => {
    expect((await adminInProcess("frobnicate")).code).not.toBe(0);
  });
});

describe.skipIf(!!process.env.DATABASE_URL)("npm start on the embedded default", () => {
  it("loads the demo tenant, prints a working key and curl line, stops on SIGTERM", async () => {
    // On another port (and a fresh folder) when the one picked was taken before the service bound it.
    let attempt = 0;
    const { child, exited, port, deadline, key, out } = await onFreePort(async (port) => {
      const folder = path.join(dir, `start-${++attempt}`);
      const startEnv: NodeJS.ProcessEnv = {
        ...process.env,
        PORT: String(port),
        PGLITE_DATA_DIR: folder,
        LOG_LEVEL: "silent",
      };
      for (const v of ["DATABASE_URL", "DIRECT_DATABASE_URL", "REDIS_URL", "REDIS_CLUSTER_NODES", "METRICS_PORT"])
        delete startEnv[v];
      const child = spawn("npm", ["start"], { env: startEnv, stdio: ["ignore", "pipe", "pipe"], detached: true });
      let out = "";
      let err = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (err += d));
      const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
      const deadline = Date.now() + 45_000;
      let key: string | undefined;
      while (Date.now() < deadline && !key && child.exitCode === null) {
        key = /API key \(shown once\): (\S+)/.exec(out)?.[1];
        await new Promise((r) => setTimeout(r, 200));
      }
      if (!key && child.exitCode === null) process.kill(-child.pid!, "SIGKILL");
      expect(key, `${out}\n${err}`).toBeDefined();
      return { child, exited, port, deadline, key, out: () => out };
    });
    try {
      expect(out()).toContain(`curl -s -H 'X-API-Key: ${key}' http://127.0.0.1:${port}/public/v1/me`);
      let res: Response | undefined;
      while (Date.now() < deadline) {
        res = await fetch(`http://127.0.0.1:${port}/public/v1/me`, { headers: { "X-API-Key": key! } }).catch(
          () => undefined,
        );
        if (res) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(res!.status).toBe(200);
      expect(((await res!.json()) as { plan: string }).plan).toBe("pro");
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    } finally {
      process.kill(-child.pid!, "SIGTERM");
    }
    // npm itself dies of the signal (code null); what matters is that the service stops in time.
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r("timeout"), 10_000))]);
    expect(code).not.toBe("timeout");
  }, 90_000);
});
