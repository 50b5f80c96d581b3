-- A broadcast's number of listed contacts, kept beside the list. Read from the list itself
-- (`cardinality(contact_ids)`), every read of the broadcast decompressed the whole list:
-- 1.6 MB at 100,000 contacts, 8 to 22 ms of Postgres a `GET /broadcasts/{id}` (and as much
-- per broadcast of a list page), however little of it the answer shows.
ALTER TABLE broadcasts ADD COLUMN contact_count integer NOT NULL
    GENERATED ALWAYS AS (cardinality(contact_ids)) STORED;
