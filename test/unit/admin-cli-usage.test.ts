// The admin CLI's usage (server/admin/cli.ts): as a process (the built dist/server/admin/cli.js, as
// `npm run --silent admin -- …` runs it), and each command line through execute(), what main()
// writes and exits with: `help` and `--help` print the verbs with their arguments on stdout (exit
// 0); no verb, an unknown verb, wrong arguments or an unknown option print the reason, then the
// verbs (exit 2). No database is opened for any of it (test/process/admin-cli.test.ts checks that
// on the leg's database, and every refusal of a verb): the same on every backend, so once.
import { describe, expect, it } from "vitest";
import { execute, USAGE } from "../../server/admin/cli.js";
import { baseEnv, runAdminCli } from "../helpers/processes.js";

const TENANT = "00000000-0000-4000-8000-0000000000a1";
const USER = "00000000-0000-4000-8000-0000000000b1";
/** An environment whose database would refuse to open: a usage error must not reach it. */
const env = { ...baseEnv(), LOG_LEVEL: "silent", DATABASE_URL: "postgresql://nobody@127.0.0.1:1/none" };
/** A command line as main() runs it (execute), in this process. */
const admin = async (args: string[]) => {
  const r = await execute(args, env);
  return { code: r.code, stdout: r.out, stderr: r.err };
};
const acme = { id: TENANT, users: { ana: USER } };

/** A usage error: exit 2, the reason on the first line, then the verbs. */
async function usage(args: string[], reason: string) {
  const r = await admin(args);
  expect(r.stderr, args.join(" ")).toBe(`${reason}\n${USAGE}\n`);
  expect(r.stdout).toBe("");
  expect(r.code).toBe(2);
}

describe("admin CLI: usage", { timeout: 120_000 }, () => {
  it("as a process (node with tsx, as npm runs it): help on stdout, exit 0; a usage error on stderr, exit 2", async () => {
    const help = await runAdminCli(["help"], env);
    expect([help.code, help.stdout, help.stderr]).toEqual([0, `${USAGE}\n`, ""]);
    const bad = await runAdminCli(["frobnicate"], env);
    expect([bad.code, bad.stdout, bad.stderr]).toEqual([2, "", `unknown verb "frobnicate"\n${USAGE}\n`]);
  });

  it("help and --help print the verbs with their arguments on stdout, exit 0", async () => {
    for (const arg of ["help", "--help"]) {
      const r = await admin([arg]);
      expect(r.stdout).toBe(`${USAGE}\n`);
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
    }
    for (const verb of [
      "load FILE",
      "create-key TENANT_ID OWNER_USER_ID SCOPES [--expires-at ISO]",
      "revoke-key KEY_ID",
      "set-plan TENANT_ID PLAN",
      "set-plan-limits PLAN PER_MINUTE PER_DAY",
      "set-tenant-limits TENANT_ID PER_MINUTE PER_DAY",
      "set-tenant-limits TENANT_ID clear",
      "inbound-message CONVERSATION_ID TEXT",
    ])
      expect(USAGE).toContain(`\n  ${verb}\n`);
  });

  it("no verb, an unknown verb, wrong arity, an unknown option: the reason, then the verbs; exit 2", async () => {
    await usage([], "no verb given");
    await usage(["frobnicate"], 'unknown verb "frobnicate"');
    await usage(["set-plan", acme.id], "set-plan: wrong number of arguments (1 given, 2 expected)");
    await usage(
      ["create-key", acme.id, acme.users.ana, "all", "extra"],
      "create-key: wrong number of arguments (4 given, 3 expected)",
    );
    await usage(
      ["set-tenant-limits", acme.id, "clear", "5"],
      "set-tenant-limits: wrong number of arguments (3 given, 2 expected)",
    );
    await usage(["create-key", acme.id, acme.users.ana, "all", "--expires-at"], "--expires-at needs a value");
    await usage(
      ["create-key", acme.id, acme.users.ana, "all", "--expire-at=2030-01-01T00:00:00Z"],
      'create-key: unknown option "--expire-at"',
    );
  });
});
