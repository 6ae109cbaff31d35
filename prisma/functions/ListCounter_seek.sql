CREATE OR REPLACE FUNCTION "ListCounter_seek"(p_tenant uuid, p_entity text, p_lo timestamptz, p_hi timestamptz, p_offset bigint, p_desc boolean)
RETURNS TABLE("total" bigint, "bound" timestamptz, "skip" bigint) LANGUAGE plpgsql STABLE ROWS 1
SET citus.allow_nested_distributed_execution = on AS $$
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
