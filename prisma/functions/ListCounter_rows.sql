CREATE OR REPLACE FUNCTION "ListCounter_rows"(p_tenant uuid, p_entity text, p_lo timestamptz, p_hi timestamptz) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
BEGIN
  CASE p_entity
    WHEN 'Lead' THEN
      RETURN (SELECT count(*) FROM "Lead" WHERE "tenantId" = p_tenant AND "createdAt" >= p_lo AND "createdAt" < p_hi);
    WHEN 'Ticket' THEN
      RETURN (SELECT count(*) FROM "Ticket" WHERE "tenantId" = p_tenant AND "createdAt" >= p_lo AND "createdAt" < p_hi);
    WHEN 'Contact' THEN
      RETURN (SELECT count(*) FROM "Contact"
               WHERE "tenantId" = p_tenant AND "createdAt" >= p_lo AND "createdAt" < p_hi AND "deletedAt" IS NULL);
    WHEN 'Appointment' THEN
      RETURN (SELECT count(*) FROM "Appointment" WHERE "tenantId" = p_tenant AND "startsAt" >= p_lo AND "startsAt" < p_hi);
    WHEN 'Conversation' THEN
      RETURN (SELECT count(*) FROM "Conversation" WHERE "tenantId" = p_tenant AND "lastMessageAt" >= p_lo AND "lastMessageAt" < p_hi);
  END CASE;
END $$;
