// `npm run db:migrate`: applies pending migrations to DIRECT_DATABASE_URL (default DATABASE_URL),
// or the embedded database. Prints {"applied":[…]} and exits 0; on failure one line on stderr
// (server/startup-error.ts: the variable and the cause; the stack only at LOG_LEVEL=debug), exit 1.
import { loadConfig } from "../config.js";
import { checkDatabaseConnections, exitWithStartupError } from "../startup-error.js";
import { openDatabase, type Database } from "./client.js";
import { migrateDirect } from "./migrate.js";

let db: Database | undefined;
try {
  // No statement_timeout: a migration may build an index on a large table.
  const config = { ...loadConfig(), databaseStatementTimeoutMs: 0 };
  await checkDatabaseConnections(config, { directOnly: true });
  db = await openDatabase(config);
  const applied = await migrateDirect(config, db);
  await db.close();
  process.stdout.write(`${JSON.stringify({ applied })}\n`);
} catch (e) {
  await db?.close().catch(() => {});
  exitWithStartupError(e);
}
