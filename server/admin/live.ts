// The running embedded service, for the admin CLI (README "Admin CLI"): PGlite allows one process per
// folder, so while `npm start` holds the embedded database, `npm run --silent admin -- demo-key` goes
// through that service's own admin transport (/trpc-admin) instead of refusing. At start the service
// writes `<folder>/crm-service.json` (mode 0600: its pid, the URL it listens on, a token made for this
// run) and removes it when it stops; /trpc-admin accepts that token besides INTERNAL_TOKEN. Whoever
// can read the file can read the database folder itself: the token gives nothing more.
import { randomBytes } from "node:crypto";
import { readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { currentLock } from "../db/pglite-lock.js";

export const SERVICE_FILE = "crm-service.json";

export interface LiveService {
  pid: number;
  url: string;
  token: string;
  /** The embedded database over SQL (server/db/sql-socket.ts), when the service serves it. */
  sql?: { url: string; psqlUrl: string };
}

/** A token for this run's local admin transport. */
export const newLocalToken = () => randomBytes(32).toString("base64url");

/** Written by the service once it listens (atomically: aside, then renamed). */
export function writeServiceFile(dataDir: string, service: LiveService): void {
  const file = path.join(dataDir, SERVICE_FILE);
  const aside = `${file}.${process.pid}.new`;
  writeFileSync(aside, `${JSON.stringify(service)}\n`, { mode: 0o600 });
  renameSync(aside, file);
}

/** Removed by the service as it stops (if it is still its own). */
export function removeServiceFile(dataDir: string, pid: number): void {
  const file = path.join(dataDir, SERVICE_FILE);
  try {
    if ((JSON.parse(readFileSync(file, "utf8")) as LiveService).pid === pid) unlinkSync(file);
  } catch {
    // gone already
  }
}

/** The service that holds the folder now, if it is one that serves (not another CLI or a migration). */
export function runningService(dataDir: string): LiveService | undefined {
  const holder = currentLock(dataDir)?.holder;
  if (!holder) return undefined;
  try {
    const s = JSON.parse(readFileSync(path.join(dataDir, SERVICE_FILE), "utf8")) as LiveService;
    return s.pid === holder.pid && typeof s.url === "string" && typeof s.token === "string" ? s : undefined;
  } catch {
    return undefined;
  }
}

/** Runs an admin procedure (a mutation) on the running service; its result, or its one-line refusal as an Error. */
export async function callAdmin(service: LiveService, procedure: string, input: unknown): Promise<unknown> {
  const res = await fetch(`${service.url}/trpc-admin/${procedure}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${service.token}`, "Content-Type": "application/json" },
    body: JSON.stringify(input ?? {}),
    signal: AbortSignal.timeout(30_000),
  });
  const body = (await res.json().catch(() => undefined)) as
    | { result?: { data?: unknown }; error?: { message?: string } }
    | undefined;
  if (res.ok && body?.result) return body.result.data;
  throw new Error(body?.error?.message ?? `the running service answered ${res.status}`);
}
