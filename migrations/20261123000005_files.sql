-- Files in object storage. Message and ticket attachments refer to them; the upload flow
-- (presigned URL, completion) writes them.

CREATE TABLE files (
    id                    uuid PRIMARY KEY,
    organization_id       uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id               uuid,
    guest_session_id      text,
    filename              text NOT NULL,
    file_type             text NOT NULL
                          CHECK (file_type IN ('image', 'video', 'audio', 'document', 'other')),
    content_type          text NOT NULL,
    file_size             bigint NOT NULL CHECK (file_size > 0),
    file_hash             text,
    storage_key           text NOT NULL UNIQUE,
    -- `pending` until the client's upload is confirmed (the object exists in the bucket).
    status                text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'uploaded')),
    uploaded_at           timestamptz,
    thumbnail_url         text,
    thumbnail_storage_key text,
    thumbnail_status      text,
    thumbnail_error       text,
    thumbnail_size        bigint,
    metadata              jsonb NOT NULL DEFAULT '{}',
    created_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at            timestamptz NOT NULL DEFAULT clock_timestamp(),
    deleted_at            timestamptz,
    UNIQUE (organization_id, id),
    CONSTRAINT files_user_fkey FOREIGN KEY (organization_id, user_id)
        REFERENCES users (organization_id, id) ON DELETE SET NULL (user_id)
);
CREATE INDEX files_list ON files (organization_id, created_at, id);
SELECT manage_updated_at('files');
