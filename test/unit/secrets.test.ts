// No password of a configured URL in any output (server/secrets.ts): maskUrl for a URL a message
// quotes, maskSecrets for any text (start-up lines, stacks, log lines), with passwords holding the
// characters that end a URL's authority for its parser ("/", "?", "#", "@"), a malformed "%" and
// JSON's escapes; and the same through the processes that print them (the built service, the
// migrator, the admin CLI, at LOG_LEVEL=debug with the stack), for DATABASE_URL,
// DIRECT_DATABASE_URL and REDIS_URL.
import { spawn } from "node:child_process";
import { beforeAll, describe, expect, it } from "vitest";
import { commandLine, ensureBuild, ROOT, serviceCommand } from "../../scripts/ensure-build.js";
import { createLogger } from "../../server/logger.js";
import { maskSecrets, maskUrl, passwordForms } from "../../server/secrets.js";
import { baseEnv, freePort } from "../helpers/processes.js";

/** Passwords as written in a URL, each with the part a leak would show. */
const PASSWORDS = [
  { written: "s3cr/et", leak: "s3cr/et" },
  { written: "pa#ss", leak: "pa#ss" },
  { written: "p?ss", leak: "p?ss" },
  { written: "p@ss", leak: "p@ss" },
  { written: "hunter#2", leak: "hunter#2" },
  { written: "bad%zzpw", leak: "bad%zzpw" },
  { written: "p%40ss%2Fword", leak: "p@ss/word" },
  { written: 'qu"ote\\s', leak: 'qu"ote\\s' },
];

describe("maskUrl", () => {
  for (const { written } of PASSWORDS)
    it(`masks the password ${JSON.stringify(written)} whatever it holds`, () => {
      const url = `postgresql://app:${written}@db.internal:5432/crm`;
      expect(maskUrl(url)).toBe("postgresql://app:***@db.internal:5432/crm");
      expect(maskUrl(`redis://:${written}@cache:6379`)).toBe("redis://:***@cache:6379");
    });

  it("leaves a URL without a password as it is; masks whole a value that does not parse and may hold credentials", () => {
    expect(maskUrl("postgresql://app@db:5432/crm")).toBe("postgresql://app@db:5432/crm");
    expect(maskUrl("postgresql://db:5432/crm")).toBe("postgresql://db:5432/crm");
    expect(maskUrl("not-a-url")).toBe("not-a-url");
    expect(maskUrl("postgresql://app@db:99999/crm")).toBe("postgresql://***");
  });
});

describe("a password in the query (password, sslpassword)", () => {
  it("maskUrl masks its value like the userinfo's, whatever the scheme; other parameters are kept", () => {
    expect(maskUrl("mysql://app@127.0.0.1:1/crm?password=S3cret")).toBe("mysql://app@127.0.0.1:1/crm?password=***");
    expect(maskUrl("postgresql://app:pw@db/crm?sslmode=require&SSLPASSWORD=k%40y&password=a+b")).toBe(
      "postgresql://app:***@db/crm?sslmode=require&SSLPASSWORD=***&password=***",
    );
    expect(maskUrl("postgresql://db/crm?password=&user=x")).toBe("postgresql://db/crm?password=&user=x");
  });
  it("maskSecrets masks it in any text, as written and decoded", () => {
    const env = {
      DATABASE_URL: "postgresql://db/crm?sslpassword=k%40y&password=S3cret",
      REDIS_URL: "redis://cache:6379?password=r3d+is",
    };
    const text = "S3cret k%40y k@y r3d+is r3d is";
    expect(maskSecrets(text, env)).toBe("*** *** *** *** ***");
  });
});

describe("maskSecrets", () => {
  for (const { written, leak } of PASSWORDS)
    for (const variable of ["DATABASE_URL", "DIRECT_DATABASE_URL", "REDIS_URL"])
      it(`${variable} with the password ${JSON.stringify(written)}: masked in text, decoded and JSON-escaped alike`, () => {
        const url =
          variable === "REDIS_URL"
            ? `redis://:${written}@cache:6379`
            : `postgresql://app:${written}@db.internal:5432/crm`;
        const env = { [variable]: url };
        const text = `connect failed for ${url} (${leak}) ${JSON.stringify({ url, leak })}`;
        const masked = maskSecrets(text, env);
        for (const f of passwordForms(url)) expect(masked, f).not.toContain(f);
        expect(masked).not.toContain(leak);
        expect(masked).toContain("***");
      });

  it("changes nothing without a configured password", () => {
    expect(maskSecrets("postgresql://app@db/crm", { DATABASE_URL: "postgresql://app@db/crm" })).toBe(
      "postgresql://app@db/crm",
    );
  });
});

