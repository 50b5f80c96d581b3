-- Retention of broadcast recipients: the worker deletes the delivery records of broadcasts that
-- ended more than PARLEY_RECIPIENT_RETENTION_DAYS ago, a broadcast at a time through its
-- recipients' index (so the cost is the rows deleted, not the table's size), and marks the
-- broadcast. What the analytics read stays: the broadcast's counters and the templates' daily
-- figures.
ALTER TABLE broadcasts ADD COLUMN recipients_purged_at timestamptz;

-- Ended broadcasts whose recipients are kept, oldest end first.
CREATE INDEX broadcasts_recipients_kept ON broadcasts ((coalesce(completed_at, cancelled_at, updated_at)))
    WHERE recipients_purged_at IS NULL AND status IN ('completed', 'failed', 'cancelled');

-- Deleting recipients lowers the counters (a deleted broadcast takes its counters along),
-- except under retention (`parley.keep_counters` set for the transaction): the records go,
-- the counts stay. The daily figures are history and stay in both cases.
CREATE OR REPLACE FUNCTION broadcast_recipients_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('parley.keep_counters', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM apply_recipient_changes(ARRAY(
        SELECT (id, broadcast_id, status, NULL, NULL, NULL, NULL, -1)::recipient_change
        FROM old_rows));
    RETURN NULL;
END
$$;
