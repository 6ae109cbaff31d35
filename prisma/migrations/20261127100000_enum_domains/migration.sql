-- Enumerations become text domains (issue 26). Prisma reads an enum column back with a cast
-- (`RETURNING "plan"::text`), and the cast of an enum to text is not IMMUTABLE (enum_out is STABLE:
-- labels can be renamed), which Citus refuses in the RETURNING clause of any write to a reference or
-- distributed table ("non-IMMUTABLE functions are not allowed in the RETURNING clause"). A domain over
-- text keeps the type's name (SQL that casts to "TicketStatus" still reads the same), keeps the set of
-- allowed values in the database (a CHECK on the domain, SQLSTATE 23514 otherwise), and is returned as
-- plain text, without a function. Each domain's values are the enum's, in the same order.
--
-- What depends on the enums' columns is dropped and created again unchanged: the list counters' UPDATE
-- triggers (their WHEN clauses read "status"), the no-overlap exclusion constraint and the pending
-- operator messages' index (their predicates compare with an enum constant), the key lookup (it
-- returns the "Plan" type).

DROP TRIGGER "ListCounter_update" ON "Ticket";
DROP TRIGGER "ListCounter_update" ON "Appointment";
DROP TRIGGER "ListCounter_update" ON "Conversation";
ALTER TABLE "Appointment" DROP CONSTRAINT "Appointment_no_overlap";
DROP INDEX "Message_pending_operator_idx";
DROP FUNCTION "ApiKey_lookup"(text);

ALTER TYPE "Plan" RENAME TO "Plan_enum";
ALTER TYPE "ChannelKind" RENAME TO "ChannelKind_enum";
ALTER TYPE "ConversationStatus" RENAME TO "ConversationStatus_enum";
ALTER TYPE "MessageRole" RENAME TO "MessageRole_enum";
ALTER TYPE "AppointmentStatus" RENAME TO "AppointmentStatus_enum";
ALTER TYPE "TicketStatus" RENAME TO "TicketStatus_enum";

CREATE DOMAIN "Plan" AS text CONSTRAINT "Plan_check" CHECK (VALUE IN ('starter', 'pro', 'enterprise'));
CREATE DOMAIN "ChannelKind" AS text CONSTRAINT "ChannelKind_check" CHECK (VALUE IN ('web', 'whatsapp', 'messenger', 'instagram', 'telegram'));
CREATE DOMAIN "ConversationStatus" AS text CONSTRAINT "ConversationStatus_check" CHECK (VALUE IN ('active', 'escalated', 'resolved'));
CREATE DOMAIN "MessageRole" AS text CONSTRAINT "MessageRole_check" CHECK (VALUE IN ('user', 'assistant', 'operator', 'system'));
CREATE DOMAIN "AppointmentStatus" AS text CONSTRAINT "AppointmentStatus_check" CHECK (VALUE IN ('scheduled', 'cancelled', 'completed', 'no_show'));
CREATE DOMAIN "TicketStatus" AS text CONSTRAINT "TicketStatus_check" CHECK (VALUE IN ('open', 'pending', 'resolved', 'closed'));

ALTER TABLE "PlanLimit" ALTER COLUMN "plan" TYPE "Plan" USING "plan"::text;
ALTER TABLE "Tenant" ALTER COLUMN "plan" TYPE "Plan" USING "plan"::text;
ALTER TABLE "Channel" ALTER COLUMN "kind" TYPE "ChannelKind" USING "kind"::text;
ALTER TABLE "Conversation" ALTER COLUMN "status" DROP DEFAULT;
ALTER TABLE "Conversation" ALTER COLUMN "status" TYPE "ConversationStatus" USING "status"::text;
ALTER TABLE "Message" ALTER COLUMN "role" TYPE "MessageRole" USING "role"::text;
ALTER TABLE "Appointment" ALTER COLUMN "status" DROP DEFAULT;
ALTER TABLE "Appointment" ALTER COLUMN "status" TYPE "AppointmentStatus" USING "status"::text;
ALTER TABLE "Ticket" ALTER COLUMN "status" DROP DEFAULT;
ALTER TABLE "Ticket" ALTER COLUMN "status" TYPE "TicketStatus" USING "status"::text;

DROP TYPE "Plan_enum";
DROP TYPE "ChannelKind_enum";
DROP TYPE "ConversationStatus_enum";
DROP TYPE "MessageRole_enum";
DROP TYPE "AppointmentStatus_enum";
DROP TYPE "TicketStatus_enum";

ALTER TABLE "Conversation" ALTER COLUMN "status" SET DEFAULT 'active';
ALTER TABLE "Appointment" ALTER COLUMN "status" SET DEFAULT 'scheduled';
ALTER TABLE "Ticket" ALTER COLUMN "status" SET DEFAULT 'open';

ALTER TABLE "Appointment" ADD CONSTRAINT "Appointment_no_overlap" EXCLUDE USING gist (
  "tenantId" WITH =, "assignedUserId" WITH =, tstzrange("startsAt", "endsAt", '[)') WITH &&
) WHERE ("status" = 'scheduled');
CREATE INDEX "Message_pending_operator_idx" ON "Message"("createdAt")
  WHERE "role" = 'operator' AND "deliveryStatus" = 'pending';

CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Ticket" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."assignedToId" IS DISTINCT FROM NEW."assignedToId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."createdAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."createdAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Appointment" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."assignedUserId" IS DISTINCT FROM NEW."assignedUserId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR OLD."leadId" IS DISTINCT FROM NEW."leadId"
        OR (OLD."startsAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."startsAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();
CREATE TRIGGER "ListCounter_update" AFTER UPDATE ON "Conversation" FOR EACH ROW
  WHEN (OLD."tenantId" IS DISTINCT FROM NEW."tenantId" OR OLD."status" IS DISTINCT FROM NEW."status"
        OR OLD."channelId" IS DISTINCT FROM NEW."channelId" OR OLD."customerId" IS DISTINCT FROM NEW."customerId"
        OR (OLD."lastMessageAt" AT TIME ZONE 'UTC')::date IS DISTINCT FROM (NEW."lastMessageAt" AT TIME ZONE 'UTC')::date)
  EXECUTE FUNCTION "ListCounter_apply"();

CREATE FUNCTION "ApiKey_lookup"(p_prefix text)
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