describe("the logger masks every line", () => {
  it("a log line (and an error's stack) quoting DATABASE_URL shows no password", async () => {
    const url = "postgresql://app:s3cr/et@db.internal:5432/crm";
    const lines: string[] = [];
    const before = process.env.DATABASE_URL;
    process.env.DATABASE_URL = url;
    try {
      for (const format of ["json", "pretty"] as const) {
        const logger = createLogger("debug", format, { write: (line: string) => lines.push(line) });
        const err = new Error(`could not connect to ${url}`);
        logger.error({ err, url }, `failed: ${url}`);
      }
    } finally {
      if (before === undefined) delete process.env.DATABASE_URL;
      else process.env.DATABASE_URL = before;
    }
    const out = lines.join("");
    expect(out).toContain("failed: postgresql://app:***@db.internal:5432/crm");
    expect(out).not.toContain("s3cr/et");
    expect(out).not.toContain("s3cr\\/et");
  });
});

describe("the processes that print a configured URL", { timeout: 120_000 }, () => {
  beforeAll(() => ensureBuild(), 180_000);

  /** Runs a command to its end with env: stdout and stderr together. */
  const run = (command: string, args: string[], env: NodeJS.ProcessEnv) =>
    new Promise<{ code: number | null; out: string }>((resolve, reject) => {
      const child = spawn(command, args, { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, out }));
    });
  const service = serviceCommand();
  const entries = {
    service: (env: NodeJS.ProcessEnv) => run(service.command, service.args, env),
    migrator: (env: NodeJS.ProcessEnv) => run(process.execPath, commandLine("db:migrate").args, env),
    "admin CLI": (env: NodeJS.ProcessEnv) =>
      run(
        process.execPath,
        commandLine("admin", ["set-plan", "00000000-0000-4000-8000-000000000001", "pro"]).args,
        env,
      ),
  };
  const env = (extra: Record<string, string>) => ({
    ...baseEnv(),
    NO_DEMO: "1",
    LOG_LEVEL: "debug",
    PGLITE_DATA_DIR: "memory://",
    ...extra,
  });

  const cases: { entry: keyof typeof entries; variable: string; password: string }[] = [
    ...PASSWORDS.slice(0, 6).map(({ written }) => ({
      entry: "service" as const,
      variable: "DATABASE_URL",
      password: written,
    })),
    { entry: "service", variable: "REDIS_URL", password: "hunter#2" },
    { entry: "service", variable: "REDIS_URL", password: "s3cr/et" },
    { entry: "service", variable: "DIRECT_DATABASE_URL", password: "p?ss" },
    { entry: "migrator", variable: "DATABASE_URL", password: "s3cr/et" },
    { entry: "migrator", variable: "DIRECT_DATABASE_URL", password: "bad%zzpw" },
    { entry: "admin CLI", variable: "DATABASE_URL", password: "pa#ss" },
    { entry: "admin CLI", variable: "DATABASE_URL", password: "p@ss" },
  ];
  for (const c of cases)
    it(`${c.entry}, ${c.variable} with the password ${JSON.stringify(c.password)}, unreachable, LOG_LEVEL=debug: exit 1, no password printed`, async () => {
      const port = await freePort();
      const url =
        c.variable === "REDIS_URL"
          ? `redis://:${c.password}@127.0.0.1:${port}`
          : `postgresql://app:${c.password}@127.0.0.1:${port}/crm`;
      const vars: Record<string, string> = { [c.variable]: url };
      if (c.variable === "DIRECT_DATABASE_URL")
        vars.DATABASE_URL = `postgresql://app@127.0.0.1:${await freePort()}/crm`;
      if (c.variable === "REDIS_URL") vars.DATABASE_URL = `postgresql://app@127.0.0.1:${await freePort()}/crm`;
      const r = await entries[c.entry](env(vars));
      expect(r.code, r.out).toBe(1);
      expect(r.out.length).toBeGreaterThan(0);
      expect(r.out, r.out).not.toContain(c.password);
      expect(r.out).not.toContain(decodeURIComponentSafe(c.password));
    });
});

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
