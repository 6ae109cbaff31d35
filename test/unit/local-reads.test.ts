// server/db/local-reads.ts: a tenant's reads over its shards on the worker that holds them
// (DATABASE_ROUTING=workers). Here, everywhere: the rename (only the tables of the map, only outside
// constants, comments and dollar-quoted bodies), the guarded wrap, what counts as a stale name, and the
// names' cache (never waited for, kept, read again when stale). On a Citus cluster the reads through the
// service, before and after a shard move: test/db/routing.test.ts.
import { describe, expect, it } from "vitest";
import { renameTables } from "../../server/db/literal.js";
import { movedAway, overLocalShards, ShardNames, type LocalShards } from "../../server/db/local-reads.js";

const names = { Lead: "Lead_102040", ListCounter: "ListCounter_102072", Tenant: "Tenant_102008" };

describe("renameTables", () => {
  it("every quoted table name of the map, and nothing else", () => {
    expect(renameTables(`SELECT l."id" FROM "Lead" l JOIN "Tenant" t ON t."id" = l."tenantId" WHERE EXISTS (SELECT 1 FROM "Lead" x) AND l."status" = $1::"LeadStatus"`, names)).toBe(
      `SELECT l."id" FROM "Lead_102040" l JOIN "Tenant_102008" t ON t."id" = l."tenantId" WHERE EXISTS (SELECT 1 FROM "Lead_102040" x) AND l."status" = $1::"LeadStatus"`,
    );
    // Not a table of the map, a longer name, lower-case identifiers, unquoted words: unchanged.
    const other = `WITH "resolved" AS (SELECT 1) SELECT "Leads", "LeadX", Lead, "lead", "Contact" FROM "resolved"`;
    expect(renameTables(other, names)).toBe(other);
  });

  it("leaves string constants, E-strings, comments and dollar-quoted bodies alone", () => {
    const kept = [`SELECT '"Lead"', 'it''s "Lead"', E'\\' "Lead"'`, `-- "Lead"`, `/* "Lead" /* "Lead" */ */`, `$q$ "Lead" $q$`, `$$ "Lead" $$`].join("\n");
    expect(renameTables(`${kept}\nFROM "Lead"`, names)).toBe(`${kept}\nFROM "Lead_102040"`);
  });

  it("a name of the map that is not a plain identifier is quoted as one (a quote doubled)", () => {
    expect(renameTables(`SELECT 1 FROM "Lead"`, { Lead: 'we"ird' })).toBe(`SELECT 1 FROM "we""ird"`);
    expect(renameTables(`SELECT 1 FROM "toString"`, {})).toBe(`SELECT 1 FROM "toString"`);
  });
});

describe("overLocalShards", () => {
  const shards: LocalShards = { anchor: "102040", names };
  it("the statement renamed, inside a guarded wrap whose guard checks the anchor shard (on its own line: a trailing comment cannot swallow it)", () => {
    expect(overLocalShards(`SELECT "id" FROM "Lead" WHERE "tenantId" = 'x' -- the page`, shards)).toBe(
      `SELECT "r".* FROM (\nSELECT "id" FROM "Lead_102040" WHERE "tenantId" = 'x' -- the page\n) "r" WHERE "tenant_shard_here"(102040::bigint)`,
    );
  });
  it("nothing where the statement names no table of the map, ends with a semicolon, or the anchor is not a shard id", () => {
    expect(overLocalShards(`SELECT now()`, shards)).toBeUndefined();
    expect(overLocalShards(`SELECT 1 FROM "Lead";`, shards)).toBeUndefined();
    expect(overLocalShards(`SELECT 1 FROM "Lead"`, { anchor: "1; DROP TABLE x", names })).toBeUndefined();
  });
  it("stale names: the guard's refusal (CR001) or the shard gone (42P01); nothing else", () => {
    expect(movedAway({ code: "CR001" })).toBe(true);
    expect(movedAway({ code: "42P01" })).toBe(true);
    expect(movedAway({ code: "57014" })).toBe(false);
    expect(movedAway(new Error("x"))).toBe(false);
    expect(movedAway(undefined)).toBe(false);
  });
});

describe("ShardNames", () => {
  const tick = () => new Promise((r) => setTimeout(r, 0));
  it("never waits: unknown until first read, then kept; read once for concurrent asks; an expired entry used while read again", async () => {
    const reads: string[] = [];
    let answer: LocalShards | null = { anchor: "1", names: { Lead: "Lead_1" } };
    const cache = new ShardNames(async (t) => (reads.push(t), answer), 30);
    expect(cache.peek("t")).toBeUndefined();
    expect(cache.peek("t")).toBeUndefined();
    await tick();
    expect(reads).toEqual(["t"]);
    expect(cache.peek("t")).toEqual(answer);
    answer = null;
    await new Promise((r) => setTimeout(r, 40));
    expect(cache.peek("t")).toEqual({ anchor: "1", names: { Lead: "Lead_1" } });
    await tick();
    expect(reads).toEqual(["t", "t"]);
    expect(cache.peek("t")).toBeNull();
  });

  it("forget: not used again until read again; a failed read is 'none'; bounded", async () => {
    let n = 0;
    const cache = new ShardNames(async (t) => {
      n++;
      if (t === "bad") throw new Error("no function");
      return { anchor: String(n), names: {} };
    }, 60_000, 2);
    cache.peek("t");
    await tick();
    expect(cache.peek("t")).toEqual({ anchor: "1", names: {} });
    cache.forget("t");
    expect(cache.peek("t")).toBeNull();
    await tick();
    expect(cache.peek("t")).toEqual({ anchor: "2", names: {} });
    cache.peek("bad");
    await tick();
    expect(cache.peek("bad")).toBeNull();
    cache.peek("third");
    await tick();
    // Two entries at most: the oldest ("t") went first, so it is unknown again.
    expect(cache.peek("t")).toBeUndefined();
  });
});
