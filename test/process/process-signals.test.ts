// Stops that reach the process: a supervisor signals the process it started — npm,
// for `npm start` and `npm run studio` — and the service stops as on a signal to node itself
// (graceful drain, exit 0), leaving no process behind and its port free within seconds. A closed
// standard output (`npm start 2>&1 | tee log`, then tee dies) never makes the service unkillable.
// Embedded leg: a temporary PGLITE_DATA_DIR; PostgreSQL leg (DATABASE_URL set): a fresh database.
// What does not depend on the database runs on one leg only: a closed standard output (the logger
// and the pipe) on the embedded leg, Prisma Studio (always on PostgreSQL) on the PostgreSQL leg, and
// `npm run dev` with SIGINT on one and SIGTERM on the other (npm start: both signals on both).
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuild, ROOT } from "../../scripts/ensure-build.js";
import { freshDatabase, seedEmbeddedFolder, type TestDb } from "../helpers/app.js";
import {
  baseEnv,
  descendants,
  killAll,
  logIntoClosedPipe,
  onFreePort,
  portFree,
  running,
  spawnNpm,
  until,
  waitReady,
} from "../helpers/processes.js";

/**
 * How long a stop may take, npm included: an idle service stops in
 * well under a second; the rest is room for a loaded 2-core machine.
 */
const STOP_MS = 20_000;
const embedded = !process.env.DATABASE_URL;
const dir = mkdtempSync(path.join(tmpdir(), "crm-signals-"));
let testDb: TestDb | undefined;
const leftovers: number[] = [];

beforeAll(async () => {
  await ensureBuild(); // `npm start`'s prestart then has nothing to build (it is still run: checked below)
  if (process.env.DATABASE_URL) testDb = await freshDatabase();
}, 120_000);
afterAll(async () => {
  killAll(leftovers);
  await testDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** The environment of one `npm start`: its own port and folder, or the test's PostgreSQL database. */
async function startEnv(port: number, extra: NodeJS.ProcessEnv = {}) {
  const env: NodeJS.ProcessEnv = { ...baseEnv(), PORT: String(port), NO_DEMO: "1", ...extra };
  if (testDb) Object.assign(env, { DATABASE_URL: testDb.url, DIRECT_DATABASE_URL: testDb.directUrl });
  else {
    env.PGLITE_DATA_DIR = path.join(dir, `db-${++n}`);
    await seedEmbeddedFolder(env.PGLITE_DATA_DIR); // migrated already: the stop is the subject, not the first start
  }
  return { env, port, url: `http://127.0.0.1:${port}` };
}

/** `npm start`, ready; with the pids of its process tree (npm's descendants) as they are now. */
async function startService(extra: NodeJS.ProcessEnv = {}, stdio?: Parameters<typeof spawnNpm>[2]) {
  // On another port when the one picked was taken before the service bound it.
  return onFreePort(async (picked) => {
    const { env, port, url } = await startEnv(picked, extra);
    const svc = spawnNpm(["start"], env, stdio);
    const npmPid = svc.child.pid!;
    leftovers.push(npmPid);
    const ready = await waitReady(`${url}/readyz`, svc);
    expect(ready, `${svc.out()}\n${svc.err()}`).toBe(true);
    const tree = descendants(npmPid);
    leftovers.push(...tree.map((p) => p.pid));
    return { svc, npmPid, port, url, tree };
  });
}

/** After a stop: npm and every process of its tree gone, and the port free, within 20 s of `since`. */
async function expectAllGone(npmPid: number, tree: { pid: number; cmd: string }[], port: number, since: number) {
  const gone = await until(
    async () => !running(npmPid) && tree.every((p) => !running(p.pid)) && (await portFree(port)),
    STOP_MS + 2_000,
  );
  const left = tree.filter((p) => running(p.pid)).map((p) => `${p.pid} ${p.cmd}`);
  expect(left, "processes left behind").toEqual([]);
  expect(gone).toBe(true);
  expect(Date.now() - since).toBeLessThanOrEqual(STOP_MS);
  expect(await portFree(port)).toBe(true);
}

describe("npm start: a signal to npm stops the service", { timeout: 180_000 }, () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal} to npm's pid: graceful shutdown (node got the signal), exit 0, no node left, port free within 20 s`, async () => {
      const { svc, npmPid, port, url, tree } = await startService();
      // exec: node is npm's child itself (no `sh -c` between that would die and orphan it).
      expect(tree.map((p) => p.cmd)).toEqual([expect.stringMatching(/^node .*dist\/server\/main\.js$/)]);
      expect(svc.out()).toContain("> node scripts/build.mjs --if-stale"); // prestart still runs
      expect((await fetch(`${url}/healthz`)).status).toBe(200);

      const at = Date.now();
      process.kill(npmPid, signal);
      const exit = await svc.exited;
      await expectAllGone(npmPid, tree, port, at);
      expect(exit, svc.err()).toMatchObject({ code: 0, signal: null });
      // The service's own graceful path ran, with the signal npm passed on.
      expect(svc.out()).toMatch(
        new RegExp(`"signal":"${signal}".*"msg":"shutting down: finishing in-flight requests"`),
      );
      expect(svc.out()).toContain('"msg":"stopped"');
    });
  }

  it("npm killed outright (SIGKILL, nothing passed on): node notices it is orphaned and stops gracefully", async () => {
    const { svc, npmPid, port, tree } = await startService();
    const at = Date.now();
    process.kill(npmPid, "SIGKILL");
    await svc.exited;
    await expectAllGone(npmPid, tree, port, at);
    // Its stdout is a pipe this test still reads: the stop went through shutdown().
    await until(() => svc.out().includes('"msg":"stopped"'), 2_000);
    expect(svc.out()).toMatch(/"signal":"parent exited".*"msg":"shutting down/);
    expect(svc.out()).toContain('"msg":"stopped"');
  });
});

