-- Broadcasts and their recipients. Postgres holds the truth of every send: Redis only carries
-- small batch jobs, and anything it loses is found again from these rows.

CREATE TABLE broadcasts (
    id                      uuid PRIMARY KEY,
    organization_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    broadcast_name          text NOT NULL,
    description             text,
    template_id             uuid NOT NULL,
    channel                 text NOT NULL CHECK (channel IN ('messaging_a', 'email', 'social_a', 'social_b')),
    template_channel        text NOT NULL,
    status                  text NOT NULL CHECK (status IN (
                                'draft', 'scheduled', 'queued', 'sending', 'paused', 'completed',
                                'failed', 'cancelled')),
    is_draft                boolean NOT NULL,
    send_now                boolean NOT NULL,
    scheduled_at            timestamptz,
    sender_email_address_id text,
    subject_override        text,
    template_variables      jsonb,
    email_variables         jsonb,
    -- The requested audience, deduplicated, in request order. Fan-out reads it in slices.
    contact_ids             uuid[] NOT NULL,
    error_message           text,
    -- The template's content as it was when sending started.
    message_body            text,
    message_subject         text,
    -- Traits of the message, from the template when the broadcast was written.
    message_length          integer NOT NULL DEFAULT 0,
    has_emojis              boolean NOT NULL DEFAULT false,
    has_images              boolean NOT NULL DEFAULT false,
    has_links               boolean NOT NULL DEFAULT false,
    -- Fan-out progress: contact_ids[1..fanout_offset] have recipient rows.
    fanout_offset           integer NOT NULL DEFAULT 0,
    fanout_done             boolean NOT NULL DEFAULT false,
    -- The dispatcher holding this broadcast until then; one dispatcher at a time.
    dispatch_lease_until    timestamptz,
    queued_at               timestamptz,
    started_at              timestamptz,
    paused_at               timestamptz,
    completed_at            timestamptz,
    cancelled_at            timestamptz,
    created_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id),
    CONSTRAINT broadcasts_template_fkey FOREIGN KEY (organization_id, template_id)
        REFERENCES templates (organization_id, id) ON DELETE RESTRICT
);
CREATE INDEX broadcasts_list ON broadcasts (organization_id, created_at, id);
CREATE INDEX broadcasts_status ON broadcasts (organization_id, status, created_at, id);
CREATE INDEX broadcasts_channel ON broadcasts (organization_id, channel, created_at, id);
CREATE INDEX broadcasts_template ON broadcasts (organization_id, template_id, created_at, id);
CREATE INDEX broadcasts_due ON broadcasts (scheduled_at) WHERE status = 'scheduled';
CREATE INDEX broadcasts_active ON broadcasts (status) WHERE status IN ('queued', 'sending');
SELECT manage_updated_at('broadcasts');

