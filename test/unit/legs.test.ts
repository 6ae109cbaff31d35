// The CI matrix holds together (test/legs.mjs, vitest.config.ts, .ci/run): every test file is in a
// group, every group and topology is run by some leg, every leg selects files, and .ci/run runs
// exactly the legs of the table, each with its CI_LEG.
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { GROUPS, LEGS, TOPOLOGIES, topologiesOf } from "../legs.mjs";

const TEST = path.resolve(import.meta.dirname, "..");
const ROOT = path.resolve(TEST, "..");

/** Every *.test.ts under test/, as paths relative to test/. */
function testFiles(dir = TEST, rel = ""): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    if (statSync(p).isDirectory()) return f === "node_modules" ? [] : testFiles(p, path.join(rel, f));
    return f.endsWith(".test.ts") ? [path.join(rel, f)] : [];
  });
}

const files = testFiles();
const groupOf = (f: string) => f.split(path.sep)[0];
const tagsOf = (f: string) => topologiesOf(readFileSync(path.join(TEST, f), "utf8"));
const ci = readFileSync(path.join(ROOT, ".ci/run"), "utf8");

describe("the CI matrix", () => {
  it("every test file is in exactly one group's folder (unit, process or db)", () => {
    expect(files.length).toBeGreaterThan(40);
    expect(files.filter((f) => !(GROUPS as readonly string[]).includes(groupOf(f)!) || f.split(path.sep).length !== 2)).toEqual([]);
  });

  it("the database files, which share their worker's process (vitest.config.ts isolate: false), change no process-wide state", () => {
    // What would reach the next file in the same process: the environment, a mocked module or
    // global, a clock left fake, a spy left on a global. Spies and fake clocks restored in `finally`.
    const db = files.filter((f) => groupOf(f) === "db");
    expect(db.length).toBeGreaterThan(30);
    const offenders: string[] = [];
    for (const f of db) {
      const text = readFileSync(path.join(TEST, f), "utf8");
      if (/process\.env(\.[A-Z_]+|\[[^\]]+\])\s*=[^=]|delete process\.env|vi\.(mock|doMock|stubEnv|stubGlobal)\(/.test(text)) offenders.push(`${f}: sets the environment or mocks a module or global`);
      if (/vi\.useFakeTimers\(/.test(text) && (text.match(/vi\.useFakeTimers\(/g)!.length > (text.match(/vi\.useRealTimers\(/g) ?? []).length)) offenders.push(`${f}: a fake clock not put back`);
      if (/vi\.spyOn\(globalThis/.test(text) && !/mockRestore\(\)/.test(text)) offenders.push(`${f}: a spy on a global not restored`);
    }
    expect(offenders).toEqual([]);
  });

  it("topologies are named only by test/db/ files, and only known ones", () => {
    const unreadable = files.flatMap((f) => {
      try {
        tagsOf(f);
        return [];
      } catch (e) {
        return [`${f}: ${(e as Error).message}`];
      }
    });
    expect(unreadable).toEqual([]);
    const tagged = files.filter((f) => tagsOf(f).length);
    expect(tagged.filter((f) => groupOf(f) !== "db")).toEqual([]);
    expect(tagged.flatMap((f) => tagsOf(f).filter((t) => !(TOPOLOGIES as readonly string[]).includes(t)).map((t) => `${f}: ${t}`))).toEqual([]);
  });

  it("a @topology line that does not read as known words fails, instead of dropping the file from its legs", () => {
    const header = (line: string) => `${line}\n// What the file tests.\nimport { it } from "vitest";\n`;
    expect(topologiesOf(header("// @topology pooler redis citus"))).toEqual(["pooler", "redis", "citus"]);
    expect(topologiesOf(header("// @topology citus"))).toEqual(["citus"]);
    expect(topologiesOf(header("// A file of no topology."))).toEqual([]);
    for (const broken of [
      "// @topology poolr",
      "// @topology pooler redis-cluster",
      "// @topology pooler, redis",
      "// @topology pooler pooler",
      "// @topology",
      "//@topology pooler",
      "// @Topology pooler",
      "// @topologies pooler",
      "/* @topology pooler */",
      "// @topology pooler\n// @topology redis",
    ])
      expect(() => topologiesOf(header(broken)), broken).toThrow(/@topology/);
    expect(() => topologiesOf(header("// @topology poolr"))).toThrow(/unknown poolr/);
  });

  it("every group and every topology is run by some leg", () => {
    const legs = Object.values(LEGS);
    for (const g of GROUPS) expect(legs.some((l) => l.groups.includes(g)), g).toBe(true);
    for (const t of TOPOLOGIES) expect(legs.some((l) => l.topologies.includes(t)), t).toBe(true);
  });

  it("every leg selects at least one file", () => {
    for (const [name, leg] of Object.entries(LEGS)) {
      const selected = files.filter((f) => leg.groups.includes(groupOf(f) as never) || (groupOf(f) === "db" && tagsOf(f).some((t) => leg.topologies.includes(t as never))));
      expect(selected.length, name).toBeGreaterThan(0);
    }
  });

  it("the leg test (test/db/leg.test.ts) runs in every leg with a backend", () => {
    const tags = tagsOf(path.join("db", "leg.test.ts"));
    for (const [name, leg] of Object.entries(LEGS)) {
      if (leg.groups.includes("db")) continue;
      if (leg.groups.length === 1 && leg.groups[0] === "unit") continue;
      expect(leg.topologies.some((t) => tags.includes(t)), name).toBe(true);
    }
  });

  it(".ci/run runs exactly the table's legs, each with its CI_LEG", () => {
    const run = [...ci.matchAll(/^(?!\s*#)[^\n]*?\bleg ([a-z0-9+-]+) (?:env|node|bash)\b/gm)].map((m) => m[1]);
    expect(run.filter((n) => n !== "drills").sort()).toEqual(Object.keys(LEGS).sort());
    expect(ci).toMatch(/^leg\(\) \{\n\s+local name="\$1"; shift\n\s+export CI_LEG="\$name"$/m);
  });
});
