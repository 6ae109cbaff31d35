-- Triggers that also run on a Citus cluster (issue 26; docs/scaling.md, "Citus").
--
-- On Citus a trigger fires on the shard that holds the row, on a worker, and every statement inside it
-- that names a distributed table is planned by Citus there. Two rules follow, and every trigger
-- function of the schema keeps them (on plain PostgreSQL and PGlite they change nothing but the shape
-- of the queries):
--   1. a transition table (new_rows, old_rows, changed) is read only by queries that name no other
--      table: Citus cannot see it from a query it plans ("executor could not find named tuplestore").
--      What the trigger needs of it is first copied into arrays;
--   2. a statement that reads or locks a distributed table pins ONE tenant ("tenantId" = a value), so
--      Citus routes it to the tenant's co-located shard, on this same node, inside this transaction
--      (local execution). Rows of several tenants (a bulk statement, a fixture) are handled tenant by
--      tenant, in tenant order. An INSERT … SELECT FROM unnest(arrays) may hold several tenants: Citus
--      routes each row to its shard;
--   3. a trigger function never reads v_table: on a shard it is the shard's name ("Lead_102008").
--      The table a trigger belongs to is its argument.
-- Co-location is what makes this safe: a tenant's rows of every table (its leads, its ChangeLog rows,
-- its counters) are on one node, so a trigger never writes to another node.

-- The changes capture (20261123300000_changes_feed), same behaviour (TG_ARGV[0] the object type fed,
-- TG_ARGV[1] the table the trigger is on): which objects changed is read from
-- the transition tables into arrays; the parents are locked tenant by tenant (object row before its
-- ChangeLog row, as before); one upsert into "ChangeLog" from the arrays. `changedAt` is one
-- clock_timestamp() per statement (was: per row; the sequencer orders a step's rows by it, then by
-- type and id).
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
  INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
  SELECT u.t, v_type, u.o, NULL, coalesce(u.a, 'upsert'), v_now
    FROM unnest(v_out_t, v_out_o, v_out_a) u(t, o, a)
   ORDER BY u.t, u.o
  ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
    SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  RETURN NULL;
END $$;

-- The capture's triggers again, each naming its table (rule 3).
DROP TRIGGER "Lead_changes_insert" ON "Lead";
DROP TRIGGER "Lead_changes_update" ON "Lead";
DROP TRIGGER "Contact_changes_insert" ON "Contact";
DROP TRIGGER "Contact_changes_update" ON "Contact";
DROP TRIGGER "Conversation_changes_insert" ON "Conversation";
DROP TRIGGER "Conversation_changes_update" ON "Conversation";
DROP TRIGGER "Appointment_changes_insert" ON "Appointment";
DROP TRIGGER "Appointment_changes_update" ON "Appointment";
DROP TRIGGER "Ticket_changes_insert" ON "Ticket";
DROP TRIGGER "Ticket_changes_update" ON "Ticket";
DROP TRIGGER "Message_changes_insert" ON "Message";
DROP TRIGGER "TicketComment_changes_insert" ON "TicketComment";
DROP TRIGGER "TicketComment_changes_update" ON "TicketComment";
DROP TRIGGER "Customer_changes_update" ON "Customer";
CREATE TRIGGER "Lead_changes_insert" AFTER INSERT ON "Lead" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('lead', 'Lead');
CREATE TRIGGER "Lead_changes_update" AFTER UPDATE ON "Lead" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('lead', 'Lead');
CREATE TRIGGER "Contact_changes_insert" AFTER INSERT ON "Contact" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('contact', 'Contact');
CREATE TRIGGER "Contact_changes_update" AFTER UPDATE ON "Contact" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('contact', 'Contact');
CREATE TRIGGER "Conversation_changes_insert" AFTER INSERT ON "Conversation" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation', 'Conversation');
CREATE TRIGGER "Conversation_changes_update" AFTER UPDATE ON "Conversation" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation', 'Conversation');
CREATE TRIGGER "Appointment_changes_insert" AFTER INSERT ON "Appointment" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('appointment', 'Appointment');
CREATE TRIGGER "Appointment_changes_update" AFTER UPDATE ON "Appointment" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('appointment', 'Appointment');
CREATE TRIGGER "Ticket_changes_insert" AFTER INSERT ON "Ticket" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket', 'Ticket');
CREATE TRIGGER "Ticket_changes_update" AFTER UPDATE ON "Ticket" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket', 'Ticket');
CREATE TRIGGER "Message_changes_insert" AFTER INSERT ON "Message" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation', 'Message');
CREATE TRIGGER "TicketComment_changes_insert" AFTER INSERT ON "TicketComment" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket', 'TicketComment');
CREATE TRIGGER "TicketComment_changes_update" AFTER UPDATE ON "TicketComment" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket', 'TicketComment');
CREATE TRIGGER "Customer_changes_update" AFTER UPDATE ON "Customer" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation', 'Customer');

-- ---- list counters (20261123200000_list_counters, 20261125000000_contact_version, 20261127000000_list_counter_bounds)

