-- Issue 14, Citus-ready schema: the keys a Citus cluster sharded by "tenantId" accepts, and each
-- table's role in it. Nothing here changes what the API stores or answers. test/citus.test.ts reads
-- the resulting catalog and fails on any violation (docs/decisions.md, "Citus-ready schema").

-- 1. Primary keys lead with "tenantId". The existing unique ("tenantId", "id") index becomes the
--    primary key (USING INDEX renames it to <table>_pkey; the composite foreign keys that referenced
--    it keep referencing the same index), and the single-column primary key on "id" goes.
ALTER TABLE "User" DROP CONSTRAINT "User_pkey", ADD CONSTRAINT "User_pkey" PRIMARY KEY USING INDEX "User_tenantId_id_key";
ALTER TABLE "ApiKey" DROP CONSTRAINT "ApiKey_pkey", ADD CONSTRAINT "ApiKey_pkey" PRIMARY KEY USING INDEX "ApiKey_tenantId_id_key";
ALTER TABLE "PipelineStage" DROP CONSTRAINT "PipelineStage_pkey", ADD CONSTRAINT "PipelineStage_pkey" PRIMARY KEY USING INDEX "PipelineStage_tenantId_id_key";
ALTER TABLE "Channel" DROP CONSTRAINT "Channel_pkey", ADD CONSTRAINT "Channel_pkey" PRIMARY KEY USING INDEX "Channel_tenantId_id_key";
ALTER TABLE "MessageTemplate" DROP CONSTRAINT "MessageTemplate_pkey", ADD CONSTRAINT "MessageTemplate_pkey" PRIMARY KEY USING INDEX "MessageTemplate_tenantId_id_key";
ALTER TABLE "ContactList" DROP CONSTRAINT "ContactList_pkey", ADD CONSTRAINT "ContactList_pkey" PRIMARY KEY USING INDEX "ContactList_tenantId_id_key";
ALTER TABLE "Contact" DROP CONSTRAINT "Contact_pkey", ADD CONSTRAINT "Contact_pkey" PRIMARY KEY USING INDEX "Contact_tenantId_id_key";
ALTER TABLE "Customer" DROP CONSTRAINT "Customer_pkey", ADD CONSTRAINT "Customer_pkey" PRIMARY KEY USING INDEX "Customer_tenantId_id_key";
ALTER TABLE "ChannelIdentity" DROP CONSTRAINT "ChannelIdentity_pkey", ADD CONSTRAINT "ChannelIdentity_pkey" PRIMARY KEY USING INDEX "ChannelIdentity_tenantId_id_key";
ALTER TABLE "Conversation" DROP CONSTRAINT "Conversation_pkey", ADD CONSTRAINT "Conversation_pkey" PRIMARY KEY USING INDEX "Conversation_tenantId_id_key";
ALTER TABLE "Message" DROP CONSTRAINT "Message_pkey", ADD CONSTRAINT "Message_pkey" PRIMARY KEY USING INDEX "Message_tenantId_id_key";
ALTER TABLE "Lead" DROP CONSTRAINT "Lead_pkey", ADD CONSTRAINT "Lead_pkey" PRIMARY KEY USING INDEX "Lead_tenantId_id_key";
ALTER TABLE "Appointment" DROP CONSTRAINT "Appointment_pkey", ADD CONSTRAINT "Appointment_pkey" PRIMARY KEY USING INDEX "Appointment_tenantId_id_key";
ALTER TABLE "Ticket" DROP CONSTRAINT "Ticket_pkey", ADD CONSTRAINT "Ticket_pkey" PRIMARY KEY USING INDEX "Ticket_tenantId_id_key";
ALTER TABLE "TicketComment" DROP CONSTRAINT "TicketComment_pkey", ADD CONSTRAINT "TicketComment_pkey" PRIMARY KEY USING INDEX "TicketComment_tenantId_id_key";
ALTER TABLE "WorkingHours" DROP CONSTRAINT "WorkingHours_pkey", ADD CONSTRAINT "WorkingHours_pkey" PRIMARY KEY ("tenantId", "id");
ALTER TABLE "ContactListMember" DROP CONSTRAINT "ContactListMember_pkey", ADD CONSTRAINT "ContactListMember_pkey" PRIMARY KEY ("tenantId", "listId", "contactId");

