// Response conformance: every /public/v1 response produced by the HTTP tests is validated against
// the OpenAPI document's schema for its operation and status (an undocumented status, a body that
// does not match, or missing rate-limit headers fail the test that made the request).
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import type { ValidateFunction } from "ajv";
import { appRouter } from "../../routers/index.js";
import { buildOpenApiDocument } from "../../rest/openapi.js";

type Json = any;
const doc: Json = JSON.parse(JSON.stringify(buildOpenApiDocument(appRouter)));

function resolve(node: Json, seen = new Set<string>()): Json {
  if (Array.isArray(node)) return node.map((n) => resolve(n, seen));
  if (!node || typeof node !== "object") return node;
  if (typeof node.$ref === "string" && node.$ref.startsWith("#/")) {
    if (seen.has(node.$ref)) throw new Error(`recursive $ref ${node.$ref}`);
    const target = node.$ref
      .slice(2)
      .split("/")
      .reduce((o: Json, k: string) => o[k.replace(/~1/g, "/").replace(/~0/g, "~")], doc);
    const { $ref: _ignored, ...rest } = node;
    return { ...resolve(target, new Set([...seen, node.$ref])), ...resolve(rest, seen) };
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, resolve(v, seen)]));
}

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);

interface Operation {
  method: string;
  template: string;
  re: RegExp;
  responses: Map<string, { schema?: Json; validate?: ValidateFunction; headers: string[] }>;
}

const operations: Operation[] = [];
for (const [template, item] of Object.entries<Json>(doc.paths)) {
  for (const [method, op] of Object.entries<Json>(item)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`);
    const responses = new Map<string, { schema?: Json; validate?: ValidateFunction; headers: string[] }>();
    for (const [status, r] of Object.entries<Json>(op.responses)) {
      const resolved = resolve(r);
      // Compiled on first use (a file meets a few of the document's responses, not all of them).
      responses.set(status, {
        schema: resolved.content?.["application/json"]?.schema,
        headers: Object.keys(resolved.headers ?? {}),
      });
    }
    operations.push({ method: method.toUpperCase(), template, re, responses });
  }
}

export const documentedOperations = () => operations.map((o) => `${o.method} ${o.template}`);
export const checked = { responses: 0 };

/**
 * Throws when a response does not conform to the document; returns the
 * operation it matched (or undefined: no operation, e.g. an unknown path).
 */
export function assertConforms(
  method: string,
  url: string,
  status: number,
  headers: Headers,
  body: unknown,
): string | undefined {
  const path = new URL(url).pathname;
  if (!path.startsWith("/public/v1/") || path === "/public/v1/openapi.json") return undefined;
  // Exact literal paths win over templates (/conversations/start vs /conversations/{id}).
  const candidates = operations.filter((o) => o.method === method.toUpperCase() && o.re.test(path));
  const op = candidates.find((o) => o.template === path) ?? candidates[0];
  if (!op) return undefined;
  const r = op.responses.get(String(status));
  if (!r)
    throw new Error(
      `conformance: ${method} ${op.template} answered ${status}, which the OpenAPI document does not list ` +
        `(${[...op.responses.keys()].join(", ")})\n${JSON.stringify(body)}`,
    );
  for (const h of r.headers) {
    if (h === "Retry-After" && status !== 429) continue;
    if (!headers.has(h)) throw new Error(`conformance: ${method} ${op.template} ${status} lacks header ${h}`);
  }
  if (r.schema) r.validate ??= ajv.compile(r.schema);
  if (r.validate && !r.validate(body))
    throw new Error(
      `conformance: ${method} ${op.template} ${status} body does not match the document: ` +
        `${ajv.errorsText(r.validate.errors)}\n${JSON.stringify(body).slice(0, 2000)}`,
    );
  checked.responses++;
  return `${op.method} ${op.template}`;
}
