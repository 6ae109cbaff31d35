// Tenant scoping in one place: every lookup of a tenant-owned row goes through owned(ctx, where),
// and "must exist or 404" is mustExist. Another tenant's row is indistinguishable from a missing one.
import { Prisma } from "../../generated/prisma/client.js";
import { notFound } from "../../server/errors.js";

/** The caller's tenant added to a where clause. */
export function owned<W extends object>(ctx: { tenantId: string }, where: W): W & { tenantId: string } {
  return { ...where, tenantId: ctx.tenantId };
}

/** The same for a raw statement: the caller's tenant as a condition on the unaliased table. */
export function ownedSql(ctx: { tenantId: string }): Prisma.Sql {
  return Prisma.sql`"tenantId" = ${ctx.tenantId}::uuid`;
}

/** The row, or 404 NOT_FOUND. */
export async function mustExist<T>(row: Promise<T | null> | T | null, what = "Resource"): Promise<T> {
  const r = await row;
  if (r === null || r === undefined) throw notFound(what);
  return r;
}
