-- apply_recipient_changes (the counters' trigger function of broadcast_recipients) without a
-- quadratic step. Its milestone part joined the new rows to the old ones four times through
-- CTEs without an index: the planner took nested loops, n x n comparisons per statement (130 ms
-- for 1,600 recipient changes against 6 ms now; the largest part of the trigger's time in the
-- send path's outcome update, as pg_stat_statements counted it: docs/benchmarks.md, issue 28).
-- Each recipient's old and new rows are now folded by one grouping, and each figure is summed
-- per broadcast before broadcasts is read.
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
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'skipped'), 0) AS skipped
        FROM unnest(changes) c
        GROUP BY c.broadcast_id
    )
    INSERT INTO broadcast_counters AS k
        (organization_id, broadcast_id, shard, total, pending, sent, delivered, read, replied, failed, skipped)
    SELECT b.organization_id, d.broadcast_id, counter_shard(), d.total, d.pending, d.sent,
           d.delivered, d.read, d.replied, d.failed, d.skipped
    FROM delta d JOIN broadcasts b ON b.id = d.broadcast_id
    WHERE (d.total, d.pending, d.sent, d.delivered, d.read, d.replied, d.failed, d.skipped)
          IS DISTINCT FROM (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)
    ORDER BY d.broadcast_id
    ON CONFLICT (broadcast_id, shard) DO UPDATE SET
        total = k.total + excluded.total,
        pending = k.pending + excluded.pending,
        sent = k.sent + excluded.sent,
        delivered = k.delivered + excluded.delivered,
        read = k.read + excluded.read,
        replied = k.replied + excluded.replied,
        failed = k.failed + excluded.failed,
        skipped = k.skipped + excluded.skipped;

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
