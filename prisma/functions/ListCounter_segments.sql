CREATE OR REPLACE FUNCTION "ListCounter_segments"(p_lo timestamp, p_hi timestamp, p_years integer[])
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
