// Named prepared statements where the database connection keeps them, unnamed ones where it does
// not (a transaction or statement pooler such as PgBouncer 1.18, whose server connections change
// between transactions).
//
// A statement a procedure marks `prepare` (the key lookup of every request, the list pages) is
// parsed and planned once per connection and then only bound and executed: PostgreSQL spends
// ~25 µs of CPU on the key lookup as a named statement against ~50 µs as an unnamed one (pgbench,
// docs/decisions/performance.md "Named prepared statements"). The pool starts in named mode unless it
// is told that it talks to a pooler (DATABASE_URL ≠ DIRECT_DATABASE_URL) and leaves it, for good, at the first sign
// of one on a statement of its own:
// - 26000 "prepared statement … does not exist": the Bind reached a server connection that never
//   saw our Parse;
// - 42P05 "prepared statement … already exists": our Parse reached a server connection where
//   another of our connections had prepared it;
// - 0A000 "cached plan must not change result type": a migration changed a column under a kept plan.
// Each is raised before the statement runs (at Parse, at Bind, or when the plan is revalidated), so
// the statement is sent again unnamed — a write included, it cannot apply twice — and the request
// never sees the error. Nothing here can run a wrong statement: a name is a digest of its text, so
// the same name is the same SQL on any server connection, from any instance or version of the
// service.
//
// Bounded: at most PREPARED_LIMIT distinct texts get a name (each connection keeps at most that many
// plans); any text beyond them is sent unnamed.
import { createHash } from "node:crypto";

export const PREPARED_LIMIT = 128;
/**
 * Of those, at most this many texts of one tenant each (the tenant written into the text on a Citus
 * worker's pool: server/db/literal.ts), so that the per-tenant texts never take the names of the
 * statements every tenant shares.
 */
export const PREPARED_TENANT_LIMIT = 64;

export interface PreparedState {
  /** false once the connections showed that they do not keep named statements (or were said not to). */
  named: boolean;
  /** Distinct texts given a name. */
  count: number;
}

/** The name a text is prepared under: a digest of the text, so one name is one SQL everywhere. */
export const statementName = (text: string) => `crm_${createHash("sha256").update(text).digest("hex").slice(0, 32)}`;

export class PreparedStatements {
  private readonly names = new Map<string, string>();
  private readonly tenantTexts = new Set<string>();
  private active: boolean;

  constructor(
    named: boolean,
    private readonly onUnnamed?: (reason: string) => void,
  ) {
    this.active = named;
  }

  /** The name to send `text` under, or undefined to send it unnamed. */
  nameOf(text: string): string | undefined {
    if (!this.active) return undefined;
    let name = this.names.get(text);
    if (name === undefined) {
      if (this.names.size >= PREPARED_LIMIT) return undefined;
      name = statementName(text);
      this.names.set(text, name);
    }
    return name;
  }

  /**
   * Whether a per-tenant text (a statement with its tenant written in) may be sent in place of its
   * shared text: where it is named — registered now within PREPARED_TENANT_LIMIT, or already — or where
   * nothing is named (the connections keep no statements). Otherwise the caller sends the shared text,
   * named: an unnamed per-tenant text would plan the whole statement on every execution.
   */
  admitsTenantText(text: string): boolean {
    if (!this.active || this.names.has(text)) return true;
    if (this.tenantTexts.size >= PREPARED_TENANT_LIMIT || this.nameOf(text) === undefined) return false;
    this.tenantTexts.add(text);
    return true;
  }

  /**
   * Whether `err`, raised by a named statement, shows that the connections do not keep them; if so,
   * every later statement is unnamed and the caller sends this one again, unnamed.
   */
  refusedBy(err: unknown): boolean {
    const e = err as { code?: string; message?: string; routine?: string } | null;
    // 0A000 is any "feature not supported": only the plan cache's own (by its C function, which a
    // translated server message does not change, or by its English text).
    const stalePlan =
      e?.code === "0A000" &&
      (e.routine === "RevalidateCachedQuery" || /cached plan must not change result type/.test(e.message ?? ""));
    const refused = e?.code === "26000" || e?.code === "42P05" || stalePlan;
    if (refused && this.active) {
      this.active = false;
      this.onUnnamed?.(`${e!.code}: ${e!.message}`);
    }
    return refused;
  }

  state(): PreparedState {
    return { named: this.active, count: this.names.size };
  }
}