-- 2. An Idempotency-Key belongs to a tenant through its API key: the record carries "tenantId"
--    (backfilled from the key; a record whose key is gone can never be replayed and is dropped), its
--    claim is unique per (tenant, key, endpoint, Idempotency-Key), and both owners are foreign keys.
ALTER TABLE "IdempotencyRecord" ADD COLUMN "tenantId" UUID;
UPDATE "IdempotencyRecord" r SET "tenantId" = k."tenantId" FROM "ApiKey" k WHERE k."id" = r."apiKeyId";
DELETE FROM "IdempotencyRecord" WHERE "tenantId" IS NULL;
ALTER TABLE "IdempotencyRecord" ALTER COLUMN "tenantId" SET NOT NULL;
DROP INDEX "IdempotencyRecord_apiKeyId_endpoint_key_key";
CREATE UNIQUE INDEX "IdempotencyRecord_tenantId_apiKeyId_endpoint_key_key" ON "IdempotencyRecord"("tenantId", "apiKeyId", "endpoint", "key");
ALTER TABLE "IdempotencyRecord"
  DROP CONSTRAINT "IdempotencyRecord_pkey",
  ADD CONSTRAINT "IdempotencyRecord_pkey" PRIMARY KEY ("tenantId", "id"),
  ADD CONSTRAINT "IdempotencyRecord_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "IdempotencyRecord_tenantId_apiKeyId_fkey" FOREIGN KEY ("tenantId", "apiKeyId") REFERENCES "ApiKey"("tenantId", "id") ON DELETE CASCADE;

-- 3. The per-conversation message page and the per-ticket comment list filter on "tenantId" too:
--    their indexes lead with it (a shard holds many tenants).
DROP INDEX "Message_conversationId_createdAt_id_idx";
CREATE INDEX "Message_tenantId_conversationId_createdAt_id_idx" ON "Message"("tenantId", "conversationId", "createdAt" DESC, "id" DESC);
DROP INDEX "TicketComment_ticketId_createdAt_id_idx";
CREATE INDEX "TicketComment_tenantId_ticketId_createdAt_id_idx" ON "TicketComment"("tenantId", "ticketId", "createdAt", "id");

-- 4. No foreign key cascades updates. Citus rejects ON UPDATE CASCADE / SET NULL / SET DEFAULT (and
--    ON DELETE SET NULL / SET DEFAULT) on a foreign key that includes the distribution column, and ids
--    never change here anyway. Every foreign key is re-created with ON UPDATE NO ACTION and its
--    ON DELETE action unchanged.
ALTER TABLE "ApiKey"
  DROP CONSTRAINT "ApiKey_tenantId_fkey",
  DROP CONSTRAINT "ApiKey_tenantId_ownerId_fkey",
  ADD CONSTRAINT "ApiKey_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "ApiKey_tenantId_ownerId_fkey" FOREIGN KEY ("tenantId", "ownerId") REFERENCES "User"("tenantId", "id") ON DELETE CASCADE;
