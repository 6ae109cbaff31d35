import { writeSync } from "node:fs";
import { createRequire } from "node:module";
import { pino, type DestinationStream } from "pino";
import type { LogFormat } from "./config.js";
import { maskSecrets } from "./secrets.js";

/**
 * The process's logger on standard output. Never log a raw API key, a key hash or provider
 * credentials: the request serializer keeps only method, url and the request id; redact covers
 * headers that might slip in. `format` (LOG_FORMAT): "json", one JSON object a line
 * (pino's own lines, for machines), or "pretty", one line a record for people (local time, level,
 * message, the other fields as compact JSON); unset: pretty when standard output is a terminal,
 * JSON otherwise (a pipe, a file, a log collector). `destination`: where the lines go instead of
 * standard output (a test's capture).
 */
export function createLogger(level: string, format?: LogFormat, destination?: DestinationStream) {
  const dest = new MaskingDestination(destination ?? stdoutDestination());
  return pino(
    {
      level,
      redact: {
        paths: [
          "req.headers['x-api-key']",
          "req.headers.authorization",
          "headers['x-api-key']",
          "config.accessToken",
          "config.token",
        ],
        censor: "[redacted]",
      },
    },
    (format ?? (process.stdout.isTTY ? "pretty" : "json")) === "pretty" ? new PrettyDestination(dest) : dest,
  );
}
export type Logger = ReturnType<typeof createLogger>;

/**
 * Every line with the configured URLs' passwords masked (server/secrets.ts), whatever wrote them: an
 * error's message or stack quoting DATABASE_URL, a driver's log. A line without a configured
 * password is written as it is (a few substring checks).
 */
class MaskingDestination implements DestinationStream {
  constructor(private readonly inner: DestinationStream) {}

  write(line: string): boolean {
    this.inner.write(maskSecrets(line));
    return true;
  }

  flushSync(): void {
    (this.inner as { flushSync?: () => void }).flushSync?.();
  }
}

/**
 * Pretty lines (LOG_FORMAT=pretty, or a terminal): each JSON line pino wrote becomes one line for
 * people — local time, level, message, the other fields as compact JSON — by pino-pretty's
 * prettifier, in process, written to the same destination (so a closed or full pipe behaves as in
 * JSON mode: no worker thread, no hang at exit). The access log line reads "GET /path 200 3.1 ms";
 * an error's stack follows its line, indented. pino-pretty is loaded here only: in JSON mode neither
 * its modules nor any per-line work are paid for. Colours when pino-pretty finds a colour terminal
 * (it honours NO_COLOR and FORCE_COLOR).
 */
export class PrettyDestination implements DestinationStream {
  private readonly prettify: (log: object) => string;

  constructor(private readonly inner: DestinationStream) {
    const { prettyFactory } = createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty");
    // No error-like keys: pino-pretty would print every "err", strings too, as a multi-line block.
    this.prettify = prettyFactory({
      translateTime: "SYS:HH:MM:ss.l",
      ignore: "pid,hostname",
      singleLine: true,
      errorLikeObjectKeys: [],
    });
  }

  write(line: string): boolean {
    let log: Record<string, unknown>;
    try {
      log = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.inner.write(line); // not pino's JSON: as it is
      return true;
    }
    const stacks: string[] = [];
    for (const key of ["err", "error"]) {
      const value = log[key];
      if (value && typeof value === "object" && typeof (value as { stack?: unknown }).stack === "string") {
        const { stack, ...fields } = value as { stack: string };
        log[key] = fields;
        stacks.push(stack);
      }
    }
    let text: string;
    try {
      text = this.prettify(humanAccessLine(log)).replace(/ +\n$/, "\n");
    } catch {
      text = line; // a record pino-pretty cannot print: the JSON line, rather than a throw at the call site
      stacks.length = 0;
    }
    for (const stack of stacks) text += `${stack.replace(/^/gm, "    ")}\n`;
    this.inner.write(text);
    return true;
  }

  flushSync(): void {
    (this.inner as { flushSync?: () => void }).flushSync?.();
  }
}

/**
 * server/app.ts's access log record ({reqId, method, path, status, ms}, "request") as "GET /path 200 3.1 ms" {reqId}.
 */
function humanAccessLine(log: Record<string, unknown>): Record<string, unknown> {
  if (
    log.msg !== "request" ||
    typeof log.method !== "string" ||
    typeof log.path !== "string" ||
    typeof log.ms !== "number"
  )
    return log;
  const { method, path, status, ms, ...rest } = log;
  return { ...rest, msg: `${method} ${path} ${String(status)} ${(ms as number).toFixed(1)} ms` };
}

/**
 * Where the log goes: standard output, one write(2) per line as it comes (a pipe is non-blocking
 * once Node has opened process.stdout, so a full pipe answers EAGAIN instead of blocking; the lines
 * then wait, at most MAX_PENDING_BYTES of them — beyond that they are dropped and counted — and are
 * retried every RETRY_MS). A destination that fails otherwise — EPIPE: the reader of the pipe is gone
 * (`npm start | tee log`, then tee dies), EBADF, EIO — is written to no more: the service keeps
 * serving without a log and stops as usual on SIGTERM. What still waits when the
 * process exits is written synchronously, giving up at the first error (and after ~1 s of a pipe
 * that stays full). No write is ever in flight in the thread pool, so lines keep their order, also at exit.
 *
 * Not pino's default destination (sonic-boom 4, which pino 10 pins): its exit-time flushSync retries
 * a failed write every 100 ms forever whatever the error, so a line queued when the reader died made
 * the exiting process spin on EPIPE with its event loop blocked — its port closed, SIGTERM ignored.
 * (sonic-boom 5 throws instead; pino does not use it yet.)
 */
