// server/db/times.ts: PostgreSQL's timestamptz text → the ISO string the driver's Date would give.
import pg from "pg";
import { describe, expect, it } from "vitest";
import { isoTimestamptz } from "../../server/db/times.js";
import { freshDatabase } from "../helpers/app.js";

const viaDate = (text: string) =>
  (pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, "text") as (t: string) => Date)(text).toISOString();

describe("isoTimestamptz", () => {
  it("equals Date#toISOString() of the driver's parse for every shape of the text", () => {
    const texts = [
      "2026-11-24 05:00:58.158+00",
      "2026-11-24 05:00:58+00",
      "2026-11-24 05:00:58.1+00",
      "2026-11-24 05:00:58.12+00",
      "2026-11-24 05:00:58.123456+00",
      "2026-11-24 05:00:58.999999+00",
      "0001-01-01 00:00:00+00",
      "9999-12-31 23:59:59.999+00",
      "2026-11-24 05:00:58.158+01",
      "2026-11-24 05:00:58.158-03",
      "2026-11-24 05:00:58.158+05:30",
      "2026-11-24 05:00:58+05:45:12",
      "0044-03-15 12:00:00+00 BC",
      "2024-02-29 23:59:59.5+00",
    ];
    for (const text of texts) expect({ text, iso: isoTimestamptz(text) }).toEqual({ text, iso: viaDate(text) });
  });
  it("gives the list statements' instants as strings on both backends, equal to the Dates of a plain query", async () => {
    const { db, drop } = await freshDatabase();
    try {
      const q =
        `SELECT x AS "t" FROM (VALUES ('2026-11-24T05:00:58.158Z'::timestamptz), ` +
        `('0001-01-01T00:00:00Z'::timestamptz), ('2026-01-01T10:00:00.5+02:00'::timestamptz)) v(x)`;
      const asText = await db.sql.query<{ t: unknown }>(q, [], { isoTimes: true });
      // PostgreSQL's driver gives the same instants as Dates. (PGlite's own Date parser reads year
      // 0001 as 2001: the ISO text is right where its Date is not.)
      if (db.kind === "postgres") {
        const asDates = await db.sql.query<{ t: Date }>(q);
        expect(asText.map((r) => r.t)).toEqual(asDates.map((r) => r.t.toISOString()));
      }
      expect(asText.map((r) => r.t)).toEqual([
        "2026-11-24T05:00:58.158Z",
        "0001-01-01T00:00:00.000Z",
        "2026-01-01T08:00:00.500Z",
      ]);
    } finally {
      await drop();
    }
  });
});
