-- Initial schema: the whole data model. Hand-written (Prisma's schema engine is not available
-- here); test/schema-drift.test.ts checks it against prisma/schema.prisma.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TYPE "Plan" AS ENUM ('starter', 'pro', 'enterprise');
CREATE TYPE "ChannelKind" AS ENUM ('web', 'whatsapp', 'messenger', 'instagram', 'telegram');
CREATE TYPE "ConversationStatus" AS ENUM ('active', 'escalated', 'resolved');
CREATE TYPE "MessageRole" AS ENUM ('user', 'assistant', 'operator', 'system');
CREATE TYPE "AppointmentStatus" AS ENUM ('scheduled', 'cancelled', 'completed', 'no_show');
CREATE TYPE "TicketStatus" AS ENUM ('open', 'pending', 'resolved', 'closed');

CREATE TABLE "PlanLimit" (
  "plan" "Plan" NOT NULL,
  "perMinute" INTEGER NOT NULL CHECK ("perMinute" >= 0),
  "perDay" INTEGER NOT NULL CHECK ("perDay" >= 0),
  CONSTRAINT "PlanLimit_pkey" PRIMARY KEY ("plan")
);
INSERT INTO "PlanLimit" ("plan", "perMinute", "perDay") VALUES
  ('starter', 0, 0), ('pro', 180, 50000), ('enterprise', 600, 200000);

CREATE TABLE "Tenant" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "name" TEXT NOT NULL,
  "plan" "Plan" NOT NULL,
  "timezone" TEXT NOT NULL DEFAULT 'UTC',
  "defaultCountry" CHAR(2),
  "slotMinutes" INTEGER NOT NULL DEFAULT 30 CHECK ("slotMinutes" BETWEEN 5 AND 1440),
  "rateLimitPerMinute" INTEGER CHECK ("rateLimitPerMinute" >= 0),
  "rateLimitPerDay" INTEGER CHECK ("rateLimitPerDay" >= 0),
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Tenant_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "Tenant_rateLimit_pair" CHECK (("rateLimitPerMinute" IS NULL) = ("rateLimitPerDay" IS NULL))
);

CREATE TABLE "User" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "email" TEXT NOT NULL,
  "bookable" BOOLEAN NOT NULL DEFAULT false,
  "assignable" BOOLEAN NOT NULL DEFAULT true,
  "apiGrant" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "User_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "User_tenantId_id_key" ON "User"("tenantId", "id");
CREATE UNIQUE INDEX "User_tenantId_email_key" ON "User"("tenantId", "email");
ALTER TABLE "User" ADD CONSTRAINT "User_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "WorkingHours" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "userId" UUID NOT NULL,
  "weekday" INTEGER NOT NULL CHECK ("weekday" BETWEEN 0 AND 6),
  "start" TEXT NOT NULL CHECK ("start" ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'),
  "end" TEXT NOT NULL CHECK ("end" ~ '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$'),
  CONSTRAINT "WorkingHours_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "WorkingHours_order" CHECK ("end" > "start")
);
CREATE INDEX "WorkingHours_tenantId_userId_idx" ON "WorkingHours"("tenantId", "userId");
ALTER TABLE "WorkingHours" ADD CONSTRAINT "WorkingHours_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "WorkingHours" ADD CONSTRAINT "WorkingHours_tenantId_userId_fkey" FOREIGN KEY ("tenantId", "userId") REFERENCES "User"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "ApiKey" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "ownerId" UUID NOT NULL,
  "name" TEXT,
  "prefix" TEXT NOT NULL,
  "keyHash" TEXT NOT NULL,
  "scopes" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
  "expiresAt" TIMESTAMPTZ(3),
  "revokedAt" TIMESTAMPTZ(3),
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "ApiKey_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "ApiKey_prefix_key" ON "ApiKey"("prefix");
CREATE UNIQUE INDEX "ApiKey_keyHash_key" ON "ApiKey"("keyHash");
CREATE UNIQUE INDEX "ApiKey_tenantId_id_key" ON "ApiKey"("tenantId", "id");
ALTER TABLE "ApiKey" ADD CONSTRAINT "ApiKey_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "ApiKey" ADD CONSTRAINT "ApiKey_tenantId_ownerId_fkey" FOREIGN KEY ("tenantId", "ownerId") REFERENCES "User"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "PipelineStage" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "position" INTEGER NOT NULL DEFAULT 0,
  "defaultEntry" BOOLEAN NOT NULL DEFAULT false,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "PipelineStage_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "PipelineStage_tenantId_id_key" ON "PipelineStage"("tenantId", "id");
