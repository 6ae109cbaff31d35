-- Issue 25 (6): list counters bounded by the data, not by the requests (docs/architecture.md, "List
-- totals"). Before, a slot row that came back to 0 stayed: 100 reschedules of one appointment, each
-- into another year, left 300 rows at n = 0 (its old years', months' and days' keys), and a deep
-- offset then walked every year between the tenant's first and last: ~10,000 year segments once
-- rows sat in years 0001 and 9999.
--
-- 1. "ListCounter_add" applies one key's delta (the loop that was inside "ListCounter_apply"), and
--    REMOVES a slot row whose n reaches 0, in the statement that brought it there. A negative delta
--    (a delete, a move away) also folds the key's negative rows into itself and is split over the
--    positive rows (each taken at most down to 0), so that the key's last row out leaves no row: a
--    key whose count is 0 has no row at all once written with nobody else holding its rows, and
--    every other key has at most one row per slot (32). A positive delta takes a negative row first.
-- 2. "ListCounter_apply" is the function of 20261125000000_contact_version, its loop now a call of
--    "ListCounter_add" per key (row-level and statement-level triggers call the same function, so
--    the Citus move to row triggers keeps this).
-- 3. "ListCounter_seek" walks only the years that have rows ("ListCounter_segments" takes the list of
--    them): a sparse range costs its non-empty years plus at most 22 months and 60 days at its ends.
-- 4. Rows already at 0, and keys whose rows have mixed signs, are compacted once, here.

CREATE FUNCTION "ListCounter_add"(p_tenant uuid, p_entity text, p_dim text, p_value text, p_n bigint, p_slot integer)
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

CREATE OR REPLACE FUNCTION "ListCounter_apply"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_slot integer := (txid_current() % "ListCounter_slots"())::integer;
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
  -- In key order (the order every transaction takes its counter rows in).
  FOR i IN 1 .. coalesce(array_length(dims, 1), 0) LOOP
    PERFORM "ListCounter_add"(ts[i], v_entity, dims[i], vals[i], ns[i], v_slot);
  END LOOP;
  RETURN NULL;
END $$;

-- ---- reading: only the years that have rows ------------------------------------------------------

-- [p_lo, p_hi) (UTC) cut into ascending segments: partial days at the ends ('edge'), then whole days,
-- months and years ('d', 'm', 'y'), the coarsest that fit: at most 2 edges, 60 days and 22 months, and
-- a whole year only when it is in p_years (the years that have rows: an empty year is no segment).
DROP FUNCTION "ListCounter_segments"(timestamp, timestamp);
CREATE FUNCTION "ListCounter_segments"(p_lo timestamp, p_hi timestamp, p_years integer[])
RETURNS TABLE("level" text, "s" timestamp, "e" timestamp) LANGUAGE plpgsql IMMUTABLE ROWS 100 AS $$
DECLARE
  d1 timestamp := date_trunc('day', p_lo);
  d2 timestamp := date_trunc('day', p_hi);
  m1 timestamp;
  m2 timestamp;
  y1 timestamp;
  y2 timestamp;
BEGIN
  IF p_lo >= p_hi THEN RETURN; END IF;
  IF d1 < p_lo THEN d1 := d1 + interval '1 day'; END IF;
  IF d1 >= d2 THEN
    RETURN QUERY SELECT 'edge', p_lo, p_hi;
    RETURN;
  END IF;
  IF p_lo < d1 THEN RETURN QUERY SELECT 'edge', p_lo, d1; END IF;
  m1 := date_trunc('month', d1);
  IF m1 < d1 THEN m1 := m1 + interval '1 month'; END IF;
  m2 := date_trunc('month', d2);
  IF m1 >= m2 THEN
    RETURN QUERY SELECT 'd', g, g + interval '1 day' FROM generate_series(d1, d2 - interval '1 day', interval '1 day') g;
  ELSE
    RETURN QUERY SELECT 'd', g, g + interval '1 day' FROM generate_series(d1, m1 - interval '1 day', interval '1 day') g;
    y1 := date_trunc('year', m1);
    IF y1 < m1 THEN y1 := y1 + interval '1 year'; END IF;
    y2 := date_trunc('year', m2);
    IF y1 >= y2 THEN
      RETURN QUERY SELECT 'm', g, g + interval '1 month' FROM generate_series(m1, m2 - interval '1 month', interval '1 month') g;
    ELSE
      RETURN QUERY SELECT 'm', g, g + interval '1 month' FROM generate_series(m1, y1 - interval '1 month', interval '1 month') g;
      RETURN QUERY SELECT 'y', g.s, g.s + interval '1 year'
                     FROM (SELECT make_timestamp(y, 1, 1, 0, 0, 0) AS s FROM unnest(p_years) y) g
                    WHERE g.s >= y1 AND g.s < y2 ORDER BY g.s;
      RETURN QUERY SELECT 'm', g, g + interval '1 month' FROM generate_series(y2, m2 - interval '1 month', interval '1 month') g;
    END IF;
    RETURN QUERY SELECT 'd', g, g + interval '1 day' FROM generate_series(m2, d2 - interval '1 day', interval '1 day') g;
  END IF;
  IF d2 < p_hi THEN RETURN QUERY SELECT 'edge', d2, p_hi; END IF;
END $$;

-- As in 20261123200000_list_counters, but the years come from the tenant's year counters (those whose
-- count is not 0): an unbounded or wide range costs the years that have rows, not every year between
-- the first and the last. Cost: the year rows (years with rows × slots), at most 22 months and 60 days
-- at the range's ends, then 12 months and up to 31 days on the way down, and an index count of the
-- partial days at the ends of a bounded range.
CREATE OR REPLACE FUNCTION "ListCounter_seek"(p_tenant uuid, p_entity text, p_lo timestamptz, p_hi timestamptz, p_offset bigint, p_desc boolean)
RETURNS TABLE("total" bigint, "bound" timestamptz, "skip" bigint) LANGUAGE plpgsql STABLE ROWS 1 AS $$
DECLARE
  lo timestamp := p_lo AT TIME ZONE 'UTC';
  hi timestamp := p_hi AT TIME ZONE 'UTC';
  years integer[];
  lv text[];
  ss timestamp[];
  es timestamp[];
  cs bigint[];
  n integer;
  i integer;
  run bigint := 0;
BEGIN
  SELECT array_agg(y.v ORDER BY y.v) INTO years
    FROM (SELECT c."value"::integer AS v FROM "ListCounter" c
           WHERE c."tenantId" = p_tenant AND c."entity" = p_entity AND c."dim" = 'y'
           GROUP BY c."value" HAVING sum(c."n") <> 0) y;
  IF years IS NULL THEN
    RETURN QUERY SELECT 0::bigint, NULL::timestamptz, NULL::bigint;
    RETURN;
  END IF;
  -- Clamp to the years that have rows.
  lo := greatest(coalesce(lo, '-infinity'), make_timestamp(years[1], 1, 1, 0, 0, 0));
  hi := least(coalesce(hi, 'infinity'), make_timestamp(years[array_length(years, 1)] + 1, 1, 1, 0, 0, 0));
  SELECT array_agg(x."level" ORDER BY x."s"), array_agg(x."s" ORDER BY x."s"), array_agg(x."e" ORDER BY x."s"),
         array_agg((SELECT coalesce(sum(c."n"), 0) FROM "ListCounter" c
                     WHERE c."tenantId" = p_tenant AND c."entity" = p_entity AND c."dim" = x."level"
                       AND c."value" = "ListCounter_bucket"(x."level", x."s")) ORDER BY x."s")
    INTO lv, ss, es, cs
    FROM "ListCounter_segments"(lo, hi, years) x;
  -- The partial days at the ends (their bucket count is NULL above): counted in the table itself.
  FOR i IN 1 .. coalesce(array_length(lv, 1), 0) LOOP
    IF lv[i] = 'edge' THEN cs[i] := "ListCounter_rows"(p_tenant, p_entity, ss[i] AT TIME ZONE 'UTC', es[i] AT TIME ZONE 'UTC'); END IF;
  END LOOP;
  total := coalesce((SELECT sum(v) FROM unnest(cs) v), 0);
  IF p_offset IS NULL OR p_offset < 0 OR p_offset >= total THEN
    RETURN QUERY SELECT total, NULL::timestamptz, NULL::bigint;
    RETURN;
  END IF;
  LOOP
    n := array_length(lv, 1);
    i := CASE WHEN p_desc THEN n ELSE 1 END;
    WHILE i BETWEEN 1 AND n AND p_offset - run >= cs[i] LOOP
      run := run + cs[i];
      i := i + CASE WHEN p_desc THEN -1 ELSE 1 END;
    END LOOP;
    -- Unreachable while the buckets of a level add up to their parent (one snapshot, one trigger).
    IF i NOT BETWEEN 1 AND n THEN RAISE EXCEPTION 'ListCounter buckets disagree (% %)', p_entity, p_tenant; END IF;
    IF lv[i] IN ('edge', 'd') THEN
      RETURN QUERY SELECT total, (CASE WHEN p_desc THEN es[i] ELSE ss[i] END) AT TIME ZONE 'UTC', p_offset - run;
      RETURN;
    END IF;
    -- A whole month or year: walk its days or months.
    SELECT array_agg(g."level" ORDER BY g."s"), array_agg(g."s" ORDER BY g."s"), array_agg(g."e" ORDER BY g."s"),
           array_agg((SELECT coalesce(sum(c."n"), 0) FROM "ListCounter" c
                       WHERE c."tenantId" = p_tenant AND c."entity" = p_entity AND c."dim" = g."level"
                         AND c."value" = "ListCounter_bucket"(g."level", g."s")) ORDER BY g."s")
      INTO lv, ss, es, cs
      FROM (SELECT CASE lv[i] WHEN 'y' THEN 'm' ELSE 'd' END AS "level", t AS "s",
                   t + CASE lv[i] WHEN 'y' THEN interval '1 month' ELSE interval '1 day' END AS "e"
              FROM generate_series(ss[i], es[i] - interval '1 second',
                                   CASE lv[i] WHEN 'y' THEN interval '1 month' ELSE interval '1 day' END) t) g;
  END LOOP;
END $$;

-- ---- the rows already there ----------------------------------------------------------------------
-- Every key with a row at 0 or below is folded into one row (slot 0) holding its sum, or none when the
-- sum is 0. Writers wait for this transaction (their counter writes need ROW EXCLUSIVE).
LOCK TABLE "ListCounter" IN SHARE ROW EXCLUSIVE MODE;
WITH k AS (
  SELECT "tenantId", "entity", "dim", "value" FROM "ListCounter" GROUP BY 1, 2, 3, 4 HAVING bool_or("n" <= 0)
), gone AS (
  DELETE FROM "ListCounter" c USING k
   WHERE c."tenantId" = k."tenantId" AND c."entity" = k."entity" AND c."dim" = k."dim" AND c."value" = k."value"
  RETURNING c."tenantId", c."entity", c."dim", c."value", c."n"
)
INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
SELECT g."tenantId", g."entity", g."dim", g."value", 0, sum(g."n") FROM gone g GROUP BY 1, 2, 3, 4 HAVING sum(g."n") <> 0;
