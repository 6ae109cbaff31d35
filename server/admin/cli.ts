// The platform-admin CLI: `npm run --silent admin -- <verb> ...` (shared/contracts/operations.md).
// Prints exactly one JSON document on stdout and exits 0; on failure a one-line reason on stderr,
// a non-zero exit, and nothing changed. The process exits only once that output has been written
// out (a pipe takes 64 KiB at a time: process.exit() right after write() would cut a large id map).
import { readFile } from "node:fs/promises";
import { loadConfig } from "../config.js";
import { openDatabase, type Database } from "../db/client.js";
import { migrateDirect } from "../db/migrate.js";
import { loadFixture } from "./fixture.js";
import * as ops from "./operations.js";

const USAGE = `usage: admin <verb> ...
  load FILE
  create-key TENANT_ID OWNER_USER_ID SCOPES [--expires-at ISO]
  revoke-key KEY_ID
  set-plan TENANT_ID PLAN
  set-plan-limits PLAN PER_MINUTE PER_DAY
  set-tenant-limits TENANT_ID PER_MINUTE|clear [PER_DAY]
  inbound-message CONVERSATION_ID TEXT`;

function takeOption(args: string[], name: string): string | undefined {
  const i = args.findIndex((a) => a === name || a.startsWith(`${name}=`));
  if (i < 0) return undefined;
  const [arg] = args.splice(i, 1);
  if (arg!.includes("=")) return arg!.slice(name.length + 1);
  const [value] = args.splice(i, 1);
  if (value === undefined) throw new ops.AdminError(`${name} needs a value`);
  return value;
}

function arity(args: string[], min: number, max = min) {
  if (args.length < min || args.length > max) throw new ops.AdminError(`wrong number of arguments\n${USAGE}`);
}

export async function run(db: Database, argv: string[]): Promise<unknown> {
  const [verb, ...args] = argv;
  switch (verb) {
    case "load": {
      arity(args, 1);
      let doc: unknown;
      try {
        doc = JSON.parse(await readFile(args[0]!, "utf8"));
      } catch (e) {
        throw new ops.AdminError(`cannot read fixture ${args[0]}: ${(e as Error).message}`);
      }
      return loadFixture(db, doc);
    }
    case "create-key": {
      const expiresAt = takeOption(args, "--expires-at");
      arity(args, 3);
      return ops.createKey(db, args[0]!, args[1]!, args[2]!, expiresAt);
    }
    case "revoke-key":
      arity(args, 1);
      return ops.revokeKey(db, args[0]!);
    case "set-plan":
      arity(args, 2);
      return ops.setPlan(db, args[0]!, args[1]!);
    case "set-plan-limits":
      arity(args, 3);
      return ops.setPlanLimits(db, args[0]!, args[1]!, args[2]!);
    case "set-tenant-limits":
      arity(args, 2, 3);
      if (args[1] !== "clear" && args.length !== 3) throw new ops.AdminError("PER_DAY is required unless PER_MINUTE is clear");
      return ops.setTenantLimits(db, args[0]!, args[1]!, args[2]);
    case "inbound-message":
      arity(args, 2);
      return ops.inboundMessage(db, args[0]!, args[1]!);
    default:
      throw new ops.AdminError(verb ? `unknown verb "${verb}"\n${USAGE}` : USAGE);
  }
}

/** Writes `text` and resolves once it has been handed to the OS (all of it, whatever the stream is). */
export function writeFully(stream: NodeJS.WritableStream, text: string): Promise<void> {
  return new Promise((resolve) => {
    stream.once("error", () => resolve()); // the reader went away (EPIPE): nothing more to write
    stream.write(text, () => resolve());
  });
}

async function main() {
  // No statement_timeout (DATABASE_STATEMENT_TIMEOUT_MS is for API requests): a fixture is loaded
  // in one transaction of large statements.
  const config = { ...loadConfig(), databaseStatementTimeoutMs: 0 };
  let db: Database | undefined;
  let code = 0;
  let out = "";
  let err = "";
  try {
    db = await openDatabase(config);
    await migrateDirect(config, db);
    out = `${JSON.stringify(await run(db, process.argv.slice(2)))}\n`;
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    err = `${msg.split("\n")[0]!.replace(/\s+/g, " ").trim() || "failed"}\n`;
    code = 1;
  } finally {
    await db?.close().catch(() => {});
  }
  if (out) await writeFully(process.stdout, out);
  if (err) await writeFully(process.stderr, err);
  // Exit explicitly (a driver may keep a handle open) but only after the output has flushed.
  process.exit(code);
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) void main();
