// One owner per embedded database folder. PGlite runs PostgreSQL inside the process that opens the
// folder, with no lock of its own: a second process on the same folder (a second `npm start`, the
// admin CLI, `npm run db:migrate` beside a running server) works on its own copy of the pages and the
// two overwrite each other's writes — acknowledged writes are lost. So whoever opens a folder first
// holds its lock, and everyone else refuses at once, before PGlite is even loaded, with one line
// naming the holder and the way out:
//
//   embedded database .data/ is in use by pid 4242 (npm start); stop it, or set DATABASE_URL
//
// The lock is a generation: `<folder>/crm-owner.<n>.lock`, holding JSON (pid, the process's start
// time — /proc/<pid>/stat field 22 —, the boot id, the host name, the command, when, a nonce). The
// folder's owner is the holder of the highest generation. Taking the lock is creating the next
// generation's file, atomically (written aside, then link(2): it appears whole or not at all, and
// exactly one of any number of racing processes creates it), when the highest one is released
// (renamed `crm-owner.<n>.released`) or stale; the new owner then removes the older generations, and
// a racing process that lost reads the new highest and refuses. Nothing is removed to make room, so
// no race leaves two owners. An earlier version's `crm-owner.lock` counts as generation 0.
//
// Stale: the holder is gone — killed with SIGKILL, a crash, a reboot: the pid no longer exists, or it
// exists but started at another time (the pid was reused), or the machine booted since. A holder on
// another host (a folder on a shared volume, a recreated container) cannot be checked that way: its
// lock carries a heartbeat, the file's mtime, refreshed every HEARTBEAT_MS; once it is older than
// FOREIGN_EXPIRY_MS the holder counts as gone. `npm run --silent admin -- break-lock` takes over
// another host's lock at once (never a live holder's on this host). Released when the database
// closes, and at the latest when the process exits.
//
// Not proper-lockfile: its staleness is an mtime refreshed by a timer on every host, and PGlite runs
// its queries on the event loop (a fixture load or a migration blocks it for seconds), so a live
// holder on this host could look stale; here the timer only matters across hosts, with minutes of
// margin. No flock(2) in Node without a native addon. Windows: no /proc; liveness is then the pid alone.
import { randomUUID } from "node:crypto";
import {
  closeSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  utimesSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import path from "node:path";
import { npmScript } from "../config.js";

/** An earlier version's lock file: generation 0. */
export const LOCK_FILE = "crm-owner.lock";
const GENERATION = /^crm-owner\.(\d{1,15})\.(lock|released)$/;
/** How often a holder refreshes its lock's mtime (its heartbeat, read across hosts). */
export const HEARTBEAT_MS = 30_000;
/** A lock from another host whose heartbeat is older than this counts as stale. */
export const FOREIGN_EXPIRY_MS = 10 * 60_000;

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
  /** Unique per acquisition. */
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
  /** Marks this generation released. Idempotent. */
  release(): void;
}

const held = new Set<EmbeddedDatabaseLock>();
let exitHook = false;

/** A generation of the folder's lock. */
interface Generation {
  gen: number;
  file: string;
  released: boolean;
}

