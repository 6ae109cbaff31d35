// One owner per embedded database folder (issue 25 §1). PGlite runs PostgreSQL inside the process
// that opens the folder, with no lock of its own: a second process on the same folder (a second
// `npm start`, the admin CLI, `npm run db:migrate` beside a running server) works on its own copy of
// the pages and the two overwrite each other's writes — acknowledged writes are lost. So whoever
// opens a folder first takes `<folder>/crm-owner.lock`, and everyone else refuses at once, before
// PGlite is even loaded, with one line naming the holder and the way out:
//
//   embedded database .data/ is in use by pid 4242 (npm start); stop it, or set DATABASE_URL
//
// The lock file is created with O_EXCL and holds JSON: pid, the process's start time (/proc/<pid>/
// stat field 22, clock ticks since boot), the boot id, the host name, the command and when. A lock
// whose holder is gone — killed with SIGKILL, a crash, a reboot — is stale and is taken over:
// the pid no longer exists, or it exists but started at another time (the pid was reused), or the
// machine booted since. A lock from another host (a folder on a shared volume) cannot be checked
// and is respected; the line then says how to clear it. Released (deleted) when the database
// closes, and at the latest when the process exits.
//
// Not proper-lockfile: its staleness is an mtime refreshed by a timer, and PGlite runs its queries
// on the event loop (a fixture load or a migration blocks it for seconds), so a live holder would
// look stale and a second owner would take over; nor would it leave the holder's pid for the line.
// No flock(2) in Node without a native addon. Windows: no /proc; liveness is then the pid alone.
import { randomUUID } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, linkSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { npmScript } from "../config.js";

export const LOCK_FILE = "crm-owner.lock";

/** What the lock file says about its holder. */
export interface LockHolder {
  pid: number;
  /** Start time of the process (/proc/<pid>/stat field 22), null where there is no /proc. */
  start: string | null;
  /** /proc/sys/kernel/random/boot_id of the holder's machine, null where there is none. */
  boot: string | null;
  host: string;
  command: string;
  since: string;
  /** Unique per acquisition: tells this lock from a newer one at the same path. */
  nonce: string;
}

/** The refusal: its message is the one line to print (the CLIs and the service print it as is). */
export class EmbeddedDatabaseInUse extends Error {
  override name = "EmbeddedDatabaseInUse";
  constructor(
    message: string,
    readonly holder: LockHolder,
    readonly lockFile: string,
  ) {
    super(message);
  }
}

export interface EmbeddedDatabaseLock {
  readonly file: string;
  /** Deletes the lock file if it is still this one. Idempotent. */
  release(): void;
}

const held = new Set<EmbeddedDatabaseLock>();
let exitHook = false;

/**
 * Takes the folder's lock or throws EmbeddedDatabaseInUse. Creates the folder if it does not exist
 * (PGlite would). Synchronous: nothing else runs between the check and the claim.
 */
export function lockEmbeddedDatabase(dataDir: string): EmbeddedDatabaseLock {
  mkdirSync(dataDir, { recursive: true });
  const file = path.join(dataDir, LOCK_FILE);
  const me: LockHolder = {
    pid: process.pid,
    start: processStart(process.pid),
    boot: bootId(),
    host: hostname(),
    command: describeCommand(),
    since: new Date().toISOString(),
    nonce: randomUUID(),
  };
  const text = `${JSON.stringify(me)}\n`;
  // Each turn either claims the lock, refuses, or removes one stale lock: a few turns suffice unless
  // other processes keep claiming and dying in between.
  for (let attempt = 0; attempt < 8; attempt++) {
    if (create(file, text)) {
      const lock: EmbeddedDatabaseLock = {
        file,
        release() {
          if (!held.delete(lock)) return;
          removeIfOurs(file, me.nonce);
        },
      };
      held.add(lock);
      if (!exitHook) {
        exitHook = true;
        process.on("exit", () => {
          for (const l of [...held]) l.release();
        });
      }
      return lock;
    }
    const seen = readHolder(file);
    if (seen === "gone") continue; // released meanwhile: try again
    if (seen !== "unreadable" && holderAlive(seen)) throw new EmbeddedDatabaseInUse(inUseLine(dataDir, file, seen), seen, file);
    breakStale(file, seen === "unreadable" ? undefined : seen.nonce);
  }
  throw new Error(`embedded database ${shownDir(dataDir)} could not be locked (${LOCK_FILE} keeps changing); stop the other processes on it, or set DATABASE_URL`);
}

/** O_CREAT|O_EXCL, then the whole text: false if the file exists. */
function create(file: string, text: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, "wx", 0o644);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  }
  try {
    writeSync(fd, text);
  } catch (e) {
    closeSync(fd);
    unlinkSync(file);
    throw e;
  }
  closeSync(fd);
  return true;
}

/**
 * The holder recorded in the file: "gone" if there is no file, "unreadable" if it never becomes
 * valid JSON (a holder killed between creating the file and writing it; waits up to ~200 ms for a
 * holder that is writing it right now).
 */
