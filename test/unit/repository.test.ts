// Docs a newcomer can trust: no file of the repository names a folder of one machine (a checkout
// path, a home directory); the decision records state what holds, without work-log tags; the map
// (docs/architecture.md) is short, and every file, migration and function it names exists.
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const tracked = execFileSync("git", ["ls-files", "-z"], { cwd: ROOT, encoding: "utf8" }).split("\0").filter(Boolean);
const text = (f: string) => readFileSync(path.join(ROOT, f), "utf8");
const isText = (f: string) => !/\.(png|jpe?g|gif|ico|wasm|tar|gz|zip|pdf)$/i.test(f);

describe("the repository", () => {
  it("no file names a machine's folders (a checkout, a home directory)", () => {
    const machinePath = /(?:^|[\s"'`(=:])\/(?:work|root|home\/[a-z0-9_-]+|Users\/[A-Za-z0-9_-]+)\//;
    const found = tracked
      .filter((f) => isText(f) && existsSync(path.join(ROOT, f)) && f !== "package-lock.json")
      .flatMap((f) =>
        text(f)
          .split("\n")
          .map((l, i) => ({ f, i, l })),
      )
      .filter(({ l }) => machinePath.test(l))
      .map(({ f, i, l }) => `${f}:${i + 1}: ${l.trim().slice(0, 120)}`);
    expect(found).toEqual([]);
  });

  it("the decision records carry no work-log tags (issue or round numbers)", () => {
    const files = readdirSync(path.join(ROOT, "docs/decisions")).map((f) => `docs/decisions/${f}`);
    const tags = files.flatMap((f) =>
      text(f)
        .split("\n")
        .map((l, i) => ({ l, at: `${f}:${i + 1}` }))
        .filter(({ l }) => /\b(?:issue|round|session) \d+\b/i.test(l))
        .map(({ at, l }) => `${at}: ${l.trim().slice(0, 100)}`),
    );
    expect(tags).toEqual([]);
  });
});

describe("docs/architecture.md, the map", () => {
  const doc = text("docs/architecture.md");
  const ticks = [...doc.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);

  it("is short (at most ~220 lines: the folders, one request walked file by file, where each concern lives)", () => {
    expect(doc.split("\n").length).toBeLessThanOrEqual(225);
  });

  it("every file and folder it names exists", () => {
    const paths = ticks
      .map((t) => t.replace(/[:#].*$/, "").replace(/\/$/, ""))
      .filter(
        (t) =>
          /^[\w.@-]+(?:\/[\w.@*-]+)+$|^[\w.-]+\.(?:ts|mjs|sql|md|json|prisma)$/.test(t) &&
          !t.includes("*") &&
          !/^https?:/.test(t),
      );
    expect(paths.length).toBeGreaterThan(20);
    const missing = paths.filter((p) => !existsSync(path.join(ROOT, p)) && !existsSync(path.join(ROOT, "..", p)));
    expect(missing).toEqual([]);
  });

  it("every migration it names exists", () => {
    const migrations = new Set(readdirSync(path.join(ROOT, "prisma/migrations")));
    const named = [...doc.matchAll(/\b(\d{14}_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
    expect(named.filter((m) => !migrations.has(m))).toEqual([]);
  });

  it('every function it names exists: a TypeScript function as name(), a database function as "name"', () => {
    const sources = tracked
      .filter((f) => /\.(ts|mjs|sql)$/.test(f) && !f.endsWith(".test.ts") && existsSync(path.join(ROOT, f)))
      .map(text)
      .join("\n");
    const tsNames = ticks.map((t) => /^([A-Za-z_$][\w$]*)\(\)$/.exec(t)?.[1]).filter((n): n is string => Boolean(n));
    const missingTs = tsNames.filter(
      (n) =>
        !new RegExp(
          `(?:function\\*? ${n}\\b|\\b${n}\\s*[:=]\\s*(?:async\\s*)?(?:\\(|function)|\\b${n}\\s*\\(|(?:async ` +
            `)?${n}\\()`,
        ).test(sources),
    );
    expect(missingTs).toEqual([]);
    const sqlNames = ticks.map((t) => /^"([A-Za-z_][\w]*)"$/.exec(t)?.[1]).filter((n): n is string => Boolean(n));
    const sql = tracked
      .filter((f) => f.endsWith(".sql"))
      .map(text)
      .join("\n");
    const missingSql = sqlNames.filter((n) => !sql.includes(`"${n}"`) && !new RegExp(`\\b${n}\\b`).test(sql));
    expect(missingSql).toEqual([]);
  });
});

describe("docs/adding-a-resource.md", () => {
  it("every file and folder it names exists (a placeholder such as routers/<resource>/ aside)", () => {
    const doc = text("docs/adding-a-resource.md");
    const paths = [...doc.matchAll(/`([^`\n]+)`/g)]
      .map((m) => m[1]!.replace(/[:#].*$/, "").replace(/\/$/, ""))
      // shared/…: beside the checkout, not in it (a bare clone has none).
      .filter((t) => /^[\w.@-]+(?:\/[\w.@-]+)+$/.test(t) && !/^https?:/.test(t) && !t.startsWith("shared/"));
    expect(paths.length).toBeGreaterThan(15);
    const missing = paths.filter((p) => !existsSync(path.join(ROOT, p)) && !existsSync(path.join(ROOT, "..", p)));
    expect(missing).toEqual([]);
  });
});
