-- updatedAt on contacts, conversations and messages, and a version on conversations
-- (docs/decisions/api.md, "Versions and updatedAt"): every write that changes an object's
-- representation moves its updatedAt, from the database's clock, together with its version.
--
-- "updatedAt" belongs to the "row_touch" trigger (prisma/functions/row_touch.sql): on INSERT the
-- column's default now() (or the writer's value: the fixture loader's past times), never before
-- "createdAt"; on an UPDATE that changes the row, the transaction's time, strictly after the previous
-- value, once per transaction on a versioned table (the transaction that made the current version,
-- "versionTx", does not move it again). The UPDATE triggers carry a WHEN clause, so an UPDATE that
-- changes nothing runs no function at all. They are named "<table>_touch_*" so that they fire before
-- "<table>_version" (BEFORE triggers fire in name order): the version sees the new updatedAt.
-- Contacts compare their columns by name: a BEFORE trigger's WHEN may not name a generated column of
-- NEW ("searchText"), whole-row or not; test/db/updated-at.test.ts checks that the list names every
-- other column of the table.
--
-- A conversation shows its customer: "customer_touch" (prisma/functions/customer_touch.sql) writes
-- the conversations of a customer whose name, email, phone or contactId changed — the changes feed's
-- "Customer_changes_update" already counts that as a change of them. Its one statement pins the
-- customer's tenant (Citus routes it to the tenant's co-located shard on the same node: rule 2 of
-- 20261127200000_citus_triggers); the other trigger functions run no statement.
--
-- Existing rows: a conversation starts at version 1 (the constant default: no table rewrite) and
-- "versionTx" NULL (another transaction's, as 20261203000000_sync did); a message's updatedAt is its
-- createdAt; a conversation's is the greatest of the times it knows (the service wrote updatedAt with
-- every stored message and start; only rows behind their own createdAt or lastMessageAt are set); a
-- contact's updatedAt was written by every create and update already.
-- apply: functions/row_touch.sql
-- apply: functions/customer_touch.sql
ALTER TABLE "Conversation" ADD COLUMN "version" INTEGER NOT NULL DEFAULT 1;
ALTER TABLE "Conversation" ADD COLUMN "versionTx" xid8;
ALTER TABLE "Message" ADD COLUMN "updatedAt" TIMESTAMPTZ(3);
UPDATE "Message" SET "updatedAt" = "createdAt";
ALTER TABLE "Message" ALTER COLUMN "updatedAt" SET DEFAULT now();
ALTER TABLE "Message" ALTER COLUMN "updatedAt" SET NOT NULL;
UPDATE "Conversation" SET "updatedAt" = greatest("updatedAt", "createdAt", "lastMessageAt")
 WHERE "updatedAt" < greatest("createdAt", "lastMessageAt");

CREATE TRIGGER "Contact_touch_insert" BEFORE INSERT ON "Contact" FOR EACH ROW EXECUTE FUNCTION "row_touch"('versioned');
CREATE TRIGGER "Contact_touch_update" BEFORE UPDATE ON "Contact" FOR EACH ROW
  WHEN ((OLD."id", OLD."tenantId", OLD."fullName", OLD."phone", OLD."email", OLD."country", OLD."phoneVerifiedAt",
         OLD."emailVerifiedAt", OLD."marketingOptOut", OLD."marketingOptOutAt", OLD."origin", OLD."deletedAt",
         OLD."createdAt", OLD."updatedAt", OLD."externalId", OLD."version", OLD."versionTx")
        IS DISTINCT FROM
        (NEW."id", NEW."tenantId", NEW."fullName", NEW."phone", NEW."email", NEW."country", NEW."phoneVerifiedAt",
         NEW."emailVerifiedAt", NEW."marketingOptOut", NEW."marketingOptOutAt", NEW."origin", NEW."deletedAt",
         NEW."createdAt", NEW."updatedAt", NEW."externalId", NEW."version", NEW."versionTx"))
  EXECUTE FUNCTION "row_touch"('versioned');

CREATE TRIGGER "Conversation_touch_insert" BEFORE INSERT ON "Conversation" FOR EACH ROW EXECUTE FUNCTION "row_touch"('versioned');
CREATE TRIGGER "Conversation_touch_update" BEFORE UPDATE ON "Conversation" FOR EACH ROW
  WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION "row_touch"('versioned');
CREATE TRIGGER "Conversation_version" BEFORE INSERT OR UPDATE ON "Conversation" FOR EACH ROW EXECUTE FUNCTION "row_version"();

-- A message's only change is its delivery (deliveryStatus, providerMessageId): its own updatedAt
-- moves, its conversation does not change.
CREATE TRIGGER "Message_touch_insert" BEFORE INSERT ON "Message" FOR EACH ROW EXECUTE FUNCTION "row_touch"();
CREATE TRIGGER "Message_touch_update" BEFORE UPDATE ON "Message" FOR EACH ROW
  WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION "row_touch"();

CREATE TRIGGER "Customer_touch" AFTER UPDATE ON "Customer" FOR EACH ROW
  WHEN ((OLD."name", OLD."email", OLD."phone", OLD."contactId") IS DISTINCT FROM (NEW."name", NEW."email", NEW."phone", NEW."contactId"))
  EXECUTE FUNCTION "customer_touch"();
