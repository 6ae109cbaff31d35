-- The triggers' writes of one create as few single-shard statements (issue 26: the writes' cost on
-- Citus). On a Citus worker every statement a trigger sends to a distributed table goes through Citus's
-- planner and executor (routing, local execution of the shard's statement): ~0.15–0.4 ms each, where
-- the shard's statement itself takes ~0.02–0.06 ms. A lead's create sent seven of them from its
-- triggers: the changes capture's INSERT … SELECT into "ChangeLog" (from arrays: planned by Citus as a
-- pull into an intermediate result and a push to the shard, the worst of all, ~5 ms under load) and one
-- UPDATE of "ListCounter" per counter key (all, y, m, d, and one per filter value). Now:
--   1. "changes_capture" writes one changed object (every create and update through the API) as one
--      row of VALUES, which Citus routes as it is; several objects keep the INSERT … SELECT;
--   2. "ListCounter_apply" hands its keys to "ListCounter_add_all", which applies every positive delta
--      of a tenant in ONE statement on the hot path (each key's first free row, locked FOR UPDATE SKIP
--      LOCKED and moved by its delta — what "ListCounter_add" does first for one key), then the rest
--      (keys without a free row, negative deltas, a row brought to 0) key by key through
--      "ListCounter_add" as before.
-- Same behaviour and the same rows on every backend (one code path); on one PostgreSQL it is one
-- statement fewer per key too.

