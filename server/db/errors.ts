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
  const constraint = cause?.constraint?.index ?? /constraint "([^"]+)"/.exec(message)?.[1];
  return { sqlState, constraint };
}

export const isUniqueViolation = (err: unknown, constraint?: string) => {
  const v = dbViolation(err);
  return v?.sqlState === "23505" && (!constraint || v.constraint === constraint);
};
export const isExclusionViolation = (err: unknown, constraint?: string) => {
  const v = dbViolation(err);
  return v?.sqlState === "23P01" && (!constraint || v.constraint === constraint);
};
