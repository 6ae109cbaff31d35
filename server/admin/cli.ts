// The platform-admin CLI: `npm run --silent admin -- <verb> ...` (shared/contracts/operations.md).
// Prints exactly one JSON document on stdout and exits 0; on failure a one-line reason on stderr,
// a non-zero exit, and nothing changed. The process exits only once that output has been written
// out (a pipe takes 64 KiB at a time: process.exit() right after write() would cut a large id map).
// A verb that succeeded also says on stderr, in one line, which database it used (databaseLine), so
// that a key minted on the embedded folder by a shell without DATABASE_URL is not taken for one on
// PostgreSQL; a long `load` shows its progress there when stderr is a terminal (server/admin/progress.ts).
import { readFile } from "node:fs/promises";
import path from "node:path";
import { loadConfig, type Config } from "../config.js";
import { openDatabase, type Database } from "../db/client.js";
import { migrateDirect } from "../db/migrate.js";
import { checkDatabaseConnections, startupErrorText } from "../startup-error.js";
import { breakLock } from "../db/pglite-lock.js";
import { localBaseUrl } from "./demo.js";
import { callAdmin, runningService, type LiveService } from "./live.js";
import { loadFixture } from "./fixture.js";
import * as ops from "./operations.js";
import { writeFully } from "./output.js";
import { loadProgress, type ProgressStream, type RowsWritten } from "./progress.js";
import { maskUrl } from "../secrets.js";
import { createLogger } from "../logger.js";
import { connectRedisFromConfig, redisReady } from "../redis.js";
import { wakeupChannel } from "../wakeups.js";
import type { LoadResult } from "./fixture.js";

/** The verbs and their arguments (operations.md), as a usage error and `help` print them. */
export const USAGE = `usage: npm run --silent admin -- <verb> [arguments]
verbs:
  load FILE
  create-key TENANT_ID OWNER_USER_ID SCOPES [--expires-at ISO]
  revoke-key KEY_ID
  set-plan TENANT_ID PLAN
  set-plan-limits PLAN PER_MINUTE PER_DAY
  set-tenant-limits TENANT_ID PER_MINUTE PER_DAY
  set-tenant-limits TENANT_ID clear
  inbound-message CONVERSATION_ID TEXT
  demo-key
  load-demo
  break-lock
  help`;

/** A command line that names no verb, an unknown one, or the wrong arguments: the CLI prints the reason, then USAGE. */
export class UsageError extends ops.AdminError {}

function takeOption(args: string[], name: string): string | undefined {
  const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (i < 0) return undefined;
  const [arg] = args.splice(i, 1);
  if (arg!.startsWith(`${name}=`)) return arg!.slice(name.length + 1);
  const [value] = args.splice(i, 1);
  if (value === undefined) throw new UsageError(`${name} needs a value`);
  return value;
}

function arity(verb: string, args: string[], min: number, max = min) {
  if (args.length < min || args.length > max)
    throw new UsageError(
      `${verb}: wrong number of arguments (${args.length} given, ${min === max ? min : `${min} to ${max}`} expected)`,
    );
}

const HELP = new Set(["help", "--help", "-h"]);

/** A verb ready to run on the database (`written`: a load's progress). */
type Command = (db: Database, written?: RowsWritten) => Promise<unknown>;

