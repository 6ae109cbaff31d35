-- Issue 13: the contacts' version (20261125000000_contact_version) also moves when a contact's
-- createdAt changes at all, not only its UTC day. A contact search's cached count now keeps, beside
-- the count, the span of its matches' createdAt (routers/_lib/totals.ts, CachedTotal): the walk of a
-- search page seeks to the newest match and stops at the oldest. That span is exact for every
-- snapshot that reads the version it was taken at only if every write that can move a match's
-- createdAt moves the version. The API never changes a createdAt; an operator's UPDATE may. Only
-- the version moves for a change within a day (the day counters' old and new keys cancel out).
DROP TRIGGER "ListCounter_update" ON "Contact";
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Contact" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR (OLD."deletedAt" IS NULL) IS DISTINCT FROM (NEW."deletedAt" IS NULL)
        OR OLD."createdAt" IS DISTINCT FROM NEW."createdAt"
        OR OLD."fullName" IS DISTINCT FROM NEW."fullName" OR OLD."email" IS DISTINCT FROM NEW."email"
        OR OLD."phone" IS DISTINCT FROM NEW."phone")
  EXECUTE FUNCTION "ListCounter_apply"();
