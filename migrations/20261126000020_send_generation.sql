-- Which send of a recipient this is: 0 for the first, N after the Nth `retry-failed`. The
-- provider's Idempotency-Key is `<recipientId>` for the first and `<recipientId>.r<N>` after,
-- so a provider that honours keys sends a retry instead of answering with the first message.
-- A constant default: added without rewriting the table.
ALTER TABLE broadcast_recipients ADD COLUMN send_generation integer NOT NULL DEFAULT 0;
