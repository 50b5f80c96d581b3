-- Issue 14: a webhook's own rate limit (deliveries per second across all workers), why it was
-- disabled, and recoveries: a window of failed deliveries queued again in the background.
ALTER TABLE webhooks
    ADD COLUMN rate_limit integer CHECK (rate_limit BETWEEN 1 AND 10000),
    ADD COLUMN disabled_reason text;

-- A recovery goes through the webhook's failed deliveries of [since, until) in (created_at,
-- id) order, a batch per relay pass, remembering where it is (a delivery that fails again is
-- not taken twice).
CREATE TABLE webhook_recoveries (
    id                 uuid PRIMARY KEY,
    organization_id    uuid NOT NULL,
    webhook_id         uuid NOT NULL,
    since              timestamptz NOT NULL,
    until              timestamptz NOT NULL CHECK (until > since),
    status             text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed')),
    recovered          integer NOT NULL DEFAULT 0,
    after_created_at   timestamptz,
    after_id           uuid,
    completed_at       timestamptz,
    created_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id),
    CONSTRAINT webhook_recoveries_webhook_fkey FOREIGN KEY (organization_id, webhook_id)
        REFERENCES webhooks (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_recoveries_running ON webhook_recoveries (created_at) WHERE status = 'running';
SELECT manage_updated_at('webhook_recoveries');

-- A webhook's failed deliveries by time, for recoveries: failures are few beside the rest.
CREATE INDEX webhook_deliveries_failed ON webhook_deliveries (webhook_id, created_at, id)
    WHERE status = 'failed';
