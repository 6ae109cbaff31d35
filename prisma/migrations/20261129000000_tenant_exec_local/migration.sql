-- "tenant_exec" over the tenant's local shards (issue 26: the creates' cost on Citus).
-- On a Citus worker every statement of a delegated call that names a distributed table goes through
-- Citus's planner: it plans the statement against the distributed table, finds the shard, deparses the
-- shard's statement, then parses and plans that again for local execution — ~0.6 ms for the
-- appointment's checks, whose own plan takes ~0.2 ms on one PostgreSQL. The call knows its tenant, and
-- runs where that tenant's shards are: so when this node holds them, each statement names them itself
-- ("Lead" → "Lead_102040", a reference table → its local placement), and PostgreSQL plans it as on
-- one server. Same rows, same constraints (a shard has its table's indexes, exclusion constraint,
-- foreign keys to its co-located shards and to the reference tables' placements) and the same triggers
-- (Citus creates them on every shard), which fire as before.
--
-- What Citus's own writes guarantee against a concurrent shard move or split is kept: Citus takes a
-- share lock on the shard's metadata for each write, and a move or split blocks writes by taking it
-- exclusively on every co-located shard, on every node, before its last catch-up. "tenant_exec_local"
-- takes that share lock (lock_shard_metadata, Citus's own function for it; it needs the caller to own
-- the table, as the service's role does) and only then reads whether the shard is still placed here,
-- in a snapshot taken after the lock: either the move has not blocked writes yet, and this call's
-- writes are before the catch-up that copies them, or it has committed, and the call finds the shard
-- gone and runs its statements as written (Citus sends them on to the shard's new node).
--
-- Returns the names to use ({"Lead": "Lead_102040", …}: every table co-located with "Lead" and every
-- reference table, with their placements on this node), or NULL: not a Citus node, the tables not
-- distributed, the caller not their owner, the tenant's shards not placed here (a coordinator without
-- shards, a stale route after a move). The names of a shard group are kept for the session in a setting
-- named after the "Lead" shard and the newest shard id (a split or a new distribution makes new shard
-- ids, so new names are read); at most one per shard group.
CREATE FUNCTION "tenant_exec_local"("tenantId" uuid) RETURNS jsonb
  LANGUAGE plpgsql AS $$
DECLARE
  v_anchor bigint;
  v_key text;
  v_names jsonb;
BEGIN
  -- Each statement is planned when first reached: Citus's catalog only where it exists.
  IF to_regclass('pg_catalog.pg_dist_local_group') IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT a.shardid, 'crm.tenant_exec_' || a.shardid || '_' || (SELECT max(s.shardid) FROM pg_dist_shard s)
    INTO v_anchor, v_key
    FROM pg_dist_partition p, LATERAL (SELECT get_shard_id_for_distribution_column(p.logicalrelid, "tenantId") AS shardid) a
   WHERE p.logicalrelid = '"Lead"'::regclass AND p.partmethod = 'h';
  IF v_anchor IS NULL THEN
    RETURN NULL;   -- the tables not distributed
  END IF;
  v_names := nullif(current_setting(v_key, true), '')::jsonb;
  IF v_names IS NULL THEN
    IF NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = '"Lead"'::regclass), 'USAGE') THEN
      v_names := 'null'::jsonb;   -- not the owner: lock_shard_metadata would refuse; the statements as written
    ELSE
      SELECT coalesce(jsonb_object_agg(c.relname, c.relname || '_' || s.shardid), 'null'::jsonb) INTO v_names
        FROM pg_dist_shard a
        JOIN pg_dist_partition ap ON ap.logicalrelid = a.logicalrelid
        JOIN pg_dist_partition p ON p.colocationid = ap.colocationid OR p.partmethod = 'n'
        JOIN pg_dist_shard s ON s.logicalrelid = p.logicalrelid AND (p.partmethod = 'n' OR s.shardminvalue = a.shardminvalue)
        JOIN pg_class c ON c.oid = p.logicalrelid
       WHERE a.shardid = v_anchor
         AND EXISTS (SELECT 1 FROM pg_dist_placement pl
                      WHERE pl.shardid = s.shardid AND pl.groupid = (SELECT l.groupid FROM pg_dist_local_group l));
    END IF;
    PERFORM set_config(v_key, v_names::text, false);
  END IF;
  IF v_names = 'null'::jsonb THEN
    RETURN NULL;
  END IF;
  -- ShareLock (5), as Citus's own writes take it; then the placement, read after the lock.
  PERFORM lock_shard_metadata(5, ARRAY[v_anchor]);
  PERFORM 1 FROM pg_dist_placement p
   WHERE p.shardid = v_anchor AND p.groupid = (SELECT l.groupid FROM pg_dist_local_group l);
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  RETURN v_names;
END $$;

-- `p_sql` with every quoted identifier that is a key of `p_names` replaced by its value ("Lead" →
-- "Lead_102040"); anything else as it is. The schema's tables are capitalised ("Lead") and its columns
-- are not ("tenantId"), the creates' statements name tables only as quoted identifiers and carry every
-- value as a parameter (server/db/delegate.ts): so a capitalised name between double quotes that is a
-- key is that table ("AppointmentStatus", a type, is not "Appointment"; a cast to the table's row type
-- would name the shard's, of the same columns). A constraint named in the text would keep the table's
-- name, which its shard's copy does not have: the statements name none (ON CONFLICT names columns).
CREATE FUNCTION "tenant_exec_rename"(p_sql text, p_names jsonb) RETURNS text
  LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_name text;
  v_sql text := p_sql;
BEGIN
  FOR v_name IN SELECT DISTINCT m[1] FROM regexp_matches(p_sql, '"([A-Z][A-Za-z0-9_]*)"', 'g') m LOOP
    IF p_names ? v_name THEN
      v_sql := replace(v_sql, '"' || v_name || '"', '"' || (p_names ->> v_name) || '"');
    END IF;
  END LOOP;
  RETURN v_sql;
END $$;

-- The call of 20261128000000_tenant_exec, its statements over the local shards where it can.
CREATE OR REPLACE FUNCTION "tenant_exec"("tenantId" uuid, "statements" text[], "params" text[]) RETURNS jsonb
  LANGUAGE plpgsql AS $$
DECLARE
  "statement" text;
  "result" jsonb := '{}'::jsonb;
  "local" jsonb := "tenant_exec_local"("tenantId");
BEGIN
  FOREACH "statement" IN ARRAY "statements" LOOP
    IF "local" IS NOT NULL THEN
      "statement" := "tenant_exec_rename"("statement", "local");
    END IF;
    EXECUTE "statement" INTO "result" USING "params", "result";
    IF "result" IS NULL THEN
      RETURN NULL;
    END IF;
  END LOOP;
  RETURN "result";
END
$$;
COMMENT ON FUNCTION "tenant_exec"(uuid, text[], text[]) IS 'citus:delegated(tenantId)';
