import { RESOURCES, type Resource } from "../../model/resources.js";

export { RESOURCES, type Resource };
export type Scope = `tenant:${Resource}.${"read" | "manage"}`;
export const ALL_SCOPES: Scope[] = RESOURCES.flatMap((r) => [`tenant:${r}.read`, `tenant:${r}.manage`] as Scope[]);

export const isScope = (s: string): s is Scope => (ALL_SCOPES as string[]).includes(s);

/** "all" or a list (array or comma-separated) → explicit scope list; throws on an unknown scope. */
export function parseScopes(input: unknown): Scope[] {
  if (input === undefined || input === null || input === "all") return [...ALL_SCOPES];
  const list = Array.isArray(input) ? input : typeof input === "string" ? input.split(",") : null;
  if (!list) throw new Error(`scopes must be "all" or a list of scopes`);
  const out = new Set<Scope>();
  for (const raw of list) {
    const s = String(raw).trim();
    if (s === "") continue;
    if (s === "all") for (const x of ALL_SCOPES) out.add(x);
    else if (isScope(s)) out.add(s);
    else throw new Error(`unknown scope "${s}"`);
  }
  return ALL_SCOPES.filter((s) => out.has(s));
}

/** The key's scopes narrowed by its owner's grant for key-based access. */
export const effectiveScopes = (keyScopes: string[], ownerGrant: string[]): Scope[] =>
  ALL_SCOPES.filter((s) => keyScopes.includes(s) && ownerGrant.includes(s));
