-- Issue 13: the contacts' version, for the count cache of contact searches (docs/architecture.md,
-- "List totals"; routers/_lib/totals.ts, cachedTotal).
--
-- The counter key (Contact, 'v', '') is the contacts' version. It gets +1, in the writing
-- transaction, for every row of every write that can change which live contacts a search (or a
-- search within a list) matches: a contact inserted or hard-deleted, soft-deleted or undeleted, its
-- fullName, email or phone changed; a membership inserted, deleted or moved. Its deltas are never
-- negative, so its sum only grows. Two snapshots that read the same version therefore see the same
-- committed contact writes (a later snapshot sees every transaction an earlier one saw, and each
-- further one adds at least 1), and a count cached with the version it was counted at is exact for
-- every snapshot that reads that version. Like every counter key it is spread over the 32 slot rows.
--
-- "ListCounter_apply" below is the function of 20261123200000_list_counters with the version added:
-- the 'v' rows of the two statement-level branches (Contact inserts, membership inserts and deletes;
-- counted +1 even for a DELETE), and one +1 per tenant in the row-level branch for Contact and
-- ContactListMember (updates, and Contact's row-level DELETE).

CREATE OR REPLACE FUNCTION "ListCounter_apply"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_slots integer := "ListCounter_slots"();
  v_slot integer := (txid_current() % "ListCounter_slots"())::integer;
  v_free integer;
  v_lock integer;
  v_cand integer;
  v_done boolean;
  v_entity text := CASE TG_TABLE_NAME WHEN 'ContactListMember' THEN 'Contact' ELSE TG_TABLE_NAME END;
  ts uuid[];
  dims text[];
  vals text[];
  ns bigint[];
BEGIN
  IF TG_TABLE_NAME = 'ContactListMember' THEN
    -- Ordered with a concurrent soft delete / undelete of the member's contact (which moves the counts
    -- of the memberships it sees) by a share lock on the contact, taken before its liveness is read.
    IF TG_LEVEL = 'STATEMENT' THEN
      PERFORM 1 FROM "Contact" c WHERE (c."tenantId", c."id") IN (SELECT m."tenantId", m."contactId" FROM changed m)
       ORDER BY c."tenantId", c."id" FOR SHARE;
    ELSE
      PERFORM 1 FROM "Contact" c
       WHERE (c."tenantId", c."id") IN ((OLD."tenantId", OLD."contactId"), (NEW."tenantId", NEW."contactId"))
       ORDER BY c."tenantId", c."id" FOR SHARE;
    END IF;
  END IF;
  IF TG_LEVEL = 'STATEMENT' THEN
    -- The keys of every inserted or deleted row (a transition table's rows are cast to the table's row type).
    CASE TG_TABLE_NAME
      WHEN 'Lead' THEN
        SELECT array_agg(r."tenantId"), array_agg(k."dim"), array_agg(k."value") INTO ts, dims, vals
          FROM changed r, "ListCounter_keys"(r::"Lead") k;
      WHEN 'Ticket' THEN
        SELECT array_agg(r."tenantId"), array_agg(k."dim"), array_agg(k."value") INTO ts, dims, vals
          FROM changed r, "ListCounter_keys"(r::"Ticket") k;
      WHEN 'Appointment' THEN
        SELECT array_agg(r."tenantId"), array_agg(k."dim"), array_agg(k."value") INTO ts, dims, vals
          FROM changed r, "ListCounter_keys"(r::"Appointment") k;
      WHEN 'Conversation' THEN
        SELECT array_agg(r."tenantId"), array_agg(k."dim"), array_agg(k."value") INTO ts, dims, vals
          FROM changed r, "ListCounter_keys"(r::"Conversation") k;
      WHEN 'Contact' THEN
        SELECT array_agg(x.t), array_agg(x.d), array_agg(x.v) INTO ts, dims, vals
          FROM (SELECT r."tenantId" AS t, k."dim" AS d, k."value" AS v FROM changed r, "ListCounter_keys"(r::"Contact") k
                UNION ALL SELECT r."tenantId", 'v', '' FROM changed r) x;
      WHEN 'ContactListMember' THEN
        SELECT array_agg(x.t), array_agg(x.d), array_agg(x.v) INTO ts, dims, vals
          FROM (SELECT r."tenantId" AS t, k."dim" AS d, k."value" AS v FROM changed r, "ListCounter_keys"(r::"ContactListMember") k
                UNION ALL SELECT r."tenantId", 'v', '' FROM changed r) x;
    END CASE;
    SELECT array_agg(g.t ORDER BY g.t, g.d, g.v), array_agg(g.d ORDER BY g.t, g.d, g.v), array_agg(g.v ORDER BY g.t, g.d, g.v),
           array_agg(g.n ORDER BY g.t, g.d, g.v)
      INTO ts, dims, vals, ns
      FROM (SELECT x.t, x.d, x.v, count(*) * CASE WHEN x.d = 'v' OR TG_OP <> 'DELETE' THEN 1 ELSE -1 END AS n
              FROM unnest(ts, dims, vals) x(t, d, v) GROUP BY 1, 2, 3) g;
  ELSE
    SELECT array_agg(x."tenantId" ORDER BY x."tenantId", x."dim", x."value"), array_agg(x."dim" ORDER BY x."tenantId", x."dim", x."value"),
           array_agg(x."value" ORDER BY x."tenantId", x."dim", x."value"), array_agg(x."n" ORDER BY x."tenantId", x."dim", x."value")
      INTO ts, dims, vals, ns
      FROM (SELECT d."tenantId", d."dim", d."value", sum(d."delta") AS "n"
              FROM (SELECT OLD."tenantId", k."dim", k."value", -1 AS "delta" FROM "ListCounter_keys"(OLD) k
                    UNION ALL
                    SELECT NEW."tenantId", k."dim", k."value", 1 FROM "ListCounter_keys"(NEW) k WHERE TG_OP = 'UPDATE'
                    UNION ALL
                    SELECT v.t, 'v', '', 1 FROM (SELECT OLD."tenantId" UNION SELECT NEW."tenantId") v(t)
                     WHERE v_entity = 'Contact' AND v.t IS NOT NULL) d
             GROUP BY 1, 2, 3
            HAVING sum(d."delta") <> 0) x;
  END IF;
  -- Each delta goes to one slot row of its key that no OTHER transaction holds (this transaction's own
  -- rows are free to it), so that a long transaction that wrote a counted row never queues the
  -- tenant's other writers behind the counter rows it holds until it commits:
  --   1. an UPDATE of an existing row, this transaction's slot first, skipping rows others hold (a
  --      plain index scan, which marks the dead versions a hot row leaves behind, where INSERT … ON
  --      CONFLICT's arbiter check keeps walking them until the next vacuum);
  --   2. else a new row at a slot, from this transaction's, that the key does not have yet in this
  --      statement's snapshot and that no other transaction is creating: a transaction-scoped
  --      advisory lock on (key, slot) marks the slot row an uncommitted transaction inserted, which
  --      the snapshot cannot see and whose unique-index check would otherwise wait for that
  --      transaction's end. If a row committed there meanwhile (DO NOTHING), back to 1: each such
  --      turn finds one more committed slot, so the loop ends within v_slots turns;
  --   3. else (every slot row exists and is held, or is being created) the upsert of this
  --      transaction's slot, which waits: only when 32 transactions of the tenant hold the key.
  FOR i IN 1 .. coalesce(array_length(dims, 1), 0) LOOP
    v_lock := hashtext(ts[i]::text || '/' || v_entity || '/' || dims[i] || '/' || vals[i]);
    v_done := false;
    FOR turn IN 1 .. v_slots + 1 LOOP
      UPDATE "ListCounter" SET "n" = "n" + ns[i]
       WHERE "tenantId" = ts[i] AND "entity" = v_entity AND "dim" = dims[i] AND "value" = vals[i]
         AND "slot" = (SELECT s."slot" FROM "ListCounter" s
                        WHERE s."tenantId" = ts[i] AND s."entity" = v_entity AND s."dim" = dims[i] AND s."value" = vals[i]
                        ORDER BY s."slot" = v_slot DESC, (s."slot" - v_slot + v_slots) % v_slots
                        LIMIT 1 FOR UPDATE SKIP LOCKED);
      IF FOUND THEN v_done := true; EXIT; END IF;
      -- One slot at a time, in order: the lock is tried only on the slot it would take.
      v_free := NULL;
      FOR v_cand IN SELECT (v_slot + g.k) % v_slots FROM generate_series(0, v_slots - 1) g(k) ORDER BY g.k LOOP
        CONTINUE WHEN EXISTS (SELECT 1 FROM "ListCounter" c
                               WHERE c."tenantId" = ts[i] AND c."entity" = v_entity AND c."dim" = dims[i] AND c."value" = vals[i]
                                 AND c."slot" = v_cand);
        IF pg_try_advisory_xact_lock(v_lock, v_cand) THEN v_free := v_cand; EXIT; END IF;
      END LOOP;
      EXIT WHEN v_free IS NULL;
      INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
      VALUES (ts[i], v_entity, dims[i], vals[i], v_free, ns[i])
      ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO NOTHING;
      IF FOUND THEN v_done := true; EXIT; END IF;
    END LOOP;
    CONTINUE WHEN v_done;
    PERFORM pg_try_advisory_xact_lock(v_lock, v_slot);
    INSERT INTO "ListCounter" AS c ("tenantId", "entity", "dim", "value", "slot", "n")
    VALUES (ts[i], v_entity, dims[i], vals[i], v_slot, ns[i])
    ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO UPDATE SET "n" = c."n" + excluded."n";
  END LOOP;
  RETURN NULL;
