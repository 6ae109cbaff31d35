// Errors a shard operation on Citus makes short-lived (drill 10 saw them while a shard moved
// or a tenant was isolated): 503 SERVICE_UNAVAILABLE, retry shortly — never a 500, which would say
// "a bug". Found wherever they sit in the error chain (driver error, adapter error, Prisma wrapper).
import { describe, expect, it } from "vitest";
import { toAppError } from "../../server/errors.js";

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: "ERROR" });

describe("transient Citus errors → 503", () => {
  it.each([
    ["XX000", "could not find valid entry for shard 102041"],
    [
      "CIINF",
      'Query could not find the intermediate result file "25_2", it was mostly likely deleted due to an error ' +
        "in a parallel process within the same distributed transaction",
    ],
  ])("%s %s", (code, message) => {
    expect(toAppError(pgError(code, message)).code).toBe("SERVICE_UNAVAILABLE");
    // Wrapped as Prisma wraps a raw query's failure.
    const wrapped = Object.assign(new Error("Invalid `prisma.$queryRaw()` invocation"), {
      meta: { driverAdapterError: { cause: pgError(code, message) } },
    });
    expect(toAppError(wrapped).code).toBe("SERVICE_UNAVAILABLE");
  });

  it("another XX000 stays an internal error (a bug, not an outage)", () => {
    expect(toAppError(pgError("XX000", "cache lookup failed for relation 12345")).code).toBe("INTERNAL_ERROR");
  });
});
