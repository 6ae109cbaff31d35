CREATE OR REPLACE FUNCTION "customer_touch"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- A conversation shows its customer's name, email, phone and linked contact: a change of them is a
  -- write of each of the customer's conversations ("row_touch" and "row_version" move their updatedAt
  -- and version, once per transaction). One tenant's rows: Citus routes the statement to the
  -- tenant's co-located shard, on this node. The value set only has to differ from every stored one
  -- (a constant: Citus refuses a stable function of a column in an UPDATE): "row_touch" puts the
  -- transaction's time in its place.
  UPDATE "Conversation" SET "updatedAt" = '-infinity'
   WHERE "tenantId" = NEW."tenantId" AND "customerId" = NEW."id";
  RETURN NULL;
END $$;
COMMENT ON FUNCTION "customer_touch"() IS 'AFTER UPDATE row trigger of Customer, WHEN its name, email, phone or contactId changed: its conversations (the same tenant''s) are written, so that their updatedAt and version move';
