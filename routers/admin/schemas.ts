// Input pieces shared by the admin procedures. Semantic checks (UUIDs, existence, scopes) stay in
// server/admin/operations.ts; these only give callers typed inputs.
import { z } from "zod";

export const Plan = z.enum(["starter", "pro", "enterprise"]);
/** A quota: a non-negative 32-bit integer. */
export const Count = z.number().int().min(0).max(2_147_483_647);
