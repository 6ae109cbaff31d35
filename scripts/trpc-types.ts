// Writes client/trpc.d.ts, the tRPC router types for internal TypeScript apps, from
// routers/client-types.ts; with --check, fails when the committed file is stale (CI, .ci/run).
//   npm run --silent client:trpc [-- --check] [-- --out FILE]
//
// The declaration is self-contained: every procedure's input, output and type, and the error shape,
// written out as plain TypeScript types (objects, unions, literals, arrays, Date) inside tRPC's own
// router and procedure types (`TRPCBuiltRouter`, `TRPCQueryProcedure`, `TRPCMutationProcedure` from
// @trpc/server, which @trpc/client needs anyway). An app type-checks against it without compiling one
// file of the service (no zod schemas, no Prisma client, no server context). test/unit/trpc-types.test.ts
// checks that it infers exactly the inputs, outputs and error shape of the real routers.
//
// How: the TypeScript checker resolves AppRouter/AdminRouter from routers/client-types.ts; a printer
// writes each resolved type structurally (never by a name from the service's sources). An object type
// printed the same way at several places is declared once and named after its shortest place
// (e.g. `LeadsGetOutput`, also the items of leads.list); anything the printer does not know (a function, a class
// other than Date, a generic parameter, a symbol key, a recursive type) stops the generation with its path.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const SOURCE = path.join(ROOT, "routers/client-types.ts");
export const TRPC_DECLARATION = "client/trpc.d.ts";

/** An object type printed longer than this is declared once when it occurs twice or more. */
const SHARED_MIN_CHARS = 80;

class Unprintable extends Error {}

function compilerOptions(): ts.CompilerOptions {
  const file = ts.readConfigFile(path.join(ROOT, "tsconfig.json"), ts.sys.readFile);
  if (file.error) throw new Error(ts.flattenDiagnosticMessageText(file.error.messageText, "\n"));
  return ts.parseJsonConfigFileContent(file.config, ts.sys, ROOT).options;
}

const IDENT = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name: string) => (IDENT.test(name) ? name : JSON.stringify(name));
const pascal = (parts: string[]) =>
  parts
    .flatMap((p) => p.split(/[^A-Za-z0-9]+/))
    .filter(Boolean)
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join("");

/** The printer: one per generation (its shared declarations are the file's). */
class Printer {
  /** Object-type text → its declared name, and the declarations in order. */
  private readonly named = new Map<string, string>();
  private readonly counts = new Map<string, number>();
  /** The shortest place (fewest parts, then first seen) of each object text: its name if declared. */
  private readonly firstPlace = new Map<string, string[]>();
  readonly declarations: { name: string; text: string }[] = [];
  private pass: "count" | "emit" = "count";

  constructor(private readonly checker: ts.TypeChecker) {}

  /** Two passes over the same types: the first counts the object texts, the second names the repeated ones. */
  startEmitting(): void {
    this.pass = "emit";
  }

