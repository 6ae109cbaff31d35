CREATE OR REPLACE FUNCTION "ListCounter_add"(p_tenant uuid, p_entity text, p_dim text, p_value text, p_n bigint, p_slot integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_slots integer := "ListCounter_slots"();
  v_lock integer := hashtext(p_tenant::text || '/' || p_entity || '/' || p_dim || '/' || p_value);
  v_rest bigint := p_n;      -- what is left to apply
  v_at integer;
  v_n bigint;
  v_take bigint;
  v_free integer;
  v_cand integer;
BEGIN
  -- The delta goes to slot rows of its key that no OTHER transaction holds (this transaction's own rows
  -- are free to it), so that a long transaction that wrote a counted row never queues the tenant's
  -- other writers behind the counter rows it holds until it commits:
  --   1. an existing row, locked with FOR UPDATE SKIP LOCKED: a negative row first, then this
  --      transaction's slot, then the next slots. A positive delta is added to that row whole (one
  --      UPDATE, the hot path of every create). A negative delta folds each negative row into itself
  --      (the row goes to 0), then takes positive rows down to 0 while they are smaller than what is
  --      left, and the last row takes the rest. A row left at 0 is deleted, else updated;
  --   2. else a new row at a slot, from this transaction's, that the key does not have yet in this
  --      statement's snapshot and that no other transaction is creating: a transaction-scoped
  --      advisory lock on (key, slot) marks the slot row an uncommitted transaction inserted, which
  --      the snapshot cannot see and whose unique-index check would otherwise wait for that
  --      transaction's end. If a row committed there meanwhile (DO NOTHING), back to 1;
  --   3. else (every slot row exists and is held, or is being created) the upsert of this
  --      transaction's slot, which waits: only when 32 transactions of the tenant hold the key.
  -- Every turn of the loop either ends it, deletes a row (1: at most one per slot: a slot this
  -- transaction deleted stays taken for the others until it ends, see below) or finds one more
  -- committed slot row (2): 3 × slots + 1 turns, then 3, bound the work (and the bound only ever
  -- costs tidiness, never exactness: 3 applies whatever is left).
  --
  -- Why no delta is ever lost to a deletion (READ COMMITTED, the only level the service uses):
  --   • a row is deleted only by the transaction that holds its row lock (FOR UPDATE in 1, or the
  --     upsert in 3) and that has just brought it to 0 itself: what it deletes carries nothing, and
  --     while it holds the lock nobody else can change the row: 1 skips it (SKIP LOCKED), 3's upsert
  --     waits for it. If that transaction rolls back, its update and its delete go with it;
  --   • an upsert (3) that waited for a row whose deletion then commits does not lose its delta:
  --     INSERT … ON CONFLICT DO UPDATE re-checks the unique index after the wait, finds no live row
  --     and inserts its own (PostgreSQL's guarantee: an insert or an update, always one of the two,
  --     under READ COMMITTED). If the deleter rolled back, it updates the restored row;
  --   • 1 never adds to a deleted row: FOR UPDATE re-reads the latest version of the row it locks,
  --     skips a row whose deletion has committed, and returns the current n (the fold and the split
  --     in 1 use it; it cannot change until this transaction ends);
  --   • 2 inserts only where its snapshot sees no row: a row deleted by a transaction still open is
  --     still seen there (the slot stays taken), and the DO NOTHING insert waits for, then re-checks
  --     against, a row another transaction is inserting or deleting: FOUND says whether this
  --     transaction's delta went in, and if not the loop goes on with the same rest.
  -- The sum of a key's rows therefore moves by exactly the deltas of the committed transactions.
  --
  -- What can remain: a negative delta lands on a new row (2, 3) only while every positive row of its
  -- key is held by other open transactions (e.g. +1 and −1 rows of a key whose count is 0). Such rows
  -- are bounded (one per slot, 32 per key) and go with the key's next writes: a positive delta takes
  -- a negative row first, a negative one folds every negative row it can lock.
  -- A positive delta (every create) first tries 1 in one statement, as before this migration: the
  -- row it takes (a negative row first) just moves by the delta; a negative row that reaches 0 goes.
  IF p_n > 0 THEN
    UPDATE "ListCounter" SET "n" = "n" + p_n
     WHERE "tenantId" = p_tenant AND "entity" = p_entity AND "dim" = p_dim AND "value" = p_value
       AND "slot" = (SELECT s."slot" FROM "ListCounter" s
                      WHERE s."tenantId" = p_tenant AND s."entity" = p_entity AND s."dim" = p_dim AND s."value" = p_value
                      ORDER BY s."n" < 0 DESC, s."slot" = p_slot DESC, (s."slot" - p_slot + v_slots) % v_slots
                      LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING "slot", "n" INTO v_at, v_n;
    IF FOUND THEN
      IF v_n = 0 THEN
        DELETE FROM "ListCounter"
         WHERE "tenantId" = p_tenant AND "entity" = p_entity AND "dim" = p_dim AND "value" = p_value AND "slot" = v_at;
      END IF;
      RETURN;
    END IF;
  END IF;
  FOR turn IN 1 .. 3 * v_slots + 1 LOOP
    EXIT WHEN v_rest = 0;
    SELECT s."slot", s."n" INTO v_at, v_n FROM "ListCounter" s
     WHERE s."tenantId" = p_tenant AND s."entity" = p_entity AND s."dim" = p_dim AND s."value" = p_value
     ORDER BY s."n" < 0 DESC, s."slot" = p_slot DESC, (s."slot" - p_slot + v_slots) % v_slots
     LIMIT 1 FOR UPDATE SKIP LOCKED;
    IF FOUND THEN
      -- What the row takes: all of a negative row (folded), all of a positive row smaller than the
      -- debt, else the whole rest.
      v_take := CASE WHEN v_n < 0 OR (v_rest < 0 AND v_n < -v_rest) THEN -v_n ELSE v_rest END;
      IF v_n + v_take = 0 THEN
        DELETE FROM "ListCounter"
         WHERE "tenantId" = p_tenant AND "entity" = p_entity AND "dim" = p_dim AND "value" = p_value AND "slot" = v_at;
      ELSE
        UPDATE "ListCounter" SET "n" = "n" + v_take
         WHERE "tenantId" = p_tenant AND "entity" = p_entity AND "dim" = p_dim AND "value" = p_value AND "slot" = v_at;
      END IF;
      v_rest := v_rest - v_take;
      CONTINUE;
    END IF;
    -- One slot at a time, in order: the lock is tried only on the slot it would take.
    v_free := NULL;
    FOR v_cand IN SELECT (p_slot + g.k) % v_slots FROM generate_series(0, v_slots - 1) g(k) ORDER BY g.k LOOP
      CONTINUE WHEN EXISTS (SELECT 1 FROM "ListCounter" c
                             WHERE c."tenantId" = p_tenant AND c."entity" = p_entity AND c."dim" = p_dim AND c."value" = p_value
                               AND c."slot" = v_cand);
      IF pg_try_advisory_xact_lock(v_lock, v_cand) THEN v_free := v_cand; EXIT; END IF;
    END LOOP;
    EXIT WHEN v_free IS NULL;
    INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
    VALUES (p_tenant, p_entity, p_dim, p_value, v_free, v_rest)
    ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO NOTHING;
    IF FOUND THEN RETURN; END IF;
  END LOOP;
  IF v_rest = 0 THEN RETURN; END IF;
  PERFORM pg_try_advisory_xact_lock(v_lock, p_slot);
  INSERT INTO "ListCounter" AS c ("tenantId", "entity", "dim", "value", "slot", "n")
  VALUES (p_tenant, p_entity, p_dim, p_value, p_slot, v_rest)
  ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO UPDATE SET "n" = c."n" + excluded."n"
  RETURNING c."n" INTO v_n;
  IF v_n = 0 THEN
    DELETE FROM "ListCounter"
     WHERE "tenantId" = p_tenant AND "entity" = p_entity AND "dim" = p_dim AND "value" = p_value AND "slot" = p_slot;
  END IF;
END $$;
