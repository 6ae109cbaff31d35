// The approved templates' select: the row (model/template.ts) and its body's highest {{n}}
// placeholder, counted in SQL so that no body is read out. It counts exactly as
// POST /conversations/start does (routers/conversations/start.ts, highestPlaceholder): the same
// pattern, with JavaScript's \s spelled out (the characters it matches: ECMAScript's WhiteSpace and
// LineTerminator) and \d as [0-9]; test/db/reference-data.test.ts compares the two on edge cases.
import { Prisma } from "../../generated/prisma/client.js";
import { Template } from "../../model/template.js";
import { INT4_MAX } from "../_lib/schemas.js";

const JS_SPACE = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff";
/** start.ts's /\{\{\s*(\d+)\s*\}\}/g as a PostgreSQL regular expression (ARE). */
export const PLACEHOLDER_SQL = `\\{\\{[${JS_SPACE}]*([0-9]+)[${JS_SPACE}]*\\}\\}`;

/**
 * The highest placeholder of `r."body"`: 0 without one; a number (leading zeros aside) of more than
 * 10 digits, or above the integer range, counts as INT4_MAX (no start can send that many variables).
 */
const highestPlaceholder = Prisma.sql`(
  SELECT coalesce(max(CASE WHEN length(ltrim(m."g"[1], '0')) > 10 THEN ${INT4_MAX}::bigint
                           ELSE least(coalesce(nullif(ltrim(m."g"[1], '0'), '')::bigint, 0), ${INT4_MAX}::bigint)
                      END), 0)::int
    FROM regexp_matches(r."body", ${PLACEHOLDER_SQL}, 'g') AS m("g"))`;

/** The select list over the template table aliased `r`. */
export const templateSelect = Prisma.sql`${Template.select("r")}, ${highestPlaceholder} AS "highestPlaceholder"`;
