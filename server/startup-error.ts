// Start-up failures as one line: a configuration or connection error at the start of
// the service (server/main.ts), the migrator (server/db/migrate-cli.ts) or the admin CLI
// (server/admin/cli.ts) prints ONE line on stderr that names the variable and the cause, and the
// process exits non-zero; the stack (with the error's cause and fields) follows only at
// LOG_LEVEL=debug or trace. Passwords of configured URLs are never printed.
//
//   DATABASE_URL=postgresql://u@127.0.0.1:5999/x → cannot connect to DATABASE_URL (127.0.0.1:5999): connection refused
//   PORT=abc                                     → PORT must be 1–65535, got "abc"   (server/config.ts)
//   port taken                                   → port 3000 is already in use (PORT)
//
// Which variable a database error belongs to is known for certain only where the connection is
// made, so checkDatabaseConnections() connects once to each configured URL (DIRECT_DATABASE_URL,
// then DATABASE_URL) before anything else uses them; describeStartupError() maps whatever fails
// later by its error code, and any other error to the first non-empty line of its message (an
// Error whose message is already one line, e.g. the embedded database's lock, prints as is).
import { writeSync } from "node:fs";
import { inspect } from "node:util";
import pg from "pg";
import { ConfigError, loadConfig, rawLogLevel, redactUrl, type Config } from "./config.js";
import { maskSecrets } from "./secrets.js";

/** An error already phrased as the one line to print. */
export class StartupError extends Error {
  override name = "StartupError";
}

/** Causes of socket errors, by Node's error code. */
const SOCKET_CAUSES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ECONNRESET: "connection reset",
  ETIMEDOUT: "timed out",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EAI_AGAIN: "host name lookup failed (temporary failure)",
};

/** SQLSTATEs a server answers a connection attempt with: its message is the cause. */
const CONNECT_SQLSTATES = new Set(["3D000", "28000", "28P01", "53300", "57P03", "08P01", "08004", "08006"]);

/** What an error object carries that is read here (Node system errors, pg errors). */
interface ErrorFields {
  code?: unknown;
  syscall?: unknown;
  address?: unknown;
  port?: unknown;
  hostname?: unknown;
  path?: unknown;
  message?: unknown;
}

const fields = (err: unknown): ErrorFields => (err && typeof err === "object" ? (err as ErrorFields) : {});

/** The first non-empty line of a text, its white space collapsed. */
export function firstLine(text: string): string {
  for (const line of text.split(/\r?\n/)) {
    const t = line.replace(/\s+/g, " ").trim();
    if (t) return t;
  }
  return "";
}

/** "host:port" of a PostgreSQL URL (the socket folder of ?host= when the host is empty); never its password. */
export function databaseTarget(url: string): string {
  try {
    const u = new URL(url);
    const host = u.hostname || u.searchParams.get("host") || "localhost";
    return `${host}:${u.port || "5432"}`;
  } catch {
    return redactUrl(url);
  }
}

/** The cause of a connection failure, in words (undefined: not a connection failure). */
function connectionCause(err: unknown): string | undefined {
  const e = fields(err);
  const code = typeof e.code === "string" ? e.code : undefined;
  if (code === "ENOTFOUND") return `host ${typeof e.hostname === "string" ? `"${e.hostname}" ` : ""}not found`;
  if (code && SOCKET_CAUSES[code]) return SOCKET_CAUSES[code];
  if (code && CONNECT_SQLSTATES.has(code)) return firstLine(String(e.message ?? ""));
  const message = err instanceof Error ? err.message : "";
  // node-postgres' own connect timeout (connectionTimeoutMillis) and a server closing the socket.
  if (/connection timeout|timeout exceeded when trying to connect/i.test(message)) return "timed out";
  if (/Connection terminated unexpectedly/i.test(message)) return "the server closed the connection";
  if (/SASL|password must be a string/i.test(message)) return firstLine(message);
  if (/server does not support SSL|self[- ]signed certificate|certificate/i.test(message)) return firstLine(message);
  return undefined;
}

/**
 * Connects once to each configured PostgreSQL URL (DIRECT_DATABASE_URL when it differs, then
 * DATABASE_URL; `directOnly`: only the one migrations use) and closes; a failure throws a
 * StartupError naming the variable. Nothing to do on the embedded database.
 */