  print(type: ts.Type, place: string[], depth = 0, stack: ts.Type[] = []): string {
    if (depth > 40) throw new Unprintable(`${place.join(".")}: nested too deep`);
    const f = type.flags;
    const c = this.checker;
    if (f & ts.TypeFlags.Any) return "any";
    if (f & ts.TypeFlags.Unknown) return "unknown";
    if (f & ts.TypeFlags.Never) return "never";
    if (f & ts.TypeFlags.Void) return "void";
    if (f & ts.TypeFlags.Undefined) return "undefined";
    if (f & ts.TypeFlags.Null) return "null";
    if (f & ts.TypeFlags.Boolean) return "boolean";
    if (f & ts.TypeFlags.String) return "string";
    if (f & ts.TypeFlags.Number) return "number";
    if (f & ts.TypeFlags.BigInt) return "bigint";
    if (f & ts.TypeFlags.StringLiteral) return JSON.stringify((type as ts.StringLiteralType).value);
    if (f & ts.TypeFlags.NumberLiteral) return String((type as ts.NumberLiteralType).value);
    if (f & ts.TypeFlags.BooleanLiteral) return c.typeToString(type);
    if (f & ts.TypeFlags.TemplateLiteral) return c.typeToString(type);
    if (f & ts.TypeFlags.TypeParameter) throw new Unprintable(`${place.join(".")}: a generic type parameter`);
    if (type.isUnion()) {
      let members = type.types;
      const hasTrue = members.some((t) => t.flags & ts.TypeFlags.BooleanLiteral && c.typeToString(t) === "true");
      const hasFalse = members.some((t) => t.flags & ts.TypeFlags.BooleanLiteral && c.typeToString(t) === "false");
      const parts: string[] = [];
      if (hasTrue && hasFalse) {
        members = members.filter((t) => !(t.flags & ts.TypeFlags.BooleanLiteral));
        parts.push("boolean");
      }
      for (const t of members) parts.push(this.wrap(t, this.print(t, place, depth + 1, stack)));
      // A stable order that does not depend on the checker's type ids (which change with unrelated
      // sources): literals sorted, then the other members by text, null and undefined last.
      const rank = (s: string) =>
        s === "null" ? 3 : s === "undefined" ? 4 : /^(?:"|-?\d)/.test(s) ? 0 : s === "boolean" ? 1 : 2;
      const num = (s: string) => (/^-?\d/.test(s) ? Number(s) : NaN);
      return [...parts]
        .sort(
          (a, b) =>
            rank(a) - rank(b) ||
            (Number.isNaN(num(a)) || Number.isNaN(num(b)) ? (a < b ? -1 : a > b ? 1 : 0) : num(a) - num(b)),
        )
        .join(" | ");
    }
    if (type.isIntersection())
      return type.types.map((t) => this.wrap(t, this.print(t, place, depth + 1, stack))).join(" & ");
    if (f & ts.TypeFlags.Object) {
      if (stack.includes(type)) throw new Unprintable(`${place.join(".")}: a recursive type`);
      const inner = [...stack, type];
      if (c.isTupleType(type)) {
        const elems = c.getTypeArguments(type as ts.TypeReference);
        const readonly = ((type as ts.TypeReference).target as ts.TupleType).readonly;
        const items = elems.map((t, i) => this.print(t, [...place, String(i)], depth + 1, inner));
        return `${readonly ? "readonly " : ""}[${items.join(", ")}]`;
      }
      if (c.isArrayType(type)) {
        const [elem] = c.getTypeArguments(type as ts.TypeReference);
        const readonly = type.symbol?.name === "ReadonlyArray";
        const e = this.print(elem!, [...place, "Item"], depth + 1, inner);
        return `${readonly ? "readonly " : ""}${elem!.isUnion() || elem!.isIntersection() ? `(${e})` : e}[]`;
      }
      const symbolName = type.symbol?.name;
      if (symbolName === "Date" && this.fromLib(type.symbol)) return "Date";
      if (
        c.getSignaturesOfType(type, ts.SignatureKind.Call).length ||
        c.getSignaturesOfType(type, ts.SignatureKind.Construct).length
      )
        throw new Unprintable(`${place.join(".")}: a function type`);
      if (type.symbol && this.fromLib(type.symbol) && symbolName !== "__type" && symbolName !== "__object")
        throw new Unprintable(`${place.join(".")}: the library type ${symbolName}`);
      return this.object(type, place, depth, inner);
    }
    throw new Unprintable(`${place.join(".")}: a type the printer does not know (${c.typeToString(type)})`);
  }

  private fromLib(symbol: ts.Symbol): boolean {
    return (symbol.declarations ?? []).some((d) =>
      /[\\/]typescript[\\/]lib[\\/]lib\..*\.d\.ts$/.test(d.getSourceFile().fileName),
    );
  }

  private wrap(t: ts.Type, text: string): string {
    return t.isUnion() || (t.flags & ts.TypeFlags.Object && /^\(|=>/.test(text)) ? `(${text})` : text;
  }

  private object(type: ts.Type, place: string[], depth: number, stack: ts.Type[]): string {
    const c = this.checker;
    const lines: string[] = [];
    for (const info of c.getIndexInfosOfType(type)) {
      const k = this.print(info.keyType, place, depth + 1, stack);
      lines.push(
        `${info.isReadonly ? "readonly " : ""}[key: ${k}]: ` +
          `${this.print(info.type, [...place, "Value"], depth + 1, stack)};`,
      );
    }
    for (const prop of c.getPropertiesOfType(type)) {
      const name = prop.getName();
      if (name.startsWith("__@") || name.startsWith("#"))
        throw new Unprintable(`${place.join(".")}: a symbol or private key (${name})`);
      const optional = (prop.flags & ts.SymbolFlags.Optional) !== 0;
      let t = c.getTypeOfSymbol(prop);
      // An optional property's type holds `undefined` (no exactOptionalPropertyTypes): `name?: T` says it.
      if (optional && t.isUnion() && t.types.some((m) => m.flags & ts.TypeFlags.Undefined)) {
        const rest = t.types.filter((m) => !(m.flags & ts.TypeFlags.Undefined));
        t = rest.length === 1 ? rest[0]! : t;
        if (rest.length !== 1) {
          const printed = this.print(t, [...place, name], depth + 1, stack).replace(/ \| undefined$/, "");
          lines.push(`${this.readonlyOf(prop)}${key(name)}?: ${printed};`);
          continue;
        }
      }
      lines.push(
        `${this.readonlyOf(prop)}${key(name)}${optional ? "?" : ""}: ` +
          `${this.print(t, [...place, name], depth + 1, stack)};`,
      );
    }
    const text = lines.length ? `{ ${lines.join(" ")} }` : "{}";
    return this.intern(text, place);
  }

  private readonlyOf(prop: ts.Symbol): string {
    const decl = prop.valueDeclaration ?? prop.declarations?.[0];
    const mods = decl && ts.canHaveModifiers(decl) ? ts.getModifiers(decl) : undefined;
    const viaMapped = ((prop as { links?: { checkFlags?: number } }).links?.checkFlags ?? 0) & 8; // CheckFlags.Readonly
    return mods?.some((m) => m.kind === ts.SyntaxKind.ReadonlyKeyword) || viaMapped ? "readonly " : "";
  }

  /** The first pass counts each object text; the second declares those seen twice or more (and long enough). */
  private intern(text: string, place: string[]): string {
    if (text.length < SHARED_MIN_CHARS) return text;
    if (this.pass === "count") {
      this.counts.set(text, (this.counts.get(text) ?? 0) + 1);
      const best = this.firstPlace.get(text);
      // an app procedure's place before an admin one's (the admin router's types are the app's too)
      const weight = (p: string[]) => p.length + (p[0] === "admin" ? 100 : 0);
      if (!best || weight(place) < weight(best)) this.firstPlace.set(text, place);
      return text;
    }
    if ((this.counts.get(text) ?? 0) < 2) return text;
    let name = this.named.get(text);
    if (!name) {
      const base = pascal(this.firstPlace.get(text) ?? place) || "Shared";
      name = base;
      for (let i = 2; this.declarations.some((d) => d.name === name); i++) name = `${base}${i}`;
      this.named.set(text, name);
      this.declarations.push({ name, text });
    }
    return name;
  }
}

interface Procedure {
  path: string[];
  /** A subscription's output is what each event carries (its `tracked()` data), printed as tRPC's TrackedEnvelope. */
  kind: "query" | "mutation" | "subscription";
  input: ts.Type;
  output: ts.Type;
}

function propType(checker: ts.TypeChecker, type: ts.Type, name: string, where: string): ts.Type {
  const p = checker.getPropertyOfType(type, name);
  if (!p) throw new Error(`${where}: no property ${name}`);
  return checker.getTypeOfSymbol(p);
}

/** Every procedure of a router type (its `_def.record`, walked). */
function proceduresOf(checker: ts.TypeChecker, router: ts.Type, name: string): Procedure[] {
  const out: Procedure[] = [];
  const walk = (record: ts.Type, at: string[]) => {
    for (const p of checker.getPropertiesOfType(record)) {
      const t = checker.getTypeOfSymbol(p);
      const here = [...at, p.getName()];
      const def = checker.getPropertyOfType(t, "_def");
      if (def && checker.getPropertyOfType(checker.getTypeOfSymbol(def), "procedure")) {
        const d = checker.getTypeOfSymbol(def);
        const kind = checker.typeToString(propType(checker, d, "type", here.join(".")));
        const types = propType(checker, d, "$types", here.join("."));
        const output = propType(checker, types, "output", here.join("."));
        out.push({
          path: here,
          kind: kind === '"query"' ? "query" : kind === '"mutation"' ? "mutation" : "subscription",
          input: propType(checker, types, "input", here.join(".")),
          output: kind === '"subscription"' ? trackedData(checker, output, here.join(".")) : output,
        });
      } else walk(t, here);
    }
  };
  walk(propType(checker, propType(checker, router, "_def", name), "record", name), []);
  return out;
}

/** The data of a subscription's events: T of its output AsyncIterable<TrackedData<T>> (only tracked events are printed). */
function trackedData(checker: ts.TypeChecker, output: ts.Type, where: string): ts.Type {
  const event = checker.getTypeArguments(output as ts.TypeReference)[0];
  const id = event && checker.getPropertyOfType(event, "id");
  const data = event && checker.getPropertyOfType(event, "data");
  if (!id || !data)
    throw new Error(`${where}: a subscription whose events are not tracked() (${checker.typeToString(output)})`);
  return checker.getTypeOfSymbol(data);
}

function routerType(checker: ts.TypeChecker, exports: ts.Symbol[], name: string): ts.Type {
  let sym = exports.find((e) => e.name === name);
  if (!sym) throw new Error(`routers/client-types.ts exports no ${name}`);
  if (sym.flags & ts.SymbolFlags.Alias) sym = checker.getAliasedSymbol(sym);
  return checker.getDeclaredTypeOfSymbol(sym);
}

/** The declaration's text (what client/trpc.d.ts must hold). */
export function renderTrpcDeclaration(): string {
  const program = ts.createProgram([SOURCE], { ...compilerOptions(), noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(SOURCE)!;
  const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(source)!);
  const routers = (["AppRouter", "AdminRouter"] as const).map((name) => {
    const type = routerType(checker, exports, name);
    const config = propType(
      checker,
      propType(checker, propType(checker, type, "_def", name), "_config", name),
      "$types",
      name,
    );
    const transformer = checker.typeToString(propType(checker, config, "transformer", name));
    if (transformer !== "false") throw new Error(`${name}: a data transformer (${transformer}) is not printed`);
    return {
      name,
      errorShape: propType(checker, config, "errorShape", name),
      procedures: proceduresOf(checker, type, name),
    };
  });

  const printer = new Printer(checker);
  const printAll = () =>
    routers.map((r) => ({
      name: r.name,
      errorShape: printer.print(r.errorShape, [r.name.replace(/Router$/, ""), "ErrorShape"]),
      procedures: r.procedures.map((p) => ({
        ...p,
        inputText: printer.print(p.input, [...(r.name === "AdminRouter" ? ["admin"] : []), ...p.path, "Input"]),
        outputText: printer.print(p.output, [...(r.name === "AdminRouter" ? ["admin"] : []), ...p.path, "Output"]),
      })),
    }));
  try {
    printAll();
    printer.startEmitting();
    const printed = printAll();
    return render(printed, printer.declarations);
  } catch (e) {
    if (e instanceof Unprintable) throw new Error(`cannot print a type of the routers: ${e.message}`);
    throw e;
  }
}

type PrintedRouter = {
  name: string;
  errorShape: string;
  procedures: (Procedure & { inputText: string; outputText: string })[];
};

function render(routers: PrintedRouter[], declarations: { name: string; text: string }[]): string {
  const out: string[] = [
    "// GENERATED by `npm run client:trpc` (scripts/trpc-types.ts) from routers/client-types.ts: do not edit.",
    "// CI fails when it is stale. The tRPC router types of the internal API, self-contained: an app",
    "// type-checks against them with @trpc/client (and @trpc/server, its peer) and nothing of the service.",
    '//   import type { AppRouter } from "<this file without .d.ts>.js";',
    `//   createTRPCClient<AppRouter>({ links: [httpBatchLink({ url: \`\${base}/trpc\`, maxItems: 20, headers: ` +
      `{ "X-API-Key": key } })] })`,
    "import type { inferRouterInputs, inferRouterOutputs, TRPCBuiltRouter, " +
      'TRPCMutationProcedure, TRPCQueryProcedure, TRPCSubscriptionProcedure } from "@trpc/server";',
    "",
  ];
  for (const d of declarations) out.push(`export type ${d.name} = ${indent(d.text)};`, "");
  for (const r of routers) {
    const tree: Record<string, unknown> = {};
    for (const p of r.procedures) {
      let node = tree;
      for (const part of p.path.slice(0, -1)) {
        node[part] ??= {};
        node = node[part] as Record<string, unknown>;
      }
      node[p.path.at(-1)!] =
        p.kind === "subscription"
          ? // tRPC's TrackedData<T> (not exported by @trpc/server), structurally.
            `TRPCSubscriptionProcedure<{ input: ${p.inputText}; output: AsyncIterable<{ id: string; data: ` +
            `${p.outputText} }, void, any>; meta: object; errorShape: unknown; }>`
          : `${p.kind === "query" ? "TRPCQueryProcedure" : "TRPCMutationProcedure"}<{ input: ${p.inputText}; ` +
            `output: ${p.outputText}; meta: object; errorShape: unknown; }>`;
    }
    const body = (node: Record<string, unknown>, pad: string): string =>
      `{\n${Object.entries(node)
        .map(
          ([k, v]) =>
            `${pad}  ${key(k)}: ` +
            `${typeof v === "string" ? indent(v, `${pad}  `) : body(v as Record<string, unknown>, `${pad}  `)};`,
        )
        .join("\n")}\n${pad}}`;
    const short = r.name.replace(/Router$/, "");
    out.push(
      `export type ${short}ErrorShape = ${indent(r.errorShape)};`,
      "",
      `export type ${r.name} = TRPCBuiltRouter<{ ctx: object; meta: object; errorShape: ${short}ErrorShape; ` +
        `transformer: false }, ${body(tree, "")}>;`,
      "",
      `export type ${short}Inputs = inferRouterInputs<${r.name}>;`,
      `export type ${short}Outputs = inferRouterOutputs<${r.name}>;`,
      "",
    );
  }
  return out.join("\n");
}

/** Breaks a one-line `{ a: T; b: U; }` type into lines, nested objects indented (a small formatter). */
function indent(text: string, pad = ""): string {
  let out = "";
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (inString) {
      out += ch;
      if (ch === "\\") out += text[++i] ?? "";
      else if (ch === '"') inString = false;
      continue;
    }
    if (ch === '"') {
      inString = true;
      out += ch;
    } else if (ch === "{" && text[i + 1] === " ") {
      depth++;
      out += `{\n${pad}${"  ".repeat(depth)}`;
      i++;
    } else if (ch === ";" && text[i + 1] === " " && text[i + 2] !== "}") {
      out += `;\n${pad}${"  ".repeat(depth)}`;
      i++;
    } else if (ch === ";" && text[i + 1] === " " && text[i + 2] === "}") {
      depth--;
      out += `;\n${pad}${"  ".repeat(depth)}}`;
      i += 2;
    } else out += ch;
  }
  return out;
}

/** The --check verdict for `target` (its path relative to the checkout in the message): null when it holds `text`. */
export function staleness(text: string, target: string): string | null {
  let current = "";
  try {
    current = readFileSync(target, "utf8");
  } catch {}
  if (current === text) return null;
  const [a, b] = [current.split("\n"), text.split("\n")];
  let line = 0;
  while (line < a.length && a[line] === b[line]) line++;
  return (
    `${path.relative(ROOT, path.resolve(target))} is stale (first difference at line ` +
    `${line + 1}): run \`npm run client:trpc\` and commit it`
  );
}

const isMain = process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const args = process.argv.slice(2);
  const outAt = args.indexOf("--out");
  const target = outAt >= 0 && args[outAt + 1] ? args[outAt + 1]! : path.join(ROOT, TRPC_DECLARATION);
  const text = renderTrpcDeclaration();
  if (args.includes("--check")) {
    const stale = staleness(text, target);
    if (stale) {
      process.stderr.write(`${stale}\n`);
      process.exit(1);
    }
    process.stdout.write(`${path.relative(ROOT, path.resolve(target))} is up to date\n`);
  } else {
    writeFileSync(target, text);
    process.stdout.write(`wrote ${path.relative(ROOT, path.resolve(target))}\n`);
  }
}