ALTER TABLE "Appointment"
  DROP CONSTRAINT "Appointment_tenantId_assignedUserId_fkey",
  DROP CONSTRAINT "Appointment_tenantId_conversationId_fkey",
  DROP CONSTRAINT "Appointment_tenantId_customerId_fkey",
  DROP CONSTRAINT "Appointment_tenantId_fkey",
  DROP CONSTRAINT "Appointment_tenantId_leadId_fkey",
  ADD CONSTRAINT "Appointment_tenantId_assignedUserId_fkey" FOREIGN KEY ("tenantId", "assignedUserId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Appointment_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Appointment_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Appointment_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "Appointment_tenantId_leadId_fkey" FOREIGN KEY ("tenantId", "leadId") REFERENCES "Lead"("tenantId", "id") ON DELETE RESTRICT;
ALTER TABLE "Channel"
  DROP CONSTRAINT "Channel_tenantId_fkey",
  ADD CONSTRAINT "Channel_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "ChannelIdentity"
  DROP CONSTRAINT "ChannelIdentity_tenantId_channelId_fkey",
  DROP CONSTRAINT "ChannelIdentity_tenantId_customerId_fkey",
  DROP CONSTRAINT "ChannelIdentity_tenantId_fkey",
  ADD CONSTRAINT "ChannelIdentity_tenantId_channelId_fkey" FOREIGN KEY ("tenantId", "channelId") REFERENCES "Channel"("tenantId", "id") ON DELETE CASCADE,
  ADD CONSTRAINT "ChannelIdentity_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Customer"("tenantId", "id") ON DELETE CASCADE,
  ADD CONSTRAINT "ChannelIdentity_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "Contact"
  DROP CONSTRAINT "Contact_tenantId_fkey",
  ADD CONSTRAINT "Contact_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "ContactList"
  DROP CONSTRAINT "ContactList_tenantId_fkey",
  ADD CONSTRAINT "ContactList_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "ContactListMember"
  DROP CONSTRAINT "ContactListMember_tenantId_contactId_fkey",
  DROP CONSTRAINT "ContactListMember_tenantId_fkey",
  DROP CONSTRAINT "ContactListMember_tenantId_listId_fkey",
  ADD CONSTRAINT "ContactListMember_tenantId_contactId_fkey" FOREIGN KEY ("tenantId", "contactId") REFERENCES "Contact"("tenantId", "id") ON DELETE CASCADE,
  ADD CONSTRAINT "ContactListMember_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "ContactListMember_tenantId_listId_fkey" FOREIGN KEY ("tenantId", "listId") REFERENCES "ContactList"("tenantId", "id") ON DELETE CASCADE;
ALTER TABLE "Conversation"
  DROP CONSTRAINT "Conversation_tenantId_assignedOperatorId_fkey",
  DROP CONSTRAINT "Conversation_tenantId_channelId_fkey",
  DROP CONSTRAINT "Conversation_tenantId_customerId_fkey",
  DROP CONSTRAINT "Conversation_tenantId_fkey",
  DROP CONSTRAINT "Conversation_tenantId_identityId_fkey",
  ADD CONSTRAINT "Conversation_tenantId_assignedOperatorId_fkey" FOREIGN KEY ("tenantId", "assignedOperatorId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Conversation_tenantId_channelId_fkey" FOREIGN KEY ("tenantId", "channelId") REFERENCES "Channel"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Conversation_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Customer"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Conversation_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "Conversation_tenantId_identityId_fkey" FOREIGN KEY ("tenantId", "identityId") REFERENCES "ChannelIdentity"("tenantId", "id") ON DELETE RESTRICT;
ALTER TABLE "Customer"
  DROP CONSTRAINT "Customer_tenantId_contactId_fkey",
  DROP CONSTRAINT "Customer_tenantId_fkey",
  ADD CONSTRAINT "Customer_tenantId_contactId_fkey" FOREIGN KEY ("tenantId", "contactId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Customer_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "Lead"
  DROP CONSTRAINT "Lead_tenantId_assignedOperatorId_fkey",
  DROP CONSTRAINT "Lead_tenantId_conversationId_fkey",
  DROP CONSTRAINT "Lead_tenantId_customerId_fkey",
  DROP CONSTRAINT "Lead_tenantId_fkey",
  DROP CONSTRAINT "Lead_tenantId_stageId_fkey",
  ADD CONSTRAINT "Lead_tenantId_assignedOperatorId_fkey" FOREIGN KEY ("tenantId", "assignedOperatorId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Lead_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Lead_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Lead_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "Lead_tenantId_stageId_fkey" FOREIGN KEY ("tenantId", "stageId") REFERENCES "PipelineStage"("tenantId", "id") ON DELETE RESTRICT;
ALTER TABLE "Message"
  DROP CONSTRAINT "Message_tenantId_authorUserId_fkey",
  DROP CONSTRAINT "Message_tenantId_conversationId_fkey",
  DROP CONSTRAINT "Message_tenantId_fkey",
  ADD CONSTRAINT "Message_tenantId_authorUserId_fkey" FOREIGN KEY ("tenantId", "authorUserId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Message_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE CASCADE,
  ADD CONSTRAINT "Message_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "MessageTemplate"
  DROP CONSTRAINT "MessageTemplate_tenantId_channelId_fkey",
  DROP CONSTRAINT "MessageTemplate_tenantId_fkey",
  ADD CONSTRAINT "MessageTemplate_tenantId_channelId_fkey" FOREIGN KEY ("tenantId", "channelId") REFERENCES "Channel"("tenantId", "id") ON DELETE CASCADE,
  ADD CONSTRAINT "MessageTemplate_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "PipelineStage"
  DROP CONSTRAINT "PipelineStage_tenantId_fkey",
  ADD CONSTRAINT "PipelineStage_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "Ticket"
  DROP CONSTRAINT "Ticket_tenantId_assignedToId_fkey",
  DROP CONSTRAINT "Ticket_tenantId_conversationId_fkey",
  DROP CONSTRAINT "Ticket_tenantId_createdById_fkey",
  DROP CONSTRAINT "Ticket_tenantId_customerId_fkey",
  DROP CONSTRAINT "Ticket_tenantId_fkey",
  DROP CONSTRAINT "Ticket_tenantId_leadId_fkey",
  ADD CONSTRAINT "Ticket_tenantId_assignedToId_fkey" FOREIGN KEY ("tenantId", "assignedToId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Ticket_tenantId_conversationId_fkey" FOREIGN KEY ("tenantId", "conversationId") REFERENCES "Conversation"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Ticket_tenantId_createdById_fkey" FOREIGN KEY ("tenantId", "createdById") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Ticket_tenantId_customerId_fkey" FOREIGN KEY ("tenantId", "customerId") REFERENCES "Contact"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "Ticket_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "Ticket_tenantId_leadId_fkey" FOREIGN KEY ("tenantId", "leadId") REFERENCES "Lead"("tenantId", "id") ON DELETE RESTRICT;
ALTER TABLE "TicketComment"
  DROP CONSTRAINT "TicketComment_tenantId_authorUserId_fkey",
  DROP CONSTRAINT "TicketComment_tenantId_fkey",
  DROP CONSTRAINT "TicketComment_tenantId_ticketId_fkey",
  ADD CONSTRAINT "TicketComment_tenantId_authorUserId_fkey" FOREIGN KEY ("tenantId", "authorUserId") REFERENCES "User"("tenantId", "id") ON DELETE RESTRICT,
  ADD CONSTRAINT "TicketComment_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "TicketComment_tenantId_ticketId_fkey" FOREIGN KEY ("tenantId", "ticketId") REFERENCES "Ticket"("tenantId", "id") ON DELETE CASCADE;
ALTER TABLE "User"
  DROP CONSTRAINT "User_tenantId_fkey",
  ADD CONSTRAINT "User_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE;
ALTER TABLE "WorkingHours"
  DROP CONSTRAINT "WorkingHours_tenantId_fkey",
  DROP CONSTRAINT "WorkingHours_tenantId_userId_fkey",
  ADD CONSTRAINT "WorkingHours_tenantId_fkey" FOREIGN KEY ("tenantId") REFERENCES "Tenant"("id") ON DELETE CASCADE,
  ADD CONSTRAINT "WorkingHours_tenantId_userId_fkey" FOREIGN KEY ("tenantId", "userId") REFERENCES "User"("tenantId", "id") ON DELETE CASCADE;

-- 5. Each table's role in a Citus cluster (docs/decisions.md): reference tables are replicated to
--    every node (small, rarely written, read by every request or joined from distributed tables),
--    distributed tables are sharded by "tenantId" and co-located. The migrator's bookkeeping stays
--    local to the coordinator.
COMMENT ON TABLE "PlanLimit" IS 'citus:reference';
COMMENT ON TABLE "Tenant" IS 'citus:reference';
COMMENT ON TABLE "User" IS 'citus:reference';
COMMENT ON TABLE "ApiKey" IS 'citus:reference';
COMMENT ON TABLE "WorkingHours" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "PipelineStage" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Channel" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "MessageTemplate" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "ContactList" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "ContactListMember" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Contact" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Customer" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "ChannelIdentity" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Conversation" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Message" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Lead" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Appointment" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "Ticket" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "TicketComment" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "IdempotencyRecord" IS 'citus:distributed(tenantId)';
COMMENT ON TABLE "_app_migrations" IS 'citus:local';