CREATE TABLE broadcast_recipients (
    id                  uuid PRIMARY KEY,
    organization_id     uuid NOT NULL,
    broadcast_id        uuid NOT NULL,
    -- The contact as it was addressed. Not a foreign key: a contact deleted later leaves its
    -- delivery record (and one index less to write per recipient change).
    contact_id          uuid NOT NULL,
    status              text NOT NULL DEFAULT 'pending' CHECK (status IN (
                            'pending', 'sent', 'delivered', 'read', 'replied', 'failed', 'skipped')),
    -- When the recipient was last put into a delivery job; older than the reconcile window
    -- while still pending means the job was lost.
    enqueued_at         timestamptz,
    external_message_id text,
    error_code          text,
    error_message       text,
    sent_at             timestamptz,
    delivered_at        timestamptz,
    read_at             timestamptz,
    replied_at          timestamptz,
    failed_at           timestamptz,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (broadcast_id, contact_id),
    CONSTRAINT broadcast_recipients_broadcast_fkey FOREIGN KEY (organization_id, broadcast_id)
        REFERENCES broadcasts (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX broadcast_recipients_list ON broadcast_recipients (broadcast_id, created_at, id);
-- Status filters: common statuses are read off the list index; the rare end states have their
-- own, which no recipient enters on the way to being sent.
CREATE INDEX broadcast_recipients_unsent ON broadcast_recipients (broadcast_id, status, created_at, id)
    WHERE status IN ('failed', 'skipped');
CREATE INDEX broadcast_recipients_pending ON broadcast_recipients (broadcast_id, enqueued_at)
    WHERE status = 'pending';
CREATE INDEX broadcast_recipients_message ON broadcast_recipients (external_message_id)
    WHERE external_message_id IS NOT NULL;
SELECT manage_updated_at('broadcast_recipients');

-- Counters of a broadcast's recipients, kept by the trigger below in the same statement as
-- every recipient change, so they always equal the recipients. sent counts recipients that
-- reached `sent` or beyond, delivered `delivered` or beyond, and so on (a funnel). Each
-- database session writes its own shard (by backend pid), so workers writing outcomes of one
-- broadcast at once do not queue on one row; a broadcast's figures are the sum of its shards.
CREATE TABLE broadcast_counters (
    organization_id uuid NOT NULL,
    broadcast_id    uuid NOT NULL,
    shard           smallint NOT NULL,
    total           integer NOT NULL DEFAULT 0,
    pending         integer NOT NULL DEFAULT 0,
    sent            integer NOT NULL DEFAULT 0,
    delivered       integer NOT NULL DEFAULT 0,
    read            integer NOT NULL DEFAULT 0,
    replied         integer NOT NULL DEFAULT 0,
    failed          integer NOT NULL DEFAULT 0,
    skipped         integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (broadcast_id, shard),
    CONSTRAINT broadcast_counters_broadcast_fkey FOREIGN KEY (organization_id, broadcast_id)
        REFERENCES broadcasts (organization_id, id) ON DELETE CASCADE
);
SELECT manage_updated_at('broadcast_counters');

-- Daily delivery figures per template and channel, for template analytics without scanning
-- recipients: kept by the same trigger, sharded the same way.
CREATE TABLE template_daily_stats (
    organization_id uuid NOT NULL,
    template_id     uuid NOT NULL,
    channel         text NOT NULL,
    day             date NOT NULL,
    shard           smallint NOT NULL,
    sent            integer NOT NULL DEFAULT 0,
    delivered       integer NOT NULL DEFAULT 0,
    read            integer NOT NULL DEFAULT 0,
    failed          integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (template_id, channel, day, shard),
    CONSTRAINT template_daily_stats_template_fkey FOREIGN KEY (organization_id, template_id)
        REFERENCES templates (organization_id, id) ON DELETE CASCADE
);
SELECT manage_updated_at('template_daily_stats');

-- A broadcast's figures: its shards summed.
CREATE VIEW broadcast_totals AS
    SELECT broadcast_id,
        sum(total)::int4 AS total, sum(pending)::int4 AS pending, sum(sent)::int4 AS sent,
        sum(delivered)::int4 AS delivered, sum(read)::int4 AS read,
        sum(replied)::int4 AS replied, sum(failed)::int4 AS failed,
        sum(skipped)::int4 AS skipped
    FROM broadcast_counters GROUP BY broadcast_id;

-- Updated rows keep updated_at fresh with a single-column compare (the first migration's
-- whole-row compare costs too much on the recipients' hot path). An update that sets
-- updated_at itself keeps its value.
CREATE OR REPLACE FUNCTION set_updated_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := clock_timestamp();
    END IF;
    RETURN NEW;
END
$$;

-- The shard this session writes.
CREATE FUNCTION counter_shard() RETURNS smallint STABLE LANGUAGE sql AS $$
    SELECT (pg_backend_pid() % 16)::smallint
$$;

-- Funnel rank of a status: a recipient at rank r counts toward every counter up to r.
CREATE FUNCTION recipient_rank(status text) RETURNS integer IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE status
        WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'read' THEN 3 WHEN 'replied' THEN 4
        ELSE 0 END
$$;

-- One recipient row before (-1) or after (+1) a change, as the counter trigger sees it.
CREATE TYPE recipient_change AS (
    id           uuid,
    broadcast_id uuid,
    status       text,
    sent_at      timestamptz,
    delivered_at timestamptz,
    read_at      timestamptz,
    failed_at    timestamptz,
    sign         integer
);

-- Applies a statement's recipient changes to the broadcasts' counters and the templates' daily
-- figures. Statement-level, so a batch of a thousand recipients costs one update per
-- broadcast, in the same transaction: the counters always equal the recipients.
CREATE FUNCTION apply_recipient_changes(changes recipient_change[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    WITH delta AS (
        SELECT c.broadcast_id, b.organization_id,
            sum(c.sign) AS total,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'pending'), 0) AS pending,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 1), 0) AS sent,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 2), 0) AS delivered,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 3), 0) AS read,
            coalesce(sum(c.sign) FILTER (WHERE recipient_rank(c.status) >= 4), 0) AS replied,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'failed'), 0) AS failed,
            coalesce(sum(c.sign) FILTER (WHERE c.status = 'skipped'), 0) AS skipped
        FROM unnest(changes) c JOIN broadcasts b ON b.id = c.broadcast_id
        GROUP BY c.broadcast_id, b.organization_id
    )
    INSERT INTO broadcast_counters AS k
        (organization_id, broadcast_id, shard, total, pending, sent, delivered, read, replied, failed, skipped)
    SELECT organization_id, broadcast_id, counter_shard(), total, pending, sent, delivered, read,
           replied, failed, skipped
    FROM delta
    WHERE (total, pending, sent, delivered, read, replied, failed, skipped)
          IS DISTINCT FROM (0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint, 0::bigint)
    ORDER BY broadcast_id
    ON CONFLICT (broadcast_id, shard) DO UPDATE SET
        total = k.total + excluded.total,
        pending = k.pending + excluded.pending,
        sent = k.sent + excluded.sent,
        delivered = k.delivered + excluded.delivered,
        read = k.read + excluded.read,
        replied = k.replied + excluded.replied,
        failed = k.failed + excluded.failed,
        skipped = k.skipped + excluded.skipped;

    -- A milestone counts on the day it was first reached.
    WITH c AS (SELECT * FROM unnest(changes)),
    n AS (SELECT * FROM c WHERE sign = 1),
    o AS (SELECT * FROM c WHERE sign = -1),
    reached AS (
        SELECT n.broadcast_id, 'sent' AS what, n.sent_at AS at
            FROM n LEFT JOIN o ON o.id = n.id WHERE n.sent_at IS NOT NULL AND o.sent_at IS NULL
        UNION ALL
        SELECT n.broadcast_id, 'delivered', n.delivered_at
            FROM n LEFT JOIN o ON o.id = n.id WHERE n.delivered_at IS NOT NULL AND o.delivered_at IS NULL
        UNION ALL
        SELECT n.broadcast_id, 'read', n.read_at
            FROM n LEFT JOIN o ON o.id = n.id WHERE n.read_at IS NOT NULL AND o.read_at IS NULL
        UNION ALL
        SELECT n.broadcast_id, 'failed', n.failed_at
            FROM n LEFT JOIN o ON o.id = n.id WHERE n.failed_at IS NOT NULL AND o.failed_at IS NULL
    ), daily AS (
        SELECT b.organization_id, b.template_id, b.channel,
            (r.at AT TIME ZONE 'UTC')::date AS day,
            count(*) FILTER (WHERE r.what = 'sent') AS sent,
            count(*) FILTER (WHERE r.what = 'delivered') AS delivered,
            count(*) FILTER (WHERE r.what = 'read') AS read,
            count(*) FILTER (WHERE r.what = 'failed') AS failed
        FROM reached r JOIN broadcasts b ON b.id = r.broadcast_id
        GROUP BY 1, 2, 3, 4
    )
    INSERT INTO template_daily_stats AS t
        (organization_id, template_id, channel, day, shard, sent, delivered, read, failed)
    SELECT organization_id, template_id, channel, day, counter_shard(), sent, delivered, read, failed
    FROM daily
    ORDER BY template_id, channel, day
    ON CONFLICT (template_id, channel, day, shard) DO UPDATE SET
        sent = t.sent + excluded.sent,
        delivered = t.delivered + excluded.delivered,
        read = t.read + excluded.read,
        failed = t.failed + excluded.failed;
