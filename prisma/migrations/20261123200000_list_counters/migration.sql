-- Issue 13: exact list totals in O(1) and cheap deep offsets (docs/architecture.md, "List totals").
--
-- "ListCounter" holds, per tenant, how many rows each list would return: unfiltered (dim 'all'), for
-- the common single equality filters (dim = the filter, value = its value) and per UTC calendar bucket
-- of the list's order column (dims 'y', 'm', 'd': year, month, day). ONE trigger function keeps it, in
-- the writing transaction: a rolled-back write takes its deltas with it, and a reader sees rows and
-- counts of one snapshot. A key's count is the SUM of its slot rows: each writing transaction adds to
-- slot (xid % "ListCounter_slots"()), so concurrent creates of one tenant update different rows
-- instead of queueing on one; a slot may go negative, the sum is exact.

CREATE TABLE "ListCounter" (
  "tenantId" UUID NOT NULL,
  "entity" TEXT NOT NULL,
  "dim" TEXT NOT NULL,
  "value" TEXT NOT NULL,
  "slot" INTEGER NOT NULL,
  "n" BIGINT NOT NULL,
  CONSTRAINT "ListCounter_pkey" PRIMARY KEY ("tenantId", "entity", "dim", "value", "slot")
);
COMMENT ON TABLE "ListCounter" IS 'citus:distributed(tenantId)';
-- Hot rows: room on each page for HOT updates, and a vacuum as soon as dead versions pile up.
ALTER TABLE "ListCounter" SET (fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,
  autovacuum_vacuum_cost_delay = 0);

-- How many slot rows a key is spread over. Readers sum whatever slots exist, so this may change at
-- any time. 32: 32 concurrent creates of one tenant no longer queue (docs/decisions.md, issue 13).
CREATE FUNCTION "ListCounter_slots"() RETURNS integer LANGUAGE sql IMMUTABLE AS $$ SELECT 32 $$;

-- The bucket key of a UTC timestamp at a level ('y' 2026, 'm' 2026-11, 'd' 2026-11-20).
CREATE FUNCTION "ListCounter_bucket"(p_level text, p_at timestamp) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT to_char(p_at, CASE p_level WHEN 'y' THEN 'YYYY' WHEN 'm' THEN 'YYYY-MM' ELSE 'YYYY-MM-DD' END)
$$;

-- The values of the keys every counted row has: 'all', then its y, m and d buckets (of p_at, in UTC).
CREATE FUNCTION "ListCounter_base"(p_at timestamptz) RETURNS text[] LANGUAGE sql STABLE AS $$
  SELECT ARRAY['', "ListCounter_bucket"('y', p_at AT TIME ZONE 'UTC'), "ListCounter_bucket"('m', p_at AT TIME ZONE 'UTC'),
               "ListCounter_bucket"('d', p_at AT TIME ZONE 'UTC')]
$$;

-- The counter keys (dim, value) of one row, per list table (a NULL row has none). A NULL filter value
-- has no key (no list filters on null). Each table's UPDATE trigger below fires only when a column
-- used here changes (its WHEN clause lists them).
CREATE FUNCTION "ListCounter_keys"(r "Lead") RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v
    FROM unnest(ARRAY['all', 'y', 'm', 'd', 'customerId'], "ListCounter_base"(r."createdAt") || r."customerId"::text) k(d, v)
   WHERE r."tenantId" IS NOT NULL AND k.v IS NOT NULL
$$;
CREATE FUNCTION "ListCounter_keys"(r "Ticket") RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v
    FROM unnest(ARRAY['all', 'y', 'm', 'd', 'status', 'assignedTo', 'customerId'],
                "ListCounter_base"(r."createdAt") || ARRAY[r."status"::text, r."assignedToId"::text, r."customerId"::text]) k(d, v)
   WHERE r."tenantId" IS NOT NULL AND k.v IS NOT NULL
$$;
CREATE FUNCTION "ListCounter_keys"(r "Appointment") RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v
    FROM unnest(ARRAY['all', 'y', 'm', 'd', 'userId', 'customerId', 'leadId', 'status'],
                "ListCounter_base"(r."startsAt")
                  || ARRAY[r."assignedUserId"::text, r."customerId"::text, r."leadId"::text, r."status"::text]) k(d, v)
   WHERE r."tenantId" IS NOT NULL AND k.v IS NOT NULL
