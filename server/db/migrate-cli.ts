// `npm run db:migrate`: applies pending migrations to DATABASE_URL (or the embedded database).
import { loadConfig } from "../config.js";
import { openDatabase } from "./client.js";
import { migrate } from "./migrate.js";

const db = await openDatabase(loadConfig());
try {
  const applied = await migrate(db.sql);
  process.stdout.write(`${JSON.stringify({ applied })}\n`);
} catch (e) {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await db.close();
}
