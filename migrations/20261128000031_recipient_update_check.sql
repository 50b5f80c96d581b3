-- The statement trigger of broadcast_recipients' updates looks first for a row whose status or
-- milestones changed, and counts nothing when none did (claims, their renewals, enqueue times,
-- holds). It joined the transition tables on id, which carry no statistics: the planner chose
-- a nested loop, and a statement updating N rows without such a change compared N x N pairs
-- (1,000 rows 0.25 s, 5,000 rows 4.6 s, 20,000 rows 100 s on the development machine). A set
-- difference of the same columns is hashed instead: linear in N. EXCEPT compares NULLs as
-- equal, as IS DISTINCT FROM does, and a row's id is in both tables, so the result is empty
-- exactly when no row changed what the counters count.
CREATE OR REPLACE FUNCTION broadcast_recipients_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, variant_no
        FROM new_rows
        EXCEPT
        SELECT id, broadcast_id, status, sent_at, delivered_at, read_at, failed_at, variant_no
        FROM old_rows)
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