/** `help`, or the verb ready to run: arity and every argument checked before any database is opened. */
export async function parse(argv: string[]): Promise<"help" | Command> {
  const [verb, ...rest] = argv;
  const args = [...rest];
  if (verb === undefined || verb === "") throw new UsageError("no verb given");
  if (HELP.has(verb)) return "help";
  switch (verb) {
    case "load": {
      arity(verb, args, 1);
      let doc: unknown;
      try {
        doc = JSON.parse(await readFile(args[0]!, "utf8"));
      } catch (e) {
        throw new ops.AdminError(`cannot read fixture ${args[0]}: ${(e as Error).message.split("\n")[0]}`);
      }
      return (db, written) => loadFixture(db, doc, written);
    }
    case "create-key": {
      const expiresAt = takeOption(args, "--expires-at");
      const unknown = args.find((a) => a.startsWith("--"));
      if (unknown) throw new UsageError(`create-key: unknown option ${JSON.stringify(unknown.split("=")[0])}`);
      arity(verb, args, 3);
      const [tenantId, ownerId, scopes] = args as [string, string, string];
      ops.createKeyArgs(tenantId, ownerId, scopes, expiresAt);
      return (db) => ops.createKey(db, tenantId, ownerId, scopes, expiresAt);
    }
    case "revoke-key":
      arity(verb, args, 1);
      ops.revokeKeyArgs(args[0]!);
      return (db) => ops.revokeKey(db, args[0]!);
    case "set-plan":
      arity(verb, args, 2);
      ops.setPlanArgs(args[0]!, args[1]!);
      return (db) => ops.setPlan(db, args[0]!, args[1]!);
    case "set-plan-limits":
      arity(verb, args, 3);
      ops.setPlanLimitsArgs(args[0]!, args[1]!, args[2]!);
      return (db) => ops.setPlanLimits(db, args[0]!, args[1]!, args[2]!);
    case "set-tenant-limits":
      arity(verb, args, args[1] === "clear" ? 2 : 3);
      ops.setTenantLimitsArgs(args[0]!, args[1]!, args[2]);
      return (db) => ops.setTenantLimits(db, args[0]!, args[1]!, args[2]);
    case "break-lock":
      arity(verb, args, 0);
      return async () => undefined; // run by execute() without opening the database
    case "inbound-message":
      arity(verb, args, 2);
      ops.inboundMessageArgs(args[0]!, args[1]!);
      return (db) => ops.inboundMessage(db, args[0]!, args[1]!);
    case "demo-key":
      // The curl line names HOST and PORT as this process sees them (the service's defaults); while the
      // embedded service runs, execute() asks that service instead (its own address).
      arity(verb, args, 0);
      return (db) => {
        const config = loadConfig();
        return ops.demoKey(db, localBaseUrl(config.host, config.port));
      };
    case "load-demo":
      arity(verb, args, 0);
      return (db) => {
        const config = loadConfig();
        return ops.loadDemo(db, localBaseUrl(config.host, config.port));
      };
    default:
      throw new UsageError(`unknown verb ${JSON.stringify(verb)}`);
  }
}

/**
 * The tenants a verb that succeeded changed in a way the changes feed's waiters care about: objects of
 * theirs (load, load-demo, inbound-message) or what a waiter's key is checked against after a wait
 * (revoke-key, set-plan, set-tenant-limits).
 */
async function touchedTenants(db: Database, argv: string[], result: unknown): Promise<string[]> {
  const [verb, first] = argv;
  switch (verb) {
    case "load":
      return Object.values((result as LoadResult).tenants).map((t) => t.id);
    case "load-demo":
      return [(result as { tenantId: string }).tenantId];
    case "set-plan":
    case "set-tenant-limits":
      return [(result as { id: string }).id];
    case "revoke-key": {
      const key = await db.prisma.apiKey.findFirst({ where: { id: first! }, select: { tenantId: true } });
      return key ? [key.tenantId] : [];
    }
    case "inbound-message": {
      const conv = await db.prisma.conversation.findFirst({ where: { id: first! }, select: { tenantId: true } });
      return conv ? [conv.tenantId] : [];
    }
    default:
      return [];
  }
}

/**
 * Wakes the tenants' waiting long-polls and subscriptions on every instance, as the service's own
 * writes do (server/wakeups.ts), when Redis is configured. Best effort within about a second: a
 * wake-up that does not go out is found by the instances' probe (CHANGES_REREAD_MS) instead.
 */
async function wakeWaiters(config: Config, tenants: string[]): Promise<void> {
  if (tenants.length === 0) return;
  const logger = createLogger("silent");
  const redis = connectRedisFromConfig(config, logger);
  if (!redis) return;
  try {
    if (await redisReady(redis, 1000))
      await Promise.all(tenants.map((t) => redis.publish(wakeupChannel(t), "1").catch(() => 0)));
  } finally {
    redis.disconnect();
  }
}

/** Runs one command line on `db` (what main() does once the database is open; `help` returns the usage text). */
export async function run(db: Database, argv: string[]): Promise<unknown> {
  const command = await parse(argv);
  return command === "help" ? USAGE : command(db);
}

