-- The statements over a tenant's local shards as prepared statements of the session (issue 26: the
-- creates' cost on Citus). "tenant_exec" (20261129000000_tenant_exec_local) and the two trigger
-- statements of 20261130000000_tenant_exec_triggers run over the shards' names as dynamic SQL, which
-- PostgreSQL parses and plans on every execution: on a worker, ~1.5 ms of an appointment create's
-- ~4.7 ms (pg_stat_statements: the calendar check's plan ~0.6 ms, the counters' batch ~0.6 ms, the
-- inserts ~0.1 ms each). Each such statement is now a prepared statement of the session, named after
-- its text and parameter types ("local_call"): planned on its first executions, then from its cached
-- plan (PostgreSQL's plan cache: custom plans first, a generic one once it is as cheap). Everywhere the
-- statements name the distributed tables (one PostgreSQL, PGlite, the coordinator, another node's
-- tenant) nothing changes: they stay the static or dynamic statements they were.
--
-- The session's list of what it has prepared is a setting (crm.local_prepared), read on each call
-- (~2 µs; pg_prepared_statements builds a row for every prepared statement of the session, the
-- driver's included: ~0.17 ms with 150). Prepared statements are not transactional and settings are:
-- a rolled-back transaction keeps what it prepared or deallocated and reverts the list. So:
--   • whenever a statement is not on the list, the list is rebuilt from pg_prepared_statements (the
--     truth) before anything is prepared (what a rolled-back transaction prepared is found, not
--     prepared twice);
--   • a name on the list whose statement is gone (deallocated in a transaction that then rolled back,
--     or by a DEALLOCATE of someone else) fails with invalid_sql_statement_name before anything is
--     executed: each call site catches exactly that, rebuilds the list and prepares the statement
--     again (a subtransaction per statement: ~12 µs).
-- Bounded: at most "local_call_limit"() statements per session; past it the one prepared longest ago
-- is deallocated (a statement the session stops using goes; one it uses again is prepared again).
-- The parameters are passed as literals of the declared types (EXECUTE of a prepared statement takes
-- no parameters of the calling statement): each type's text form reads back as the same value.

CREATE FUNCTION "local_call_limit"() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 64';

-- 'EXECUTE <name>(<p_args>)' for the session's prepared statement of `p_sql` with parameters of
-- `p_types` ('uuid, text[]'); prepared now when it is not on the session's list, or when `p_check`
-- (the caller's EXECUTE of a listed name found it gone).
CREATE FUNCTION "local_call"(p_sql text, p_types text, p_args text, p_check boolean) RETURNS text
  LANGUAGE plpgsql AS $$
DECLARE
  v_name text := 'crm_local_' || md5(p_types || chr(10) || p_sql);
  v_ours text[];
BEGIN
  IF p_check OR strpos(coalesce(current_setting('crm.local_prepared', true), ''), v_name) = 0 THEN
    SELECT coalesce(array_agg(s.name::text ORDER BY s.prepare_time, s.name), '{}') INTO v_ours
      FROM pg_prepared_statements s WHERE s.name LIKE 'crm\_local\_%';
    IF NOT v_name = ANY(v_ours) THEN
      WHILE cardinality(v_ours) >= "local_call_limit"() LOOP
        EXECUTE format('DEALLOCATE %I', v_ours[1]);
        v_ours := v_ours[2:];
      END LOOP;
      EXECUTE format('PREPARE %I(%s) AS %s', v_name, p_types, p_sql);
      v_ours := v_ours || v_name;
    END IF;
    PERFORM set_config('crm.local_prepared', array_to_string(v_ours, ' '), false);
  END IF;
  RETURN format('EXECUTE %I(%s)', v_name, p_args);
END $$;

-- The call of 20261130000000_tenant_exec_triggers; over the local shards, each statement prepared.
CREATE OR REPLACE FUNCTION "tenant_exec"("tenantId" uuid, "statements" text[], "params" text[]) RETURNS jsonb
  LANGUAGE plpgsql AS $$
DECLARE
  "statement" text;
  "result" jsonb := '{}'::jsonb;
  "local" jsonb := "tenant_exec_local"("tenantId");
  "args" text;
BEGIN
  IF "local" IS NOT NULL THEN
    PERFORM set_config('crm.tenant_exec_names', "local"::text, true), set_config('crm.tenant_exec_tenant', "tenantId"::text, true);
  END IF;
  FOREACH "statement" IN ARRAY "statements" LOOP
    IF "local" IS NULL THEN
      EXECUTE "statement" INTO "result" USING "params", "result";
    ELSE
      "statement" := "tenant_exec_rename"("statement", "local");
      "args" := format('%L, %L', "params", "result");
      BEGIN
        EXECUTE "local_call"("statement", 'text[], jsonb', "args", false) INTO "result";
      EXCEPTION WHEN invalid_sql_statement_name THEN
        EXECUTE "local_call"("statement", 'text[], jsonb', "args", true) INTO "result";
      END;
    END IF;
    IF "result" IS NULL THEN
      RETURN NULL;
    END IF;
  END LOOP;
  RETURN "result";
END
$$;
COMMENT ON FUNCTION "tenant_exec"(uuid, text[], text[]) IS 'citus:delegated(tenantId)';

-- The counters' batch of 20261130000000_tenant_exec_triggers; its statement over the tenant's shard as a
-- prepared statement of the session.
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
  v_sql text;
  v_args text;
BEGIN
  FOR v_t IN SELECT DISTINCT x FROM unnest(p_ts) x ORDER BY 1 LOOP
    v_names := "tenant_exec_names"(v_t);
    IF v_names IS NOT NULL THEN
      -- The statement below over the tenant's local shard (20261130000000_tenant_exec_triggers).
      v_sql := format($q$
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
          FROM up$q$, v_names ->> 'ListCounter');
      v_args := format('%L, %L, %L, %L, %L, %L, %L, %L', v_t, p_entity, p_slot, v_slots, p_ts, p_dims, p_vals, p_ns);
      BEGIN
        EXECUTE "local_call"(v_sql, 'uuid, text, integer, integer, uuid[], text[], text[], bigint[]', v_args, false) INTO v_new, v_zero, v_zero_i;
      EXCEPTION WHEN invalid_sql_statement_name THEN
        EXECUTE "local_call"(v_sql, 'uuid, text, integer, integer, uuid[], text[], text[], bigint[]', v_args, true) INTO v_new, v_zero, v_zero_i;
      END;
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

-- The changes capture of 20261130000000_tenant_exec_triggers; its one-object statement over the tenant's
-- shard as a prepared statement of the session.
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
  v_sql text;
  v_args text;
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
      -- The statement below over the tenant's local shard (20261130000000_tenant_exec_triggers).
      v_sql := format($q$
        INSERT INTO %I ("tenantId", "type", "objectId", "pos", "action", "changedAt")
        VALUES ($1, $2, $3, NULL, $4, $5)
        ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
          SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt"$q$, v_names ->> 'ChangeLog');
      v_args := format('%L, %L, %L, %L, %L', v_out_t[1], v_type, v_out_o[1], coalesce(v_out_a[1], 'upsert'), v_now);
      BEGIN
        EXECUTE "local_call"(v_sql, 'uuid, text, uuid, text, timestamptz', v_args, false);
      EXCEPTION WHEN invalid_sql_statement_name THEN
        EXECUTE "local_call"(v_sql, 'uuid, text, uuid, text, timestamptz', v_args, true);
      END;
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
