// text[] columns (an API key's scopes, its owner's grant, a lead's zones) from PostgreSQL's text
// output without the general array parser for the common shape. `{a,b,c}` — no element quoted,
// escaped or nested, no bounds prefix — is the elements between the commas (an unquoted NULL is
// null); anything else goes to the driver's own parser (postgres-array). On GET /me the general
// parser was ~5% of the process's CPU and a sixth of what a request allocates (two arrays of ten
// scopes); docs/decisions/performance.md "text[] parser for the common shape".
import pg from "pg";

const TEXT_ARRAY = 1009;
/** "text" or "binary": the format node-postgres asks a parser for. */
export type TypeFormat = Parameters<typeof pg.types.getTypeParser>[1];
const general = (pg.types.getTypeParser as (oid: number, format: string) => (text: string) => unknown)(
  TEXT_ARRAY,
  "text",
);
/** Characters that only appear in an array's text when an element is quoted, escaped or nested. */
const SPECIAL = /["\\{}]/;

export function parseTextArray(text: string): unknown {
  const n = text.length;
  if (n < 2 || text.charCodeAt(0) !== 123 || text.charCodeAt(n - 1) !== 125) return general(text);
  if (n === 2) return [];
  const inner = text.slice(1, n - 1);
  if (SPECIAL.test(inner)) return general(text);
  const out: (string | null)[] = inner.split(",");
  for (let i = 0; i < out.length; i++) if (out[i] === "NULL") out[i] = null;
  return out;
}

/** node-postgres `types` of the raw runner: the driver's parsers, text[] through parseTextArray. */
export const rawTypes = {
  getTypeParser(oid: number, format?: TypeFormat) {
    if (oid === TEXT_ARRAY && format !== "binary") return parseTextArray;
    return pg.types.getTypeParser(oid, format);
  },
};
