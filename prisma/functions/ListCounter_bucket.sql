CREATE OR REPLACE FUNCTION "ListCounter_bucket"(p_level text, p_at timestamp) RETURNS text LANGUAGE sql STABLE AS $$
  SELECT to_char(p_at, CASE p_level WHEN 'y' THEN 'YYYY' WHEN 'm' THEN 'YYYY-MM' ELSE 'YYYY-MM-DD' END)
$$;
