CREATE OR REPLACE FUNCTION "ListCounter_rebuild"(p_tenant uuid DEFAULT NULL) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
  v_rows bigint := 0;
  v_t uuid;
BEGIN
  IF p_tenant IS NULL THEN
    FOR v_t IN SELECT t."id" FROM "Tenant" t ORDER BY t."id" LOOP
      v_rows := v_rows + "ListCounter_rebuild"(v_t);
    END LOOP;
    RETURN v_rows;
  END IF;
  LOCK TABLE "Lead", "Ticket", "Appointment", "Conversation", "Contact", "ContactListMember" IN SHARE MODE;
  DELETE FROM "ListCounter" WHERE "tenantId" = p_tenant AND "dim" <> 'v';
  INSERT INTO "ListCounter" ("tenantId", "entity", "dim", "value", "slot", "n")
  SELECT p_tenant, x."entity", x."dim", x."value", 0, count(*)
    FROM (SELECT 'Lead' AS "entity", k."dim", k."value" FROM "Lead" r, "ListCounter_keys"('Lead', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Ticket', k."dim", k."value" FROM "Ticket" r, "ListCounter_keys"('Ticket', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Appointment', k."dim", k."value" FROM "Appointment" r, "ListCounter_keys"('Appointment', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Conversation', k."dim", k."value" FROM "Conversation" r, "ListCounter_keys"('Conversation', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Contact', k."dim", k."value" FROM "Contact" r, "ListCounter_keys"('Contact', to_jsonb(r)) k WHERE r."tenantId" = p_tenant
          UNION ALL SELECT 'Contact', 'listId', m."listId"::text
                      FROM "ContactListMember" m JOIN "Contact" c ON c."tenantId" = m."tenantId" AND c."id" = m."contactId"
                     WHERE m."tenantId" = p_tenant AND c."tenantId" = p_tenant AND c."deletedAt" IS NULL) x
   GROUP BY 1, 2, 3, 4;
  GET DIAGNOSTICS v_rows = ROW_COUNT;
  INSERT INTO "ListCounter" AS c ("tenantId", "entity", "dim", "value", "slot", "n")
  VALUES (p_tenant, 'Contact', 'v', '', 0, 1)
  ON CONFLICT ("tenantId", "entity", "dim", "value", "slot") DO UPDATE SET "n" = c."n" + 1;
  RETURN v_rows;
END $$;