describe("npm run dev: a signal to npm stops the service run from its sources", { timeout: 180_000 }, () => {
  for (const signal of [embedded ? "SIGINT" : "SIGTERM"] as const) {
    it(`${signal} to npm's pid: graceful shutdown, exit 0, no node (nor tsx) left, port free within 20 s`, async () => {
      const { svc, npmPid, port } = await onFreePort(async (picked) => {
        const { env, port, url } = await startEnv(picked);
        const svc = spawnNpm(["run", "dev"], env);
        leftovers.push(svc.child.pid!);
        expect(await waitReady(`${url}/readyz`, svc), `${svc.out()}\n${svc.err()}`).toBe(true);
        return { svc, npmPid: svc.child.pid!, port };
      });
      const tree = descendants(npmPid);
      leftovers.push(...tree.map((p) => p.pid));
      // exec, and tsx as node's loader (no tsx CLI process, which would run node as its own child);
      // below node only esbuild's service, which tsx's loader starts.
      expect(tree[0]?.cmd).toMatch(/^node .*--import tsx server\/main\.ts$/);
      expect(tree.slice(1).filter((p) => !/esbuild --service/.test(p.cmd))).toEqual([]);
      const at = Date.now();
      process.kill(npmPid, signal);
      const exit = await svc.exited;
      await expectAllGone(npmPid, tree, port, at);
      expect(exit, svc.err()).toMatchObject({ code: 0, signal: null });
      expect(svc.out()).toMatch(
        new RegExp(`"signal":"${signal}".*"msg":"shutting down: finishing in-flight requests"`),
      );
      expect(svc.out()).toContain('"msg":"stopped"');
    });
  }
});

