CREATE OR REPLACE FUNCTION "ApiKey_lookup"(p_prefix text)
RETURNS TABLE("id" uuid, "keyHash" text, "expiresAt" timestamptz, "revokedAt" timestamptz, "scopes" text[],
              "tenantId" uuid, "ownerId" uuid, "apiGrant" text[], "plan" "Plan", "timezone" text,
              "defaultCountry" character, "slotMinutes" integer, "perMinute" integer, "perDay" integer)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT k."id", k."keyHash", k."expiresAt", k."revokedAt", k."scopes", k."tenantId", k."ownerId",
         u."apiGrant", t."plan", t."timezone", t."defaultCountry", t."slotMinutes",
         COALESCE(t."rateLimitPerMinute", p."perMinute") AS "perMinute",
         COALESCE(t."rateLimitPerDay", p."perDay") AS "perDay"
    FROM "ApiKey" k
    JOIN "User" u ON u."tenantId" = k."tenantId" AND u."id" = k."ownerId"
    JOIN "Tenant" t ON t."id" = k."tenantId"
    JOIN "PlanLimit" p ON p."plan" = t."plan"
   WHERE k."prefix" = p_prefix;
END $$;
