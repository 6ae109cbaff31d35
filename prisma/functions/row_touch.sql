CREATE OR REPLACE FUNCTION "row_touch"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    -- The column's default, now() (the transaction's start on the database's clock), or what the
    -- writer gave (the fixture loader's past times); never before the object's createdAt (the
    -- service's clock), so that a new object never reads as updated before it was created.
    NEW."updatedAt" := greatest(NEW."updatedAt", NEW."createdAt");
    RETURN NEW;
  END IF;
  -- An UPDATE that changed the row (the trigger's WHEN clause compares it). Whatever the statement
  -- set, the database's clock decides.
  IF TG_ARGV[0] = 'versioned' THEN
    -- A nested IF: the row of an unversioned table has no "versionTx" to name.
    IF OLD."versionTx" IS NOT DISTINCT FROM pg_current_xact_id() THEN
      -- This transaction already made the row's current version (a message and its conversation's
      -- last-message fields, a create and a later statement): one write, one updatedAt, as one version.
      NEW."updatedAt" := OLD."updatedAt";
      RETURN NEW;
    END IF;
  END IF;
  -- The transaction's time, strictly after the previous value: a write never moves updatedAt back (a
  -- transaction that began before the last writer's) nor leaves it equal (two writes in 1 ms).
  NEW."updatedAt" := greatest(now(), OLD."updatedAt" + interval '1 millisecond');
  RETURN NEW;
END $$;
COMMENT ON FUNCTION "row_touch"() IS 'BEFORE row trigger of "updatedAt" (Contact, Conversation, Message): on INSERT never before createdAt; on an UPDATE that changes the row (the trigger''s WHEN) the transaction''s time, strictly after the previous value, once per transaction where the table is versioned (argument ''versioned'': "versionTx", see row_version)';
