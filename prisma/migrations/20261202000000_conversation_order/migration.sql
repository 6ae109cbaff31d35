-- The conversation list's order index in the list's own order. GET /public/v1/conversations reads a
-- tenant's conversations ORDER BY "lastMessageAt" DESC, "id" DESC (its deep offsets walk the same
-- order), as the status and channel lists do, whose indexes (20261123200000_list_counters) end in
-- "id" DESC. The tenant's own index ended in "id" ascending, so every page sorted again: an Incremental
-- Sort over the index's groups of equal "lastMessageAt". With "id" DESC the page is the index's first
-- rows, and no sort runs.
--
-- Measured on a Citus worker (bench/results/2026-11-29-citus-1m.md, docs/decisions/scale-out.md), the
-- list's statement for a tenant of 5,000 conversations, prepared, 1 connection: 1.34 → 1.23 ms.
--
-- Rebuilt under the same name (the name Prisma gives it, prisma/schema.prisma). The build holds the
-- table's lock until the migration commits: conversations are read and written again once it has,
-- a moment on tables of this size (5,800 rows: milliseconds). On Citus, run after `npm run
-- db:distribute`, both statements reach every shard (checked: a worker's 17 shard indexes, all
-- "id" DESC).
DROP INDEX "Conversation_tenantId_lastMessageAt_id_idx";
CREATE INDEX "Conversation_tenantId_lastMessageAt_id_idx" ON "Conversation"("tenantId", "lastMessageAt" DESC, "id" DESC);
