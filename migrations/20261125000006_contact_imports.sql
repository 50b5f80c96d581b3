-- Issue 14: contact imports. An import is a CSV or NDJSON file (inline, or an uploaded file the
-- worker downloads through a presigned URL) run as a job: rows are upserted by email or phone
-- in batches, each batch committed with the import's counters and the number of rows done, so
-- a job that dies resumes after the last batch without counting anything twice.
CREATE TABLE contact_imports (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    format          text NOT NULL CHECK (format IN ('csv', 'ndjson')),
    -- The file inline (at most the API's body limit), or where to download it.
    data            bytea,
    file_id         uuid,
    download_url    text,
    status          text NOT NULL DEFAULT 'queued'
                    CHECK (status IN ('queued', 'running', 'completed', 'failed')),
    rows            integer NOT NULL DEFAULT 0,
    created         integer NOT NULL DEFAULT 0,
    updated         integer NOT NULL DEFAULT 0,
    unchanged       integer NOT NULL DEFAULT 0,
    rejected        integer NOT NULL DEFAULT 0,
    -- The first rejected rows: [{row, reason}], at most 1,000.
    errors          jsonb NOT NULL DEFAULT '[]',
    error_message   text,
    -- A running job holds the import until then, renewing it at every batch.
    lease_until     timestamptz,
    enqueued_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    started_at      timestamptz,
    completed_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id)
);
CREATE INDEX contact_imports_unfinished ON contact_imports (enqueued_at)
    WHERE status IN ('queued', 'running');
SELECT manage_updated_at('contact_imports');
