CREATE OR REPLACE FUNCTION "ticket_comment_admit"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  len integer := char_length(NEW."body");
  n integer;
  chars integer;
BEGIN
  UPDATE "Ticket" SET "commentCount" = "commentCount" + 1, "commentChars" = "commentChars" + len
   WHERE "tenantId" = NEW."tenantId" AND "id" = NEW."ticketId"
     AND "commentCount" < 500 AND "commentChars" <= 150000 - len
  RETURNING "commentCount" INTO n;
  IF n IS NULL THEN
    SELECT "commentCount", "commentChars" INTO n, chars FROM "Ticket" WHERE "tenantId" = NEW."tenantId" AND "id" = NEW."ticketId";
    IF n IS NULL THEN
      RETURN NEW; -- no such ticket: the foreign key refuses the row
    ELSIF n >= 500 THEN
      RAISE EXCEPTION 'new row for relation "TicketComment" violates check constraint "Ticket_comment_count_limit"'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'Ticket_comment_count_limit',
              DETAIL = format('The ticket has %s comments; at most 500 are allowed.', n);
    ELSE
      RAISE EXCEPTION 'new row for relation "TicketComment" violates check constraint "Ticket_comment_chars_limit"'
        USING ERRCODE = 'check_violation', CONSTRAINT = 'Ticket_comment_chars_limit',
              DETAIL = format('The thread has %s characters; with %s more it would exceed 150000.', chars, len);
    END IF;
  END IF;
  NEW."seq" := n;
  RETURN NEW;
END $$;
