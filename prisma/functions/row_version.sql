CREATE OR REPLACE FUNCTION "row_version"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  -- Columns that are not part of the object's state: the version itself, and the trigger's arguments
  -- (generated columns, whose NEW value a BEFORE trigger does not see yet).
  v_skip text[] := ARRAY['version'] || coalesce(TG_ARGV, '{}'::text[]);
BEGIN
  IF (to_jsonb(NEW) - v_skip) IS DISTINCT FROM (to_jsonb(OLD) - v_skip) THEN
    NEW."version" := OLD."version" + 1;
  ELSE
    NEW."version" := OLD."version";
  END IF;
  RETURN NEW;
END $$;
COMMENT ON FUNCTION "row_version"() IS 'BEFORE UPDATE row trigger of the versioned objects (Lead, Contact, Ticket, Appointment): the version grows by one with every update that changes the row, and is kept as it was by one that changes nothing (a version the statement set is ignored)';
