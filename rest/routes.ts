// Route templates for metrics labels: a request path → the template it was served by
// ("/public/v1/leads/{id}", "/trpc/leads.get"), never the raw path, so label cardinality is bounded
// by the procedures that exist. Anything else is "unmatched".
import type { AnyProcedure } from "@trpc/server";
import type { AppRouter } from "../routers/index.js";
import type { Meta } from "../routers/trpc.js";
import { PUBLIC_PREFIX } from "./facade.js";
import { ADMIN_TRPC_PREFIX, TRPC_PREFIX } from "./trpc.js";

const FIXED = new Set(["/healthz", "/readyz", "/docs", `${PUBLIC_PREFIX}/openapi.json`]);
export const UNMATCHED = "unmatched";

export function routeTemplates(router: AppRouter): (method: string, path: string) => string {
  const templates: { method: string; template: string; re: RegExp }[] = [];
  const procedures = new Set<string>();
  // Every procedure by its dotted path (typed as the nested record the router was built from).
  for (const [name, proc] of Object.entries(router._def.procedures as unknown as Record<string, AnyProcedure>)) {
    procedures.add(name);
    const meta = proc._def.meta as Meta | undefined;
    if (!meta?.openapi) continue;
    const template = meta.openapi.path;
    const pattern = template
      .split(/(\{[^}]+\})/)
      .map((part) => (/^\{[^}]+\}$/.test(part) ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
      .join("");
    // Express routes are case-insensitive and ignore one trailing slash; so is this match.
    templates.push({ method: meta.openapi.method.toUpperCase(), template, re: new RegExp(`^${pattern}/?$`, "i") });
  }
  // Literal paths before templated ones (/conversations/start before /conversations/{id}/…).
  templates.sort((a, b) => a.template.split("{").length - b.template.split("{").length);
  const under = (path: string, prefix: string) =>
    path.toLowerCase() === prefix || path.toLowerCase().startsWith(`${prefix}/`);
  return (method, path) => {
    if (FIXED.has(path)) return path;
    if (under(path, PUBLIC_PREFIX)) {
      const found =
        templates.find((t) => t.method === method && t.re.test(path)) ?? templates.find((t) => t.re.test(path));
      return found ? found.template : `${PUBLIC_PREFIX}/${UNMATCHED}`;
    }
    if (under(path, ADMIN_TRPC_PREFIX)) return ADMIN_TRPC_PREFIX;
    if (under(path, TRPC_PREFIX)) {
      const name = path.slice(TRPC_PREFIX.length + 1);
      if (procedures.has(name)) return `${TRPC_PREFIX}/${name}`;
      // A batch (httpBatchLink: "a.b,c.d"): one label for all, whatever it holds.
      return /^[^/]*(?:,|%2c)/i.test(name) ? `${TRPC_PREFIX}/batch` : `${TRPC_PREFIX}/${UNMATCHED}`;
    }
    if (under(path, "/docs")) return "/docs";
    return UNMATCHED;
  };
}
