-- Unsubscribe links (issue 45, docs/api.md "Unsubscribing"): the keys that sign them, and
-- each broadcast's count of the unsubscribes its links made (`unsubscribeRate`).

-- The foreign key below and the counters' column lock `broadcasts` and `broadcast_counters`
-- for an instant; waiting long for them would queue the send path behind this migration.
SET LOCAL lock_timeout = '10s';

-- A key signs once every API process knows it (two minutes after it is added); every key
-- verifies the links it signed for as long as it is kept. The deployment's first is added on
-- first use; `parley-api unsubscribe-keys rotate` adds the next.
CREATE TABLE unsubscribe_keys (
    id         smallint PRIMARY KEY CHECK (id BETWEEN 1 AND 255),
    secret     bytea NOT NULL CHECK (length(secret) = 32),
    created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Who unsubscribed through a broadcast's links: each contact counts once per broadcast, however
-- often it resubscribes and unsubscribes again.
CREATE TABLE broadcast_unsubscribes (
    organization_id uuid NOT NULL,
    broadcast_id    uuid NOT NULL,
    contact_id      uuid NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (broadcast_id, contact_id),
    CONSTRAINT broadcast_unsubscribes_broadcast_fkey FOREIGN KEY (organization_id, broadcast_id)
        REFERENCES broadcasts (organization_id, id) ON DELETE CASCADE
);

ALTER TABLE broadcast_counters ADD COLUMN unsubscribed integer NOT NULL DEFAULT 0;

CREATE OR REPLACE VIEW broadcast_totals AS
    SELECT broadcast_id,
        sum(total)::int4 AS total, sum(pending)::int4 AS pending, sum(sent)::int4 AS sent,
        sum(delivered)::int4 AS delivered, sum(read)::int4 AS read,
        sum(replied)::int4 AS replied, sum(failed)::int4 AS failed,
        sum(skipped)::int4 AS skipped, sum(held)::int4 AS held,
        sum(bounced)::int4 AS bounced, sum(complained)::int4 AS complained,
        sum(unsubscribed)::int4 AS unsubscribed
    FROM broadcast_counters GROUP BY broadcast_id;
