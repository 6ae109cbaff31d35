// The admin CLI through a pipe: `npm run --silent admin -- load FILE | …` prints its
// whole JSON document — several MB here — and exits only after it has been written out, however
// slowly the reader drains the pipe; a failure prints one line on stderr and exits 1.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureBuild } from "../../scripts/ensure-build.js";
import { freshDatabase, seedEmbeddedFolder, type TestDb } from "../helpers/app.js";

const dir = mkdtempSync(path.join(tmpdir(), "crm-cli-pipe-"));
let pgDb: TestDb | undefined;
let env: NodeJS.ProcessEnv;

beforeAll(async () => {
  await ensureBuild(); // `npm run admin` would rebuild a stale dist/ and say so on stderr
  env = { ...process.env, LOG_LEVEL: "silent" };
  delete env.DATABASE_URL;
  if (process.env.DATABASE_URL) {
    pgDb = await freshDatabase();
    env.DATABASE_URL = pgDb.url;
  } else {
    env.PGLITE_DATA_DIR = path.join(dir, "db");
    await seedEmbeddedFolder(env.PGLITE_DATA_DIR); // migrated already: the pipe is the subject, not initdb
  }
});
afterAll(async () => {
  await pgDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Runs the CLI with stdout on a pipe that nobody reads until `stallMs` after the first output (or
 * until the CLI exits, whichever comes first), then drains it.
 */
function adminThroughPipe(
  args: string[],
  stallMs: number,
): Promise<{ code: number | null; stdout: Buffer; stderr: string; exitedWhileStalled: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn("npm", ["run", "--silent", "admin", "--", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let stderr = "";
    let draining = false;
    let exitedWhileStalled = false;
    const drain = () => {
      if (draining) return;
      draining = true;
      child.stdout.removeAllListeners("readable");
      child.stdout.on("data", (c: Buffer) => out.push(c));
      child.stdout.resume();
    };
    // A 'readable' listener keeps the stream paused: what the CLI writes waits in the pipe.
    child.stdout.once("readable", () => setTimeout(drain, stallMs));
    child.on("exit", () => {
      if (!draining) exitedWhileStalled = true;
      drain();
    });
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout: Buffer.concat(out), stderr, exitedWhileStalled }));
  });
}

describe("admin CLI output through a pipe", { timeout: 300_000 }, () => {
  it("load prints the whole id map of a big fixture (several MB) and exits 0 after it flushed", async () => {
    const n = 15_000;
    // 200-character refs: the id map is about 3.7 MB.
    const ref = (i: number) => `lead-${String(i).padStart(6, "0")}-`.padEnd(200, "x");
    const leads = Array.from({ length: n }, (_, i) => ({ ref: ref(i), customerName: `Lead ${i}` }));
    const file = path.join(dir, "big.json");
    writeFileSync(file, JSON.stringify({ tenants: [{ ref: "big", users: [{ ref: "ana" }], leads }] }));

    // The reader stalls for 2 s once output starts: the old CLI exited meanwhile, with only what the
    // pipe buffer (64 KiB) took written.
    const r = await adminThroughPipe(["load", file], 2_000);
    expect(r.exitedWhileStalled).toBe(false);
    // stderr is a pipe (no progress line): only the line naming the database the load used.
    const embedded = `database: the embedded PGlite folder ${env.PGLITE_DATA_DIR} (DATABASE_URL is not set)\n`;
    expect(r.stderr).toBe(pgDb ? `database: ${pgDb.url} (DATABASE_URL)\n` : embedded);
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(3_000_000);
    const text = r.stdout.toString("utf8");
    expect(text.endsWith("}\n")).toBe(true);
    const doc = JSON.parse(text);
    expect(Buffer.byteLength(`${JSON.stringify(doc)}\n`)).toBe(r.stdout.length);
    const map = doc.tenants.big.leads as Record<string, string>;
    expect(Object.keys(map)).toHaveLength(n);
    expect(map[ref(n - 1)]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(Object.values(map)).size).toBe(n);
  });

  it("a failure prints one line on stderr, nothing on stdout, and exits 1", async () => {
    const r = await adminThroughPipe(["load", path.join(dir, "missing.json")], 200);
    expect(r.code).toBe(1);
    expect(r.stdout.length).toBe(0);
    expect(r.stderr).toMatch(/^cannot read fixture .*missing\.json.*\n$/);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});
