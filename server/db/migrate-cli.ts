// `npm run db:migrate`: applies pending migrations to DIRECT_DATABASE_URL (default DATABASE_URL),
// or the embedded database.
import { loadConfig } from "../config.js";
import { openDatabase } from "./client.js";
import { migrateDirect } from "./migrate.js";

// No statement_timeout: a migration may build an index on a large table.
const config = { ...loadConfig(), databaseStatementTimeoutMs: 0 };
const db = await openDatabase(config);
try {
  const applied = await migrateDirect(config, db);
  process.stdout.write(`${JSON.stringify({ applied })}\n`);
} catch (e) {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await db.close();
}
