-- Retention of webhook events (with their deliveries and attempts): the worker deletes the
-- oldest first, in small batches.
CREATE INDEX webhook_events_created ON webhook_events (created_at) WHERE relayed_at IS NOT NULL;
