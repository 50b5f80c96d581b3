-- A FAQ collection's figures (faq_collection_totals) kept per statement, not per row. The row
-- trigger updated the collection's one totals row once for each FAQ a statement wrote, all
-- in one transaction, and each update walked the row's growing chain of versions: deleting a
-- collection of 10,000 FAQs (a cascade, one statement) or writing many FAQs at once cost the
-- square of their number. Now each statement updates each collection's row once.
--
-- Both kinds of figures (a collection's, a team's) take their rows' locks in id order in every
-- branch, so that two statements touching several collections or teams cannot deadlock.

DROP TRIGGER faqs_tally ON faqs;
DROP FUNCTION faqs_tally();

-- Dropping the trigger locks the FAQs until this migration commits: the figures are counted
-- again meanwhile (migration 12 counted them before its trigger existed, without a lock, so
-- a FAQ written between the two was not counted).
DELETE FROM faq_collection_totals;
INSERT INTO faq_collection_totals (collection_id, faq_count, total_read_time)
SELECT collection_id, count(*), sum(read_time) FROM faqs GROUP BY collection_id;

CREATE FUNCTION faqs_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Each branch reads only the transition tables its kind of statement has.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO faq_collection_totals AS k (collection_id, faq_count, total_read_time)
        SELECT collection_id, count(*), sum(read_time) FROM new_rows
        GROUP BY collection_id ORDER BY collection_id
        ON CONFLICT (collection_id) DO UPDATE SET
            faq_count = k.faq_count + excluded.faq_count,
            total_read_time = k.total_read_time + excluded.total_read_time;
    ELSIF TG_OP = 'DELETE' THEN
        -- The rows locked in collection order first, as the other branches take them (one
        -- statement may delete FAQs of several collections: an organization's deletion).
        PERFORM 1 FROM faq_collection_totals
        WHERE collection_id IN (SELECT collection_id FROM old_rows)
        ORDER BY collection_id FOR NO KEY UPDATE;
        -- A collection deleted with its FAQs (a cascade) may have lost its row already.
        UPDATE faq_collection_totals k
        SET faq_count = k.faq_count - d.n, total_read_time = k.total_read_time - d.read_time
        FROM (SELECT collection_id, count(*) AS n, sum(read_time) AS read_time FROM old_rows
              GROUP BY collection_id) d
        WHERE k.collection_id = d.collection_id;
    ELSE
        -- What each collection gains from the new rows and loses with the old ones; only
        -- FAQs that changed collection or read time leave a difference to write.
        INSERT INTO faq_collection_totals AS k (collection_id, faq_count, total_read_time)
        SELECT collection_id, sum(n), sum(read_time)
        FROM (SELECT collection_id, 1 AS n, read_time FROM new_rows
              UNION ALL
              SELECT collection_id, -1, -read_time FROM old_rows) AS c
        GROUP BY collection_id
        HAVING sum(n) <> 0 OR sum(read_time) <> 0
        ORDER BY collection_id
        ON CONFLICT (collection_id) DO UPDATE SET
            faq_count = k.faq_count + excluded.faq_count,
            total_read_time = k.total_read_time + excluded.total_read_time;
    END IF;
    RETURN NULL;
END
$$;

-- Transition tables exist only in their own statement's kind of trigger: one trigger each.
CREATE TRIGGER faqs_tally_inserted AFTER INSERT ON faqs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION faqs_tally();
CREATE TRIGGER faqs_tally_updated AFTER UPDATE ON faqs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION faqs_tally();
CREATE TRIGGER faqs_tally_deleted AFTER DELETE ON faqs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION faqs_tally();

-- A team's conversation count: its delete branch now locks in team order, as its insert does.
CREATE OR REPLACE FUNCTION conversation_teams_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO team_totals AS k (team_id, conversation_count)
        SELECT team_id, count(*) FROM new_rows GROUP BY team_id ORDER BY team_id
        ON CONFLICT (team_id) DO UPDATE SET conversation_count = k.conversation_count + excluded.conversation_count;
    ELSE
        PERFORM 1 FROM team_totals WHERE team_id IN (SELECT team_id FROM old_rows)
        ORDER BY team_id FOR NO KEY UPDATE;
        UPDATE team_totals k SET conversation_count = k.conversation_count - d.n
        FROM (SELECT team_id, count(*) AS n FROM old_rows GROUP BY team_id) d
        WHERE k.team_id = d.team_id;
    END IF;
    RETURN NULL;
END
$$;
