-- The update-time order of every list (sort=updatedAt, sort=-updatedAt, updatedFrom/updatedTo): one
-- index per table leading with the tenant, so that a page in that order, a window of it and a cursor
-- in it read the index from the position on (docs/decisions/api.md, "Lists: sort, windows, ids,
-- cursors"). Ascending; PostgreSQL reads it backwards for the descending order (ties by id in the
-- same direction). Every statement names the tenant as a constant: on Citus each one goes to one
-- shard, whose index this is.
CREATE INDEX "Lead_tenantId_updatedAt_id_idx" ON "Lead"("tenantId", "updatedAt", "id");
CREATE INDEX "Contact_tenantId_updatedAt_id_idx" ON "Contact"("tenantId", "updatedAt", "id");
CREATE INDEX "Conversation_tenantId_updatedAt_id_idx" ON "Conversation"("tenantId", "updatedAt", "id");
CREATE INDEX "Appointment_tenantId_updatedAt_id_idx" ON "Appointment"("tenantId", "updatedAt", "id");
CREATE INDEX "Ticket_tenantId_updatedAt_id_idx" ON "Ticket"("tenantId", "updatedAt", "id");
