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
