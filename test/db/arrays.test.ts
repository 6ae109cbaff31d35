// server/db/arrays.ts: text[] from PostgreSQL's text output, the common shape without the general
// parser, everything else through it — the same arrays either way.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { parseTextArray } from "../../server/db/arrays.js";
import { freshDatabase } from "../helpers/app.js";

const general = (pg.types.getTypeParser as (oid: number, format: string) => (t: string) => unknown)(1009, "text");

describe("parseTextArray", () => {
  it("equals the driver's parser for every shape of the text", () => {
    const texts = [
      "{}",
      "{a}",
      "{a,b,c}",
      "{tenant:leads.read,tenant:leads.manage}",
      "{NULL}",
      "{NULL,x,NULL}",
      '{"NULL"}',
      '{""}',
      '{"a b",c}',
      '{"a,b",c}',
      '{"a\\"b"}',
      '{"a\\\\b"}',
      "{{a,b},{c,d}}",
      "[1:2]={a,b}",
      "[0:0]={x}",
      '{"{",b}',
      '{"}"}',
      "{é,日本,emoji-😀}",
      "{a-b_c.d:e/f}",
      "{1,2,3}",
      "{NULLx,xNULL}",
    ];
    for (const text of texts) expect({ text, parsed: parseTextArray(text) }).toEqual({ text, parsed: general(text) });
  });

  // PostgreSQL's raw runner only: PGlite parses its own results (and reads an unquoted NULL element
  // as the string "NULL").
  it.runIf(Boolean(process.env.DATABASE_URL))(
    "reads arrays PostgreSQL itself wrote as the driver's parser does, through the raw runner",
    async () => {
      const { db, drop } = await freshDatabase();
      try {
        const q = `SELECT v AS "v" FROM (VALUES (ARRAY['a','b']::text[]), (ARRAY[]::text[]), (ARRAY['a b', NULL, '', 'NULL', 'x,y', 'q"t', 'b\\s', '{']::text[]),
                   (ARRAY[ARRAY['a','b'],ARRAY['c','d']]::text[]), ('[3:4]={p,q}'::text[]), (ARRAY['tenant:leads.read','zone-1']::text[])) t(v)`;
        const rows = await db.sql.query<{ v: unknown }>(q);
        expect(rows.map((r) => r.v)).toEqual([
          ["a", "b"],
          [],
          ["a b", null, "", "NULL", "x,y", 'q"t', "b\\s", "{"],
          [
            ["a", "b"],
            ["c", "d"],
          ],
          ["p", "q"],
          ["tenant:leads.read", "zone-1"],
        ]);
      } finally {
        await drop();
      }
    },
  );
});
