// PostgreSQL constraint violations as they surface through Prisma and either driver adapter:
// the SQLSTATE (23505 unique, 23P01 exclusion, 23503 foreign key, 23514 check) and the constraint
// name, so procedures can map a database-held invariant to its API error.
export interface Violation {
  sqlState: string;
  constraint?: string;
}

/** The fields of an error (Prisma's, the adapter's, the driver's) that name a violation. */
interface ErrorFields {
  code?: unknown;
  originalCode?: unknown;
  message?: unknown;
  originalMessage?: unknown;
  constraint?: { index?: string } | null;
  cause?: ErrorFields | null;
  meta?: { code?: unknown; driverAdapterError?: { cause?: ErrorFields | null } | null } | null;
}

export function dbViolation(err: unknown): Violation | undefined {
  const e = err as ErrorFields | null | undefined;
  const cause = e?.meta?.driverAdapterError?.cause ?? e?.cause?.cause ?? e?.cause ?? e;
  const sqlState = cause?.originalCode ?? cause?.code ?? e?.meta?.code;
  if (typeof sqlState !== "string" || !/^[0-9A-Z]{5}$/.test(sqlState)) return undefined;
  const message = String(cause?.originalMessage ?? cause?.message ?? e?.message ?? "");
  const named = cause?.constraint?.index ?? /constraint "([^"]+)"/.exec(message)?.[1];
  return { sqlState, constraint: named === undefined ? undefined : schemaName(named) };
}

/**
 * The constraint's name in the schema. On Citus a violation is raised by a shard, whose constraints
 * carry the shard's id as a suffix ("Contact_tenantId_phone_key_102041"; shard ids start at 102008);
 * no constraint of the schema ends in `_` and six or more digits.
 */
export const schemaName = (constraint: string) => constraint.replace(/_\d{6,}$/, "");

export const isUniqueViolation = (err: unknown, constraint?: string) => {
  const v = dbViolation(err);
  return v?.sqlState === "23505" && (!constraint || v.constraint === constraint);
};
export const isExclusionViolation = (err: unknown, constraint?: string) => {
  const v = dbViolation(err);
  return v?.sqlState === "23P01" && (!constraint || v.constraint === constraint);
};
