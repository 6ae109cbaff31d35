-- Two-way sync (issue 39): external ids on leads, contacts and tickets, and a version on leads,
-- contacts, tickets and appointments (docs/decisions/api.md, "Two-way sync").
--
-- "externalId": the integrator's own id, 1–255 characters without control characters, unique per
-- tenant within its table (a soft-deleted contact keeps it, as it keeps its phone). NULL for none:
-- the unique index holds any number of NULLs. The index leads with "tenantId", the distribution
-- column on Citus, so it is a per-shard unique index there.
--
-- "version": 1 on insert; the "row_version" trigger (prisma/functions/row_version.sql, applied
-- first by the line below) adds one for every transaction that changes the row, and keeps it on an
-- update that changes nothing. "versionTx" is the transaction that made the current version (set by
-- the trigger on insert, on the node that holds the row: a column default would be evaluated on a
-- Citus coordinator, in another transaction id than the worker's): a second change by the same
-- transaction — a ticket created with its first comment (the comment's admission updates the
-- ticket's counters), a comment and its ticket's updatedAt — is the same version. The constant
-- default fills existing rows with version 1 without a table rewrite; "versionTx" has no default
-- (existing rows: NULL, another transaction), so no row is rewritten either.
-- apply: functions/row_version.sql
ALTER TABLE "Lead" ADD COLUMN "externalId" TEXT, ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Contact" ADD COLUMN "externalId" TEXT, ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Ticket" ADD COLUMN "externalId" TEXT, ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Appointment" ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Lead" ADD COLUMN "versionTx" xid8;
ALTER TABLE "Contact" ADD COLUMN "versionTx" xid8;
ALTER TABLE "Ticket" ADD COLUMN "versionTx" xid8;
ALTER TABLE "Appointment" ADD COLUMN "versionTx" xid8;

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
CREATE TRIGGER "Lead_version" BEFORE INSERT OR UPDATE ON "Lead" FOR EACH ROW EXECUTE FUNCTION "row_version"();
CREATE TRIGGER "Contact_version" BEFORE INSERT OR UPDATE ON "Contact" FOR EACH ROW EXECUTE FUNCTION "row_version"('searchText');
CREATE TRIGGER "Ticket_version" BEFORE INSERT OR UPDATE ON "Ticket" FOR EACH ROW EXECUTE FUNCTION "row_version"();
CREATE TRIGGER "Appointment_version" BEFORE INSERT OR UPDATE ON "Appointment" FOR EACH ROW EXECUTE FUNCTION "row_version"();