-- At most one default-entry stage per tenant (the loader guarantees at least one).
CREATE UNIQUE INDEX "PipelineStage_one_default_entry" ON "PipelineStage"("tenantId") WHERE "defaultEntry";
ALTER TABLE "PipelineStage" ADD CONSTRAINT "PipelineStage_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "Channel" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "kind" "ChannelKind" NOT NULL,
  "name" TEXT NOT NULL,
  "connected" BOOLEAN NOT NULL DEFAULT true,
  "config" JSONB NOT NULL DEFAULT '{}',
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Channel_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "Channel_tenantId_id_key" ON "Channel"("tenantId", "id");
ALTER TABLE "Channel" ADD CONSTRAINT "Channel_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "MessageTemplate" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "channelId" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "language" TEXT NOT NULL,
  "body" TEXT NOT NULL,
  "approved" BOOLEAN NOT NULL DEFAULT false,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "MessageTemplate_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "MessageTemplate_tenantId_id_key" ON "MessageTemplate"("tenantId", "id");
CREATE UNIQUE INDEX "MessageTemplate_tenantId_channelId_name_language_key" ON "MessageTemplate"("tenantId", "channelId", "name", "language");
ALTER TABLE "MessageTemplate" ADD CONSTRAINT "MessageTemplate_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "MessageTemplate" ADD CONSTRAINT "MessageTemplate_tenantId_channelId_fkey" FOREIGN KEY ("tenantId", "channelId") REFERENCES "Channel"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "ContactList" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "name" TEXT NOT NULL,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "ContactList_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "ContactList_tenantId_id_key" ON "ContactList"("tenantId", "id");
ALTER TABLE "ContactList" ADD CONSTRAINT "ContactList_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "Contact" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "fullName" TEXT,
  "phone" TEXT CHECK ("phone" ~ '^\+[1-9][0-9]{1,14}$'),
  "email" TEXT,
  "country" CHAR(2),
  "phoneVerifiedAt" TIMESTAMPTZ(3),
  "emailVerifiedAt" TIMESTAMPTZ(3),
  "marketingOptOut" BOOLEAN NOT NULL DEFAULT false,
  "marketingOptOutAt" TIMESTAMPTZ(3),
  "origin" TEXT NOT NULL DEFAULT 'api',
  "deletedAt" TIMESTAMPTZ(3),
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Contact_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "Contact_tenantId_id_key" ON "Contact"("tenantId", "id");
-- Unique per tenant including soft-deleted contacts.
CREATE UNIQUE INDEX "Contact_tenantId_phone_key" ON "Contact"("tenantId", "phone");
CREATE UNIQUE INDEX "Contact_tenantId_email_ci_key" ON "Contact"("tenantId", lower("email"));
CREATE INDEX "Contact_tenantId_createdAt_id_idx" ON "Contact"("tenantId", "createdAt" DESC, "id");
ALTER TABLE "Contact" ADD CONSTRAINT "Contact_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "ContactListMember" (
  "tenantId" UUID NOT NULL,
  "listId" UUID NOT NULL,
  "contactId" UUID NOT NULL,
  CONSTRAINT "ContactListMember_pkey" PRIMARY KEY ("listId", "contactId")
);
CREATE INDEX "ContactListMember_tenantId_contactId_idx" ON "ContactListMember"("tenantId", "contactId");
ALTER TABLE "ContactListMember" ADD CONSTRAINT "ContactListMember_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "ContactListMember" ADD CONSTRAINT "ContactListMember_tenantId_listId_fkey" FOREIGN KEY ("tenantId", "listId") REFERENCES "ContactList"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "ContactListMember" ADD CONSTRAINT "ContactListMember_tenantId_contactId_fkey" FOREIGN KEY ("tenantId", "contactId") REFERENCES "Contact"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "Customer" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "name" TEXT,
  "email" TEXT,
  "phone" TEXT,
  "contactId" UUID,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Customer_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "Customer_tenantId_id_key" ON "Customer"("tenantId", "id");