-- The counter keys (dim, value) of one row of `p_table`, the row given as jsonb (to_jsonb(row)): a row
-- of any row type, so the same function serves the table on one PostgreSQL and its shards on Citus,
-- whose row types are the shards' own ("Lead_102008"). Every counted row has 'all' and its y/m/d
-- buckets of the list's order column; then one key per filter with a value (a NULL filter value has no
-- key: no list filters on null). Contacts count while live; their 'listId' keys (one per membership) and
-- a membership's own key need another table and are added by "ListCounter_apply". The filter lists
-- (dims and the columns they read, in the same order) are the database's half of the counter registry
-- (routers/_lib/counters.ts; test/counter-registry.test.ts checks that both name the same pairs). One
-- SELECT over arrays (inlined by the planner): ~2x cheaper than a join with a VALUES list.
CREATE FUNCTION "ListCounter_keys"(p_table text, r jsonb) RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v
    FROM unnest(ARRAY['all', 'y', 'm', 'd'] || CASE p_table
                  WHEN 'Lead' THEN ARRAY['customerId']
                  WHEN 'Ticket' THEN ARRAY['status', 'assignedTo', 'customerId']
                  WHEN 'Appointment' THEN ARRAY['userId', 'customerId', 'leadId', 'status']
                  WHEN 'Conversation' THEN ARRAY['status', 'channelId', 'customerId']
                  ELSE ARRAY[]::text[] END,
                "ListCounter_base"((r ->> CASE p_table WHEN 'Appointment' THEN 'startsAt' WHEN 'Conversation' THEN 'lastMessageAt' ELSE 'createdAt' END)::timestamptz)
                || CASE p_table
                  WHEN 'Lead' THEN ARRAY[r ->> 'customerId']
                  WHEN 'Ticket' THEN ARRAY[r ->> 'status', r ->> 'assignedToId', r ->> 'customerId']
                  WHEN 'Appointment' THEN ARRAY[r ->> 'assignedUserId', r ->> 'customerId', r ->> 'leadId', r ->> 'status']
                  WHEN 'Conversation' THEN ARRAY[r ->> 'status', r ->> 'channelId', r ->> 'customerId']
                  ELSE ARRAY[]::text[] END) k(d, v)
   WHERE p_table IN ('Lead', 'Ticket', 'Appointment', 'Conversation', 'Contact') AND r ->> 'tenantId' IS NOT NULL
     AND (p_table <> 'Contact' OR r ->> 'deletedAt' IS NULL) AND k.v IS NOT NULL
$$;

-- The one trigger function of every list table (TG_ARGV[0]: the table), as in 20261127000000 but
-- Citus-safe (the rules at the top). INSERT and DELETE are counted once per statement over the
-- transition table "changed"; UPDATE (only when a counted column changed) and a contact's DELETE are row
-- triggers. The keys of the old row count −1, those of the new row +1; keys in both cancel out.
-- Memberships count under Contact for their list while their contact is live: the contacts are
-- share-locked first (ordered with a concurrent soft delete of the contact, which moves the counts of
-- the memberships it sees), then read, tenant by tenant. Deltas are applied in key order by
-- "ListCounter_add" (which removes a slot row that reaches 0).
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
  FOR i IN 1 .. coalesce(array_length(dims, 1), 0) LOOP
    PERFORM "ListCounter_add"(ts[i], v_entity, dims[i], vals[i], ns[i], v_slot);
  END LOOP;
  RETURN NULL;
END $$;

-- The list counters' triggers again, each naming its table (rule 3); the same events, levels and WHEN
-- clauses as before.
DROP TRIGGER "ListCounter_insert" ON "Lead";
DROP TRIGGER "ListCounter_delete" ON "Lead";
DROP TRIGGER "ListCounter_update" ON "Lead";
DROP TRIGGER "ListCounter_insert" ON "Ticket";
DROP TRIGGER "ListCounter_delete" ON "Ticket";
DROP TRIGGER "ListCounter_update" ON "Ticket";
DROP TRIGGER "ListCounter_insert" ON "Appointment";
DROP TRIGGER "ListCounter_delete" ON "Appointment";
DROP TRIGGER "ListCounter_update" ON "Appointment";
DROP TRIGGER "ListCounter_insert" ON "Conversation";
DROP TRIGGER "ListCounter_delete" ON "Conversation";
DROP TRIGGER "ListCounter_update" ON "Conversation";
DROP TRIGGER "ListCounter_insert" ON "Contact";
DROP TRIGGER "ListCounter_delete" ON "Contact";
DROP TRIGGER "ListCounter_update" ON "Contact";
DROP TRIGGER "ListCounter_insert" ON "ContactListMember";
DROP TRIGGER "ListCounter_delete" ON "ContactListMember";
DROP TRIGGER "ListCounter_update" ON "ContactListMember";

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Lead" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Lead');
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Lead" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Lead');
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Lead" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"('Lead');

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Ticket" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Ticket');
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Ticket" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Ticket');
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Ticket" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."assignedToId" IS DISTINCT FROM NEW."assignedToId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"('Ticket');

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Appointment" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Appointment');
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Appointment" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Appointment');
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Appointment" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."assignedUserId" IS DISTINCT FROM NEW."assignedUserId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR OLD."leadId" IS DISTINCT FROM NEW."leadId"
        OR (OLD."startsAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."startsAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"('Appointment');

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Conversation" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Conversation');
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Conversation" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Conversation');
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Conversation" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."channelId" IS DISTINCT FROM NEW."channelId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."lastMessageAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."lastMessageAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"('Conversation');

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "Contact" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('Contact');
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "Contact" FOR EACH ROW
  EXECUTE FUNCTION "ListCounter_apply"('Contact');
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Contact" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR (OLD."deletedAt" IS NULL) IS DISTINCT FROM (NEW."deletedAt" IS NULL)
        OR OLD."createdAt" IS DISTINCT FROM NEW."createdAt"
        OR OLD."fullName" IS DISTINCT FROM NEW."fullName" OR OLD."email" IS DISTINCT FROM NEW."email"
        OR OLD."phone" IS DISTINCT FROM NEW."phone")
  EXECUTE FUNCTION "ListCounter_apply"('Contact');

