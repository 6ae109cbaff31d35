CREATE OR REPLACE FUNCTION "ListCounter_base"(p_at timestamptz) RETURNS text[] LANGUAGE sql STABLE AS $$
  SELECT ARRAY['', "ListCounter_bucket"('y', p_at AT TIME ZONE 'UTC'), "ListCounter_bucket"('m', p_at AT TIME ZONE 'UTC'),
               "ListCounter_bucket"('d', p_at AT TIME ZONE 'UTC')]
$$;
