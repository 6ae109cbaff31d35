CREATE OR REPLACE FUNCTION "ListCounter_add_all"(p_ts uuid[], p_entity text, p_dims text[], p_vals text[], p_ns bigint[], p_slot integer)
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
