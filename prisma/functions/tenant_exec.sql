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
