-- Issue 13: the contact search's trigram index starts with the tenant (btree_gin), so a search reads
-- its own tenant's candidates only. The index it replaces held every tenant's trigrams: a small
-- tenant's search for a common fragment ("600 012": digit trigrams are in nearly every stored phone)
-- rechecked the matching rows of every other tenant — its cost grew with the whole database, not
-- with its own contacts. GIN intersects the tenant's key with the trigrams' posting lists, the rarest
-- first (fast scan). Built inside the migration's transaction: writes to Contact wait for the build.
CREATE EXTENSION IF NOT EXISTS btree_gin;
CREATE INDEX "Contact_tenantId_fullName_email_phone_idx" ON "Contact"
  USING gin ("tenantId" uuid_ops, "fullName" gin_trgm_ops, "email" gin_trgm_ops, "phone" gin_trgm_ops);
DROP INDEX "Contact_fullName_email_phone_idx";