/** The folder's lock generations, highest first. */
function generations(dataDir: string): Generation[] {
  let names: string[];
  try {
    names = readdirSync(dataDir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw e;
  }
  const out: Generation[] = [];
  for (const name of names) {
    if (name === LOCK_FILE) out.push({ gen: 0, file: path.join(dataDir, name), released: false });
    const m = GENERATION.exec(name);
    if (m) out.push({ gen: Number(m[1]), file: path.join(dataDir, name), released: m[2] === "released" });
  }
  // A generation seen both held and released (renamed between two reads of the folder): released.
  return out.sort((a, b) => b.gen - a.gen || Number(b.released) - Number(a.released));
}

/** The folder's live holder and its lock file, if any. */
export function currentLock(dataDir: string): { file: string; holder: LockHolder } | undefined {
  const top = generations(dataDir)[0];
  if (!top || top.released) return undefined;
  const h = readHolder(top.file);
  return h === "gone" || h === "unreadable" || !holderAlive(h, top.file) ? undefined : { file: top.file, holder: h };
}

/**
 * Takes the folder's lock or throws EmbeddedDatabaseInUse. Creates the folder if it does not exist
 * (PGlite would). Synchronous: nothing else runs between the check and the claim. `breakForeign`:
 * take over a lock of another host whatever its heartbeat says (the operator says that host is gone).
 */
export function lockEmbeddedDatabase(dataDir: string, opts: { breakForeign?: boolean } = {}): EmbeddedDatabaseLock {
  mkdirSync(dataDir, { recursive: true });
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
  // Each turn claims the next generation, refuses, or sees another process claim it first (and looks
  // again): a few turns suffice unless other processes keep claiming and dying in between.
  for (let attempt = 0; attempt < 8; attempt++) {
    const top = generations(dataDir)[0];
    if (top && !top.released) {
      const seen = readHolder(top.file);
      if (seen === "gone") continue; // released or superseded meanwhile: look again
      if (seen !== "unreadable" && holderAlive(seen, top.file) && !(opts.breakForeign && foreign(seen)))
        throw new EmbeddedDatabaseInUse(inUseLine(dataDir, top.file, seen), seen, top.file);
    }
    const gen = (top?.gen ?? 0) + 1;
    const file = path.join(dataDir, `crm-owner.${gen}.lock`);
    if (!create(file, text)) continue; // another process took this generation first: look again
    for (const old of generations(dataDir)) if (old.gen < gen) removeQuietly(old.file);
    const heartbeat = setInterval(() => touch(file), HEARTBEAT_MS);
    heartbeat.unref();
    const lock: EmbeddedDatabaseLock = {
      file,
      release() {
        if (!held.delete(lock)) return;
        clearInterval(heartbeat);
        try {
          renameSync(file, file.replace(/\.lock$/, ".released"));
        } catch {
          // superseded (break-lock) and removed, or the folder is gone
        }
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
  throw new Error(
    `embedded database ${shownDir(dataDir)} could not be locked (its lock keeps changing); ` +
      "stop the other processes on it, or set DATABASE_URL",
  );
}

/**
 * `npm run --silent admin -- break-lock`: takes the folder's lock over from a holder on another host
 * whatever its heartbeat says, or from a stale one, and releases it at once; a live holder on this
 * host is refused (EmbeddedDatabaseInUse). The holder whose lock it broke, or null (none held it).
 */
export function breakLock(dataDir: string): LockHolder | null {
  const top = generations(dataDir)[0];
  const before = top && !top.released ? readHolder(top.file) : undefined;
  lockEmbeddedDatabase(dataDir, { breakForeign: true }).release();
  return before && before !== "gone" && before !== "unreadable" ? before : null;
}

/**
 * Creates `file` whole with `text`, or returns false if it exists:
 * written aside, then linked (link(2) fails on an existing name).
 */
function create(file: string, text: string): boolean {
  const aside = `${file}.${process.pid}.${randomUUID()}.new`;
  const fd = openSync(aside, "wx", 0o644);
  try {
    writeSync(fd, text);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(aside, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  } finally {
    removeQuietly(aside);
  }
}

function touch(file: string): void {
  try {
    const now = new Date();
    utimesSync(file, now, now);
  } catch {
    // released or superseded
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

const foreign = (h: LockHolder) => Boolean(h.host) && h.host !== hostname();

/**
 * The holder recorded in the file: "gone" if there is no file, "unreadable" if it is not a holder's
 * JSON (a file of ours appears whole; an earlier version's could be caught half-written: waits up
 * to ~200 ms for it).
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

/**
 * Is the recorded holder still running? On this host: its pid, start time and boot id say. On another
 * host: while its heartbeat (the mtime of `file`) is younger than FOREIGN_EXPIRY_MS.
 */
export function holderAlive(h: LockHolder, file?: string): boolean {
  if (foreign(h)) return file === undefined || heartbeatAge(file) < FOREIGN_EXPIRY_MS;
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

/** Milliseconds since the lock file's last heartbeat (Infinity: gone). */
function heartbeatAge(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return Infinity;
  }
}

/** The line of the refusal. */
function inUseLine(dataDir: string, file: string, h: LockHolder): string {
  const who = `pid ${h.pid}${h.command ? ` (${h.command})` : ""}`;
  if (foreign(h)) {
    const age = Math.round(heartbeatAge(file) / 1000);
    return (
      `embedded database ${shownDir(dataDir)} is in use by ${who} on host ${oneLine(h.host)} ` +
      `(heartbeat ${age} s ago, stale after ${FOREIGN_EXPIRY_MS / 60_000} min); ` +
      "stop it (if that host is gone: npm run --silent admin -- break-lock), or set DATABASE_URL"
    );
  }
  return `embedded database ${shownDir(dataDir)} is in use by ${who}; stop it, or set DATABASE_URL`;
}

/** The folder as the operator would type it: relative to the working directory when inside it. */
function shownDir(dataDir: string): string {
  const abs = path.resolve(dataDir);
  const rel = path.relative(process.cwd(), abs);
  const shown = rel && !rel.startsWith("..") && !path.isAbsolute(rel) ? rel : abs;
  return shown.endsWith(path.sep) ? shown : `${shown}${path.sep}`;
}

/**
 * How this process was started, for the other side's line: `npm start`,
 * `npm run admin -- set-plan`, `node dist/server/main.js`.
 */
function describeCommand(): string {
  const event = npmScript();
  let cmd: string;
  if (event === "start" || event === "test") cmd = `npm ${event}`;
  else if (event === "admin") cmd = `npm run admin${process.argv[2] ? ` -- ${process.argv[2]}` : ""}`;
  else if (event) cmd = `npm run ${event}`;
  else {
    const script = process.argv[1];
    const shown = script ? ` ${path.relative(process.cwd(), script) || script}` : "";
    cmd = `${path.basename(process.argv0 || "node")}${shown}`;
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
