-- A contact import's job holds it by a token: a job whose lease ran out (and was taken by
-- another) can no longer write; and an import tried too many times fails instead of looping.
ALTER TABLE contact_imports
    ADD COLUMN lease_token uuid,
    ADD COLUMN attempts smallint NOT NULL DEFAULT 0;
