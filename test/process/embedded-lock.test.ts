// One owner per embedded database folder (server/db/pglite-lock.ts). A second process
// on the folder of a running `npm start` — another `npm start`, the admin CLI, `npm run db:migrate` —
// refuses at once with one line naming the holder and the way out, exits non-zero and changes
// nothing; a lock left by a killed holder (kill -9) does not block the next start; `memory://` is
// never locked, nor is anything with DATABASE_URL. The lock is PGlite's and these tests give every
// process an embedded folder of their own, so they run the same on either leg: the embedded leg runs
// them; the PostgreSQL leg, that a DATABASE_URL configuration takes no lock.
import { spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuild, ROOT } from "../../scripts/ensure-build.js";
import { openDatabase, openPglite } from "../../server/db/client.js";
import {
  breakLock,
  currentLock,
  EmbeddedDatabaseInUse,
  FOREIGN_EXPIRY_MS,
  LOCK_FILE,
  lockEmbeddedDatabase,
  processStart,
} from "../../server/db/pglite-lock.js";
import { seedEmbeddedFolder } from "../helpers/app.js";
import { fixture, tenant } from "../helpers/fixtures.js";
import {
  baseEnv,
  freePort,
  freePorts,
  killAll,
  onFreePort,
  portTaken,
  running,
  spawnNpm,
  until,
  waitReady,
} from "../helpers/processes.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-lock-"));
const leftovers: number[] = [];
afterAll(() => {
  killAll(leftovers);
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
const folder = () => path.join(dir, `f${++n}`);
/** The folder's held lock files (generations, and an earlier version's crm-owner.lock), highest first. */
const heldFiles = (f: string) =>
  readdirSync(f)
    .filter((name) => name === LOCK_FILE || /^crm-owner\.\d+\.lock$/.test(name))
    .sort((a, b) => Number(/\.(\d+)\./.exec(b)?.[1] ?? 0) - Number(/\.(\d+)\./.exec(a)?.[1] ?? 0));
const lockOf = (f: string) =>
  JSON.parse(readFileSync(path.join(f, heldFiles(f)[0]!), "utf8")) as Record<string, unknown>;
/** No live holder and no held lock file left. */
const free = (f: string) => currentLock(f) === undefined && heldFiles(f).length === 0;
/** Writes a lock as an earlier version (or another host) left it: crm-owner.lock. */
const writeLegacy = (f: string, text: string) => {
  mkdirSync(f, { recursive: true });
  writeFileSync(path.join(f, LOCK_FILE), text);
};
const line = (f: string, pid: number, command: string) =>
  `embedded database ${f}/ is in use by pid ${pid} (${command}); stop it, or set DATABASE_URL`;

/** A pid that no longer exists (a process that ran and exited). */
function deadPid(): number {
  const r = spawnSync(process.execPath, ["-e", ""]);
  return r.pid!;
}

describe.skipIf(!!process.env.DATABASE_URL)("the lock (in process)", () => {
  it("the first taker holds it; a second taker gets the one line naming the holder; released, it can be taken again", () => {
    const f = folder();
    const lock = lockEmbeddedDatabase(f);
    const held = lockOf(f);
    expect(held).toMatchObject({
      pid: process.pid,
      start: processStart(process.pid),
      host: hostname(),
      nonce: expect.any(String),
    });
    let err: unknown;
    try {
      lockEmbeddedDatabase(f);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(EmbeddedDatabaseInUse);
    const msg = (err as Error).message;
    expect(msg).toBe(line(f, process.pid, String(held.command)));
    expect(msg).not.toContain("\n");
    expect(lockOf(f)).toEqual(held); // the refusal changed nothing
    lock.release();
    expect(free(f)).toBe(true);
    lock.release(); // idempotent
    const again = lockEmbeddedDatabase(f);
    expect(lockOf(f).nonce).not.toBe(held.nonce);
    again.release();
  });

  it("a folder inside the working directory is shown relative to it (as `.data/`), one outside absolute", () => {
    const rel = path.join("scratch", `lock-test-${process.pid}-${Date.now()}`); // scratch/ is git-ignored
    const abs = path.resolve(rel);
    const lock = lockEmbeddedDatabase(abs);
    try {
      expect(() => lockEmbeddedDatabase(abs)).toThrow(
        new RegExp(`^embedded database ${rel}/ is in use by pid ${process.pid} `),
      );
    } finally {
      lock.release();
      rmSync(abs, { recursive: true, force: true });
    }
    const outside = folder(); // under the system's temporary folder
    const held = lockEmbeddedDatabase(outside);
    try {
      expect(() => lockEmbeddedDatabase(outside)).toThrow(new RegExp(`^embedded database ${outside}/ is in use`));
    } finally {
      held.release();
    }
  });

  const stale: [string, (h: Record<string, unknown>) => Record<string, unknown>][] = [
    ["its pid is gone (kill -9)", (h) => ({ ...h, pid: deadPid() })],
    ["its pid was reused (another start time)", (h) => ({ ...h, start: String(Number(h.start ?? 0) + 12345) })],
    ["the machine rebooted since (another boot id)", (h) => ({ ...h, boot: "00000000-0000-0000-0000-000000000000" })],
  ];
  for (const [what, make] of stale)
    it(`a stale lock is taken over: ${what}`, () => {
      const f = folder();
      const l = lockEmbeddedDatabase(f);
      const mine = lockOf(f);
      l.release();
      rmSync(f, { recursive: true });
      // pid reuse: a live process (this one) recorded with another start time.
      writeLegacy(f, JSON.stringify({ ...make(mine), nonce: "stale" }));
      const lock = lockEmbeddedDatabase(f);
      expect(lockOf(f)).toMatchObject({ pid: process.pid, nonce: expect.not.stringMatching(/^stale$/) });
      expect(readdirSync(f)).toEqual(["crm-owner.1.lock"]); // the next generation; the stale one removed
      lock.release();
      expect(readdirSync(f)).toEqual(["crm-owner.1.released"]);
    });

  it("a lock file left empty (its holder died while writing it) is taken over", () => {
    const f = folder();
    writeLegacy(f, "");
    const lock = lockEmbeddedDatabase(f);
    expect(lockOf(f).pid).toBe(process.pid);
    lock.release();
  });

  it("a lock of a live process is respected, even one of another user (EPERM)", () => {
    const f = folder();
    const initStart = processStart(1);
    writeLegacy(f, JSON.stringify({ pid: 1, start: initStart, host: hostname(), command: "npm start", nonce: "init" }));
    expect(() => lockEmbeddedDatabase(f)).toThrow(line(f, 1, "npm start"));
    expect(lockOf(f).nonce).toBe("init");
  });

  it("a lock from another host (a shared volume): respected while its heartbeat is fresh, the line naming break-lock; stale once it is old", () => {
    const f = folder();
    writeLegacy(
      f,
      JSON.stringify({ pid: deadPid(), start: "1", host: "old-container-7f9c", command: "npm start", nonce: "remote" }),
    );
    expect(() => lockEmbeddedDatabase(f)).toThrow(
      new RegExp(
        `^embedded database ${f}/ is in use by pid \\d+ \\(npm start\\) on host old-container-7f9c \\(heartbeat \\d+ s ago, stale after 10 min\\); stop it \\(if that host is gone: npm run --silent admin -- break-lock\\), or set DATABASE_URL$`,
      ),
    );
    expect(lockOf(f).nonce).toBe("remote");
    // No heartbeat for longer than FOREIGN_EXPIRY_MS (the container was recreated after a kill -9): taken over.
    const old = new Date(Date.now() - FOREIGN_EXPIRY_MS - 60_000);
    utimesSync(path.join(f, LOCK_FILE), old, old);
    const lock = lockEmbeddedDatabase(f);
    expect(lockOf(f)).toMatchObject({ pid: process.pid, host: hostname() });
    lock.release();
  });

  it("break-lock takes over another host's lock at once (then releases it); a live holder on this host is refused", () => {
    const f = folder();
    writeLegacy(
      f,
      JSON.stringify({ pid: 4242, start: "1", host: "old-container-7f9c", command: "npm start", nonce: "remote" }),
    );
    expect(breakLock(f)).toMatchObject({ pid: 4242, host: "old-container-7f9c" });
    expect(free(f)).toBe(true);
    expect(breakLock(f)).toBeNull(); // nothing held any more
    const mine = lockEmbeddedDatabase(f);
    try {
      expect(() => breakLock(f)).toThrow(EmbeddedDatabaseInUse);
      expect(lockOf(f).pid).toBe(process.pid);
    } finally {
      mine.release();
    }
  });

  it("N processes racing on a stale lock: exactly one owner (each holds what it took until all have tried)", async () => {
    const f = folder();
    writeLegacy(
      f,
      JSON.stringify({ pid: deadPid(), start: "1", host: hostname(), command: "npm start", nonce: "stale" }),
    );
    const N = 8;
    // A barrier instead of a deadline: each process says it is at the race point (its imports done),
    // waits for "go", tries, says what it got, and holds it until "end" — however long the 8 starts
    // take on a busy machine. The waits sleep 1 ms at a time (Atomics.wait), so waiting costs no CPU
    // that the others' starts need, and the racers leave the barrier within about a millisecond.
    const barrier = mkdtempSync(path.join(dir, "barrier-"));
    const at = (name: string) => path.join(barrier, name);
    const script = (i: number) => `import { existsSync, writeFileSync } from "node:fs";
      import { lockEmbeddedDatabase } from ${JSON.stringify(path.join(ROOT, "server/db/pglite-lock.ts"))};
      const nap = new Int32Array(new SharedArrayBuffer(4));
      const waitFor = (file) => { while (!existsSync(file)) Atomics.wait(nap, 0, 0, 1); };
      writeFileSync(${JSON.stringify(at(`ready.${i}`))}, "");
      waitFor(${JSON.stringify(at("go"))});
      let out;
      try { lockEmbeddedDatabase(${JSON.stringify(f)}); out = "owner"; }
      catch (e) { out = e.name === "EmbeddedDatabaseInUse" ? "refused" : "error " + e.message; }
      writeFileSync(${JSON.stringify(at(`result.${i}`))}, out);
      waitFor(${JSON.stringify(at("end"))});
      process.exit(0);`;
    const children = Array.from({ length: N }, (_, i) => {
      const args = ["--import", "tsx", "--input-type=module", "-e", script(i)];
      const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
      leftovers.push(child.pid!);
      let err = "";
      child.stderr.on("data", (d: Buffer) => (err += d.toString()));
      const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
      return { child, err: () => err, closed };
    });
    const all = (name: string) => children.every((_, i) => existsSync(at(`${name}.${i}`)));
    const gone = () => children.filter((c) => c.child.exitCode !== null).map((c) => c.err().trim());
    try {
      const ready = await until(() => all("ready") || gone().length > 0, 240_000, 50);
      expect(ready, "every process at the race point").toBe(true);
      expect(gone(), "exited before the race").toEqual([]);
      writeFileSync(at("go"), "");
      expect(await until(() => all("result") || gone().length > 0, 60_000, 20), "every process tried").toBe(true);
      const results = children.map((_, i) => {
        const file = at(`result.${i}`);
        return existsSync(file) ? readFileSync(file, "utf8") : "none";
      });
      expect(
        results.filter((r) => r === "owner"),
        results.join(" | "),
      ).toHaveLength(1);
      expect(
        results.filter((r) => r === "refused"),
        results.join(" | "),
      ).toHaveLength(N - 1);
    } finally {
      writeFileSync(at("end"), "");
      await Promise.all(children.map((c) => c.closed));
    }
    expect(free(f)).toBe(true); // the owner's exit released it
  }, 360_000);

  it("openPglite: a second open of a folder refuses before touching it; closing releases; memory:// is never locked", async () => {
    const f = folder();
    await seedEmbeddedFolder(f); // a database there already: opening it is the subject, not initdb
    const db = await openPglite(f);
    try {
      const before = readdirSync(f).sort();
      await expect(openPglite(f)).rejects.toThrow(line(f, process.pid, String(lockOf(f).command)));
      expect(readdirSync(f).sort()).toEqual(before);
    } finally {
      await db.close();
    }
    expect(free(f)).toBe(true);
    // memory://: nothing to own (no folder "memory:" appears), so no refusal either, held or not.
    const held = lockEmbeddedDatabase(f);
    const mem = await openPglite("memory://");
    await mem.close();
    held.release();
    expect(existsSync(path.join(process.cwd(), "memory:"))).toBe(false);
  }, 180_000);
});

describe.runIf(process.env.DATABASE_URL)("the lock with DATABASE_URL", () => {
  it("no lock is taken, whatever PGLITE_DATA_DIR says", async () => {
    const f = folder();
    const held = lockEmbeddedDatabase(f); // the folder is even held
    try {
      const db = await openDatabase({ databaseUrl: process.env.DATABASE_URL, dataDir: f });
      await db.ping();
      await db.close();
      expect(lockOf(f).pid).toBe(process.pid);
    } finally {
      held.release();
    }
  });
});

// Processes on the embedded database: the same whatever backend the leg runs the suite on, so they
// run in the embedded leg only.
describe.skipIf(!!process.env.DATABASE_URL)("processes on one folder", { timeout: 300_000 }, () => {
  let f: string;
  let env: NodeJS.ProcessEnv;
  let tenantId: string;
  let key: string;

  beforeAll(async () => {
    await ensureBuild();
    f = folder();
    await seedEmbeddedFolder(f); // migrated already: the lock is the subject, not initdb
    env = { ...baseEnv(), PGLITE_DATA_DIR: f, NO_DEMO: "1" };
    const file = path.join(dir, "fixture.json");
    writeFileSync(file, JSON.stringify(fixture(tenant("acme"))));
    const r = spawnSync("npm", ["run", "--silent", "admin", "--", "load", file], {
      cwd: ROOT,
      env,
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(r.status, r.stderr).toBe(0);
    const ids = JSON.parse(r.stdout).tenants.acme;
    tenantId = ids.id;
    key = ids.apiKeys.full.key;
    expect(free(f)).toBe(true); // the CLI released it
  }, 180_000);

  /** `npm start` on the folder, ready; its node's pid (the holder). */
  async function start() {
    // On another port when the one picked was taken before the service bound it.
    return onFreePort(async (port) => {
      const svc = spawnNpm(["start"], { ...env, PORT: String(port) });
      leftovers.push(svc.child.pid!);
      const url = `http://127.0.0.1:${port}`;
      expect(await waitReady(`${url}/readyz`, svc), svc.err()).toBe(true);
      const holder = lockOf(f);
      leftovers.push(Number(holder.pid));
      return { svc, url, holder, port };
    });
  }

  /**
   * Runs `npm run --silent <args>` to its end — asynchronously: a blocked event loop here would let
   * fetch reuse a keep-alive socket the server has meanwhile closed.
   */
  async function npmRun(args: string[]) {
    const r = spawnNpm(["run", "--silent", ...args], env);
    leftovers.push(r.child.pid!);
    const { code } = await r.exited;
    return { code, stdout: r.out(), stderr: r.err() };
  }

  it("npm start holds it: a second npm start, the admin CLI and db:migrate refuse with the line, exit non-zero, change nothing", async () => {
    const a = await start();
    expect(a.holder).toMatchObject({ command: "npm start" });
    const expected = line(f, Number(a.holder.pid), "npm start");
    expect(running(Number(a.holder.pid))).toBe(true);
    // A write through the holder, acknowledged: it must survive everything below.
    const lead = await fetch(`${a.url}/public/v1/leads`, {
      method: "POST",
      headers: { "X-API-Key": key, "Content-Type": "application/json" },
      body: JSON.stringify({ customerName: "Kept Lead" }),
    });
    expect(lead.status).toBe(201);
    const leadId = ((await lead.json()) as { id: string }).id;

    // A second server (another port): refuses at once, before listening.
    const port2 = await freePort();
    const b = spawnNpm(["start"], { ...env, PORT: String(port2) });
    leftovers.push(b.child.pid!);
    const bExit = await Promise.race([b.exited, new Promise<null>((r) => setTimeout(() => r(null), 60_000))]);
    expect(bExit, b.err()).not.toBeNull();
    expect(bExit!.code).not.toBe(0);
    const bLines = b.err().split("\n");
    expect(bLines, b.err()).toContain(expected);
    expect(b.err()).not.toMatch(/^\s+at /m); // no stack
    expect(
      await fetch(`http://127.0.0.1:${port2}/healthz`).then(
        () => "answered",
        () => "refused",
      ),
    ).toBe("refused");

    // The admin CLI: one line on stderr, nothing on stdout, exit 1.
    const setPlan = await npmRun(["admin", "--", "set-plan", tenantId, "starter"]);
    expect(setPlan.stderr).toBe(`${expected}\n`);
    expect(setPlan.stdout).toBe("");
    expect(setPlan.code).toBe(1);
    // The migrator: the same.
    const migrate = await npmRun(["db:migrate"]);
    expect(migrate.stderr).toBe(`${expected}\n`);
    expect(migrate.stdout).toBe("");
    expect(migrate.code).not.toBe(0);

    // Nothing changed: the holder's lock is the same, the holder still serves the old plan.
    expect(lockOf(f)).toEqual(a.holder);
    const me = await fetch(`${a.url}/public/v1/me`, { headers: { "X-API-Key": key } });
    expect(((await me.json()) as { plan: string }).plan).toBe("pro");

    // Stopped, the holder releases the folder; what it acknowledged is there, the refused change is not.
    process.kill(a.svc.child.pid!, "SIGTERM");
    expect((await a.svc.exited).code).toBe(0);
    expect(free(f)).toBe(true);
    const db = await openPglite(f);
    try {
      expect((await db.prisma.tenant.findUniqueOrThrow({ where: { id: tenantId } })).plan).toBe("pro");
      expect(await db.prisma.lead.count({ where: { tenantId, id: leadId } })).toBe(1);
    } finally {
      await db.close();
    }
    // Free again: the CLI now applies the change.
    const applied = await npmRun(["admin", "--", "set-plan", tenantId, "starter"]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(JSON.parse(applied.stdout)).toMatchObject({ plan: "starter" });
  });

  it("a holder killed with SIGKILL leaves a stale lock that does not block the next start", async () => {
    const a = await start();
    const holderPid = Number(a.holder.pid);
    process.kill(holderPid, "SIGKILL");
    await a.svc.exited; // npm ends with its child
    await until(() => !running(holderPid), 5_000);
    expect(lockOf(f)).toEqual(a.holder); // left behind
    const b = await start();
    expect(Number(b.holder.pid)).not.toBe(holderPid);
    expect(b.holder.nonce).not.toBe(a.holder.nonce);
    expect((await fetch(`${b.url}/readyz`)).status).toBe(200);
    process.kill(b.svc.child.pid!, "SIGTERM");
    expect((await b.svc.exited).code).toBe(0);
    expect(free(f)).toBe(true);
    // The folder came through the kill: the last change (the plan set after the previous test) is there.
    const db = await openPglite(f);
    try {
      expect((await db.prisma.tenant.findUniqueOrThrow({ where: { id: tenantId } })).plan).toBe("starter");
    } finally {
      await db.close();
    }
  });

  it("two servers started together on a fresh folder: exactly one runs, the other refuses", async () => {
    const g = folder();
    // Two ports of their own (distinct); both started again when one of them was taken meanwhile (the
    // lock's winner then exits for its port, and the loser has already refused: nothing holds the folder).
    const { svcs, refused } = await onFreePort(async () => {
      const ports = await freePorts(2);
      const svcs = ports.map((p) => spawnNpm(["start"], { ...env, PGLITE_DATA_DIR: g, PORT: String(p) }));
      for (const s of svcs) leftovers.push(s.child.pid!);
      // Each either exits or gets ready (waitReady gives up when its process exits).
      const readyz = (i: number) => `http://127.0.0.1:${ports[i]}/readyz`;
      await Promise.all(svcs.map((s, i) => Promise.race([s.exited, waitReady(readyz(i), s)])));
      const refused = svcs.filter((s) => s.child.exitCode !== null || s.child.signalCode !== null);
      const said = svcs.map((s) => s.err()).join("\n");
      if (refused.length === 2 && portTaken(said)) throw new Error(said);
      return { svcs, refused };
    });
    expect(refused, svcs.map((s) => s.err()).join("\n---\n")).toHaveLength(1);
    expect(refused[0]!.child.exitCode).not.toBe(0);
    const winner = svcs.find((s) => !refused.includes(s))!;
    const holder = lockOf(g);
    leftovers.push(Number(holder.pid));
    expect(refused[0]!.err()).toContain(line(g, Number(holder.pid), "npm start"));
    process.kill(winner.child.pid!, "SIGTERM");
    expect((await winner.exited).code).toBe(0);
  });
});