describe.skipIf(embedded)("npm run studio: a signal to npm stops Prisma Studio", { timeout: 120_000 }, () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`${signal} to npm's pid: no process left, port free within 20 s`, async () => {
      const env: NodeJS.ProcessEnv = { ...baseEnv(), DATABASE_URL: process.env.DATABASE_URL };
      const { svc, npmPid, port } = await onFreePort(async (port) => {
        const svc = spawnNpm(["run", "studio", "--", "--port", String(port), "--browser", "none"], env);
        leftovers.push(svc.child.pid!);
        expect(await waitReady(`http://127.0.0.1:${port}/`, svc, 90_000), `${svc.out()}\n${svc.err()}`).toBe(true);
        return { svc, npmPid: svc.child.pid!, port };
      });
      const tree = descendants(npmPid);
      leftovers.push(...tree.map((p) => p.pid));
      // exec: Prisma's CLI is npm's child itself. (Besides it, Prisma may run its update check — a
      // detached child with a 5 s timeout, unless CHECKPOINT_DISABLE=1 — that must be gone in time too.)
      expect(tree[0]?.cmd).toMatch(/^node \S*prisma studio /);
      // A child caught between fork and exec, or exiting, has no command line yet (or no more): it
      // must be gone in time like the others, whatever it was going to be.
      for (const p of tree.slice(1)) expect(p.cmd).toMatch(/^$|prisma\/build\/child /);
      const at = Date.now();
      process.kill(npmPid, signal);
      await svc.exited;
      await expectAllGone(npmPid, tree, port, at);
    });
  }
});

