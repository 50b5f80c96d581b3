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

-- apply_recipient_changes of migration 20261127000023, counting `held` beside the others.
CREATE OR REPLACE FUNCTION apply_recipient_changes(changes recipient_change[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH delta AS (
        SELECT c.broadcast_id,
            sum(c.sign) AS total,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'pending'), 0) AS pending,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 1), 0) AS sent,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 2), 0) AS delivered,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 3), 0) AS read,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 4), 0) AS replied,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'failed'), 0) AS failed,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'skipped'), 0) AS skipped,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'held'), 0) AS held
        FROM unnest(changes) c
        GROUP BY c.broadcast_id
    )
    INSERT INTO broadcast_counters AS k
        (organization_id, broadcast_id, shard, total, pending, sent, delivered, read, replied,
         failed, skipped, held)
    SELECT b.organization_id, d.broadcast_id, counter_shard(), d.total, d.pending, d.sent,
           d.delivered, d.read, d.replied, d.failed, d.skipped, d.held
    FROM delta d JOIN broadcasts b ON b.id = d.broadcast_id
    WHERE (d.total, d.pending, d.sent, d.delivered, d.read, d.replied, d.failed, d.skipped, d.held)
          IS DISTINCT FROM (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
                            0::bigint, 0::bigint, 0::bigint)
    ORDER BY d.broadcast_id
    ON CONFLICT (broadcast_id, shard) DO UPDATE SET
        total = k.total + excluded.total,
        pending = k.pending + excluded.pending,
        sent = k.sent + excluded.sent,
        delivered = k.delivered + excluded.delivered,
        read = k.read + excluded.read,
        replied = k.replied + excluded.replied,
        failed = k.failed + excluded.failed,
        skipped = k.skipped + excluded.skipped,
        held = k.held + excluded.held;

    -- A milestone counts on the day it was first reached: set in a recipient's new row (sign 1)
    -- and not in its old one (sign -1; none for an inserted recipient).
    WITH per_recipient AS (
        SELECT (array_agg(c.broadcast_id) FILTER (WHERE c.sign = 1))[1] AS broadcast_id,
            max(c.sent_at) FILTER (WHERE c.sign = 1) AS sent_at,
            max(c.delivered_at) FILTER (WHERE c.sign = 1) AS delivered_at,
            max(c.read_at) FILTER (WHERE c.sign = 1) AS read_at,
            max(c.failed_at) FILTER (WHERE c.sign = 1) AS failed_at,
            count(c.sent_at) FILTER (WHERE c.sign = -1) AS had_sent,
            count(c.delivered_at) FILTER (WHERE c.sign = -1) AS had_delivered,
            count(c.read_at) FILTER (WHERE c.sign = -1) AS had_read,
            count(c.failed_at) FILTER (WHERE c.sign = -1) AS had_failed
        FROM unnest(changes) c
        GROUP BY c.id
    ), daily AS (
        SELECT p.broadcast_id, (m.at AT TIME ZONE 'UTC')::date AS day,
            count(*) FILTER (WHERE m.what = 'sent') AS sent,
            count(*) FILTER (WHERE m.what = 'delivered') AS delivered,
            count(*) FILTER (WHERE m.what = 'read') AS read,
            count(*) FILTER (WHERE m.what = 'failed') AS failed
        FROM per_recipient p CROSS JOIN LATERAL (VALUES
            ('sent', p.sent_at, p.had_sent), ('delivered', p.delivered_at, p.had_delivered),
            ('read', p.read_at, p.had_read), ('failed', p.failed_at, p.had_failed)) AS m(what, at, had)
        WHERE m.at IS NOT NULL AND m.had = 0
        GROUP BY 1, 2
    ), by_template AS (
        SELECT b.organization_id, b.template_id, b.channel, d.day,
            sum(d.sent) AS sent, sum(d.delivered) AS delivered, sum(d.read) AS read,
            sum(d.failed) AS failed
        FROM daily d JOIN broadcasts b ON b.id = d.broadcast_id
        GROUP BY 1, 2, 3, 4
    )
    INSERT INTO template_daily_stats AS t
        (organization_id, template_id, channel, day, shard, sent, delivered, read, failed)
    SELECT organization_id, template_id, channel, day, counter_shard(), sent, delivered, read, failed
    FROM by_template
    ORDER BY template_id, channel, day
    ON CONFLICT (template_id, channel, day, shard) DO UPDATE SET
        sent = t.sent + excluded.sent,
        delivered = t.delivered + excluded.delivered,
        read = t.read + excluded.read,
        failed = t.failed + excluded.failed;
END
$$;
