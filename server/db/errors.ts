// PostgreSQL constraint violations as they surface through Prisma and either driver adapter:
// the SQLSTATE (23505 unique, 23P01 exclusion, 23503 foreign key, 23514 check) and the constraint
// name, so procedures can map a database-held invariant to its API error.
export interface Violation {
  sqlState: string;
  constraint?: string;
}

export function dbViolation(err: unknown): Violation | undefined {
  const e = err as any;
  const cause = e?.meta?.driverAdapterError?.cause ?? e?.cause?.cause ?? e?.cause ?? e;
  const sqlState: unknown = cause?.originalCode ?? cause?.code ?? e?.meta?.code;
  if (typeof sqlState !== "string" || !/^[0-9A-Z]{5}$/.test(sqlState)) return undefined;
  const message: string = cause?.originalMessage ?? cause?.message ?? e?.message ?? "";
  const named: string | undefined = cause?.constraint?.index ?? /constraint "([^"]+)"/.exec(message)?.[1];
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
