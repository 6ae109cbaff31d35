CREATE OR REPLACE FUNCTION "ListCounter_keys"(p_table text, r jsonb) RETURNS TABLE("dim" text, "value" text) LANGUAGE sql STABLE AS $$
  SELECT k.d, k.v
    FROM unnest(ARRAY['all', 'y', 'm', 'd'] || CASE p_table
                  WHEN 'Lead' THEN ARRAY['customerId']
                  WHEN 'Ticket' THEN ARRAY['status', 'assignedTo', 'customerId']
                  WHEN 'Appointment' THEN ARRAY['userId', 'customerId', 'leadId', 'status']
                  WHEN 'Conversation' THEN ARRAY['status', 'channelId', 'customerId']
                  ELSE ARRAY[]::text[] END,
                "ListCounter_base"((r ->> CASE p_table WHEN 'Appointment' THEN 'startsAt' WHEN 'Conversation' THEN 'lastMessageAt' ELSE 'createdAt' END)::timestamptz)
                || CASE p_table
                  WHEN 'Lead' THEN ARRAY[r ->> 'customerId']
                  WHEN 'Ticket' THEN ARRAY[r ->> 'status', r ->> 'assignedToId', r ->> 'customerId']
                  WHEN 'Appointment' THEN ARRAY[r ->> 'assignedUserId', r ->> 'customerId', r ->> 'leadId', r ->> 'status']
                  WHEN 'Conversation' THEN ARRAY[r ->> 'status', r ->> 'channelId', r ->> 'customerId']
                  ELSE ARRAY[]::text[] END) k(d, v)
   WHERE p_table IN ('Lead', 'Ticket', 'Appointment', 'Conversation', 'Contact') AND r ->> 'tenantId' IS NOT NULL
     AND (p_table <> 'Contact' OR r ->> 'deletedAt' IS NULL) AND k.v IS NOT NULL
$$;
