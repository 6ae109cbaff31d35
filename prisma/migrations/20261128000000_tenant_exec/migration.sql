-- The one-statement creates' statements, run where the tenant's rows are (issue 26;
-- server/db/delegate.ts). "tenant_exec" runs `statements` in order, in the caller's transaction,
-- each with two parameters: $1 the values of them all (text[]; a statement reads its n-th as
-- ($1[n]), cast to its type) and $2 the jsonb the previous statement returned ('{}' for the first).
-- Each returns one jsonb value or no row; no row (a gate that refused, a key already claimed) stops
-- there and the call returns NULL, having written nothing that a later statement would have needed.
-- Returns the last statement's value. On a Citus coordinator, `npm run db:distribute` makes it a
-- distributed function co-located with the tenant tables by "tenantId" (the comment below), so a call
-- is sent whole to the worker holding that tenant's shards, and each statement runs there as a
-- single-shard statement against local shards. Not SECURITY DEFINER: a caller runs only what its own
-- role may.
CREATE OR REPLACE FUNCTION "tenant_exec"("tenantId" uuid, "statements" text[], "params" text[]) RETURNS jsonb
  LANGUAGE plpgsql AS $$
DECLARE
  "statement" text;
  "result" jsonb := '{}'::jsonb;
BEGIN
  FOREACH "statement" IN ARRAY "statements" LOOP
    EXECUTE "statement" INTO "result" USING "params", "result";
    IF "result" IS NULL THEN
      RETURN NULL;
    END IF;
  END LOOP;
  RETURN "result";
END
$$;
COMMENT ON FUNCTION "tenant_exec"(uuid, text[], text[]) IS 'citus:delegated(tenantId)';
