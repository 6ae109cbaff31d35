// The CI matrix holds together (test/legs.mjs, vitest.config.ts, .ci/run): every test file is in a
// group, every `@topology` line reads, every group and topology is run by some leg, every leg selects
// files, and .ci/run runs exactly the legs of the table, each with its CI_LEG. The database files,
// which share their worker's process, leave nothing behind: no environment, mocks or clocks, and no
// module state of the service that is not reset between files (test/helpers/module-state.ts).
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ENTRY_POINTS, MODULE_STATE, moduleState } from "../helpers/module-state.js";
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

/** Every .ts file under `dir`. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = path.join(dir, f);
    return statSync(p).isDirectory() ? sourceFiles(p) : f.endsWith(".ts") ? [p] : [];
  });
}

const files = testFiles();
const groupOf = (f: string) => f.split(path.sep)[0];
const tagsOf = (f: string) => topologiesOf(readFileSync(path.join(TEST, f), "utf8"));
const ci = readFileSync(path.join(ROOT, ".ci/run"), "utf8");

describe("the CI matrix", () => {
  it("every test file is in exactly one group's folder (unit, process or db)", () => {
    expect(files.length).toBeGreaterThan(40);
    expect(
      files.filter((f) => !(GROUPS as readonly string[]).includes(groupOf(f)!) || f.split(path.sep).length !== 2),
    ).toEqual([]);
  });

  it("the database files, which share their worker's process (vitest.config.ts isolate: false), change no process-wide state", () => {
    // What would reach the next file in the same process: the environment, a mocked module or
    // global, a clock left fake, a spy left on a global. Spies and fake clocks restored in `finally`.
    const db = files.filter((f) => groupOf(f) === "db");
    expect(db.length).toBeGreaterThan(30);
    const offenders: string[] = [];
    for (const f of db) {
      const text = readFileSync(path.join(TEST, f), "utf8");
      if (
        /process\.env(\.[A-Z_]+|\[[^\]]+\])\s*=[^=]|delete process\.env|vi\.(mock|doMock|stubEnv|stubGlobal)\(/.test(
          text,
        )
      )
        offenders.push(`${f}: sets the environment or mocks a module or global`);
      if (
        /vi\.useFakeTimers\(/.test(text) &&
        text.match(/vi\.useFakeTimers\(/g)!.length > (text.match(/vi\.useRealTimers\(/g) ?? []).length
      )
        offenders.push(`${f}: a fake clock not put back`);
      if (/vi\.spyOn\(globalThis/.test(text) && !/mockRestore\(\)/.test(text))
        offenders.push(`${f}: a spy on a global not restored`);
    }
    expect(offenders).toEqual([]);
  });

  it("module state of the service a shared-process file could leave: reset between files or kept for a reason", () => {
    const sources = ["server", "routers", "rest", "model"].flatMap((d) => sourceFiles(path.join(ROOT, d)));
    expect(sources.length).toBeGreaterThan(100);
    const stateOf = (f: string) => moduleState(readFileSync(f, "utf8")).map((n) => `${path.relative(ROOT, f)} ${n}`);
    const found = sources.flatMap(stateOf);
    // A new module-level variable (or changed Map, Set, array, object) fails here until MODULE_STATE
    // says what makes it safe; an entry whose binding is gone fails too.
    expect(
      found.filter((k) => !(k in MODULE_STATE)),
      "module state not in test/helpers/module-state.ts",
    ).toEqual([]);
    expect(
      Object.keys(MODULE_STATE).filter((k) => !found.includes(k)),
      "entries no longer found",
    ).toEqual([]);
    // What is reset is reset by the setup file of every project that shares its process.
    const setup = readFileSync(path.join(TEST, "helpers/shared-process.ts"), "utf8")
      .split("\n")
      .map((l) => l.trim());
    for (const [k, how] of Object.entries(MODULE_STATE)) {
      expect(how, k).toMatch(/^(reset: [\w$]+\(\)|kept: .+)$/);
      if (how.startsWith("reset: ")) expect(setup, `${k}: ${how}`).toContain(`${how.slice("reset: ".length)};`);
    }
    const config = readFileSync(path.join(ROOT, "vitest.config.ts"), "utf8").replace(/^\s*\/\/.*$/gm, "");
    expect(config).toMatch(/const SHARED = \{ isolate: false, setupFiles: \["test\/helpers\/shared-process\.ts"\] \}/);
    expect(config.match(/isolate: false/g), "a project sharing its process without the setup file").toHaveLength(1);
    expect(config).toMatch(/name: g, include: \[`test\/\$\{g\}\/\*\*\/\*\.test\.ts`\], \.\.\.\(g === "db" \? SHARED/);
    expect(config).toMatch(/name: "topology", include: topologyFiles, \.\.\.SHARED/);
    // The conditions the kept ones rely on.
    const tests = files.map((f) => ({ f, text: readFileSync(path.join(TEST, f), "utf8") }));
    const setsKept = tests.filter((t) => groupOf(t.f) === "db" && /\bstartStopping\b|\bcountQueries\b/.test(t.text));
    expect(
      setsKept.map((t) => t.f),
      "db files calling startStopping or counting queries",
    ).toEqual([]);
    const entries = ENTRY_POINTS.map((e) => e.replace(/\.ts$/, ""));
    expect(tests.filter((t) => entries.some((e) => t.text.includes(`${e}.js"`))).map((t) => t.f)).toEqual([]);
  });

  it("the module-state finder sees what a module could leave behind, and not what it cannot", () => {
    const found = moduleState(`import { x } from "y";
export let current = 0;
let cache: Promise<string> | undefined;
const seen = new Set<string>();
const LOOKUP = new Set(["a", "b"]);
const byKey: Map<string, number> = new Map();
const byReq = new WeakMap<object, number>();
export const counter = { count: 0 };
const LIMITS = { max: 5 };
const queue: string[] = [];
export function f(k: string) {
  let local = 1;
  seen.add(k);
  byKey.set(k, local);
  byReq.set({}, 1);
  counter.count += 1;
  queue.push(k);
  return LOOKUP.has(k) && LIMITS.max > 1;
}
`);
    expect(found.sort()).toEqual(["byKey", "cache", "counter", "current", "queue", "seen"]);
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
    expect(
      tagged.flatMap((f) =>
        tagsOf(f)
          .filter((t) => !(TOPOLOGIES as readonly string[]).includes(t))
          .map((t) => `${f}: ${t}`),
      ),
    ).toEqual([]);
  });

  it("a @topology line that does not read as known words fails, instead of dropping the file from its legs", () => {
    const header = (line: string) => `${line}\n// What the file tests.\nimport { it } from "vitest";\n`;
    expect(topologiesOf(header("// @topology pooler redis citus"))).toEqual(["pooler", "redis", "citus"]);
    expect(topologiesOf(header("// @topology citus"))).toEqual(["citus"]);
    expect(topologiesOf(header("// A file of no topology."))).toEqual([]);
    // Mentions in the text, and other tags, are not the header line.
    const mentions = "// Files name theirs with `// @topology pooler`.\n// @ts-expect-error: a type test";
    expect(topologiesOf(header(mentions))).toEqual([]);
    for (const broken of [
      "// @topology poolr",
      "// @topology pooler redis-cluster",
      "// @topology pooler, redis",
      "// @topology pooler pooler",
      "// @topology",
      "//@topology pooler",
      "// @Topology pooler",
      "// @topologies pooler",
      "// @topolgy pooler",
      "// @Topolgoy pooler",
      "/* @topology pooler */",
      "// @topology pooler\n// @topology redis",
    ])
      expect(() => topologiesOf(header(broken)), broken).toThrow(/@topology/);
    expect(() => topologiesOf(header("// @topology poolr"))).toThrow(/unknown poolr/);
  });

  it("every group and every topology is run by some leg", () => {
    const legs = Object.values(LEGS);
    for (const g of GROUPS)
      expect(
        legs.some((l) => l.groups.includes(g)),
        g,
      ).toBe(true);
    for (const t of TOPOLOGIES)
      expect(
        legs.some((l) => l.topologies.includes(t)),
        t,
      ).toBe(true);
  });

  it("every leg selects at least one file", () => {
    for (const [name, leg] of Object.entries(LEGS)) {
      const selected = files.filter(
        (f) =>
          leg.groups.includes(groupOf(f) as never) ||
          (groupOf(f) === "db" && tagsOf(f).some((t) => leg.topologies.includes(t as never))),
      );
      expect(selected.length, name).toBeGreaterThan(0);
    }
  });

  it("the leg test (test/db/leg.test.ts) runs in every leg with a backend", () => {
    const tags = tagsOf(path.join("db", "leg.test.ts"));
    for (const [name, leg] of Object.entries(LEGS)) {
      if (leg.groups.includes("db")) continue;
      if (leg.groups.length === 1 && leg.groups[0] === "unit") continue;
      expect(
        leg.topologies.some((t) => tags.includes(t)),
        name,
      ).toBe(true);
    }
  });

  it(".ci/run runs exactly the table's legs, each with its CI_LEG", () => {
    const run = [...ci.matchAll(/^(?!\s*#)[^\n]*?\bleg ([a-z0-9+-]+) (?:env|node|bash)\b/gm)].map((m) => m[1]);
    expect(run.filter((n) => n !== "drills").sort()).toEqual(Object.keys(LEGS).sort());
    expect(ci).toMatch(/^leg\(\) \{\n\s+local name="\$1"; shift\n\s+export CI_LEG="\$name"$/m);
  });
});
