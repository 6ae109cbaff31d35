// The platform-admin CLI as an operator runs it: `npm run --silent admin -- <verb> ...`.
import { ROOT, run } from "./proc.js";

export async function admin(databaseUrl: string, ...args: string[]): Promise<any> {
  const r = await run("npm", ["run", "--silent", "admin", "--", ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl },
    timeoutMs: 60_000,
  });
  if (r.code !== 0) throw new Error(`admin ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  return JSON.parse(r.stdout);
}