CREATE INDEX "Customer_tenantId_contactId_idx" ON "Customer"("tenantId", "contactId");
ALTER TABLE "Customer" ADD CONSTRAINT "Customer_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Customer" ADD CONSTRAINT "Customer_tenantId_contactId_fkey" FOREIGN KEY ("tenantId", "contactId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "ChannelIdentity" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "customerId" UUID NOT NULL,
  "channelId" UUID NOT NULL,
  "externalId" TEXT NOT NULL,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "ChannelIdentity_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "ChannelIdentity_tenantId_id_key" ON "ChannelIdentity"("tenantId", "id");
CREATE UNIQUE INDEX "ChannelIdentity_tenantId_channelId_externalId_key" ON "ChannelIdentity"("tenantId", "channelId", "externalId");
ALTER TABLE "ChannelIdentity" ADD CONSTRAINT "ChannelIdentity_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "ChannelIdentity" ADD CONSTRAINT "ChannelIdentity_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Customer"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "ChannelIdentity" ADD CONSTRAINT "ChannelIdentity_tenantId_channelId_fkey" FOREIGN KEY ("tenantId", "channelId") REFERENCES "Channel"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;

CREATE TABLE "Conversation" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "channelId" UUID NOT NULL,
  "customerId" UUID NOT NULL,
  "identityId" UUID,
  "status" "ConversationStatus" NOT NULL DEFAULT 'active',
  "subject" TEXT,
  "assignedOperatorId" UUID,
  "lastMessagePreview" TEXT NOT NULL DEFAULT '',
  "lastMessageAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Conversation_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "Conversation_tenantId_id_key" ON "Conversation"("tenantId", "id");
CREATE INDEX "Conversation_tenantId_lastMessageAt_id_idx" ON "Conversation"("tenantId", "lastMessageAt" DESC, "id");
CREATE INDEX "Conversation_tenantId_customerId_idx" ON "Conversation"("tenantId", "customerId");
CREATE INDEX "Conversation_tenantId_identityId_idx" ON "Conversation"("tenantId", "identityId");
ALTER TABLE "Conversation" ADD CONSTRAINT "Conversation_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Conversation" ADD CONSTRAINT "Conversation_tenantId_channelId_fkey" FOREIGN KEY ("tenantId", "channelId") REFERENCES "Channel"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Conversation" ADD CONSTRAINT "Conversation_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Customer"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Conversation" ADD CONSTRAINT "Conversation_tenantId_identityId_fkey" FOREIGN KEY ("tenantId", "identityId") REFERENCES "ChannelIdentity"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Conversation" ADD CONSTRAINT "Conversation_tenantId_assignedOperatorId_fkey" FOREIGN KEY ("tenantId", "assignedOperatorId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "Message" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "conversationId" UUID NOT NULL,
  "role" "MessageRole" NOT NULL,
  "content" TEXT NOT NULL,
  "deliveryStatus" TEXT NOT NULL CHECK ("deliveryStatus" IN ('received', 'pending', 'sent', 'delivered', 'failed')),
  "providerMessageId" TEXT,
  "authorUserId" UUID,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Message_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "Message_tenantId_id_key" ON "Message"("tenantId", "id");
CREATE INDEX "Message_conversationId_createdAt_id_idx" ON "Message"("conversationId", "createdAt" DESC, "id" DESC);
ALTER TABLE "Message" ADD CONSTRAINT "Message_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Message" ADD CONSTRAINT "Message_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Message" ADD CONSTRAINT "Message_tenantId_authorUserId_fkey" FOREIGN KEY ("tenantId", "authorUserId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "Lead" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "customerId" UUID,
  "conversationId" UUID,
  "customerName" TEXT NOT NULL,
  "customerEmail" TEXT,
  "customerPhone" TEXT,
  "intent" TEXT NOT NULL DEFAULT 'unknown',
  "quality" TEXT NOT NULL DEFAULT 'unknown',
  "stageId" UUID NOT NULL,
  "budgetMin" INTEGER,
  "budgetMax" INTEGER,
  "zones" TEXT[] NOT NULL DEFAULT ARRAY[]::TEXT[],
  "rooms" INTEGER,
  "assignedOperatorId" UUID,
  "source" TEXT NOT NULL DEFAULT 'api',
  "notes" TEXT,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Lead_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "Lead_budget_order" CHECK ("budgetMin" IS NULL OR "budgetMax" IS NULL OR "budgetMin" <= "budgetMax")
);
CREATE UNIQUE INDEX "Lead_tenantId_id_key" ON "Lead"("tenantId", "id");
CREATE INDEX "Lead_tenantId_createdAt_id_idx" ON "Lead"("tenantId", "createdAt" DESC, "id" DESC);
CREATE INDEX "Lead_tenantId_customerId_createdAt_idx" ON "Lead"("tenantId", "customerId", "createdAt" DESC);
ALTER TABLE "Lead" ADD CONSTRAINT "Lead_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Lead" ADD CONSTRAINT "Lead_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Lead" ADD CONSTRAINT "Lead_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Lead" ADD CONSTRAINT "Lead_tenantId_stageId_fkey" FOREIGN KEY ("tenantId", "stageId") REFERENCES "PipelineStage"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Lead" ADD CONSTRAINT "Lead_tenantId_assignedOperatorId_fkey" FOREIGN KEY ("tenantId", "assignedOperatorId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "Appointment" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "assignedUserId" UUID NOT NULL,
  "customerId" UUID,
  "conversationId" UUID,
  "leadId" UUID,
  "title" TEXT NOT NULL,
  "appointmentType" TEXT NOT NULL,
  "startsAt" TIMESTAMPTZ(3) NOT NULL,
  "endsAt" TIMESTAMPTZ(3) NOT NULL,
  "status" "AppointmentStatus" NOT NULL DEFAULT 'scheduled',
  "source" TEXT NOT NULL DEFAULT 'manual',
  "notes" TEXT,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Appointment_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "Appointment_ends_after_starts" CHECK ("endsAt" > "startsAt"),
  -- Two scheduled appointments of one user never overlap ([start, end) half-open: back-to-back is fine).
  CONSTRAINT "Appointment_no_overlap" EXCLUDE USING gist (
    "tenantId" WITH =, "assignedUserId" WITH =, tstzrange("startsAt", "endsAt", '[)') WITH &&
  ) WHERE ("status" = 'scheduled')
);
CREATE UNIQUE INDEX "Appointment_tenantId_id_key" ON "Appointment"("tenantId", "id");
CREATE INDEX "Appointment_tenantId_startsAt_id_idx" ON "Appointment"("tenantId", "startsAt", "id");
CREATE INDEX "Appointment_tenantId_assignedUserId_startsAt_idx" ON "Appointment"("tenantId", "assignedUserId", "startsAt");
ALTER TABLE "Appointment" ADD CONSTRAINT "Appointment_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Appointment" ADD CONSTRAINT "Appointment_tenantId_assignedUserId_fkey" FOREIGN KEY ("tenantId", "assignedUserId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Appointment" ADD CONSTRAINT "Appointment_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Appointment" ADD CONSTRAINT "Appointment_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Appointment" ADD CONSTRAINT "Appointment_tenantId_leadId_fkey" FOREIGN KEY ("tenantId", "leadId") REFERENCES "Lead"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "Ticket" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "customerId" UUID,
  "leadId" UUID,
  "conversationId" UUID,
  "subject" TEXT NOT NULL CHECK (char_length("subject") BETWEEN 1 AND 500),
  "status" "TicketStatus" NOT NULL DEFAULT 'open',
  "createdById" UUID NOT NULL,
  "assignedToId" UUID,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "Ticket_pkey" PRIMARY KEY ("id"),
  CONSTRAINT "Ticket_has_subject_entity" CHECK ("customerId" IS NOT NULL OR "leadId" IS NOT NULL OR "conversationId" IS NOT NULL)
);
CREATE UNIQUE INDEX "Ticket_tenantId_id_key" ON "Ticket"("tenantId", "id");
CREATE INDEX "Ticket_tenantId_createdAt_id_idx" ON "Ticket"("tenantId", "createdAt" DESC, "id" DESC);
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_tenantId_leadId_fkey" FOREIGN KEY ("tenantId", "leadId") REFERENCES "Lead"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_tenantId_createdById_fkey" FOREIGN KEY ("tenantId", "createdById") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "Ticket" ADD CONSTRAINT "Ticket_tenantId_assignedToId_fkey" FOREIGN KEY ("tenantId", "assignedToId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "TicketComment" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "tenantId" UUID NOT NULL,
  "ticketId" UUID NOT NULL,
  "authorUserId" UUID NOT NULL,
  "body" TEXT NOT NULL CHECK (char_length("body") >= 1),
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  CONSTRAINT "TicketComment_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "TicketComment_tenantId_id_key" ON "TicketComment"("tenantId", "id");
CREATE INDEX "TicketComment_ticketId_createdAt_id_idx" ON "TicketComment"("ticketId", "createdAt", "id");
ALTER TABLE "TicketComment" ADD CONSTRAINT "TicketComment_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "TicketComment" ADD CONSTRAINT "TicketComment_tenantId_ticketId_fkey" FOREIGN KEY ("tenantId", "ticketId") REFERENCES "Ticket"("tenantId", "id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "TicketComment" ADD CONSTRAINT "TicketComment_tenantId_authorUserId_fkey" FOREIGN KEY ("tenantId", "authorUserId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT ON UPDATE CASCADE;

CREATE TABLE "IdempotencyRecord" (
  "id" UUID NOT NULL DEFAULT gen_random_uuid(),
  "apiKeyId" UUID NOT NULL,
  "endpoint" TEXT NOT NULL,
  "key" TEXT NOT NULL,
  "fingerprint" TEXT NOT NULL,
  "statusCode" INTEGER NOT NULL,
  "responseBody" JSONB NOT NULL,
  "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
  "expiresAt" TIMESTAMPTZ(3) NOT NULL,
  CONSTRAINT "IdempotencyRecord_pkey" PRIMARY KEY ("id")
);
CREATE UNIQUE INDEX "IdempotencyRecord_apiKeyId_endpoint_key_key" ON "IdempotencyRecord"("apiKeyId", "endpoint", "key");
CREATE INDEX "IdempotencyRecord_expiresAt_idx" ON "IdempotencyRecord"("expiresAt");
