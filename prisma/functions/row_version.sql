CREATE OR REPLACE FUNCTION "row_version"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  -- Columns that are not part of the object's state: the version, the transaction that last changed
  -- it, and the trigger's arguments (generated columns, whose NEW value a BEFORE trigger does not see
  -- yet).
  v_skip text[] := ARRAY['version', 'versionTx'] || coalesce(TG_ARGV, '{}'::text[]);
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- Set here, not by a column default: on Citus a default of a volatile function is evaluated on
    -- the coordinator (its transaction id), the trigger on the shard's node (the worker's), where the
    -- same transaction's later updates compare it.
    NEW."version" := 1;
    NEW."versionTx" := pg_current_xact_id();
    RETURN NEW;
  END IF;
  IF (to_jsonb(NEW) - v_skip) IS DISTINCT FROM (to_jsonb(OLD) - v_skip) THEN
    IF OLD."versionTx" IS NOT DISTINCT FROM pg_current_xact_id() THEN
      -- Changed again by the transaction that already made this version (a create with its first
      -- comment, a comment and its ticket's updatedAt): one write, one version.
      NEW."version" := OLD."version";
    ELSE
      NEW."version" := OLD."version" + 1;
      NEW."versionTx" := pg_current_xact_id();
    END IF;
  ELSE
    NEW."version" := OLD."version";
    NEW."versionTx" := OLD."versionTx";
  END IF;
  RETURN NEW;
END $$;
COMMENT ON FUNCTION "row_version"() IS 'BEFORE INSERT OR UPDATE row trigger of the versioned objects (Lead, Contact, Ticket, Appointment, Conversation): version 1 on insert; the version grows by one with every transaction that changes the row (however many of its statements do), and an update that changes nothing keeps it (a version the statement set is ignored)';