describe.skipIf(!embedded)("a closed standard output (the log's reader died)", { timeout: 180_000 }, () => {
  it("npm start 2>&1 | reader that exits: the service keeps serving, then SIGTERM to npm stops it within 20 s", async () => {
    // Both streams into one pipe, as `2>&1 | tee log`; the reader is this process, which closes its end.
    const { svc, npmPid, port, url, tree } = await startService({}, ["ignore", "pipe", "pipe"]);
    svc.child.stdout!.destroy();
    svc.child.stderr!.destroy();
    // Every request writes an access log line: the first meets EPIPE.
    for (let i = 0; i < 30; i++) expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    expect((await fetch(`${url}/readyz`)).status).toBe(200);
    expect(tree.every((p) => running(p.pid))).toBe(true);
    const at = Date.now();
    process.kill(npmPid, "SIGTERM");
    const exit = await svc.exited;
    await expectAllGone(npmPid, tree, port, at);
    expect(exit).toMatchObject({ code: 0, signal: null });
  });

  it("the reader dies as the stop begins (log lines still queued at exit): exits within 20 s", async () => {
    // LOG_LEVEL=debug: shutdown writes several lines in a row, so some are queued when the process
    // exits and are flushed synchronously — into the broken pipe.
    const { svc, npmPid, port, tree } = await startService({ LOG_LEVEL: "debug" }, ["ignore", "pipe", "pipe"]);
    svc.child.stdout!.destroy();
    svc.child.stderr!.destroy();
    const at = Date.now();
    process.kill(npmPid, "SIGTERM");
    await svc.exited;
    await expectAllGone(npmPid, tree, port, at);
  });

  it("a reader that stops reading (the pipe fills up): requests are still served, and SIGTERM to npm stops it within 20 s", async () => {
    const { svc, npmPid, port, url, tree } = await startService({}, ["ignore", "pipe", "pipe"]);
    svc.child.stdout!.pause(); // never read again: a pipe holds 64 KiB
    svc.child.stdout!.removeAllListeners("data");
    // ~250 bytes of access log per request: 1,000 requests are ~4 pipes full.
    for (let i = 0; i < 100; i++) {
      const statuses = await Promise.all(
        Array.from({ length: 10 }, () => fetch(`${url}/healthz`).then((r) => r.status)),
      );
      expect(statuses.every((s) => s === 200)).toBe(true);
    }
    const at = Date.now();
    process.kill(npmPid, "SIGTERM");
    await svc.exited;
    await expectAllGone(npmPid, tree, port, at);
  });

  it("the logger: lines queued when the process exits into a closed pipe do not block the exit", async () => {
    // Two lines in a row (the second queued behind the first's write), then exit: pino's default
    // destination retried the queued write every 100 ms forever in its exit hook.
    const { exit, stderr } = await logIntoClosedPipe(`"info"`, leftovers);
    expect(exit, stderr).toBe(0);
    expect(stderr).toContain("log output closed (EPIPE): no more log lines are written");
  });

  it("the logger on a full pipe (a slow reader): never blocks the process, keeps every line in order, also those written just before exit", async () => {
    // ~900 KB of log while the reader stalls (a pipe holds 64 KiB): the rest waits in the process; a
    // timer still fires; then 100 more lines and exit at once, the pipe still full: what waits is
    // written at exit as the reader resumes.
    const script = `import { createLogger } from ${JSON.stringify(path.join(ROOT, "server/logger.ts"))};
      const logger = createLogger("info");
      const pad = "x".repeat(100);
      for (let i = 0; i < 6000; i++) logger.info({ i, pad }, "line");
      const t0 = Date.now();
      setTimeout(() => {
        process.stderr.write("lag " + (Date.now() - t0 - 10) + "\\n");
        for (let i = 6000; i < 6100; i++) logger.info({ i, pad }, "line");
        process.exit(0);
      }, 10);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    leftovers.push(child.pid!);
    const closed = new Promise<number | null>((r) => child.on("close", (c) => r(c)));
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    const chunks: Buffer[] = [];
    child.stdout.pause();
    const first = await new Promise<boolean>((r) => {
      child.stdout.once("readable", () => r(true));
      child.on("exit", () => r(false));
    });
    expect(first, err).toBe(true);
    // The stall: standard output is not read until the child's timer has fired and said so on
    // standard error (read all along). A process blocked on the full pipe could not run its timer
    // before the reader resumes: the line arriving during the stall is the proof (no time bound).
    const timerFiredWhileFull = await until(() => /lag -?\d+/.test(err), 30_000, 10);
    child.stdout.on("data", (d: Buffer) => chunks.push(d));
    child.stdout.resume();
    const code = await closed;
    expect(code, err).toBe(0);
    expect(timerFiredWhileFull, err).toBe(true); // the event loop was free while the pipe was full
    const lines = Buffer.concat(chunks)
      .toString()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { i: number });
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 6100 }, (_, i) => i));
  });

  it("LogDestination: what waits for a full pipe is bounded (beyond: dropped and counted, the rest in order)", async () => {
    const script = `import { LogDestination } from ${JSON.stringify(path.join(ROOT, "server/logger.ts"))};
      void process.stdout; // Node opens the pipe non-blocking, as the service's logger does
      const dest = new LogDestination(1, { maxPendingBytes: 20_000 });
      for (let i = 0; i < 300; i++) dest.write(JSON.stringify({ i, pad: "y".repeat(1000) }) + "\\n");
      process.stderr.write("dropped " + dest.dropped + "\\n");
      setTimeout(() => process.exit(0), 1500);`;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    leftovers.push(child.pid!);
    const closed = new Promise<number | null>((r) => child.on("close", (c) => r(c)));
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.stdout.pause();
    await new Promise<void>((r) => {
      const check = () => (/dropped/.test(err) ? r() : setTimeout(check, 20));
      check();
    });
    const chunks: Buffer[] = [];
    child.stdout.on("data", (d: Buffer) => chunks.push(d));
    child.stdout.resume();
    const code = await closed;
    expect(code, err).toBe(0);
    const dropped = Number(/dropped (\d+)/.exec(err)?.[1]);
    const got = Buffer.concat(chunks)
      .toString()
      .trim()
      .split("\n")
      .map((l) => (JSON.parse(l) as { i: number }).i);
    // What the pipe and the reader's stream buffer take before the reader stops (64–190 KiB seen: ~64–190
    // lines of ~1 KB) plus 20,000 bytes waiting (~19 lines) get through; the rest are dropped.
    expect(dropped).toBeGreaterThan(0);
    expect(got.length + dropped).toBe(300);
    expect(got).toEqual(Array.from({ length: got.length }, (_, i) => i));
  });
});
