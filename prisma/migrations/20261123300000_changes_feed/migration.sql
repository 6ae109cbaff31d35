-- The changes feed (issue 15, GET /public/v1/changes): docs/architecture.md, "Changes feed".
--
-- "ChangeLog" holds one row per object (lead, contact, conversation, appointment, ticket). It is
-- written ONLY by the trigger function below: a change sets the object's row to `pos` NULL (a
-- committed change not yet placed in the feed) with a new `changedAt`. The sequencer
-- (server/changes.ts), serialised by a transaction-scoped advisory lock, gives pending rows the next
-- positions of their tenant ("ChangeHead", written by the sequencer only), so positions follow the
-- commit order of the sequencing steps and nothing can ever appear behind a position a reader saw.

CREATE TABLE "ChangeLog" (
  "tenantId" UUID NOT NULL,
  "type" TEXT NOT NULL,
  "objectId" UUID NOT NULL,
  "pos" BIGINT,
  "action" TEXT NOT NULL,
  "changedAt" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "ChangeLog_pkey" PRIMARY KEY ("tenantId", "type", "objectId"),
  CONSTRAINT "ChangeLog_type_check" CHECK ("type" IN ('lead', 'contact', 'conversation', 'appointment', 'ticket')),
  CONSTRAINT "ChangeLog_action_check" CHECK ("action" IN ('upsert', 'delete')),
  CONSTRAINT "ChangeLog_pos_check" CHECK ("pos" > 0)
);
-- Reading: a range of positions of the tenant (all types), or of one type (a UNION ALL per type).
-- Unique: a position names one object (and NULLs, the pending rows, are many).
CREATE UNIQUE INDEX "ChangeLog_tenantId_pos_key" ON "ChangeLog"("tenantId", "pos");
CREATE INDEX "ChangeLog_tenantId_type_pos_idx" ON "ChangeLog"("tenantId", "type", "pos");
-- The sequencer's work list: only pending rows, so it stays as small as the backlog.
CREATE INDEX "ChangeLog_pending_idx" ON "ChangeLog"("tenantId", "changedAt") WHERE "pos" IS NULL;
-- The retention purge's work list: tombstones only.
CREATE INDEX "ChangeLog_tombstones_idx" ON "ChangeLog"("changedAt") WHERE "action" = 'delete';
ALTER TABLE "ChangeLog" ADD CONSTRAINT "ChangeLog_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;

-- The highest position handed out per tenant (monotonic: a placed row that changes again loses its
-- position, so max("pos") could go back; this cannot).
CREATE TABLE "ChangeHead" (
  "tenantId" UUID NOT NULL,
  "pos" BIGINT NOT NULL DEFAULT 0,
  CONSTRAINT "ChangeHead_pkey" PRIMARY KEY ("tenantId"),
  CONSTRAINT "ChangeHead_pos_check" CHECK ("pos" >= 0)
);
ALTER TABLE "ChangeHead" ADD CONSTRAINT "ChangeHead_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;

-- The one capture function, for every table whose rows make up a public object. Statement-level
-- with transition tables: a bulk statement costs one upsert statement, not one per row.
--   Lead, Conversation, Appointment, Ticket (TG_ARGV[0] = the type): inserts, and updates that
--     change anything (whole-row comparison; a no-op UPDATE writes nothing);
--   Contact: the same, `delete` when it is (or stays) soft-deleted; a contact inserted already
--     deleted is not fed (nobody can have mirrored it);
--   Message (insert) → its conversation; TicketComment (insert, update) → its ticket;
--   Customer (update of what a conversation shows of it) → its conversations.
-- For the last three the parent rows are locked first (FOR NO KEY UPDATE, in id order): every path
-- then takes the object's row before its ChangeLog row, as a direct update of the object does, so
-- a comment and a concurrent ticket PATCH cannot deadlock on the two rows.
-- Hard deletes are not fed: the API has none (rows go only with their tenant).
CREATE FUNCTION "changes_capture"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'Message' THEN
    PERFORM 1 FROM "Conversation" c
      WHERE (c."tenantId", c."id") IN (SELECT "tenantId", "conversationId" FROM new_rows)
      ORDER BY c."id" FOR NO KEY UPDATE;
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT d."tenantId", 'conversation', d."conversationId", NULL, 'upsert', clock_timestamp()
      FROM (SELECT DISTINCT "tenantId", "conversationId" FROM new_rows) d
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  ELSIF TG_TABLE_NAME = 'TicketComment' THEN
    PERFORM 1 FROM "Ticket" t
      WHERE (t."tenantId", t."id") IN (SELECT "tenantId", "ticketId" FROM new_rows)
      ORDER BY t."id" FOR NO KEY UPDATE;
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT d."tenantId", 'ticket', d."ticketId", NULL, 'upsert', clock_timestamp()
      FROM (SELECT DISTINCT "tenantId", "ticketId" FROM new_rows) d
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  ELSIF TG_TABLE_NAME = 'Customer' THEN
    PERFORM 1 FROM "Conversation" c
      JOIN new_rows n ON c."tenantId" = n."tenantId" AND c."customerId" = n."id"
      JOIN old_rows o ON o."id" = n."id"
     WHERE (o."name", o."email", o."phone", o."contactId") IS DISTINCT FROM (n."name", n."email", n."phone", n."contactId")
     ORDER BY c."id" FOR NO KEY UPDATE OF c;
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT c."tenantId", 'conversation', c."id", NULL, 'upsert', clock_timestamp()
      FROM "Conversation" c
      JOIN new_rows n ON c."tenantId" = n."tenantId" AND c."customerId" = n."id"
      JOIN old_rows o ON o."id" = n."id"
     WHERE (o."name", o."email", o."phone", o."contactId") IS DISTINCT FROM (n."name", n."email", n."phone", n."contactId")
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  ELSIF TG_TABLE_NAME = 'Contact' AND TG_OP = 'INSERT' THEN
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT n."tenantId", 'contact', n."id", NULL, 'upsert', clock_timestamp()
      FROM new_rows n WHERE n."deletedAt" IS NULL
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  ELSIF TG_TABLE_NAME = 'Contact' THEN
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT n."tenantId", 'contact', n."id", NULL,
           CASE WHEN n."deletedAt" IS NULL THEN 'upsert' ELSE 'delete' END, clock_timestamp()
      FROM new_rows n JOIN old_rows o ON o."id" = n."id"
     WHERE o IS DISTINCT FROM n
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT n."tenantId", TG_ARGV[0], n."id", NULL, 'upsert', clock_timestamp()
      FROM new_rows n
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  ELSE
    INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
    SELECT n."tenantId", TG_ARGV[0], n."id", NULL, 'upsert', clock_timestamp()
      FROM new_rows n JOIN old_rows o ON o."id" = n."id"
     WHERE o IS DISTINCT FROM n
    ON CONFLICT ("tenantId", "type", "objectId") DO UPDATE
      SET "pos" = NULL, "action" = EXCLUDED."action", "changedAt" = EXCLUDED."changedAt";
  END IF;
  RETURN NULL;
