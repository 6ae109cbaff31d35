-- Bounded work and storage (issue 12).

-- 1. Ticket comment threads are bounded, in the database: at most 500 comments and 150,000
--    characters (code points, as char_length counts them) per ticket. Every inserted comment passes
--    through "ticket_comment_admit" (BEFORE INSERT), which advances the ticket's counters with one
--    conditional UPDATE: the ticket row lock serializes concurrent commenters of one ticket, and the
--    condition is re-evaluated on the latest row version (READ COMMITTED), so nobody overshoots. A
--    comment past a bound fails with SQLSTATE 23514 naming "Ticket_comment_count_limit" or
--    "Ticket_comment_chars_limit" (the API answers 409 TICKET_COMMENT_LIMIT_REACHED).
--    Not a CHECK on the counters: a ticket already over a bound (from before this migration) would
--    then fail every later UPDATE (a PATCH of its status); here it simply takes no more comments.
--    "seq" numbers the comments of a ticket 1, 2, 3, … in commit order (the counter's new value):
--    the comments a response showed are exactly those with seq <= its thread length, which is how an
--    Idempotency-Key replay rebuilds a comment response without storing the thread.
ALTER TABLE "Ticket"
  ADD COLUMN "commentCount" INTEGER NOT NULL DEFAULT 0,
  ADD COLUMN "commentChars" INTEGER NOT NULL DEFAULT 0,
  ADD CONSTRAINT "Ticket_comment_counters_check" CHECK ("commentCount" >= 0 AND "commentChars" >= 0);
ALTER TABLE "TicketComment" ADD COLUMN "seq" INTEGER NOT NULL DEFAULT 0;

WITH numbered AS (
  SELECT "tenantId", "id", row_number() OVER (PARTITION BY "tenantId", "ticketId" ORDER BY "createdAt", "id") AS n
    FROM "TicketComment"
)
UPDATE "TicketComment" c SET "seq" = numbered.n
  FROM numbered
 WHERE c."tenantId" = numbered."tenantId" AND c."id" = numbered."id";

UPDATE "Ticket" t SET "commentCount" = s.n, "commentChars" = s.chars
  FROM (SELECT "tenantId", "ticketId", count(*)::int AS n, LEAST(sum(char_length("body")), 2147483647)::int AS chars
          FROM "TicketComment" GROUP BY "tenantId", "ticketId") s
 WHERE t."tenantId" = s."tenantId" AND t."id" = s."ticketId";

CREATE UNIQUE INDEX "TicketComment_tenantId_ticketId_seq_key" ON "TicketComment"("tenantId", "ticketId", "seq");

CREATE FUNCTION "ticket_comment_admit"() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER "TicketComment_admit" BEFORE INSERT ON "TicketComment" FOR EACH ROW EXECUTE FUNCTION "ticket_comment_admit"();

-- Comments are immutable (a replay rebuilds a thread from them; the counters count them).
CREATE FUNCTION "ticket_comment_immutable"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'ticket comments are immutable' USING ERRCODE = 'feature_not_supported';
END $$;
CREATE TRIGGER "TicketComment_immutable" BEFORE UPDATE ON "TicketComment" FOR EACH ROW EXECUTE FUNCTION "ticket_comment_immutable"();

-- 2. The abandoned-send sweep (every instance, every 15 s) looks only at operator messages still
--    "pending": a partial index holds just those (a handful at any time), so the sweep never reads
--    the Message table. IF NOT EXISTS: on a large table an operator may build it beforehand with
--    CREATE INDEX CONCURRENTLY under this name and deploy without the write lock of a plain build.
CREATE INDEX IF NOT EXISTS "Message_pending_operator_idx" ON "Message"("createdAt")
  WHERE "role" = 'operator' AND "deliveryStatus" = 'pending';