END
$$;

CREATE FUNCTION broadcast_recipients_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, 1)::recipient_change
        FROM new_rows));
    RETURN NULL;
END
$$;

CREATE FUNCTION broadcast_recipients_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Claims and their renewals change no status or milestone: nothing to count.
    IF NOT EXISTS (
        SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (n.status, n.sent_at, n.delivered_at, n.read_at, n.failed_at)
              IS DISTINCT FROM (o.status, o.sent_at, o.delivered_at, o.read_at, o.failed_at)
           OR n.broadcast_id IS DISTINCT FROM o.broadcast_id)
    THEN
        RETURN NULL;
    END IF;
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, 1)::recipient_change
        FROM new_rows
        UNION ALL
        SELECT (id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, -1)::recipient_change
        FROM old_rows));
    RETURN NULL;
END
$$;

-- Deleting recipients lowers the counters (a deleted broadcast takes its counters along);
-- the daily figures are history and stay.
CREATE FUNCTION broadcast_recipients_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, NULL, NULL, NULL, NULL, -1)::recipient_change
        FROM old_rows));
    RETURN NULL;
END
$$;

CREATE TRIGGER broadcast_recipients_inserted AFTER INSERT ON broadcast_recipients
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION broadcast_recipients_inserted();
CREATE TRIGGER broadcast_recipients_updated AFTER UPDATE ON broadcast_recipients
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION broadcast_recipients_updated();
CREATE TRIGGER broadcast_recipients_deleted AFTER DELETE ON broadcast_recipients
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION broadcast_recipients_deleted();
