// admin load: create the tenants of a fixture document (shared/contracts/operations.md) in one
// transaction; returns the ids by ref and the raw API keys. The document is validated by
// loadFixture itself (FixtureError → BAD_REQUEST); the input type is the fixture's for callers.
import { z } from "zod";
import { loadFixture as load, type FixtureInput } from "../../server/admin/fixture.js";
import { adminProcedure } from "./trpc.js";

export const loadFixture = adminProcedure
  .input(z.custom<FixtureInput>((v) => v !== undefined, { message: "a fixture document is required" }))
  .mutation(({ ctx, input }) => load(ctx.services.db, input));
