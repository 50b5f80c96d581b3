-- Bounces and complaints from providers' receipts feed the suppression ledger (issue 45,
-- docs/api.md "Suppressions"): a hard bounce or a complaint suppresses the address at once;
-- soft bounces do after the organization's `softBounceLimit` (N within D days).

-- Every statement below is instant once it has its lock; waiting long for one would queue the
-- send path behind it (docs/operations.md, Upgrading: bounces and complaints).
SET LOCAL lock_timeout = '10s';

-- The address a message went to (written with its `sent` outcome), so that a bounce suppresses
-- that address even when the contact's has changed since; and what the receipts reported of
-- each message, set once. NOT VALID: the new column is NULL in every existing row, and a
-- validation would read the whole table under this statement's exclusive lock.
ALTER TABLE broadcast_recipients
    ADD COLUMN sent_to text,
    ADD COLUMN bounce_type text,
    ADD COLUMN bounced_at timestamptz,
    ADD COLUMN complained_at timestamptz,
    ADD CONSTRAINT broadcast_recipients_bounce_type_check
        CHECK (bounce_type IN ('hard', 'soft')) NOT VALID;

-- Counted by the receipts' code in the same transaction as the recipients' marks (the marks
-- are set once, under the recipients' row locks); retention keeps them with the others.
ALTER TABLE broadcast_counters
    ADD COLUMN bounced integer NOT NULL DEFAULT 0,
    ADD COLUMN complained integer NOT NULL DEFAULT 0;

CREATE OR REPLACE VIEW broadcast_totals AS
    SELECT broadcast_id,
        sum(total)::int4 AS total, sum(pending)::int4 AS pending, sum(sent)::int4 AS sent,
        sum(delivered)::int4 AS delivered, sum(read)::int4 AS read,
        sum(replied)::int4 AS replied, sum(failed)::int4 AS failed,
        sum(skipped)::int4 AS skipped, sum(held)::int4 AS held,
        sum(bounced)::int4 AS bounced, sum(complained)::int4 AS complained
    FROM broadcast_counters GROUP BY broadcast_id;

-- Receipts that beat their message's id keep what they reported.
ALTER TABLE early_receipts
    DROP CONSTRAINT early_receipts_status_check,
    ADD CONSTRAINT early_receipts_status_check
        CHECK (status IN ('delivered', 'read', 'replied', 'failed', 'bounced', 'complained')),
    ADD COLUMN bounce_type text CHECK (bounce_type IN ('hard', 'soft'));

-- `{count, days}`: an address that soft-bounces `count` times within `days` days is suppressed
-- (`soft_bounce_limit`).
ALTER TABLE organizations
    ADD COLUMN soft_bounce_limit jsonb NOT NULL DEFAULT '{"count": 3, "days": 7}';

-- Each message's soft bounce, by what an entry would name (the address, lowercase, or the
-- contact's id), counted against the limit. The worker's upkeep deletes rows older than the
-- longest window.
CREATE TABLE soft_bounces (
    recipient_id    uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    channel         text NOT NULL,
    subject         text NOT NULL,
    occurred_at     timestamptz NOT NULL
);
CREATE INDEX soft_bounces_subject ON soft_bounces (organization_id, channel, subject, occurred_at);
CREATE INDEX soft_bounces_age ON soft_bounces (occurred_at);
