CREATE OR REPLACE FUNCTION "ticket_comment_immutable"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ticket comments are immutable' USING ERRCODE = 'feature_not_supported';
END $$;
