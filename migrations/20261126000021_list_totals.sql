-- Totals kept per organization of the lists whose unfiltered page would otherwise count the
-- organization's rows on every request (a page of 20 contacts cost what a count of 10,001
-- rows costs). Each statement adds the rows it inserted or deleted, grouped by organization,
-- to one of 16 shards, the transaction's (by its id): concurrent writes of one organization
-- seldom wait on the same row, two statements of one transaction take the same row (no lock
-- order to get wrong), and a read sums at most 16 rows. No foreign key: a deleted organization's
-- cascading deletes still count down, and its rows are never read again.
CREATE TABLE list_totals (
    organization_id uuid NOT NULL,
    list text NOT NULL,
    shard smallint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (organization_id, list, shard)
);

CREATE FUNCTION count_list_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO list_totals AS t (organization_id, list, shard, n)
        SELECT organization_id, TG_TABLE_NAME, (txid_current() % 16)::smallint, count(*)
        FROM changed GROUP BY organization_id ORDER BY organization_id
        ON CONFLICT (organization_id, list, shard) DO UPDATE SET n = t.n + excluded.n;
    ELSE
        INSERT INTO list_totals AS t (organization_id, list, shard, n)
        SELECT organization_id, TG_TABLE_NAME, (txid_current() % 16)::smallint, -count(*)
        FROM changed GROUP BY organization_id ORDER BY organization_id
        ON CONFLICT (organization_id, list, shard) DO UPDATE SET n = t.n + excluded.n;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER contacts_count_inserted AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION count_list_rows();
CREATE TRIGGER contacts_count_deleted AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION count_list_rows();

-- A statement of several organizations takes their rows in one order (no deadlock between
-- two such statements). TRUNCATE fires no row trigger: it empties the table's totals.
CREATE FUNCTION forget_list_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM list_totals WHERE list = TG_TABLE_NAME;
    RETURN NULL;
END $$;

CREATE TRIGGER contacts_count_truncated AFTER TRUNCATE ON contacts
    FOR EACH STATEMENT EXECUTE FUNCTION forget_list_rows();

INSERT INTO list_totals (organization_id, list, shard, n)
SELECT organization_id, 'contacts', 0, count(*) FROM contacts GROUP BY organization_id;
