// The caller's tenant written into a statement's text (DATABASE_ROUTING=workers: server/db/routing.ts).
//
// Why: on a Citus worker, a single-tenant statement whose distribution value is a constant of its text
// is planned directly on the local shard (Citus's local fast path: no deparse, no second parse and
// plan), and a named statement of that text keeps its plan; with the tenant as a bound parameter the
// worker deparses the shard query and plans it again on every execution, as the coordinator does.
// Measured with pgbench on this machine's cluster (docs/decisions/scale-out.md): the 50-lead page on the
// tenant's worker, prepared, 1 connection: 14,194 tps with the tenant as a literal, 5,082 as a
// parameter; the list shape (the count joined to the page): 5,341 against 3,464.
//
// How: every parameter whose value IS the tenant id (`$n` outside string constants, quoted identifiers,
// comments and dollar-quoted bodies) becomes the quoted literal of that same value, and the parameters
// after it are renumbered. The statement means exactly what it meant — the same value, in the same
// places, and an untyped literal takes its type from its context as an untyped parameter does — so it
// does not matter what a parameter stands for (a tenant id, or another id that happens to be equal).
// Only a canonical uuid is ever written (it cannot contain a quote); any other value leaves the
// statement as it is.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The SQL literal of a tenant id: only a uuid (it cannot hold a quote), else undefined. */
const uuidLiteral = (value: unknown): string | undefined =>
  typeof value === "string" && UUID.test(value) ? `'${value}'` : undefined;
/** A character that may continue an identifier (a `$` after one is part of the identifier, e.g. `a$1`). */
const IDENT_CHAR = /[A-Za-z0-9_$\u0080-\uffff]/;
const DIGIT = /[0-9]/;
const TAG = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/;

/**
 * `text` with each parameter reference `$n` (1-based) outside string constants, quoted identifiers,
 * comments and dollar-quoted bodies replaced by what `at(n)` returns for it (undefined: kept as it is).
 */
function rewrite(text: string, at: (n: number) => string | undefined): string {
  let out = "";
  let from = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === "'") {
      // A string constant; an E'…' one also ends at no backslash-escaped quote.
      const escapes =
        i > 0 && (text[i - 1] === "E" || text[i - 1] === "e") && (i < 2 || !IDENT_CHAR.test(text[i - 2]!));
      i++;
      while (i < n) {
        if (escapes && text[i] === "\\") i += 2;
        else if (text[i] === "'") {
          if (text[i + 1] !== "'") break;
          i += 2;
        } else i++;
      }
      i++;
    } else if (c === '"') {
      i++;
      while (i < n) {
        if (text[i] !== '"') i++;
        else if (text[i + 1] === '"') i += 2;
        else break;
      }
      i++;
    } else if (c === "-" && text[i + 1] === "-") {
      const end = text.indexOf("\n", i);
      i = end < 0 ? n : end + 1;
    } else if (c === "/" && text[i + 1] === "*") {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (text[i] === "/" && text[i + 1] === "*") {
          depth++;
          i += 2;
        } else if (text[i] === "*" && text[i + 1] === "/") {
          depth--;
          i += 2;
        } else i++;
      }
    } else if (c === "$" && !(i > 0 && IDENT_CHAR.test(text[i - 1]!))) {
      if (DIGIT.test(text[i + 1] ?? "")) {
        let j = i + 1;
        while (j < n && DIGIT.test(text[j]!)) j++;
        const to = at(Number(text.slice(i + 1, j)));
        if (to !== undefined) {
          out += text.slice(from, i) + to;
          from = j;
        }
        i = j;
      } else {
        const tag = TAG.exec(text.slice(i, i + 64));
        if (tag) {
          const end = text.indexOf(tag[0], i + tag[0].length);
          i = end < 0 ? n : end + tag[0].length;
        } else i++;
      }
    } else i++;
  }
  return out + text.slice(from);
}

/**
 * `text` with every `$n` whose parameter is `value` written as `'value'`, and the remaining parameters
 * renumbered in order; the same `text` and `params` when `value` is not a uuid or no parameter equals it.
 */
export function inlineValue(
  text: string,
  params: readonly unknown[],
  value: string,
): { text: string; params: unknown[] } {
  const literal = uuidLiteral(value);
  if (literal === undefined || !params.includes(value)) return { text, params: params as unknown[] };
  return inlineParams(text, params, (i) => (params[i] === value ? literal : undefined));
}

/**
 * `text` with each parameter `$n` for which `literal(n - 1)` gives a text written as it, the rest renumbered in order.
 */
function inlineParams(
  text: string,
  params: readonly unknown[],
  literal: (index: number) => string | undefined,
): { text: string; params: unknown[] } {
  const number: number[] = [];
  const kept: unknown[] = [];
  for (const [i, p] of params.entries()) number.push(literal(i) !== undefined ? 0 : kept.push(p));
  const out = rewrite(text, (n) =>
    n - 1 < number.length ? (number[n - 1] === 0 ? literal(n - 1)! : `$${number[n - 1]}`) : undefined,
  );
  return { text: out, params: kept };
}
