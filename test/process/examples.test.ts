// The examples the README points to, type-checked and RUN against a live service:
// - examples/internal-app/digest.ts: an internal team's daily pipeline digest over /trpc
//   (createTRPCClient<AppRouter> from client/trpc.d.ts, httpBatchLink), on a fixture whose day is known;
// - examples/rest-client.mts: the README's typed REST client example, on the demo tenant
//   (server/admin/demo.ts, what the first `npm start` loads), with the ids it finds itself;
// - the README shows both as they are: its "Typed client" block is the example file.
// The service is the real app on an ephemeral port (embedded database, or PostgreSQL + Redis with
// DATABASE_URL/REDIS_URL); the examples run as separate processes, as a user runs them (tsx).
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoFixture } from "../../server/admin/demo.js";
import { ROOT } from "../../scripts/ensure-build.js";
import { seedEmbeddedFolder, startApp, type TestApp } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";

const execute = promisify(execFile);
const TSC = path.join(ROOT, "node_modules/typescript/bin/tsc");

type Ids = Awaited<ReturnType<TestApp["load"]>>["tenants"][string];
let app: Awaited<ReturnType<typeof startApp>>;
let pipe: Ids;
let demo: Ids;

beforeAll(async () => {
  app = await startApp();
  const day = (h: number, m = 0, d = 20) => new Date(Date.UTC(2026, 10, d, h, m)).toISOString();
  const loaded = await app.load(
    fixture(
      tenant("pipe", {
        contacts: [{ ref: "c", fullName: "Carla Gómez", phone: "+34600000001" }],
        leads: [
          { ref: "a", customerName: "Ada", stage: "new", createdAt: day(8) },
          { ref: "b", customerName: "Bo", stage: "new", createdAt: day(12) },
          { ref: "c", customerName: "Cy", stage: "won", createdAt: day(23, 59) },
          { ref: "old", customerName: "Di", stage: "new", createdAt: day(23, 59, 19) },
          { ref: "next", customerName: "Ed", stage: "won", createdAt: day(0, 0, 21) },
        ],
        appointments: [
          {
            ref: "v",
            assignedTo: "ana",
            title: "Viewing",
            appointmentType: "visit",
            startsAt: day(15, 30),
            endsAt: day(16),
          },
          {
            ref: "w",
            assignedTo: "ana",
            title: "Call back",
            appointmentType: "call",
            startsAt: day(9),
            endsAt: day(9, 30),
            status: "cancelled",
          },
          {
            ref: "x",
            assignedTo: "ana",
            title: "Tomorrow",
            appointmentType: "visit",
            startsAt: day(10, 0, 21),
            endsAt: day(11, 0, 21),
          },
        ],
        tickets: [
          {
            ref: "t1",
            subject: "Broken link in listing",
            createdBy: "ana",
            contact: "c",
            comments: [{ author: "ana", body: "Looking into it" }],
            createdAt: day(7),
          },
          { ref: "t2", subject: "Old and done", status: "closed", createdBy: "ana", contact: "c" },
          { ref: "t3", subject: "Waiting for the owner", status: "pending", createdBy: "bob", contact: "c" },
        ],
      }),
    ),
  );
  pipe = loaded.tenants.pipe!;
  demo = (await app.load(demoFixture())).tenants.demo!;
}, 120_000);
afterAll(() => app?.close());