$$;
-- channelId and customerId (a Customer row) are read as the channels of a kind and the customers
-- linked to a contact: the filters the list offers.
CREATE FUNCTION "ListCounter_keys"(r "Conversation") RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v
    FROM unnest(ARRAY['all', 'y', 'm', 'd', 'status', 'channelId', 'customerId'],
                "ListCounter_base"(r."lastMessageAt") || ARRAY[r."status"::text, r."channelId"::text, r."customerId"::text]) k(d, v)
   WHERE r."tenantId" IS NOT NULL AND k.v IS NOT NULL
$$;
-- Live contacts only, with a listId key for each of their memberships.
CREATE FUNCTION "ListCounter_keys"(r "Contact") RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v FROM unnest(ARRAY['all', 'y', 'm', 'd'], "ListCounter_base"(r."createdAt")) k(d, v)
   WHERE r."tenantId" IS NOT NULL AND r."deletedAt" IS NULL
  UNION ALL
  SELECT 'listId', m."listId"::text FROM "ContactListMember" m
   WHERE r."deletedAt" IS NULL AND m."tenantId" = r."tenantId" AND m."contactId" = r."id"
$$;
-- A membership counts (under Contact) for its list while its contact is live.
CREATE FUNCTION "ListCounter_keys"(r "ContactListMember") RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT 'listId', r."listId"::text FROM "Contact" c
   WHERE c."tenantId" = r."tenantId" AND c."id" = r."contactId" AND c."deletedAt" IS NULL
$$;

