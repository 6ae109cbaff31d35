-- The triggers' writes over the tenant's local shards too (issue 26: the creates' cost on Citus).
-- Inside a "tenant_exec" call that found the tenant's shards on this node (20261129000000_tenant_exec_local),
-- the call's own statements name the shards, but the statements of the triggers they fire still name
-- the distributed tables, and Citus plans each of them (finds the shard, deparses the shard's
-- statement, parses and plans it again for local execution): ~45 % of a Citus worker's CPU per create.
-- Two of them run on every create: the changes capture's INSERT into "ChangeLog" and the counters'
-- batch UPDATE of "ListCounter".
--
-- Now "tenant_exec" records, for the rest of its transaction, the tenant whose shard group it has locked
-- (Citus's share lock on the group's metadata, held until the transaction ends) and found on this node,
-- with the names ("tenant_exec_names"); those two trigger statements, for that tenant, run over the
-- names as dynamic SQL, which PostgreSQL plans as on one server. Everywhere else (one PostgreSQL,
-- PGlite, the coordinator, a statement of another tenant, a transaction without such a call) nothing
-- is recorded, and they run as the static statements they were, with their cached plans: the dynamic
-- form is planned on each execution, which on one server would cost more than it saves. The two forms
-- are the same statement (same text but the table's name, same parameters in the same places):
-- test/delegate.test.ts compares the rows both write.

-- The names a "tenant_exec" call of this transaction found for `p_tenant` ({"Lead": "Lead_102040", …}),
-- or NULL. Transaction-scoped settings (set_config(…, true)): nothing outlives the call's transaction,
-- and so nothing outlives the metadata lock that makes the names right.
CREATE FUNCTION "tenant_exec_names"(p_tenant uuid) RETURNS jsonb
  LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN current_setting('crm.tenant_exec_tenant', true) = p_tenant::text
              THEN nullif(current_setting('crm.tenant_exec_names', true), '')::jsonb END
$$;

-- The call of 20261129000000_tenant_exec_local; it records its tenant and names for the triggers.
CREATE OR REPLACE FUNCTION "tenant_exec"("tenantId" uuid, "statements" text[], "params" text[]) RETURNS jsonb
  LANGUAGE plpgsql AS $$
DECLARE
  "statement" text;
  "result" jsonb := '{}'::jsonb;
  "local" jsonb := "tenant_exec_local"("tenantId");
BEGIN
  IF "local" IS NOT NULL THEN
    PERFORM set_config('crm.tenant_exec_names', "local"::text, true), set_config('crm.tenant_exec_tenant', "tenantId"::text, true);
  END IF;
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

-- The counters' batch of 20261128100000_single_shard_triggers; for the tenant of a local "tenant_exec" call,
-- over its shard.
CREATE OR REPLACE FUNCTION "ListCounter_add_all"(p_ts uuid[], p_entity text, p_dims text[], p_vals text[], p_ns bigint[], p_slot integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_slots integer := "ListCounter_slots"();
  v_t uuid;
  v_done bigint[];     -- the ordinals (1-based) the batch applied
  v_zero integer[];    -- the slots of rows the batch brought to 0 (a negative row that took its key's +n)
  v_zero_i bigint[];
  v_names jsonb;
  v_new bigint[];
BEGIN
  FOR v_t IN SELECT DISTINCT x FROM unnest(p_ts) x ORDER BY 1 LOOP
    v_names := "tenant_exec_names"(v_t);
    IF v_names IS NOT NULL THEN
      -- The statement below over the tenant's local shard (this migration's header).
      EXECUTE format($q$
        WITH k AS MATERIALIZED (
          SELECT u.i, u.d, u.v, u.n,
                 (SELECT s."slot" FROM %1$I s
                   WHERE s."tenantId" = $1 AND s."entity" = $2 AND s."dim" = u.d AND s."value" = u.v
                   ORDER BY s."n" < 0 DESC, s."slot" = $3 DESC, (s."slot" - $3 + $4) %% $4
                   LIMIT 1 FOR UPDATE SKIP LOCKED) AS "slot"
            FROM unnest($5, $6, $7, $8) WITH ORDINALITY u(t, d, v, n, i)
           WHERE u.t = $1 AND u.n > 0
           ORDER BY u.i),
        up AS (
          UPDATE %1$I c SET "n" = c."n" + k.n
            FROM k
           WHERE c."tenantId" = $1 AND c."entity" = $2 AND c."dim" = k.d AND c."value" = k.v AND c."slot" = k."slot"
          RETURNING k.i, c."slot", c."n")
        SELECT array_agg(up.i), array_agg(up."slot") FILTER (WHERE up."n" = 0), array_agg(up.i) FILTER (WHERE up."n" = 0)
          FROM up$q$, v_names ->> 'ListCounter')
        INTO v_new, v_zero, v_zero_i
        USING v_t, p_entity, p_slot, v_slots, p_ts, p_dims, p_vals, p_ns;
      v_done := coalesce(v_done, '{}') || v_new;
    ELSE
      WITH k AS MATERIALIZED (
        SELECT u.i, u.d, u.v, u.n,
               (SELECT s."slot" FROM "ListCounter" s
                 WHERE s."tenantId" = v_t AND s."entity" = p_entity AND s."dim" = u.d AND s."value" = u.v
                 ORDER BY s."n" < 0 DESC, s."slot" = p_slot DESC, (s."slot" - p_slot + v_slots) % v_slots
                 LIMIT 1 FOR UPDATE SKIP LOCKED) AS "slot"
          FROM unnest(p_ts, p_dims, p_vals, p_ns) WITH ORDINALITY u(t, d, v, n, i)
         WHERE u.t = v_t AND u.n > 0
         ORDER BY u.i),
      up AS (
        UPDATE "ListCounter" c SET "n" = c."n" + k.n
          FROM k
         WHERE c."tenantId" = v_t AND c."entity" = p_entity AND c."dim" = k.d AND c."value" = k.v AND c."slot" = k."slot"
        RETURNING k.i, c."slot", c."n")
      SELECT coalesce(v_done, '{}') || array_agg(up.i), array_agg(up."slot") FILTER (WHERE up."n" = 0), array_agg(up.i) FILTER (WHERE up."n" = 0)
        INTO v_done, v_zero, v_zero_i
        FROM up;
    END IF;
    FOR j IN 1 .. coalesce(cardinality(v_zero), 0) LOOP
      DELETE FROM "ListCounter"
       WHERE "tenantId" = v_t AND "entity" = p_entity AND "dim" = p_dims[v_zero_i[j]] AND "value" = p_vals[v_zero_i[j]] AND "slot" = v_zero[j];
    END LOOP;
  END LOOP;
  FOR i IN 1 .. coalesce(cardinality(p_dims), 0) LOOP
    CONTINUE WHEN i = ANY(v_done);
    PERFORM "ListCounter_add"(p_ts[i], p_entity, p_dims[i], p_vals[i], p_ns[i], p_slot);
  END LOOP;
END $$;

-- The changes capture of 20261128100000_single_shard_triggers; one changed object of the tenant of a local
-- "tenant_exec" call, over its shard.
CREATE OR REPLACE FUNCTION "changes_capture"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_type text := TG_ARGV[0];
  v_table text := TG_ARGV[1];
  v_now timestamptz := clock_timestamp();
  v_out_t uuid[];     -- the changes: tenant, object, action (NULL: 'upsert')
  v_out_o uuid[];
  v_out_a text[];
  v_keys_t uuid[];    -- Customer: the customers whose conversations change
  v_keys_o uuid[];
  v_t uuid;
  v_of uuid[];
  v_conv uuid[];
  v_names jsonb;
BEGIN
  IF v_table = 'Message' THEN
    SELECT array_agg(d.t), array_agg(d.o) INTO v_out_t, v_out_o
      FROM (SELECT DISTINCT "tenantId" AS t, "conversationId" AS o FROM new_rows) d;
  ELSIF v_table = 'TicketComment' THEN
    SELECT array_agg(d.t), array_agg(d.o) INTO v_out_t, v_out_o
      FROM (SELECT DISTINCT "tenantId" AS t, "ticketId" AS o FROM new_rows) d;
  ELSIF v_table = 'Customer' THEN
    -- Customers whose fields shown on a conversation changed.
    SELECT array_agg(n."tenantId"), array_agg(n."id") INTO v_keys_t, v_keys_o
      FROM new_rows n JOIN old_rows o ON o."tenantId" = n."tenantId" AND o."id" = n."id"
     WHERE (o."name", o."email", o."phone", o."contactId") IS DISTINCT FROM (n."name", n."email", n."phone", n."contactId");
  ELSIF v_table = 'Contact' AND TG_OP = 'INSERT' THEN
    -- A contact inserted already deleted is not fed (nobody can have mirrored it).
    SELECT array_agg(n."tenantId"), array_agg(n."id") INTO v_out_t, v_out_o FROM new_rows n WHERE n."deletedAt" IS NULL;
  ELSIF v_table = 'Contact' THEN
    SELECT array_agg(n."tenantId"), array_agg(n."id"), array_agg(CASE WHEN n."deletedAt" IS NULL THEN 'upsert' ELSE 'delete' END)
      INTO v_out_t, v_out_o, v_out_a
      FROM new_rows n JOIN old_rows o ON o."tenantId" = n."tenantId" AND o."id" = n."id"
     WHERE o IS DISTINCT FROM n;
  ELSIF TG_OP = 'INSERT' THEN
    SELECT array_agg(n."tenantId"), array_agg(n."id") INTO v_out_t, v_out_o FROM new_rows n;
  ELSE
    -- Lead, Conversation, Appointment, Ticket: updates that change anything (a no-op UPDATE writes nothing).
    SELECT array_agg(n."tenantId"), array_agg(n."id") INTO v_out_t, v_out_o
      FROM new_rows n JOIN old_rows o ON o."tenantId" = n."tenantId" AND o."id" = n."id"
     WHERE o IS DISTINCT FROM n;
  END IF;

  -- The parents, tenant by tenant, in id order: every path takes the object's row before its ChangeLog
  -- row, as a direct update of the object does (a comment and a concurrent ticket PATCH cannot deadlock).
  IF v_table IN ('Message', 'TicketComment') AND v_out_t IS NOT NULL THEN
    FOR v_t IN SELECT DISTINCT x FROM unnest(v_out_t) x ORDER BY 1 LOOP
      SELECT array_agg(u.o) INTO v_of FROM unnest(v_out_t, v_out_o) u(t, o) WHERE u.t = v_t;
      IF v_table = 'Message' THEN
        PERFORM 1 FROM "Conversation" c WHERE c."tenantId" = v_t AND c."id" = ANY(v_of) ORDER BY c."id" FOR NO KEY UPDATE;
      ELSE
        PERFORM 1 FROM "Ticket" k WHERE k."tenantId" = v_t AND k."id" = ANY(v_of) ORDER BY k."id" FOR NO KEY UPDATE;
      END IF;
    END LOOP;
  ELSIF v_table = 'Customer' AND v_keys_t IS NOT NULL THEN
    FOR v_t IN SELECT DISTINCT x FROM unnest(v_keys_t) x ORDER BY 1 LOOP
      SELECT array_agg(u.o) INTO v_of FROM unnest(v_keys_t, v_keys_o) u(t, o) WHERE u.t = v_t;
      PERFORM 1 FROM "Conversation" c WHERE c."tenantId" = v_t AND c."customerId" = ANY(v_of) ORDER BY c."id" FOR NO KEY UPDATE;
      SELECT array_agg(c."id") INTO v_conv FROM "Conversation" c WHERE c."tenantId" = v_t AND c."customerId" = ANY(v_of);
      v_out_t := v_out_t || array_fill(v_t, ARRAY[coalesce(cardinality(v_conv), 0)]);
      v_out_o := v_out_o || v_conv;
    END LOOP;
  END IF;

  IF v_out_t IS NULL OR cardinality(v_out_t) = 0 THEN
    RETURN NULL;
  END IF;
  IF cardinality(v_out_t) = 1 THEN
    -- One object (every create and update through the API): one row of VALUES, which Citus routes to
    -- the tenant's shard as it is (an INSERT … SELECT from arrays is planned there as a pull into an
    -- intermediate result and a push to the shard: ~5x the work).
    v_names := "tenant_exec_names"(v_out_t[1]);
    IF v_names IS NOT NULL THEN
      -- The statement below over the tenant's local shard (this migration's header).
      EXECUTE format($q$
        INSERT INTO %I ("tenantId", "type", "objectId", "pos", "action", "changedAt")
        VALUES ($1, $2, $3, NULL, $4, $5)
        ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
          SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt"$q$, v_names ->> 'ChangeLog')
        USING v_out_t[1], v_type, v_out_o[1], coalesce(v_out_a[1], 'upsert'), v_now;
      RETURN NULL;
    END IF;
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    VALUES (v_out_t[1], v_type, v_out_o[1], NULL, coalesce(v_out_a[1], 'upsert'), v_now)
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
    RETURN NULL;
  END IF;
  INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
  SELECT u.t, v_type, u.o, NULL, coalesce(u.a, 'upsert'), v_now
    FROM unnest(v_out_t, v_out_o, v_out_a) u(t, o, a)
   ORDER BY u.t, u.o
  ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
    SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  RETURN NULL;
END $$;