/**
 * The line a verb that succeeded prints on stderr: the database it used, its password masked — the
 * PostgreSQL of DATABASE_URL, or the embedded folder (directly, or through the service holding it).
 */
export function databaseLine(config: Config, through?: LiveService): string {
  if (config.databaseUrl) return `database: ${maskUrl(config.databaseUrl)} (DATABASE_URL)`;
  const folder = config.dataDir === "memory://" ? config.dataDir : path.resolve(config.dataDir);
  const how = through ? `through the service holding it, pid ${through.pid}` : "DATABASE_URL is not set";
  return `database: the embedded PGlite folder ${folder} (${how})`;
}

/**
 * One command line, as `npm run --silent admin -- …` runs it (main() writes `out` on stdout and `err`
 * on stderr, then exits with `code`): `env` is the configuration it reads (the process's by default),
 * `io.stderr` where a long load shows its progress when it is a terminal (nothing is written
 * otherwise), `io.now` the progress's clock (tests inject both).
 * Exit status: 0 with the verb's JSON document on stdout (or the usage text for help); 1 with a
 * one-line reason on stderr when the verb fails or is refused (the database's own message for a
 * database error; the variable and the cause for a configuration or connection error, as at the
 * service's start); 2 for a usage error, whose reason line is followed by the verbs. At
 * LOG_LEVEL=debug a failure's stack follows its line.
 */
export async function execute(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  io: { stderr?: ProgressStream; now?: () => number } = {},
): Promise<{ code: number; out: string; err: string }> {
  let db: Database | undefined;
  let code = 0;
  let out = "";
  let err = "";
  try {
    const command = await parse(argv);
    const config = command === "help" ? undefined : { ...loadConfig(env), databaseStatementTimeoutMs: 0 };
    const live = config && !config.databaseUrl && argv[0] === "demo-key" ? runningService(config.dataDir) : undefined;
    if (command === "help") out = `${USAGE}\n`;
    else if (argv[0] === "break-lock") {
      if (config!.databaseUrl)
        throw new ops.AdminError(
          "break-lock is for the embedded database (DATABASE_URL is set: PostgreSQL has its own locks)",
        );
      const broken = breakLock(config!.dataDir);
      out = `${JSON.stringify({ dataDir: config!.dataDir, broken })}\n`;
      err = `${databaseLine(config!)}\n`;
    } else if (live) {
      // The embedded service holds the folder: ask it (its admin transport, server/admin/live.ts).
      out = `${JSON.stringify(await callAdmin(live, "demoKey", {}))}\n`;
      err = `${databaseLine(config!, live)}\n`;
    } else {
      // No statement_timeout (DATABASE_STATEMENT_TIMEOUT_MS is for API requests): a fixture is loaded
      // in one transaction of large statements.
      await checkDatabaseConnections(config!);
      db = await openDatabase(config!);
      await migrateDirect(config!, db);
      const progress = argv[0] === "load" ? loadProgress(io.stderr ?? process.stderr, io.now) : undefined;
      let result: unknown;
      try {
        result = await command(db, progress?.rows);
        out = `${JSON.stringify(result)}\n`;
      } finally {
        progress?.end();
      }
      await wakeWaiters(config!, await touchedTenants(db, argv, result));
      err = `${databaseLine(config!)}\n`;
    }
  } catch (e) {
    out = "";
    if (e instanceof UsageError) {
      err = `${e.message}\n${USAGE}\n`;
      code = 2;
    } else {
      err = startupErrorText(e, undefined, env);
      code = 1;
    }
  } finally {
    await db?.close().catch(() => {});
  }
  return { code, out, err };
}

async function main() {
  const { code, out, err } = await execute(process.argv.slice(2));
  if (out) await writeFully(process.stdout, out);
  if (err) await writeFully(process.stderr, err);
  // Exit explicitly (a driver may keep a handle open) but only after the output has flushed.
  process.exit(code);
}

// Run as a program (dist/server/admin/cli.js, or this file under tsx), not when imported. No other entry
// point of the build may import this module: esbuild would move it into a shared chunk, whose URL is
// never the program's (test/process/runtime.test.ts runs each built command).
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) void main();
