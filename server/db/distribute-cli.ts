// `npm run db:distribute [-- --shard-count N]`: distributes the migrated schema on a Citus
// coordinator (DIRECT_DATABASE_URL, else DATABASE_URL) as the tables' roles say (server/db/distribute.ts).
// Prints one JSON document and exits 0 (its `warnings`, if any, also on stderr, one line each); or one
// line on stderr and a non-zero exit, having changed nothing.
import { writeFully } from "../admin/output.js";
import { loadConfig } from "../config.js";
import { openPostgres } from "./client.js";
import { distribute, DistributeError } from "./distribute.js";

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  let shardCount: number | undefined;
  for (let i = 0; i < args.length; i++) {
    const [name, inline] = args[i]!.split("=", 2);
    if (name === "--shard-count") {
      const value = inline ?? args[++i];
      shardCount = Number(value);
      if (!Number.isInteger(shardCount) || shardCount < 1 || shardCount > 64_000) {
        await writeFully(process.stderr, `--shard-count must be an integer from 1 to 64000, got "${value ?? ""}"\n`);
        return 2;
      }
    } else {
      await writeFully(
        process.stderr,
        `unknown argument "${args[i]}"\nusage: npm run db:distribute [-- --shard-count N]\n`,
      );
      return 2;
    }
  }
  const config = loadConfig();
  const url = config.directDatabaseUrl;
  if (!url) {
    await writeFully(
      process.stderr,
      "not a Citus coordinator: DATABASE_URL is unset (the embedded database cannot be distributed)\n",
    );
    return 1;
  }
  const db = await openPostgres(url, { max: 1 });
  try {
    const result = await distribute(db.sql, { shardCount });
    const changed = result.reference.length + result.distributed.length + result.delegated.length > 0;
    await writeFully(
      process.stdout,
      `${JSON.stringify({ changed, ...result, ...(changed ? {} : { note: "already distributed: nothing to do" }) })}\n`,
    );
    // Also where an operator reads them: the JSON document may go to a file or a pipe.
    for (const w of result.warnings) await writeFully(process.stderr, `warning: ${w}\n`);
    return 0;
  } catch (err) {
    const msg = err instanceof DistributeError ? err.message : `distribute failed: ${firstLine(err)}`;
    await writeFully(process.stderr, `${msg}\n`);
    return 1;
  } finally {
    await db.close();
  }
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return (
    text
      .split("\n")
      .map((l) => l.trim())
      .find(Boolean) ?? "unknown error"
  );
}

process.exitCode = await main();