END $$;

-- The contact UPDATE trigger fires also when a searched column changes (only the version moves: the
-- old and new row's other keys cancel out).
DROP TRIGGER "ListCounter_update" ON "Contact";
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Contact" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR (OLD."deletedAt" IS NULL) IS DISTINCT FROM (NEW."deletedAt" IS NULL)
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date
        OR OLD."fullName" IS DISTINCT FROM NEW."fullName" OR OLD."email" IS DISTINCT FROM NEW."email"
        OR OLD."phone" IS DISTINCT FROM NEW."phone")
  EXECUTE FUNCTION "ListCounter_apply"();

-- A rebuild recomputes every counter but the version, which moves on instead (+1 for every tenant
-- rebuilt): a rebuild follows writes made with the triggers disabled (a bulk load), which changed
-- contacts without moving it.
CREATE OR REPLACE FUNCTION "ListCounter_rebuild"(p_tenant uuid DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_rows bigint;
BEGIN
  LOCK TABLE "Lead", "Ticket", "Appointment", "Conversation", "Contact", "ContactListMember" IN SHARE MODE;
  DELETE FROM "ListCounter" WHERE (p_tenant IS NULL OR "tenantId" = p_tenant) AND "dim" <> 'v';
  INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
  SELECT x."tenantId", x."entity", x."dim", x."value", 0, count(*)
    FROM (SELECT r."tenantId", 'Lead' AS "entity", k.* FROM "Lead" r, "ListCounter_keys"(r) k
          UNION ALL SELECT r."tenantId", 'Ticket', k.* FROM "Ticket" r, "ListCounter_keys"(r) k
          UNION ALL SELECT r."tenantId", 'Appointment', k.* FROM "Appointment" r, "ListCounter_keys"(r) k
          UNION ALL SELECT r."tenantId", 'Conversation', k.* FROM "Conversation" r, "ListCounter_keys"(r) k
          UNION ALL SELECT r."tenantId", 'Contact', k.* FROM "Contact" r, "ListCounter_keys"(r) k) x
   WHERE p_tenant IS NULL OR x."tenantId" = p_tenant
   GROUP BY 1, 2, 3, 4;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  INSERT INTO "ListCounter" AS c ("tenantId", "entity", "dim", "value", "slot", "n")
  SELECT t."id", 'Contact', 'v', '', 0, 1 FROM "Tenant" t WHERE p_tenant IS NULL OR t."id" = p_tenant
  ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO UPDATE SET "n" = c."n" + 1;
  RETURN v_rows;
END $$;