/** Runs an example as a user does (tsx), with the service's base URL and a key. */
async function runExample(
  file: string,
  key: string,
  args: string[] = [],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, CRM_URL: app.url, CRM_API_KEY: key };
  delete env.NODE_OPTIONS;
  return execute(process.execPath, ["--import", "tsx", file, ...args], { cwd: ROOT, env, timeout: 60_000 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}

const remaining = async (key: string) =>
  Number((await app.request("GET", "/public/v1/me", { key })).headers.get("x-ratelimit-remaining"));

describe("examples/internal-app (the daily pipeline digest over /trpc)", () => {
  it("prints the day's new leads by stage, appointments and open tickets; its four calls are each counted", {
    timeout: 120_000,
  }, async () => {
    const key = pipe.apiKeys.full!.key;
    const before = await remaining(key);
    const out = await runExample("examples/internal-app/digest.ts", key, ["2026-11-20"]);
    expect(out.stderr).toBe("");
    expect(out.code).toBe(0);
    expect(out.stdout.trim().split("\n")).toEqual([
      `Pipeline digest for 2026-11-20 (UTC) — tenant ${pipe.id}, plan pro`,
      "",
      "New leads: 3",
      `  stage ${pipe.stages.new}: 2`,
      `  stage ${pipe.stages.won}: 1`,
      "",
      "Appointments: 2",
      "  09:00–09:30 UTC  Call back (call, cancelled)",
      "  15:30–16:00 UTC  Viewing (visit, scheduled)",
      "",
      "Open tickets: 1",
      "  Broken link in listing — 1 comment(s), opened 2026-11-20",
    ]);
    // me.get + three lists: four calls, each counted (then the request that reads the quota).
    expect(await remaining(key)).toBe(before - 4 - 1);
  });

  it("says what went wrong with the first reason of the error", { timeout: 60_000 }, async () => {
    const refused = await runExample("examples/internal-app/digest.ts", pipe.apiKeys.none!.key, ["2026-11-20"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "digest: PERMISSION_DENIED (HTTP 403): This key lacks the scope tenant:leads.read",
    );
    const bad = await runExample("examples/internal-app/digest.ts", "crm_nope", ["2026-11-20"]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^digest: INVALID_CREDENTIALS \(HTTP 401\): /);
    const day = await runExample("examples/internal-app/digest.ts", pipe.apiKeys.full!.key, ["20-11-2026"]);
    expect(day.code).toBe(2);
    expect(day.stderr.trim()).toBe('digest: the day must be YYYY-MM-DD, got "20-11-2026"');
  });
});

describe("examples/internal-app/live.ts (changes as they happen, over the tRPC subscription)", () => {
  /** The example running: its output so far, and its exit. */
  function startLive(key: string, args: string[]) {
    const env: NodeJS.ProcessEnv = { ...process.env, CRM_URL: app.url, CRM_API_KEY: key };
    delete env.NODE_OPTIONS;
    const child = spawn(process.execPath, ["--import", "tsx", "examples/internal-app/live.ts", ...args], {
      cwd: ROOT,
      env,
    });
    const out = { stdout: "", stderr: "" };
    child.stdout.on("data", (d: Buffer) => (out.stdout += d));
    child.stderr.on("data", (d: Buffer) => (out.stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    return { out, exited, kill: () => child.kill("SIGKILL") };
  }
  const started = async (out: { stderr: string }) => {
    for (let i = 0; i < 600 && !out.stderr.includes("live: following"); i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(out.stderr).toContain("live: following");
  };
  const createLead = (key: string, name: string) =>
    app.request("POST", "/public/v1/leads", { key, body: { customerName: name, customerPhone: "+34600000099" } });

  it("prints a change as it happens; a later run from the printed position prints what came after, once", {
    timeout: 120_000,
  }, async () => {
    const key = pipe.apiKeys.full!.key;
    const first = startLive(key, ["--pages", "1"]);
    try {
      await started(first.out);
      const lead = await createLead(key, "Live One");
      expect(await first.exited).toBe(0);
      expect(first.out.stdout).toMatch(new RegExp(`^\\S+Z lead upsert ${lead.body.id}\n$`));
    } finally {
      first.kill();
    }
    const at = /live: at (\S+)/.exec(first.out.stderr)![1]!;
    const missed = await createLead(key, "While It Was Off");
    const second = startLive(key, ["--since", at, "--pages", "1"]);
    try {
      expect(await second.exited).toBe(0);
      expect(second.out.stdout).toMatch(new RegExp(`^\\S+Z lead upsert ${missed.body.id}\n$`));
    } finally {
      second.kill();
    }
  });

  it("a key that cannot read the feed: the envelope's code, exit 1", { timeout: 60_000 }, async () => {
    const run = startLive(pipe.apiKeys.none!.key, ["--pages", "1"]);
    try {
      expect(await run.exited).toBe(1);
      expect(run.out.stderr).toContain("live: PERMISSION_DENIED");
    } finally {
      run.kill();
    }
  });
});

describe("examples/rest-client.mts (the README's typed REST client example)", () => {
  it("runs as written against the demo tenant, with the ids it finds; a second run replays its keyed writes", {
    timeout: 120_000,
  }, async () => {
    const key = demo.apiKeys.demo!.key;
    const first = await runExample("examples/rest-client.mts", key);
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const lines = first.stdout.trim().split("\n");
    const newest = await app.db.prisma.lead.findFirst({ where: { tenantId: demo.id }, orderBy: { createdAt: "desc" } });
    expect(lines[0]).toBe(`1. leads: 2, next dateFrom ${newest!.createdAt.toISOString()}`);
    expect(lines[1]).toBe("2. contact: 201 +34611000222");
    expect(lines[2]).toMatch(/^3\. booked: 201 \d{4}-\d\d-\d\dT\d\d:\d\d:00(?:\.000)?Z$/);
    expect(lines.slice(3)).toEqual([
      "4. tickets of the contact: 1, comments: 2",
      "5. message: 201 sent",
      // The demo's WhatsApp channel points at 127.0.0.1:9: stored, 201, delivery failed.
      "5. template: 201 failed",
    ]);
    const carla = await app.db.prisma.contact.findMany({ where: { tenantId: demo.id, phone: "+34611000222" } });
    expect(carla.map((c) => c.fullName)).toEqual(["Carla Díaz"]);
    const booked = await app.db.prisma.appointment.findMany({ where: { tenantId: demo.id, title: "Flat viewing" } });
    expect(booked).toHaveLength(1);
    expect(lines[2]).toContain(booked[0]!.startsAt.toISOString().slice(0, 16));

    const second = await runExample("examples/rest-client.mts", key);
    expect(second.code).toBe(0);
    const again = second.stdout.trim().split("\n");
    expect(again[1]).toBe("2. contact: 201 +34611000222"); // the Idempotency-Key replays the same contact
    expect(again.at(-1)).toBe("5. template: 201 failed");
    expect(await app.db.prisma.contact.count({ where: { tenantId: demo.id, phone: "+34611000222" } })).toBe(1);
    // The next free slot
    expect(await app.db.prisma.appointment.count({ where: { tenantId: demo.id, title: "Flat viewing" } })).toBe(2);
  });

  it("is the README's example, as written there", () => {
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
    const file = readFileSync(path.join(ROOT, "examples/rest-client.mts"), "utf8");
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks).toContain(file);
  });
});

describe('README.md, "Internal tRPC API"', () => {
  it("its snippet type-checks against client/trpc.d.ts alone and runs as written", { timeout: 120_000 }, async () => {
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Internal tRPC API"));
    const code = section.match(/```ts\n([\s\S]*?)```/)![1]!;
    expect(code).toContain('import type { AppRouter } from "./trpc.js";');
    const dir = mkdtempSync(path.join(ROOT, "examples/.readme-"));
    try {
      // The app's copy of client/trpc.d.ts, as the README says; the internal app's compiler options.
      writeFileSync(path.join(dir, "trpc.d.ts"), readFileSync(path.join(ROOT, "client/trpc.d.ts")));
      writeFileSync(path.join(dir, "snippet.mts"), code);
      writeFileSync(
        path.join(dir, "tsconfig.json"),
        JSON.stringify({ extends: "../internal-app/tsconfig.json", include: [], files: ["snippet.mts"] }),
      );
      await expect(execute(process.execPath, [TSC, "-p", dir], { cwd: ROOT })).resolves.toBeDefined();
      const out = await runExample(path.join(dir, "snippet.mts"), demo.apiKeys.demo!.key);
      expect(out.stderr).toBe("");
      expect(out.code).toBe(0);
      const leads = await app.db.prisma.lead.count({ where: { tenantId: demo.id } });
      const openTickets = await app.db.prisma.ticket.count({ where: { tenantId: demo.id, status: "open" } });
      expect(out.stdout.trim().split("\n")).toEqual([
        `pro ${leads} ${openTickets}`,
        "phone: not a possible phone number for its region VALIDATION_ERROR",
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("examples/in-process/main.ts (the core called in-process)", () => {
  it("lists, creates with an Idempotency-Key and replays, and reports a stale If-Match's 412, on a database of its own", {
    timeout: 120_000,
  }, async () => {
    // Its own database: a throwaway embedded one (its demo loaded, as on a first `npm start`), or the
    // test's PostgreSQL database with one of its keys.
    const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: "warn" };
    delete env.NODE_OPTIONS;
    // (The embedded folder is the run's migrated one, no tenant yet: the migrations are tested elsewhere.)
    const folder = mkdtempSync(path.join(tmpdir(), "crm-in-process-"));
    if (app.testDb.url)
      Object.assign(env, {
        DATABASE_URL: app.testDb.url,
        DIRECT_DATABASE_URL: app.testDb.directUrl,
        CRM_API_KEY: demo.apiKeys.demo!.key,
      });
    else {
      await seedEmbeddedFolder(folder);
      Object.assign(env, { PGLITE_DATA_DIR: folder });
    }
    const run = execute(process.execPath, ["--import", "tsx", "examples/in-process/main.ts"], {
      cwd: ROOT,
      env,
      timeout: 100_000,
    });
    const { stdout, stderr } = await run.finally(() => rmSync(folder, { recursive: true, force: true }));
    expect(stderr).toBe("");
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^leads: \d+ in all; the newest: /);
    const id = /^created lead ([0-9a-f-]{36}) \(version 1\), replayed: false$/.exec(lines[1]!)?.[1];
    expect(id).toBeDefined();
    expect(lines.slice(2)).toEqual([
      `the same call again: lead ${id}, replayed: true`,
      "stale If-Match: PRECONDITION_FAILED (HTTP 412)",
    ]);
  });
});