export async function checkDatabaseConnections(
  config: Pick<Config, "databaseUrl" | "directDatabaseUrl">,
  opts: { directOnly?: boolean; timeoutMs?: number } = {},
): Promise<void> {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  const urls: [string, string][] = [];
  const direct = config.directDatabaseUrl && config.directDatabaseUrl !== config.databaseUrl;
  if (direct) urls.push(["DIRECT_DATABASE_URL", config.directDatabaseUrl!]);
  if (config.databaseUrl && !(opts.directOnly && direct)) urls.push(["DATABASE_URL", config.databaseUrl]);
  for (const [name, url] of urls) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
    client.on("error", () => {}); // a late socket error after the failure below is already reported
    try {
      await client.connect();
    } catch (err) {
      const cause = connectionCause(err) ?? (firstLine(err instanceof Error ? err.message : String(err)) || "failed");
      throw new StartupError(`cannot connect to ${name} (${databaseTarget(url)}): ${cause}`, { cause: err });
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/** The configuration, or undefined when it does not load (that error is then the one reported). */
function currentConfig(env: NodeJS.ProcessEnv = process.env): Config | undefined {
  try {
    return loadConfig(env);
  } catch {
    return undefined;
  }
}

/** Which variable a socket error of a database connection belongs to (by the address it names). */
function databaseVariable(err: ErrorFields, config: Config | undefined): [string, string] | undefined {
  if (!config?.databaseUrl) return undefined;
  const candidates: [string, string][] = [["DATABASE_URL", config.databaseUrl]];
  if (config.directDatabaseUrl && config.directDatabaseUrl !== config.databaseUrl)
    candidates.unshift(["DIRECT_DATABASE_URL", config.directDatabaseUrl]);
  if (candidates.length === 1) return candidates[0];
  // The error names a port (and a host name, or the address it resolved to): the URL that matches most.
  const port = err.port !== undefined ? String(err.port) : undefined;
  const hosts = [err.hostname, err.address].filter((h): h is string => typeof h === "string");
  const score = (url: string) => {
    const [h, p] = databaseTarget(url).split(/:(?=\d+$)/);
    return (hosts.includes(h!) ? 2 : 0) + (port !== undefined && p === port ? 1 : 0);
  };
  return candidates.reduce((best, c) => (score(c[1]) > score(best[1]) ? c : best));
}

/** A listen() failure of the public or the metrics listener. */
function listenError(err: ErrorFields, config: Config | undefined): string | undefined {
  const code = typeof err.code === "string" ? err.code : "";
  if (
    err.syscall !== "listen" &&
    !(code === "ENOTFOUND" && config && (err.hostname === config.host || err.hostname === config.metricsHost))
  )
    return undefined;
  const metrics =
    config?.metricsPort !== undefined &&
    String(err.port) === String(config.metricsPort) &&
    String(err.port) !== String(config.port);
  const portVar = metrics ? "METRICS_PORT" : "PORT";
  const hostVar = metrics ? "METRICS_HOST" : "HOST";
  const port = err.port ?? (metrics ? config?.metricsPort : config?.port);
  const host =
    typeof err.address === "string"
      ? err.address
      : typeof err.hostname === "string"
        ? err.hostname
        : metrics
          ? config?.metricsHost
          : config?.host;
  switch (code) {
    case "EADDRINUSE":
      return `port ${port} is already in use (${portVar})`;
    case "EACCES":
      return `cannot listen on ${portVar} ${port} (${host}): permission denied (ports below 1024 need privileges)`;
    case "EADDRNOTAVAIL":
      return `cannot listen on ${hostVar} ${host} (port ${port}): address not available on this machine`;
    case "ENOTFOUND":
      return `cannot listen on ${hostVar} ${host}: host not found`;
    default:
      return `cannot listen on ${host}:${port} (${hostVar}/${portVar}): ${firstLine(String(err.message ?? code))}`;
  }
}

/** A file-system error of the embedded database's folder (Node's fs errors carry syscall and path). */
function dataDirError(err: ErrorFields, config: Config | undefined): string | undefined {
  if (
    config?.databaseUrl ||
    typeof err.syscall !== "string" ||
    typeof err.path !== "string" ||
    typeof err.code !== "string"
  )
    return undefined;
  const causes: Record<string, string> = {
    ENOENT: "a parent folder does not exist",
    ENOTDIR: "a parent is not a folder",
    EACCES: "permission denied",
    EPERM: "permission denied",
    EROFS: "read-only file system",
    ENOSPC: "no space left on the device",
  };
  const cause = causes[err.code];
  return cause && `cannot open the embedded database in PGLITE_DATA_DIR (${err.path}): ${cause}`;
}

/**
 * The first non-empty line of a Prisma error's cause: the database's own message for a database
 * error (driver adapters keep it in meta.driverAdapterError.cause), else the message without
 * Prisma's "Invalid `…` invocation" preamble and code frame (whose first line is empty).
 */
export function prismaCause(err: unknown): string | undefined {
  if (!(err instanceof Error) || !err.name.startsWith("PrismaClient")) return undefined;
  const meta = (err as { meta?: { driverAdapterError?: { cause?: { originalMessage?: unknown; message?: unknown } } } })
    .meta;
  const cause = meta?.driverAdapterError?.cause;
  const dbMessage = cause?.originalMessage ?? cause?.message;
  if (typeof dbMessage === "string" && firstLine(dbMessage)) return firstLine(dbMessage);
  const lines = err.message.split(/\r?\n/);
  const frame = lines.findIndex((l) => /^Invalid `.*` invocation/.test(l.trim()));
  if (frame >= 0) {
    // After the preamble: an optional "file:line:col" line and code-frame lines ("  12 …", "→ 15 …").
    const rest = lines
      .slice(frame + 1)
      .filter((l) => l.trim() && !/^\s*(→\s*)?\d+\s/.test(l) && !/:\d+:\d+$/.test(l.trim()));
    if (rest.length) return firstLine(rest.join("\n"));
  }
  return firstLine(err.message) || undefined;
}

/** The one line that says why starting failed. */
export function describeStartupError(err: unknown, config: Config | undefined = currentConfig()): string {
  if (err instanceof StartupError || err instanceof ConfigError) return firstLine(err.message);
  const e = fields(err);
  const listen = listenError(e, config);
  if (listen) return listen;
  const dir = dataDirError(e, config);
  if (dir) return dir;
  const cause = connectionCause(err);
  if (cause) {
    const db = databaseVariable(e, config);
    if (db) return `cannot connect to ${db[0]} (${databaseTarget(db[1])}): ${cause}`;
  }
  const prisma = prismaCause(err);
  if (prisma) return masked(prisma, config);
  const message =
    err instanceof Error ? firstLine(err.message) || firstLine(String(err.cause ?? "")) : firstLine(String(err));
  return masked(message || (err instanceof Error ? err.name : "failed"), config);
}

/** `text` with the passwords of the configured URLs (the environment's and `config`'s) masked (server/secrets.ts). */
const masked = (text: string, config: Config | undefined, env: NodeJS.ProcessEnv = process.env) =>
  maskSecrets(text, env, [config?.databaseUrl, config?.directDatabaseUrl, config?.redisUrl]);

/** Whether the stack is wanted: LOG_LEVEL debug or trace (read raw: the configuration may be what failed). */
export function wantsStack(env: NodeJS.ProcessEnv = process.env): boolean {
  const level = rawLogLevel(env);
  return level === "debug" || level === "trace";
}

/** The text to write on stderr for a failure: its line, then (LOG_LEVEL=debug) the full error. */
export function startupErrorText(err: unknown, config?: Config, env: NodeJS.ProcessEnv = process.env): string {
  // Masked again whole: every branch above, and the stack, may quote a configured URL (server/secrets.ts).
  const cfg = config ?? currentConfig(env);
  const line = masked(describeStartupError(err, cfg), cfg, env);
  if (!wantsStack(env)) return `${line}\n`;
  return `${line}\n${masked(inspect(err, { depth: 4 }), cfg, env)}\n`;
}

/** Writes the failure's line (and, at debug, the stack) on stderr and exits 1. */
export function exitWithStartupError(err: unknown): never {
  try {
    writeSync(2, startupErrorText(err));
  } catch {
    /* stderr closed: the exit status still says it */
  }
  process.exit(1);
}

/**
 * Until the returned function is called (the service is listening), any uncaught exception or
 * rejected top-level await — a failing loadConfig, database connection, migration, listen() — is
 * reported as one line and exits 1.
 */
export function exitOnStartupError(): () => void {
  const handler = (err: unknown) => exitWithStartupError(err);
  process.on("uncaughtException", handler);
  return () => void process.off("uncaughtException", handler);
}
