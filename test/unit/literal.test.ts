// server/db/literal.ts: the caller's tenant written into a statement's text (DATABASE_ROUTING=workers).
// The rewrite must change only real parameter references ($n outside constants, quoted identifiers,
// comments and dollar-quoted bodies), renumber the rest in order, and leave a statement meaning what
// it meant: checked here on the text, then by running original and rewritten statements side by side.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inlineValue } from "../../server/db/literal.js";
import { openPglite, type Database } from "../../server/db/client.js";

const T = "0b0e8f3c-5a7d-4c1e-9f2a-3d4b5c6d7e8f";
const U = "11111111-2222-4333-8444-555555555555";

describe("inlineValue", () => {
  it("writes every parameter equal to the tenant as its literal and renumbers the others", () => {
    const r = inlineValue(
      `SELECT * FROM "Lead" WHERE "tenantId" = $1::uuid AND "id" = $2::uuid AND x IN (SELECT 1 FROM y WHERE ` +
        `"tenantId" = $3::uuid LIMIT $4)`,
      [T, U, T, 50],
      T,
    );
    expect(r.text).toBe(
      `SELECT * FROM "Lead" WHERE "tenantId" = '${T}'::uuid AND "id" = $1::uuid AND x IN (SELECT 1 FROM y ` +
        `WHERE "tenantId" = '${T}'::uuid LIMIT $2)`,
    );
    expect(r.params).toEqual([U, 50]);
  });

  it("numbers of two and more digits, the same parameter used twice, a parameter at the very end", () => {
    const params = Array.from({ length: 12 }, (_, i) => (i === 10 ? T : i));
    const r = inlineValue("SELECT $1, $10, $11, $12, $11, $2::int+$3", params, T);
    expect(r.text).toBe(`SELECT $1, $10, '${T}', $11, '${T}', $2::int+$3`);
    expect(r.params).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11]);
    expect(inlineValue("SELECT $1", [T], T)).toEqual({ text: `SELECT '${T}'`, params: [] });
  });

  it("leaves $n alone inside string constants, E-strings, quoted identifiers, comments and dollar-quoted bodies", () => {
    const sql = [
      `SELECT '$1', 'it''s $1', E'\\' $1', "col$1", "a""$1"`,
      `-- a comment $1`,
      `/* outer /* nested $1 */ still $1 */`,
      `$$ body $1 $$, $fn$ $1 $fn$, x$1, $1`,
    ].join("\n");
    const r = inlineValue(sql, [T], T);
    expect(r.text).toBe(sql.replace(/, \$1$/, `, '${T}'`));
    expect(r.params).toEqual([]);
  });

  it("changes nothing when no parameter is the tenant, or the value is not a uuid", () => {
    const params = [U, 5];
    expect(inlineValue("SELECT $1, $2", params, T)).toEqual({ text: "SELECT $1, $2", params });
    for (const bad of ["x'; DROP TABLE t; --", `${T}'`, "", `${T.toUpperCase()}0`]) {
      const p = [bad];
      expect(inlineValue("SELECT $1", p, bad)).toEqual({ text: "SELECT $1", params: p });
    }
    // A parameter number beyond the parameters is left as it is (the server reports it as before).
    expect(inlineValue("SELECT $1, $3", [T], T).text).toBe(`SELECT '${T}', $3`);
  });

  it("only a value identical to the tenant's (not a number or an object that prints the same)", () => {
    const r = inlineValue("SELECT $1, $2, $3", [T, { toString: () => T }, [T]], T);
    expect(r.text).toBe(`SELECT '${T}', $1, $2`);
    expect(r.params).toHaveLength(2);
  });
});

describe("a rewritten statement answers as the original", () => {
  let db: Database;
  beforeAll(async () => {
    db = await openPglite("memory://");
    await db.sql.exec(`CREATE TABLE t ("tenantId" uuid, "id" uuid, "name" text, "n" int);
      INSERT INTO t VALUES ('${T}', '${U}', '$1 in a value', 1), ('${T}', '${T}', 'same id', 2), ('${U}', '${T}',
        'other', 3)`);
  });
  afterAll(() => db?.close());

  const cases: [string, unknown[]][] = [
    [`SELECT "name", "n" FROM t WHERE "tenantId" = $1::uuid AND "n" >= $2 ORDER BY "n"`, [T, 1]],
    [`SELECT "name" FROM t WHERE "tenantId" = $1 AND "id" = $2 AND "name" <> '$1'`, [T, T]],
    [`SELECT count(*)::int AS "c" FROM t WHERE "tenantId" = ANY($2::uuid[]) OR "id" = $1`, [T, [U]]],
    [`SELECT $1::text AS "v", length($1) AS "l", $2::int + 1 AS "k"`, [T, 41]],
    [
      `SELECT coalesce((SELECT "name" FROM t WHERE "tenantId" = $2::uuid AND "id" = $1::uuid), 'none') AS "x" -- $1`,
      [U, T],
    ],
  ];
  it.each(cases)("%s", async (sql, params) => {
    const r = inlineValue(sql, params, T);
    expect(r.text).not.toBe(sql);
    expect(await db.sql.query(r.text, r.params)).toEqual(await db.sql.query(sql, params));
  });
});