-- Every key's delta (p_ts, p_dims, p_vals, p_ns: in key order, as "ListCounter_apply" sorts them), tenant
-- by tenant (each statement pins one tenant: Citus routes it to that tenant's shard).
-- The batch takes each key's row as "ListCounter_add"'s first statement does (a negative row first,
-- then this transaction's slot, then the next ones; FOR UPDATE SKIP LOCKED: it never waits), in key
-- order (the MATERIALIZED list is evaluated in the arrays' order). What it did not apply goes through
-- "ListCounter_add" in key order. Waiting happens only there, as before (its step 3: every slot row of
-- a key held by other open transactions), so the counter rows a transaction can wait for are the same;
-- a key it holds from the batch may now come after the key it waits for, which can close a cycle only
-- when two transactions each find all 32 slots of a key held, and PostgreSQL then aborts one as a
-- deadlock (40P01), which the service retries (server/db/transaction.ts).
CREATE FUNCTION "ListCounter_add_all"(p_ts uuid[], p_entity text, p_dims text[], p_vals text[], p_ns bigint[], p_slot integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_slots integer := "ListCounter_slots"();
  v_t uuid;
  v_done bigint[];     -- the ordinals (1-based) the batch applied
  v_zero integer[];    -- the slots of rows the batch brought to 0 (a negative row that took its key's +n)
  v_zero_i bigint[];
BEGIN
  FOR v_t IN SELECT DISTINCT x FROM unnest(p_ts) x ORDER BY 1 LOOP
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

-- The changes capture of 20261127200000_citus_triggers, one changed object now as one row of VALUES.
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

-- The list counters' trigger function of 20261127200000_citus_triggers, its keys now applied by "ListCounter_add_all".
CREATE OR REPLACE FUNCTION "ListCounter_apply"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_table text := TG_ARGV[0];
  v_slot integer := (txid_current() % "ListCounter_slots"())::integer;
  v_entity text := CASE v_table WHEN 'ContactListMember' THEN 'Contact' ELSE v_table END;
  v_sign integer := CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END;
  ts uuid[];
  dims text[];
  vals text[];
  ns bigint[];
  m_t uuid[];     -- memberships (tenant, contact, list) of a ContactListMember statement
  m_c uuid[];
  m_l uuid[];
  v_t uuid;
  v_of uuid[];
  v_live uuid[];
  r_old jsonb;
  r_new jsonb;
BEGIN
  IF TG_LEVEL = 'STATEMENT' THEN
    IF v_table = 'ContactListMember' THEN
      SELECT array_agg(m."tenantId"), array_agg(m."contactId"), array_agg(m."listId") INTO m_t, m_c, m_l FROM changed m;
      -- One 'v' (the contacts' version) per membership row; a 'listId' key per membership of a live contact.
      ts := m_t;
      dims := array_fill('v'::text, ARRAY[coalesce(cardinality(m_t), 0)]);
      vals := array_fill(''::text, ARRAY[coalesce(cardinality(m_t), 0)]);
      FOR v_t IN SELECT DISTINCT x FROM unnest(m_t) x ORDER BY 1 LOOP
        SELECT array_agg(DISTINCT u.c) INTO v_of FROM unnest(m_t, m_c) u(t, c) WHERE u.t = v_t;
        PERFORM 1 FROM "Contact" c WHERE c."tenantId" = v_t AND c."id" = ANY(v_of) ORDER BY c."id" FOR SHARE;
        SELECT array_agg(c."id") INTO v_live FROM "Contact" c WHERE c."tenantId" = v_t AND c."id" = ANY(v_of) AND c."deletedAt" IS NULL;
        SELECT ts || array_agg(u.t), dims || array_agg('listId'::text), vals || array_agg(u.l::text) INTO ts, dims, vals
          FROM unnest(m_t, m_c, m_l) u(t, c, l) WHERE u.t = v_t AND u.c = ANY(v_live);
      END LOOP;
    ELSE
      -- A contact's statement trigger is INSERT only (its DELETE is a row trigger): a new contact has no
      -- memberships yet (a membership's foreign key needs its contact first), so its keys are the row's.
      IF v_table = 'Contact' AND TG_OP <> 'INSERT' THEN
        RAISE EXCEPTION 'ListCounter_apply: a statement-level % trigger on Contact would miss its list keys', TG_OP;
      END IF;
      SELECT array_agg(x.t), array_agg(x.d), array_agg(x.v) INTO ts, dims, vals
        FROM (SELECT (j ->> 'tenantId')::uuid AS t, k."dim" AS d, k."value" AS v
                FROM (SELECT to_jsonb(r) AS j FROM changed r) c, "ListCounter_keys"(v_table, c.j) k
              UNION ALL
              SELECT r."tenantId", 'v', '' FROM changed r WHERE v_table = 'Contact') x;
    END IF;
    SELECT array_agg(g.t ORDER BY g.t, g.d, g.v), array_agg(g.d ORDER BY g.t, g.d, g.v), array_agg(g.v ORDER BY g.t, g.d, g.v),
           array_agg(g.n ORDER BY g.t, g.d, g.v)
      INTO ts, dims, vals, ns
      FROM (SELECT x.t, x.d, x.v, count(*) * CASE WHEN x.d = 'v' THEN 1 ELSE v_sign END AS n
              FROM unnest(ts, dims, vals) x(t, d, v) GROUP BY 1, 2, 3) g;
  ELSE
    IF TG_OP <> 'INSERT' THEN r_old := to_jsonb(OLD); END IF;
    IF TG_OP <> 'DELETE' THEN r_new := to_jsonb(NEW); END IF;
    SELECT array_agg(x.t ORDER BY x.t, x.d, x.v), array_agg(x.d ORDER BY x.t, x.d, x.v),
           array_agg(x.v ORDER BY x.t, x.d, x.v), array_agg(x.n ORDER BY x.t, x.d, x.v)
      INTO ts, dims, vals, ns
      FROM (SELECT d.t, d.d, d.v, sum(d.delta) AS n
              FROM (SELECT (r_old ->> 'tenantId')::uuid AS t, k."dim" AS d, k."value" AS v, -1 AS delta FROM "ListCounter_keys"(v_table, r_old) k
                    UNION ALL
                    SELECT (r_new ->> 'tenantId')::uuid, k."dim", k."value", 1 FROM "ListCounter_keys"(v_table, r_new) k
                    UNION ALL
                    SELECT v.t, 'v', '', 1 FROM (SELECT (r_old ->> 'tenantId')::uuid UNION SELECT (r_new ->> 'tenantId')::uuid) v(t)
                     WHERE v_entity = 'Contact' AND v.t IS NOT NULL) d
             GROUP BY 1, 2, 3
            HAVING sum(d.delta) <> 0) x;
    -- The 'listId' keys, which need the other table: a contact's memberships (while it is live), or a
    -- membership's own key (while its contact is live, that contact share-locked first).
    IF v_table = 'Contact' THEN
      FOR v_t IN SELECT DISTINCT x FROM unnest(ARRAY[OLD."tenantId", NEW."tenantId"]) x WHERE x IS NOT NULL ORDER BY 1 LOOP
        SELECT ts || array_agg(v_t), dims || array_agg('listId'::text), vals || array_agg(d.l::text), ns || array_agg(d.n)
          INTO ts, dims, vals, ns
          FROM (SELECT m."listId" AS l,
                       sum(CASE WHEN TG_OP <> 'INSERT' AND OLD."tenantId" = v_t AND m."contactId" = OLD."id" AND OLD."deletedAt" IS NULL THEN -1 ELSE 0 END
                         + CASE WHEN TG_OP <> 'DELETE' AND NEW."tenantId" = v_t AND m."contactId" = NEW."id" AND NEW."deletedAt" IS NULL THEN 1 ELSE 0 END) AS n
                  FROM "ContactListMember" m
                 WHERE m."tenantId" = v_t AND m."contactId" = ANY(ARRAY[OLD."id", NEW."id"])
                 GROUP BY m."listId") d
         WHERE d.n <> 0;
      END LOOP;
    ELSIF v_table = 'ContactListMember' THEN
      FOR v_t IN SELECT DISTINCT x FROM unnest(ARRAY[OLD."tenantId", NEW."tenantId"]) x WHERE x IS NOT NULL ORDER BY 1 LOOP
        PERFORM 1 FROM "Contact" c WHERE c."tenantId" = v_t AND c."id" = ANY(ARRAY[OLD."contactId", NEW."contactId"]) ORDER BY c."id" FOR SHARE;
        SELECT array_agg(c."id") INTO v_live FROM "Contact" c
         WHERE c."tenantId" = v_t AND c."id" = ANY(ARRAY[OLD."contactId", NEW."contactId"]) AND c."deletedAt" IS NULL;
        SELECT ts || array_agg(v_t), dims || array_agg('listId'::text), vals || array_agg(d.l), ns || array_agg(d.n)
          INTO ts, dims, vals, ns
          FROM (SELECT e.l, sum(e.n) AS n
                  FROM (SELECT OLD."listId"::text AS l, -1 AS n WHERE TG_OP <> 'INSERT' AND OLD."tenantId" = v_t AND OLD."contactId" = ANY(v_live)
                        UNION ALL
                        SELECT NEW."listId"::text, 1 WHERE TG_OP <> 'DELETE' AND NEW."tenantId" = v_t AND NEW."contactId" = ANY(v_live)) e
                 GROUP BY e.l HAVING sum(e.n) <> 0) d;
      END LOOP;
    END IF;
    IF v_table IN ('Contact', 'ContactListMember') AND ts IS NOT NULL THEN
      -- Key order again, now with the list keys.
      SELECT array_agg(x.t ORDER BY x.t, x.d, x.v), array_agg(x.d ORDER BY x.t, x.d, x.v),
             array_agg(x.v ORDER BY x.t, x.d, x.v), array_agg(x.n ORDER BY x.t, x.d, x.v)
        INTO ts, dims, vals, ns
        FROM (SELECT u.t, u.d, u.v, sum(u.n) AS n FROM unnest(ts, dims, vals, ns) u(t, d, v, n) GROUP BY 1, 2, 3 HAVING sum(u.n) <> 0) x;
    END IF;
  END IF;
  IF ts IS NOT NULL THEN
    PERFORM "ListCounter_add_all"(ts, v_entity, dims, vals, ns, v_slot);
  END IF;
  RETURN NULL;
END $$;