export class LogDestination implements DestinationStream {
  /** Bytes that met a full pipe, then every line after them, in order. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private retry: NodeJS.Timeout | undefined;
  private closedBy: NodeJS.ErrnoException | undefined;
  /** Lines dropped because MAX_PENDING_BYTES were already waiting. */
  dropped = 0;

  constructor(
    private readonly fd: number,
    private readonly opts: { maxPendingBytes?: number; onClose?: (err: NodeJS.ErrnoException) => void } = {},
  ) {}

  /** The error that ended writing, if any. */
  get closed(): NodeJS.ErrnoException | undefined {
    return this.closedBy;
  }

  write(line: string): boolean {
    if (this.closedBy) return true;
    if (this.pending.length > 0) {
      const buf = Buffer.from(line);
      if (this.pendingBytes + buf.length > (this.opts.maxPendingBytes ?? MAX_PENDING_BYTES)) this.dropped += 1;
      else {
        this.pending.push(buf);
        this.pendingBytes += buf.length;
      }
      return true;
    }
    let written = 0;
    try {
      written = writeSync(this.fd, line);
    } catch (e) {
      if (!busy(e)) {
        this.close(e as NodeJS.ErrnoException);
        return true;
      }
    }
    if (written === Buffer.byteLength(line)) return true;
    const rest = Buffer.from(line).subarray(written);
    this.pending.push(rest);
    this.pendingBytes += rest.length;
    this.scheduleRetry();
    return true;
  }

  private scheduleRetry(): void {
    this.retry ??= setTimeout(() => {
      this.retry = undefined;
      if (this.writePending(0)) this.scheduleRetry();
    }, RETRY_MS).unref();
  }

  /**
   * Writes what waits, in order; waits `waitMs` and tries again up to `tries` times while the pipe is
   * full. True if some is still waiting (a full pipe); false when all is written or writing ended.
   */
  private writePending(tries: number, waitMs = 0): boolean {
    let buf = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending);
    this.pending = [];
    this.pendingBytes = 0;
    let attempt = 0;
    while (buf.length > 0) {
      try {
        buf = buf.subarray(writeSync(this.fd, buf));
        attempt = 0; // the reader is reading: only a pipe that stays full ends the attempt
      } catch (e) {
        if (!busy(e)) {
          this.close(e as NodeJS.ErrnoException);
          return false;
        }
        if (attempt++ >= tries) break;
        sleepMs(waitMs);
      }
    }
    if (buf.length === 0) return false;
    this.pending = [buf];
    this.pendingBytes = buf.length;
    return true;
  }

  private close(err: NodeJS.ErrnoException): void {
    this.closedBy = err;
    this.pending = [];
    this.pendingBytes = 0;
    clearTimeout(this.retry);
    this.retry = undefined;
    this.opts.onClose?.(err);
  }

  /**
   * At exit (no event loop any more): writes what waits, while the
   * reader keeps reading (giving up after ~1 s without progress).
   */
  flushSync(): void {
    if (this.closedBy || this.pending.length === 0) return;
    clearTimeout(this.retry);
    this.retry = undefined;
    this.writePending(EXIT_FLUSH_TRIES, EXIT_FLUSH_WAIT_MS);
  }
}

const busy = (e: unknown) => {
  const code = (e as NodeJS.ErrnoException).code;
  return code === "EAGAIN" || code === "EBUSY";
};

const MAX_PENDING_BYTES = 16 * 1024 * 1024;
const RETRY_MS = 100;
const EXIT_FLUSH_TRIES = 50;
const EXIT_FLUSH_WAIT_MS = 20;

let stdout: DestinationStream | undefined;

/**
 * One destination for standard output, shared by every logger of the process, flushed at exit.
 * Where standard output has been replaced (a test runner capturing it), that replacement — as pino
 * itself does.
 */
function stdoutDestination(): DestinationStream {
  if (stdout) return stdout;
  guardStdio();
  const replaced = process.stdout.write !== process.stdout.constructor.prototype.write; // pino's own test
  if (replaced || typeof process.stdout.fd !== "number") {
    stdout = process.stdout;
    return stdout;
  }
  const dest = new LogDestination(process.stdout.fd, {
    onClose: (err) => {
      // Said once on stderr, which may well be the same closed pipe (then nobody hears it).
      process.stderr.write(`log output closed (${err.code ?? err.message}): no more log lines are written\n`);
    },
  });
  process.on("exit", () => dest.flushSync());
  stdout = dest;
  return dest;
}

/**
 * Standard output and error whose reader is gone must not take the process down: an 'error' event
 * (EPIPE) on process.stdout/stderr without a listener is an uncaught exception. What is written
 * there directly (the demo key at start, Node's warnings) is then simply lost.
 */
function guardStdio(): void {
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
}

function sleepMs(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
