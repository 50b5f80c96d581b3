-- Outbound webhooks: subscriptions, the event outbox, deliveries and their attempt log.
-- An event is written in the same transaction as the change that causes it; the worker's
-- relay turns it into one delivery per matching webhook; retries wait in Postgres, due ones
-- move into the queue in bounded batches.

CREATE TABLE webhooks (
    id                          uuid PRIMARY KEY,
    organization_id             uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    url                         text NOT NULL,
    events                      text[] NOT NULL,
    description                 text,
    is_active                   boolean NOT NULL DEFAULT true,
    -- Signing secrets: the current one, and the previous one until it expires (24 h after a
    -- rotation), both signing every delivery meanwhile.
    secret                      text NOT NULL,
    previous_secret             text,
    previous_secret_expires_at  timestamptz,
    -- Since when every attempt has failed; a webhook failing for 5 days is disabled.
    failing_since               timestamptz,
    disabled_at                 timestamptz,
    -- Until when the endpoint is known to be stuck (every delivery slot held by a slow
    -- attempt): the relay leaves its new deliveries to the due path, which feeds them a few
    -- at a time, instead of enqueueing every one to be put back.
    stalled_until               timestamptz,
    created_at                  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at                  timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id)
);
CREATE INDEX webhooks_list ON webhooks (organization_id, created_at, id);
-- The relay's lookup: the active webhooks of an organization that take an event.
CREATE INDEX webhooks_subscribed ON webhooks USING gin (events) WHERE is_active;
CREATE INDEX webhooks_active ON webhooks (organization_id) WHERE is_active;
SELECT manage_updated_at('webhooks');

-- The outbox. `relayed_at` is set when the relay has made its deliveries.
CREATE TABLE webhook_events (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    event           text NOT NULL,
    data            jsonb NOT NULL,
    relayed_at      timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id)
);
CREATE INDEX webhook_events_unrelayed ON webhook_events (id) WHERE relayed_at IS NULL;
SELECT manage_updated_at('webhook_events');

CREATE TABLE webhook_deliveries (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    webhook_id      uuid NOT NULL,
    event_id        uuid NOT NULL,
    event           text NOT NULL,
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- When the delivery was last put into a job; before next_attempt_at means not yet.
    enqueued_at     timestamptz,
    delivered_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (webhook_id, event_id),
    CONSTRAINT webhook_deliveries_webhook_fkey FOREIGN KEY (organization_id, webhook_id)
        REFERENCES webhooks (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_event_fkey FOREIGN KEY (organization_id, event_id)
        REFERENCES webhook_events (organization_id, id) ON DELETE CASCADE
);
-- Due retries, oldest first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);
SELECT manage_updated_at('webhook_deliveries');

-- Every attempt, for GET /webhooks/{id}/logs.
CREATE TABLE webhook_attempts (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    webhook_id      uuid NOT NULL,
    delivery_id     uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    event           text NOT NULL,
    attempt         integer NOT NULL,
    status          text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    response_status integer,
    response_body   text,
    duration_ms     integer NOT NULL,
    error           text,
    next_attempt_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT webhook_attempts_webhook_fkey FOREIGN KEY (organization_id, webhook_id)
        REFERENCES webhooks (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_attempts_list ON webhook_attempts (webhook_id, created_at, id);
CREATE INDEX webhook_attempts_status ON webhook_attempts (webhook_id, status, created_at, id);
CREATE INDEX webhook_attempts_event ON webhook_attempts (webhook_id, event, created_at, id);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id);
SELECT manage_updated_at('webhook_attempts');

-- A UUID v7 (time-ordered, as the service's own ids), for rows made in SQL.
CREATE FUNCTION uuid_v7() RETURNS uuid VOLATILE LANGUAGE sql AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