END $$;

-- The triggers come before the backfill: CREATE TRIGGER locks each table against writes until this
-- migration commits, so no write can fall between the backfill's snapshot and its trigger.
CREATE TRIGGER "Lead_changes_insert" AFTER INSERT ON "Lead" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('lead');
CREATE TRIGGER "Lead_changes_update" AFTER UPDATE ON "Lead" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('lead');
CREATE TRIGGER "Contact_changes_insert" AFTER INSERT ON "Contact" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('contact');
CREATE TRIGGER "Contact_changes_update" AFTER UPDATE ON "Contact" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('contact');
CREATE TRIGGER "Conversation_changes_insert" AFTER INSERT ON "Conversation" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation');
CREATE TRIGGER "Conversation_changes_update" AFTER UPDATE ON "Conversation" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation');
CREATE TRIGGER "Appointment_changes_insert" AFTER INSERT ON "Appointment" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('appointment');
CREATE TRIGGER "Appointment_changes_update" AFTER UPDATE ON "Appointment" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('appointment');
CREATE TRIGGER "Ticket_changes_insert" AFTER INSERT ON "Ticket" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket');
CREATE TRIGGER "Ticket_changes_update" AFTER UPDATE ON "Ticket" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket');
CREATE TRIGGER "Message_changes_insert" AFTER INSERT ON "Message" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation');
CREATE TRIGGER "TicketComment_changes_insert" AFTER INSERT ON "TicketComment" REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket');
CREATE TRIGGER "TicketComment_changes_update" AFTER UPDATE ON "TicketComment" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('ticket');
CREATE TRIGGER "Customer_changes_update" AFTER UPDATE ON "Customer" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION "changes_capture"('conversation');

-- Backfill: one placed row per existing live object, positions 1..n per tenant in the order of
-- the objects' last change; soft-deleted contacts are left out (no mirror can hold them yet).
INSERT INTO "ChangeLog" ("tenantId", "type", "objectId", "pos", "action", "changedAt")
SELECT o."tenantId", o."type", o."objectId",
       row_number() OVER (PARTITION BY o."tenantId" ORDER BY o."changedAt", o."type", o."objectId"),
       'upsert', o."changedAt"
  FROM (SELECT "tenantId", 'lead' AS "type", "id" AS "objectId", "updatedAt" AS "changedAt" FROM "Lead"
        UNION ALL SELECT "tenantId", 'contact', "id", "updatedAt" FROM "Contact" WHERE "deletedAt" IS NULL
        UNION ALL SELECT "tenantId", 'conversation', "id", "updatedAt" FROM "Conversation"
        UNION ALL SELECT "tenantId", 'appointment', "id", "updatedAt" FROM "Appointment"
        UNION ALL SELECT "tenantId", 'ticket', "id", "updatedAt" FROM "Ticket") o;
INSERT INTO "ChangeHead" ("tenantId", "pos")
SELECT "tenantId", max("pos") FROM "ChangeLog" GROUP BY "tenantId";

-- Citus roles (issue 14, test/citus.test.ts): both tables are distributed by "tenantId".
COMMENT ON TABLE "ChangeLog" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "ChangeHead" IS 'citus:distributed(tenantId)';