-- The one trigger function of every list table. INSERT and DELETE are counted once per statement,
-- over its transition table ("changed"): a bulk statement touches each counter row once, where a row
-- trigger would update the same row once per row inside one transaction (a HOT chain that every later
-- update walks: quadratic). UPDATE (only when a counted column changed) is a row trigger, and so is
-- DELETE on Contact (see the triggers). The keys of the old row count −1, those of the new row +1; keys
-- in both cancel out, so only real moves (a status change, a re-link, a soft delete, another day
-- bucket) touch a counter. Deltas are applied in key order.
CREATE FUNCTION "ListCounter_apply"() RETURNS trigger LANGUAGE plpgsql AS $$
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
        SELECT array_agg(r."tenantId"), array_agg(k."dim"), array_agg(k."value") INTO ts, dims, vals
          FROM changed r, "ListCounter_keys"(r::"Contact") k;
      WHEN 'ContactListMember' THEN
        SELECT array_agg(r."tenantId"), array_agg(k."dim"), array_agg(k."value") INTO ts, dims, vals
          FROM changed r, "ListCounter_keys"(r::"ContactListMember") k;
    END CASE;
    SELECT array_agg(g.t ORDER BY g.t, g.d, g.v), array_agg(g.d ORDER BY g.t, g.d, g.v), array_agg(g.v ORDER BY g.t, g.d, g.v),
           array_agg(g.n ORDER BY g.t, g.d, g.v)
      INTO ts, dims, vals, ns
      FROM (SELECT x.t, x.d, x.v, count(*) * CASE TG_OP WHEN 'DELETE' THEN -1 ELSE 1 END AS n
              FROM unnest(ts, dims, vals) x(t, d, v) GROUP BY 1, 2, 3) g;
  ELSE
    SELECT array_agg(x."tenantId" ORDER BY x."tenantId", x."dim", x."value"), array_agg(x."dim" ORDER BY x."tenantId", x."dim", x."value"),
           array_agg(x."value" ORDER BY x."tenantId", x."dim", x."value"), array_agg(x."n" ORDER BY x."tenantId", x."dim", x."value")
      INTO ts, dims, vals, ns
      FROM (SELECT d."tenantId", d."dim", d."value", sum(d."delta") AS "n"
              FROM (SELECT OLD."tenantId", k."dim", k."value", -1 AS "delta" FROM "ListCounter_keys"(OLD) k
                    UNION ALL
                    SELECT NEW."tenantId", k."dim", k."value", 1 FROM "ListCounter_keys"(NEW) k WHERE TG_OP = 'UPDATE') d
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

-- INSERT and DELETE: statement triggers; UPDATE: a row trigger, only when a column the table's keys
-- use changes. A hard-deleted contact must subtract its memberships before the foreign key cascade
-- removes them: on Contact, DELETE is a row trigger whose name, "ListCounter…" (upper case), fires it
-- before "RI_ConstraintTrigger…".
CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Lead" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Lead" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Lead" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Ticket" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Ticket" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Ticket" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."assignedToId" IS DISTINCT FROM NEW."assignedToId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Appointment" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Appointment" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Appointment" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."assignedUserId" IS DISTINCT FROM NEW."assignedUserId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR OLD."leadId" IS DISTINCT FROM NEW."leadId"
        OR (OLD."startsAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."startsAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Conversation" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Conversation" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
-- Every stored message moves lastMessageAt: the trigger runs only when it crosses a UTC day.
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Conversation" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."channelId" IS DISTINCT FROM NEW."channelId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."lastMessageAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."lastMessageAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Contact" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Contact" FOR EACH ROW EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Contact" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR (OLD."deletedAt" IS NULL) IS DISTINCT FROM (NEW."deletedAt" IS NULL)
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "ContactListMember" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "ContactListMember" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "ContactListMember" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."listId" IS DISTINCT FROM NEW."listId"
        OR OLD."contactId" IS DISTINCT FROM NEW."contactId")
  EXECUTE FUNCTION "ListCounter_apply"();

-- Recomputes the counters of one tenant (or of all, p_tenant NULL) from the rows, in slot 0: the
-- backfill below, and the repair after a bulk load run with the triggers disabled. Takes SHARE locks on
-- the list tables, so writes wait until the calling transaction ends.
CREATE FUNCTION "ListCounter_rebuild"(p_tenant uuid DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_rows bigint;
BEGIN
  LOCK TABLE "Lead", "Ticket", "Appointment", "Conversation", "Contact", "ContactListMember" IN SHARE MODE;
  DELETE FROM "ListCounter" WHERE p_tenant IS NULL OR "tenantId" = p_tenant;
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
  RETURN v_rows;
END $$;

-- ---- reading ------------------------------------------------------------------------------------
-- Every reader below is STABLE: called inside a list's one SQL statement it sees that statement's
-- snapshot, so a total and the page it comes with always describe the same rows.

-- Rows of a list whose order column lies in [p_lo, p_hi): an index range count, used only for the
-- partial days at the ends of a range (at most two days of rows). (plpgsql: each branch's plan is
-- prepared once per connection.)
CREATE FUNCTION "ListCounter_rows"(p_tenant uuid, p_entity text, p_lo timestamptz, p_hi timestamptz) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
  CASE p_entity
    WHEN 'Lead' THEN
      RETURN (SELECT count(*) FROM "Lead" WHERE "tenantId" = p_tenant AND "createdAt" >= p_lo AND "createdAt" < p_hi);
    WHEN 'Ticket' THEN
      RETURN (SELECT count(*) FROM "Ticket" WHERE "tenantId" = p_tenant AND "createdAt" >= p_lo AND "createdAt" < p_hi);
    WHEN 'Contact' THEN
      RETURN (SELECT count(*) FROM "Contact"
               WHERE "tenantId" = p_tenant AND "createdAt" >= p_lo AND "createdAt" < p_hi AND "deletedAt" IS NULL);
    WHEN 'Appointment' THEN
      RETURN (SELECT count(*) FROM "Appointment" WHERE "tenantId" = p_tenant AND "startsAt" >= p_lo AND "startsAt" < p_hi);
    WHEN 'Conversation' THEN
      RETURN (SELECT count(*) FROM "Conversation" WHERE "tenantId" = p_tenant AND "lastMessageAt" >= p_lo AND "lastMessageAt" < p_hi);
  END CASE;
END $$;

-- [p_lo, p_hi) (UTC) cut into ascending segments: partial days at the ends ('edge'), then whole
-- days, months and years ('d', 'm', 'y'), the coarsest that fit: at most 2 edges, 60 days, 22 months
-- and the whole years in between.
CREATE FUNCTION "ListCounter_segments"(p_lo timestamp, p_hi timestamp)
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
      RETURN QUERY SELECT 'y', g, g + interval '1 year' FROM generate_series(y1, y2 - interval '1 year', interval '1 year') g;
      RETURN QUERY SELECT 'm', g, g + interval '1 month' FROM generate_series(y2, m2 - interval '1 month', interval '1 month') g;
    END IF;
    RETURN QUERY SELECT 'd', g, g + interval '1 day' FROM generate_series(m2, d2 - interval '1 day', interval '1 day') g;
  END IF;
  IF d2 < p_hi THEN RETURN QUERY SELECT 'edge', d2, p_hi; END IF;
END $$;

-- The rows of a list with its order column in [p_lo, p_hi) (NULL = unbounded): their exact number
-- ("total") and, for p_offset, where row number p_offset of that range is in the list's order
-- (p_desc: descending, else ascending): the list continues at row "skip" of the rows before "bound"
-- (descending: order column < bound; ascending: >= bound), "skip" being at most one day's rows.
-- Both NULL when p_offset is NULL or not below the total. Cost: the segments' counter rows (the
-- tenant's years, at most 12 months and 31 days, times the slots) plus an index count of the partial
-- days at the ends of a bounded range: independent of how many rows the tenant has.
CREATE FUNCTION "ListCounter_seek"(p_tenant uuid, p_entity text, p_lo timestamptz, p_hi timestamptz, p_offset bigint, p_desc boolean)
RETURNS TABLE("total" bigint, "bound" timestamptz, "skip" bigint) LANGUAGE plpgsql STABLE ROWS 1 AS $$
DECLARE
  lo timestamp := p_lo AT TIME ZONE 'UTC';
  hi timestamp := p_hi AT TIME ZONE 'UTC';
  ymin integer;
  ymax integer;
  lv text[];
  ss timestamp[];
  es timestamp[];
  cs bigint[];
  n integer;
  i integer;
  run bigint := 0;
BEGIN
  -- Clamp to the years that have rows: an unbounded or very wide range is a few year segments.
  SELECT min(c."value"::integer), max(c."value"::integer) INTO ymin, ymax
    FROM "ListCounter" c WHERE c."tenantId" = p_tenant AND c."entity" = p_entity AND c."dim" = 'y';
  IF ymin IS NULL THEN
    RETURN QUERY SELECT 0::bigint, NULL::timestamptz, NULL::bigint;
    RETURN;
  END IF;
  lo := greatest(coalesce(lo, '-infinity'), make_timestamp(ymin, 1, 1, 0, 0, 0));
  hi := least(coalesce(hi, 'infinity'), make_timestamp(ymax + 1, 1, 1, 0, 0, 0));
  SELECT array_agg(x."level" ORDER BY x."s"), array_agg(x."s" ORDER BY x."s"), array_agg(x."e" ORDER BY x."s"),
         array_agg((SELECT coalesce(sum(c."n"), 0) FROM "ListCounter" c
                     WHERE c."tenantId" = p_tenant AND c."entity" = p_entity AND c."dim" = x."level"
                       AND c."value" = "ListCounter_bucket"(x."level", x."s")) ORDER BY x."s")
    INTO lv, ss, es, cs
    FROM "ListCounter_segments"(lo, hi) x;
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

-- ---- filtered pages --------------------------------------------------------------------------------
-- A filtered page (and the count of a combined filter) walks the index of its most selective filter in
-- list order, so its cost follows the rows that match, not the tenant's size.
CREATE INDEX "Ticket_tenantId_status_createdAt_id_idx" ON "Ticket"("tenantId", "status", "createdAt" DESC, "id" DESC);
CREATE INDEX "Ticket_tenantId_assignedToId_createdAt_id_idx" ON "Ticket"("tenantId", "assignedToId", "createdAt" DESC, "id" DESC);
CREATE INDEX "Ticket_tenantId_customerId_createdAt_id_idx" ON "Ticket"("tenantId", "customerId", "createdAt" DESC, "id" DESC);
CREATE INDEX "Appointment_tenantId_customerId_startsAt_id_idx" ON "Appointment"("tenantId", "customerId", "startsAt", "id");
CREATE INDEX "Appointment_tenantId_leadId_startsAt_id_idx" ON "Appointment"("tenantId", "leadId", "startsAt", "id");
CREATE INDEX "Appointment_tenantId_status_startsAt_id_idx" ON "Appointment"("tenantId", "status", "startsAt", "id");
-- The from/to filter (appointments intersecting [from, to)) as a range overlap (&&) over this index:
-- a btree on startsAt would read every appointment before `to`.
CREATE INDEX "Appointment_tenantId_during_idx" ON "Appointment" USING gist ("tenantId", tstzrange("startsAt", "endsAt", '[)'));
CREATE INDEX "Conversation_tenantId_status_lastMessageAt_id_idx" ON "Conversation"("tenantId", "status", "lastMessageAt" DESC, "id" DESC);
CREATE INDEX "Conversation_tenantId_channelId_lastMessageAt_id_idx" ON "Conversation"("tenantId", "channelId", "lastMessageAt" DESC, "id" DESC);

-- Backfill from the existing rows (memberships come with their contacts' keys).
SELECT "ListCounter_rebuild"();
