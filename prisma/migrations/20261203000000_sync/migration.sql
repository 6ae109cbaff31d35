-- Two-way sync (issue 39): external ids on leads, contacts and tickets, and a version on leads,
-- contacts, tickets and appointments (docs/decisions/api.md, "Two-way sync").
--
-- "externalId": the integrator's own id, 1–255 characters without control characters, unique per
-- tenant within its table (a soft-deleted contact keeps it, as it keeps its phone). NULL for none:
-- the unique index holds any number of NULLs. The index leads with "tenantId", the distribution
-- column on Citus, so it is a per-shard unique index there.
--
-- "version": 1 on insert; the "row_version" trigger (prisma/functions/row_version.sql, applied
-- first by the line below) adds one on every UPDATE that changes the row and keeps it on one that
-- changes nothing. A ticket's new comment updates its ticket's counters and updatedAt in the
-- comment's admission trigger, so a comment is one version too; a ticket created with its first
-- comment is inserted at version 0, and that comment's admission, in the same transaction, makes it 1
-- (a create is one write). The column defaults fill existing
-- rows with 1 (a constant default: no table rewrite).
-- apply: functions/row_version.sql
ALTER TABLE "Lead" ADD COLUMN "externalId" TEXT, ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Contact" ADD COLUMN "externalId" TEXT, ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Ticket" ADD COLUMN "externalId" TEXT, ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Appointment" ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;

ALTER TABLE "Lead" ADD CONSTRAINT "Lead_externalId_check"
  CHECK ("externalId" IS NULL OR (char_length("externalId") BETWEEN 1 AND 255 AND "externalId" !~ '[\u0001-\u001f\u007f-\u009f]'));
ALTER TABLE "Contact" ADD CONSTRAINT "Contact_externalId_check"
  CHECK ("externalId" IS NULL OR (char_length("externalId") BETWEEN 1 AND 255 AND "externalId" !~ '[\u0001-\u001f\u007f-\u009f]'));
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_externalId_check"
  CHECK ("externalId" IS NULL OR (char_length("externalId") BETWEEN 1 AND 255 AND "externalId" !~ '[\u0001-\u001f\u007f-\u009f]'));

CREATE UNIQUE INDEX "Lead_tenantId_externalId_key" ON "Lead"("tenantId", "externalId");
CREATE UNIQUE INDEX "Contact_tenantId_externalId_key" ON "Contact"("tenantId", "externalId");
CREATE UNIQUE INDEX "Ticket_tenantId_externalId_key" ON "Ticket"("tenantId", "externalId");

-- "searchText" is generated: a BEFORE trigger sees no new value of it, and it follows the columns
-- that are compared anyway.
CREATE TRIGGER "Lead_version" BEFORE UPDATE ON "Lead" FOR EACH ROW EXECUTE FUNCTION "row_version"();
CREATE TRIGGER "Contact_version" BEFORE UPDATE ON "Contact" FOR EACH ROW EXECUTE FUNCTION "row_version"('searchText');
CREATE TRIGGER "Ticket_version" BEFORE UPDATE ON "Ticket" FOR EACH ROW EXECUTE FUNCTION "row_version"();
CREATE TRIGGER "Appointment_version" BEFORE UPDATE ON "Appointment" FOR EACH ROW EXECUTE FUNCTION "row_version"();
