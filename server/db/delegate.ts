// A write of one tenant as a few statements run in one call, where the tenant's rows are (Citus's
// function call delegation). Used by the one-statement creates (server/idempotency.ts).
//
// "tenant_exec"(tenantId, statements, params) (prisma/functions/tenant_exec.sql) runs the statements
// in order in the call's transaction; each returns one jsonb value (or no row: the call stops and
// returns NULL) and reads the previous one as $2 (PREVIOUS). On a Citus coordinator,
// `npm run db:distribute` makes it a distributed function co-located with the tenant tables by its
// first argument (create_distributed_function; its comment: 'citus:delegated(tenantId)'): the
// coordinator sends the whole call to the worker holding that tenant's shards, where each statement
// is an ordinary statement over the distributed tables, which Citus runs on the local shard — one hop
// per create. The creates use it where it is distributed (tenantDelegation); elsewhere they send their
// one prepared statement (server/idempotency.ts says why both). The function exists on every backend,
// and the tests force the delegated form on each.
//
// The statements' parameters become elements of one text[] ($1[n], each use cast to its type, as every
// planned value is: server/db/insert.ts), converted to text exactly as the pg driver sends them.
import utils from "pg/lib/utils.js";
import { Prisma } from "../../generated/prisma/client.js";
import type { Database } from "./client.js";
import { readOncePerDatabase } from "./once.js";

/** The function as the catalog names it (its comment gives db:distribute its role). */
export const TENANT_EXEC = '"tenant_exec"(uuid, text[], text[])';

/** The one text of a call (one prepared statement for every create). */
export const TENANT_EXEC_CALL = `SELECT "tenant_exec"($1::uuid, $2::text[], $3::text[]) AS "result"`;

/** In a statement of runForTenant(): the jsonb value the previous statement returned ('{}' for the first). */
export const PREVIOUS = Prisma.raw("$2");

/** Whether each database has "tenant_exec" distributed (read once per Database: createApp asks at start). */
const delegation = readOncePerDatabase(detect);

/**
 * Whether `db` is a Citus coordinator whose "tenant_exec" is distributed (db:distribute): then the
 * one-statement creates go through it (server/idempotency.ts). Read once and kept (a failed read is
 * read again): a service started before `npm run db:distribute` keeps the CTE form until restarted.
 */
export const tenantDelegation = (db: Database): Promise<boolean> => delegation.get(db);

/**
 * Tests: the creates of `db` through "tenant_exec" (true) or
 * not (false) whatever the database; undefined: detect again.
 */
export function useTenantDelegation(db: Database, on: boolean | undefined): void {
  if (on === undefined) delegation.forget(db);
  else delegation.set(db, on);
}

async function detect(db: Database): Promise<boolean> {
  if (db.kind !== "postgres") return false;
  const [citus] = await db.sql.query<{ on: boolean }>(
    `SELECT to_regclass('pg_catalog.pg_dist_object') IS NOT NULL AS "on"`,
  );
  if (!citus?.on) return false;
  const [fn] = await db.sql.query<{ on: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_object
                     WHERE classid = 'pg_proc'::regclass AND objid = to_regprocedure($1)
                       AND distribution_argument_index IS NOT NULL) AS "on"`,
    [TENANT_EXEC],
  );
  return fn?.on === true;
}

/**
 * Runs `statements` for `tenantId` in one call (module comment): each a SELECT, INSERT … RETURNING …
 * of one jsonb value. Returns the last one's value, or undefined when one of them returned no row.
 */
export async function runForTenant(db: Database, tenantId: string, statements: Prisma.Sql[]): Promise<unknown> {
  const [row] = await db.sql.query<{ result: unknown }>(TENANT_EXEC_CALL, [tenantId, ...delegated(statements)], {
    prepare: true,
  });
  return row?.result ?? undefined;
}

/** The statements' texts over one text[] parameter ($1[n] for the n-th value of them all), and that array. */
export function delegated(statements: Prisma.Sql[]): [texts: string[], params: (string | null)[]] {
  const params: (string | null)[] = [];
  const texts = statements.map(({ strings, values }) => {
    let text = strings[0]!;
    for (let i = 1; i < strings.length; i++) {
      const p = utils.prepareValue(values[i - 1]);
      if (p !== null && typeof p !== "string")
        throw new Error("tenant_exec: a binary parameter cannot be passed as text");
      params.push(p);
      text += `($1[${params.length}])${strings[i]}`;
    }
    return text;
  });
  return [texts, params];
}

/**
 * What a "tenant_exec" call runs, as separate statements in their own form (`$n` for the n-th value,
 * PREVIOUS as the parameter after the last, a jsonb value): what the statement observer reports
 * (test/db/tenant-queries.test.ts analyses every statement a create runs); undefined for any other statement.
 */
export function undelegated(text: string, params: readonly unknown[]): [string, readonly unknown[]][] | undefined {
  const [, statements, values] = params;
  if (text !== TENANT_EXEC_CALL || !Array.isArray(statements) || !Array.isArray(values)) return undefined;
  const previous = `$${values.length + 1}`;
  return statements.map((s: string) => [
    s.replace(/\$2(?!\d)/g, previous).replace(/\(\$1\[(\d+)\]\)/g, "$$$1"),
    [...values, "{}"],
  ]);
}
