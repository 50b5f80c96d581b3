-- A/B broadcasts (issue 29): 2 to 4 variants (template and variables each), a test share of
-- the audience split among them at random, and the winner, picked by receipts when the wait
-- ends (or by the caller), sent to the rest. Per-variant counters follow every recipient change
-- in the same statement, as the broadcast's do.

-- `ab_test`: {testPercent, winnerMetric, waitMinutes}. `ab_test_ends_at`: set when the test
-- share is written (the wait runs from then). `winning_variant`: the variant number picked.
ALTER TABLE broadcasts ADD COLUMN ab_test jsonb,
    ADD COLUMN ab_test_ends_at timestamptz,
    ADD COLUMN winning_variant smallint,
    ADD COLUMN variant_picked_at timestamptz,
    ADD COLUMN variant_picked_by text CHECK (variant_picked_by IN ('auto', 'api'));
-- Sending tests whose winner is not picked yet, for the worker's ticker (a cancelled or paused
-- one leaves the index).
CREATE INDEX broadcasts_ab_due ON broadcasts (ab_test_ends_at)
    WHERE winning_variant IS NULL AND ab_test_ends_at IS NOT NULL AND status = 'sending';

-- A variant's content is captured from its template when sending starts, as a broadcast's is.
CREATE TABLE broadcast_variants (
    organization_id    uuid NOT NULL,
    broadcast_id       uuid NOT NULL,
    variant_no         smallint NOT NULL CHECK (variant_no BETWEEN 1 AND 4),
    name               text NOT NULL,
    template_id        uuid NOT NULL,
    template_variables jsonb,
    message_body       text,
    message_subject    text,
    PRIMARY KEY (broadcast_id, variant_no),
    UNIQUE (broadcast_id, name),
    FOREIGN KEY (organization_id, broadcast_id)
        REFERENCES broadcasts (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT broadcast_variants_template_fkey FOREIGN KEY (organization_id, template_id)
        REFERENCES templates (organization_id, id) ON DELETE RESTRICT
);

-- A template's analytics count the variants sent with it (and its deletion checks them).
CREATE INDEX broadcast_variants_template ON broadcast_variants (organization_id, template_id);

-- The variant a recipient is sent (NULL outside A/B broadcasts).
ALTER TABLE broadcast_recipients ADD COLUMN variant_no smallint;

CREATE TABLE broadcast_variant_counters (
    organization_id uuid NOT NULL,
    broadcast_id    uuid NOT NULL,
    variant_no      smallint NOT NULL,
    shard           smallint NOT NULL,
    total           integer NOT NULL DEFAULT 0,
    sent            integer NOT NULL DEFAULT 0,
    delivered       integer NOT NULL DEFAULT 0,
    read            integer NOT NULL DEFAULT 0,
    replied         integer NOT NULL DEFAULT 0,
    failed          integer NOT NULL DEFAULT 0,
    skipped         integer NOT NULL DEFAULT 0,
    PRIMARY KEY (broadcast_id, variant_no, shard),
    FOREIGN KEY (organization_id, broadcast_id)
        REFERENCES broadcasts (organization_id, id) ON DELETE CASCADE
);

-- The counters' trigger functions carry each recipient's variant.
ALTER TYPE recipient_change ADD ATTRIBUTE variant_no smallint;

CREATE OR REPLACE FUNCTION broadcast_recipients_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, 1, variant_no)::recipient_change
        FROM new_rows));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION broadcast_recipients_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Claims and their renewals change no status or milestone: nothing to count.
    IF NOT EXISTS (
        SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (n.status, n.sent_at, n.delivered_at, n.read_at, n.failed_at, n.variant_no)
              IS DISTINCT FROM (o.status, o.sent_at, o.delivered_at, o.read_at, o.failed_at, o.variant_no)
           OR n.broadcast_id IS DISTINCT FROM o.broadcast_id)
    THEN
        RETURN NULL;
    END IF;
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, 1, variant_no)::recipient_change
        FROM new_rows
        UNION ALL
        SELECT (id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, -1, variant_no)::recipient_change
        FROM old_rows));
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION broadcast_recipients_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('parley.keep_counters', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, NULL, NULL, NULL, NULL, -1, variant_no)::recipient_change
        FROM old_rows));
    RETURN NULL;
END
$$;

-- apply_recipient_changes of migration 20261127000023, counting `held` (migration
-- 20261127000028) beside the others, with the variants' counters, and a variant's milestones
-- counted in its own template's daily figures.
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

    -- Only A/B broadcasts' recipients have a variant.
    WITH delta AS (
        SELECT c.broadcast_id, c.variant_no,
            sum(c.sign) AS total,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 1), 0) AS sent,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 2), 0) AS delivered,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 3), 0) AS read,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 4), 0) AS replied,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'failed'), 0) AS failed,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'skipped'), 0) AS skipped
        FROM unnest(changes) c
        WHERE c.variant_no IS NOT NULL
        GROUP BY c.broadcast_id, c.variant_no
    )
    INSERT INTO broadcast_variant_counters AS k
        (organization_id, broadcast_id, variant_no, shard, total, sent, delivered, read, replied,
         failed, skipped)
    SELECT b.organization_id, d.broadcast_id, d.variant_no, counter_shard(), d.total, d.sent,
           d.delivered, d.read, d.replied, d.failed, d.skipped
    FROM delta d JOIN broadcasts b ON b.id = d.broadcast_id
    WHERE (d.total, d.sent, d.delivered, d.read, d.replied, d.failed, d.skipped)
          IS DISTINCT FROM (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
                            0::bigint)
    ORDER BY d.broadcast_id, d.variant_no
    ON CONFLICT (broadcast_id, variant_no, shard) DO UPDATE SET
        total = k.total + excluded.total,
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
            (array_agg(c.variant_no) FILTER (WHERE c.sign = 1))[1] AS variant_no,
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
        SELECT p.broadcast_id, p.variant_no, (m.at AT TIME ZONE 'UTC')::date AS day,
            count(*) FILTER (WHERE m.what = 'sent') AS sent,
            count(*) FILTER (WHERE m.what = 'delivered') AS delivered,
            count(*) FILTER (WHERE m.what = 'read') AS read,
            count(*) FILTER (WHERE m.what = 'failed') AS failed
        FROM per_recipient p CROSS JOIN LATERAL (VALUES
            ('sent', p.sent_at, p.had_sent), ('delivered', p.delivered_at, p.had_delivered),
            ('read', p.read_at, p.had_read), ('failed', p.failed_at, p.had_failed)) AS m(what, at, had)
        WHERE m.at IS NOT NULL AND m.had = 0
        GROUP BY 1, 2, 3
    ), by_template AS (
        SELECT b.organization_id, coalesce(v.template_id, b.template_id) AS template_id,
            b.channel, d.day,
            sum(d.sent) AS sent, sum(d.delivered) AS delivered, sum(d.read) AS read,
            sum(d.failed) AS failed
        FROM daily d JOIN broadcasts b ON b.id = d.broadcast_id
            LEFT JOIN broadcast_variants v
                ON v.broadcast_id = d.broadcast_id AND v.variant_no = d.variant_no
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