CREATE TRIGGER "ListCounter_insert" AFTER INSERT ON "ContactListMember" REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('ContactListMember');
CREATE TRIGGER "ListCounter_delete" AFTER DELETE ON "ContactListMember" REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION "ListCounter_apply"('ContactListMember');
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "ContactListMember" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."listId" IS DISTINCT FROM NEW."listId"
        OR OLD."contactId" IS DISTINCT FROM NEW."contactId")
  EXECUTE FUNCTION "ListCounter_apply"('ContactListMember');

-- The rebuild (after writes made with the triggers off), tenant by tenant: every statement pins the
-- tenant. NULL: every tenant. Keeps the contacts' version and adds 1 (a cached count is then stale).
CREATE OR REPLACE FUNCTION "ListCounter_rebuild"(p_tenant uuid DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_rows bigint := 0;
  v_t uuid;
BEGIN
  IF p_tenant IS NULL THEN
    FOR v_t IN SELECT t."id" FROM "Tenant" t ORDER BY t."id" LOOP
      v_rows := v_rows + "ListCounter_rebuild"(v_t);
    END LOOP;
    RETURN v_rows;
  END IF;
  LOCK TABLE "Lead", "Ticket", "Appointment", "Conversation", "Contact", "ContactListMember" IN SHARE MODE;
  DELETE FROM "ListCounter" WHERE "tenantId" = p_tenant AND "dim" <> 'v';
  INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
  SELECT p_tenant, x."entity", x."dim", x."value", 0, count(*)
    FROM (SELECT 'Lead' AS "entity", k."dim", k."value" FROM "Lead" r, "ListCounter_keys"('Lead', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Ticket', k."dim", k."value" FROM "Ticket" r, "ListCounter_keys"('Ticket', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Appointment', k."dim", k."value" FROM "Appointment" r, "ListCounter_keys"('Appointment', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Conversation', k."dim", k."value" FROM "Conversation" r, "ListCounter_keys"('Conversation', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Contact', k."dim", k."value" FROM "Contact" r, "ListCounter_keys"('Contact', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Contact', 'listId', m."listId"::text
                      FROM "ContactListMember" m JOIN "Contact" c ON c."tenantId" = m."tenantId" AND c."id" = m."contactId"
                     WHERE m."tenantId" = p_tenant AND c."tenantId" = p_tenant AND c."deletedAt" IS NULL) x
   GROUP BY 1, 2, 3, 4;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  INSERT INTO "ListCounter" AS c ("tenantId", "entity", "dim", "value", "slot", "n")
  VALUES (p_tenant, 'Contact', 'v', '', 0, 1)
  ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO UPDATE SET "n" = c."n" + 1;
  RETURN v_rows;
END $$;

DROP FUNCTION "ListCounter_keys"("Lead");
DROP FUNCTION "ListCounter_keys"("Ticket");
DROP FUNCTION "ListCounter_keys"("Appointment");
DROP FUNCTION "ListCounter_keys"("Conversation");
DROP FUNCTION "ListCounter_keys"("Contact");
DROP FUNCTION "ListCounter_keys"("ContactListMember");

-- The one function that runs INSIDE an API statement: a list statement calls "ListCounter_seek" (the
-- deep offset's seek, a dated lead list's total) in a query that Citus routes, whole, to the tenant's
-- shard, so the function's own queries are a distributed query started from a query on a shard, which
-- Citus refuses unless citus.allow_nested_distributed_execution is on: its warning is about a nested
-- query that reaches ANOTHER node. Every query of the seek pins the same tenant as the statement that
-- calls it, whose counter shard is co-located on the same node: it runs there, locally, in the same
-- transaction. The setting is the function's own (applied while it runs, on whichever node), not the
-- session's. On PostgreSQL without Citus it is an inert placeholder.
ALTER FUNCTION "ListCounter_seek"(uuid, text, timestamptz, timestamptz, bigint, boolean)
  SET citus.allow_nested_distributed_execution = on;
