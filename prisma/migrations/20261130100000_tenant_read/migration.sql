-- The reads of a tenant over its local shards (issue 26: the reads' cost on Citus). On the worker
-- holding a tenant's shards, a list read whose statement names three tables (the counter, the page,
-- the budget cut) goes through Citus's router planner on every execution: planned against the
-- distributed tables, the shard query deparsed, parsed and planned again (pgbench on the worker, the
-- GET /leads?customerId statement prepared: 1,690 tps; the same text over the shards' names, planned
-- by PostgreSQL alone and kept: 7,200). The service's worker pools (server/db/client.ts, localReads)
-- therefore send a tenant's reads over the shards' names, read from "tenant_shards" and kept a few
-- seconds, each read guarded by "tenant_shard_here".
--
-- Why a guard: a read takes no lock that a shard move waits for, so names kept by the service can be
-- stale. After a move has committed, the old shard stays until its deferred drop, and a read of it
-- would miss every write made since. The guard reads the shard's placement in the read's own snapshot
-- (a STABLE function sees the calling statement's snapshot) and raises when it is not on this node; a
-- call with only constant arguments is a pseudo-constant qual, which PostgreSQL evaluates once, before
-- any scan of the statement (a One-Time Filter). If the move committed before the read's snapshot, the
-- guard raises and the service sends the statement as written (Citus routes it); if after, the old
-- shard holds every row that snapshot can see (a move blocks writes for its final catch-up, and writes
-- after the switch commit after it). A shard already dropped fails the read with 42P01, also sent again
-- as written.

-- The names of the tenant's shards and of the reference tables' placements on this node, and the
-- "Lead" shard whose placement the guard checks: {"anchor": "102040", "names": {"Lead": "Lead_102040", …}},
-- or NULL where "tenant_exec_local" gives none (not a Citus node, the tables not distributed, not their
-- owner, the shards not here). Its share lock on the shard group's metadata ends with this statement.
CREATE FUNCTION "tenant_shards"("tenantId" uuid) RETURNS jsonb
  LANGUAGE plpgsql AS $$
DECLARE
  v_names jsonb := "tenant_exec_local"("tenantId");
BEGIN
  IF v_names IS NULL THEN
    RETURN NULL;
  END IF;
  RETURN jsonb_build_object('anchor', get_shard_id_for_distribution_column('"Lead"'::regclass, "tenantId")::text, 'names', v_names);
END $$;

-- True when the shard is placed on this node, in the calling statement's snapshot; else it raises
-- CR001 (the service then sends the statement as written).
CREATE FUNCTION "tenant_shard_here"(p_shard bigint) RETURNS boolean
  LANGUAGE plpgsql STABLE AS $$
BEGIN
  PERFORM 1 FROM pg_dist_placement p
   WHERE p.shardid = p_shard AND p.groupid = (SELECT l.groupid FROM pg_dist_local_group l);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the shard % is not placed on this node', p_shard USING ERRCODE = 'CR001';
  END IF;
  RETURN true;
END $$;
