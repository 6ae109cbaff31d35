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
      -- Each row's jsonb once (OFFSET 0 keeps the subquery from being flattened, which would
      -- compute to_jsonb again for every field the keys read: ~5 times a row, most of a batch's cost).
      SELECT array_agg(x.t), array_agg(x.d), array_agg(x.v) INTO ts, dims, vals
        FROM (SELECT (j ->> 'tenantId')::uuid AS t, k."dim" AS d, k."value" AS v
                FROM (SELECT to_jsonb(r) AS j FROM changed r OFFSET 0) c, "ListCounter_keys"(v_table, c.j) k
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
