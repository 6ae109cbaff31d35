// `npm run studio` on the embedded database (scripts/studio.sh, when DATABASE_URL is not set): Prisma
// Studio over the SQL socket of the process that owns the folder (server/db/sql-socket.ts). The
// running service's, when one runs (its service file names it); otherwise this process opens the
// folder itself (its lock: a service started meanwhile refuses), serves it for Studio, and closes it
// when Studio ends. Prisma Studio's arguments pass through (`-- --port 5555 --browser none`).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { loadConfig } from "../config.js";
import { openDatabase, type Database } from "../db/client.js";
import { migrateDirect } from "../db/migrate.js";
import { startupErrorText } from "../startup-error.js";
import { runningService } from "./live.js";

async function main(): Promise<number> {
  const config = loadConfig();
  const live = runningService(config.dataDir);
  let db: Database | undefined;
  let url: string;
  let close = async () => {};
  if (live?.sql) {
    url = live.sql.url;
    process.stderr.write(
      `Prisma Studio on the embedded database ${config.dataDir} through the service holding it (pid ${live.pid}); ` +
        `psql: psql '${live.sql.psqlUrl}'\n`,
    );
  } else if (live) {
    process.stderr.write(
      `the service holding ${config.dataDir} (pid ${live.pid}) does not serve SQL (EMBEDDED_SQL_PORT=off): ` +
        "start it without that setting, or stop it\n",
    );
    return 1;
  } else {
    db = await openDatabase({ ...config, databaseStatementTimeoutMs: 0 });
    await migrateDirect(config, db);
    const socket = await db.serveSql!(config.embeddedSqlPort ?? 0);
    url = socket.url;
    close = async () => {
      await socket.close();
      await db!.close();
    };
    process.stderr.write(
      `Prisma Studio on the embedded database ${config.dataDir} (held by this process until Studio ends); ` +
        `psql: psql '${socket.psqlUrl}'\n`,
    );
  }
  const prisma = createRequire(import.meta.url).resolve("prisma/build/index.js");
  const studio = spawn(process.execPath, [prisma, "studio", ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, DATABASE_URL: url },
  });
  // npm's SIGTERM/SIGINT reach this process (exec in package.json and studio.sh): passed on to Studio.
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => studio.kill(sig));
  const code = await new Promise<number>((resolve) => studio.on("exit", (c, signal) => resolve(c ?? (signal ? 1 : 0))));
  await close();
  return code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(startupErrorText(err, undefined, process.env));
    process.exit(1);
  },
);
