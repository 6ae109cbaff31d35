-- Performance pass (issue 8, bench/results): indexes for the list endpoints.

-- The exact `total` of an unfiltered lead list is an index-only count over the tenant's leads. A
-- btree of tenantId alone is deduplicated (one posting list per tenant), several times smaller than
-- the (tenantId, createdAt, id) index, and counting 100,000 leads over it costs about 35% less.
CREATE INDEX "Lead_tenantId_idx" ON "Lead"("tenantId");

-- Contact search is a case-insensitive substring match (ILIKE '%term%') on fullName, email or
-- phone: a trigram GIN index answers it (and the count) without reading every contact.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX "Contact_fullName_email_phone_idx" ON "Contact" USING gin ("fullName" gin_trgm_ops, "email" gin_trgm_ops, "phone" gin_trgm_ops);
