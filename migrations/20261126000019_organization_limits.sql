-- Limits an operator set for one organization (`parley-api org limits`), each NULL for the
-- deployment's default (docs/operations.md, "Per-organization limits").
CREATE TABLE organization_limits (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    -- Delivery jobs ready or running at once, across all workers (PARLEY_DELIVERY_JOBS_PER_ORG).
    delivery_jobs integer CHECK (delivery_jobs BETWEEN 1 AND 10000),
    -- Webhook delivery jobs ready or running at once (PARLEY_WEBHOOK_JOBS_PER_ORG).
    webhook_jobs integer CHECK (webhook_jobs BETWEEN 1 AND 10000),
    -- Imports running at once (PARLEY_IMPORTS_PER_ORG).
    imports integer CHECK (imports BETWEEN 1 AND 1000),
    -- Broadcasts sending at once (PARLEY_BROADCASTS_PER_ORG).
    broadcasts integer CHECK (broadcasts BETWEEN 1 AND 100000),
    -- Messages per second by channel ({"email": 50}), in place of PARLEY_CHANNEL_<CH>_RATE.
    -- Only channels' names, each with a whole number from 1 to 1,000,000, so that every worker
    -- can read every row.
    rates jsonb NOT NULL DEFAULT '{}' CHECK (
        jsonb_typeof(rates) = 'object'
        AND rates - ARRAY['messaging_a', 'email', 'social_a', 'social_b'] = '{}'::jsonb
        AND NOT jsonb_path_exists(rates,
            '$.* ? (@.type() != "number" || @ < 1 || @ > 1000000 || @ != @.floor())')),
    updated_at timestamptz NOT NULL DEFAULT now()
);
