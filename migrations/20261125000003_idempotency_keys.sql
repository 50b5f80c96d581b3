-- `Idempotency-Key` on POST: the first request with a key takes it (a row without `status`),
-- runs, and stores its answer; a later request with the same key and the same request
-- (`request_hash`: method, path and query, body) gets that answer again for 24 hours. Keys are
-- per organization. The worker's ticker deletes expired rows in small batches.
CREATE TABLE idempotency_keys (
    organization_id  uuid        NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key              text        NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    request_hash     bytea       NOT NULL,
    -- Which request holds the key while it runs: only it stores or releases the answer.
    token            uuid        NOT NULL,
    status           smallint,
    body             bytea,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (organization_id, key)
);

CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
