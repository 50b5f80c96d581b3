-- Sending that respects people's time (issue 29): quiet hours and frequency caps per
-- organization, local-time broadcasts and a per-broadcast quiet-hours override, and recipients
-- `held` until their send time comes (shared/domain/src/send_rules.rs, docs/jobs.md).

-- The organization's daily window of quiet time in each contact's local time ({start, end},
-- `HH:MM`), and its caps per channel ({"email": {"perDay": 2, "perWeek": 5}}).
ALTER TABLE organizations ADD COLUMN quiet_hours jsonb,
    ADD COLUMN frequency_caps jsonb NOT NULL DEFAULT '{}';

-- `send_in = 'contact_timezone'`: `local_time` is the wall time each recipient is sent at in its
-- own zone, and `scheduled_at` the first instant it comes anywhere (UTC+14).
ALTER TABLE broadcasts
    ADD COLUMN send_in text NOT NULL DEFAULT 'utc'
        CHECK (send_in IN ('utc', 'contact_timezone')),
    ADD COLUMN local_time timestamp,
    ADD COLUMN past_time_policy text NOT NULL DEFAULT 'send_now'
        CHECK (past_time_policy IN ('send_now', 'skip')),
    ADD COLUMN quiet_hours jsonb;

-- A held recipient waits for `hold_until` (its local send time, or the end of its quiet hours)
-- outside every queue; the worker's ticker makes it pending and enqueues it then.
-- NOT VALID: the old check held every existing row to a subset of the new one, and a
-- validation would read the whole table under this statement's exclusive lock.
ALTER TABLE broadcast_recipients ADD COLUMN hold_until timestamptz,
    DROP CONSTRAINT broadcast_recipients_status_check,
    ADD CONSTRAINT broadcast_recipients_status_check CHECK (status IN (
        'pending', 'held', 'sent', 'delivered', 'read', 'replied', 'failed', 'skipped')) NOT VALID;
-- IF NOT EXISTS: an operator of a large deployment builds it CONCURRENTLY beforehand
-- (docs/operations.md, Upgrading); built here, it reads the table under this migration's locks.
CREATE INDEX IF NOT EXISTS broadcast_recipients_held ON broadcast_recipients (hold_until)
    WHERE status = 'held';

ALTER TABLE broadcast_counters ADD COLUMN held integer NOT NULL DEFAULT 0;

CREATE OR REPLACE VIEW broadcast_totals AS
    SELECT broadcast_id,
        sum(total)::int4 AS total, sum(pending)::int4 AS pending, sum(sent)::int4 AS sent,
        sum(delivered)::int4 AS delivered, sum(read)::int4 AS read,
        sum(replied)::int4 AS replied, sum(failed)::int4 AS failed,
        sum(skipped)::int4 AS skipped, sum(held)::int4 AS held
    FROM broadcast_counters GROUP BY broadcast_id;

-- The counters' trigger function counts `held` from migration 20261127000029 on, which replaces
-- it with the A/B variants' counters too (one new definition, not two).
