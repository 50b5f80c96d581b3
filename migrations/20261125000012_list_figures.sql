-- Figures a list shows for each of its rows, kept beside the rows by triggers instead of
-- counted at every read: a FAQ collection's FAQs and their read time, and a team's
-- conversations. Counted at read time, a page of collections or teams cost as much as the
-- FAQs or conversations they hold (a page holding a collection of 10,000 FAQs took 100 ms).

CREATE TABLE faq_collection_totals (
    collection_id   uuid PRIMARY KEY REFERENCES faq_collections (id) ON DELETE CASCADE,
    faq_count       bigint NOT NULL DEFAULT 0,
    total_read_time bigint NOT NULL DEFAULT 0
);
INSERT INTO faq_collection_totals (collection_id, faq_count, total_read_time)
SELECT collection_id, count(*), sum(read_time) FROM faqs GROUP BY collection_id;

-- FAQs are written by people, one at a time: a row trigger is enough.
CREATE FUNCTION faqs_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE faq_collection_totals
        SET faq_count = faq_count - 1, total_read_time = total_read_time - OLD.read_time
        WHERE collection_id = OLD.collection_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO faq_collection_totals AS k (collection_id, faq_count, total_read_time)
        VALUES (NEW.collection_id, 1, NEW.read_time)
        ON CONFLICT (collection_id) DO UPDATE SET
            faq_count = k.faq_count + 1, total_read_time = k.total_read_time + excluded.total_read_time;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER faqs_tally AFTER INSERT OR DELETE OR UPDATE OF collection_id, read_time ON faqs
    FOR EACH ROW EXECUTE FUNCTION faqs_tally();

CREATE TABLE team_totals (
    team_id            uuid PRIMARY KEY REFERENCES teams (id) ON DELETE CASCADE,
    conversation_count bigint NOT NULL DEFAULT 0
);
INSERT INTO team_totals (team_id, conversation_count)
SELECT team_id, count(*) FROM conversation_teams GROUP BY team_id;

-- Per statement: one update per team however many conversations a statement assigns.
CREATE FUNCTION conversation_teams_tally() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO team_totals AS k (team_id, conversation_count)
        SELECT team_id, count(*) FROM new_rows GROUP BY team_id ORDER BY team_id
        ON CONFLICT (team_id) DO UPDATE SET conversation_count = k.conversation_count + excluded.conversation_count;
    ELSE
        UPDATE team_totals k SET conversation_count = k.conversation_count - d.n
        FROM (SELECT team_id, count(*) AS n FROM old_rows GROUP BY team_id) d
        WHERE k.team_id = d.team_id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER conversation_teams_inserted AFTER INSERT ON conversation_teams
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION conversation_teams_tally();
CREATE TRIGGER conversation_teams_deleted AFTER DELETE ON conversation_teams
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION conversation_teams_tally();