function readHolder(file: string): LockHolder | "gone" | "unreadable" {
  for (let i = 0; i < 10; i++) {
    let raw: string;
    try {
      raw = readFileSync(file, "utf8");
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return "gone";
      throw e;
    }
    const holder = parseHolder(raw);
    if (holder) return holder;
    sleepMs(20);
  }
  return "unreadable";
}

function parseHolder(raw: string): LockHolder | undefined {
  try {
    const h = JSON.parse(raw) as Partial<LockHolder>;
    if (!Number.isSafeInteger(h.pid) || h.pid! <= 0 || typeof h.nonce !== "string") return undefined;
    return {
      pid: h.pid!,
      start: typeof h.start === "string" ? h.start : null,
      boot: typeof h.boot === "string" ? h.boot : null,
      host: typeof h.host === "string" ? h.host : "",
      command: typeof h.command === "string" ? h.command : "",
      since: typeof h.since === "string" ? h.since : "",
      nonce: h.nonce,
    };
  } catch {
    return undefined;
  }
}

/** Is the recorded holder still running? Unknowable for another host: then yes. */
export function holderAlive(h: LockHolder): boolean {
  if (h.host && h.host !== hostname()) return true;
  const boot = bootId();
  if (h.boot && boot && h.boot !== boot) return false; // the machine restarted since
  try {
    process.kill(h.pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ESRCH") return false;
    // EPERM: a process of another user has that pid; its start time below tells whether it is the holder.
  }
  const proc = procStat(h.pid);
  if (proc?.state === "Z") return false; // killed, not yet reaped by its parent
  if (h.start && proc && proc.start !== h.start) return false; // the pid was reused
  return true;
}

/**
 * Removes a stale lock without removing a fresh one: the file is renamed aside (atomic), and only if
 * it is still the stale holder's (its nonce) is it deleted; a lock someone else claimed in between
 * is put back.
 */
function breakStale(file: string, staleNonce: string | undefined): void {
  const aside = `${file}.${process.pid}.${randomUUID()}.stale`;
  try {
    renameSync(file, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  let raw = "";
  try {
    raw = readFileSync(aside, "utf8");
  } catch {
    // unreadable: treated as the stale one
  }
  const moved = parseHolder(raw);
  if (moved && moved.nonce !== staleNonce && holderAlive(moved)) {
    try {
      linkSync(aside, file); // put it back (fails if yet another process claimed the path meanwhile)
    } catch {
      // EEXIST: the path is claimed again; nothing better to do than leave it to that claim
    }
  }
  try {
    unlinkSync(aside);
  } catch {
    // already gone
  }
}

function removeIfOurs(file: string, nonce: string): void {
  try {
    const h = parseHolder(readFileSync(file, "utf8"));
    if (h?.nonce === nonce) unlinkSync(file);
  } catch {
    // gone already, or the folder was removed
  }
}

/** The line of the refusal. */
function inUseLine(dataDir: string, file: string, h: LockHolder): string {
  const who = `pid ${h.pid}${h.command ? ` (${h.command})` : ""}`;
  if (h.host && h.host !== hostname())
    return `embedded database ${shownDir(dataDir)} is in use by ${who} on host ${oneLine(h.host)}; stop it (if that host is gone, delete ${file}), or set DATABASE_URL`;
  return `embedded database ${shownDir(dataDir)} is in use by ${who}; stop it, or set DATABASE_URL`;
}

/** The folder as the operator would type it: relative to the working directory when inside it. */
function shownDir(dataDir: string): string {
  const abs = path.resolve(dataDir);
  const rel = path.relative(process.cwd(), abs);
  const shown = rel && !rel.startsWith("..") && !path.isAbsolute(rel) ? rel : abs;
  return shown.endsWith(path.sep) ? shown : `${shown}${path.sep}`;
}

/** How this process was started, for the other side's line: `npm start`, `npm run admin -- set-plan`, `node dist/server/main.js`. */
function describeCommand(): string {
  const event = npmScript();
  let cmd: string;
  if (event === "start" || event === "test") cmd = `npm ${event}`;
  else if (event === "admin") cmd = `npm run admin${process.argv[2] ? ` -- ${process.argv[2]}` : ""}`;
  else if (event) cmd = `npm run ${event}`;
  else {
    const script = process.argv[1];
    cmd = `${path.basename(process.argv0 || "node")}${script ? ` ${path.relative(process.cwd(), script) || script}` : ""}`;
  }
  return oneLine(cmd).slice(0, 120);
}

function oneLine(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
}

/** State and start time (clock ticks since boot) of a process, from /proc/<pid>/stat (Linux); else undefined. */
function procStat(pid: number): { state: string; start: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) state ppid …": comm may hold spaces and parentheses; the fields after it do not.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return rest[0] && rest[19] ? { state: rest[0], start: rest[19] } : undefined; // fields 3 and 22
  } catch {
    return undefined;
  }
}

/** Start time of a process in clock ticks since boot (Linux), or null. */
export function processStart(pid: number): string | null {
  return procStat(pid)?.start ?? null;
}

function bootId(): string | null {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || null;
  } catch {
    return null;
  }
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
