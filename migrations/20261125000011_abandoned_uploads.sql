-- Retention of abandoned uploads: files still pending an hour after their upload URL expired
-- are removed with their objects by the API, oldest first.
CREATE INDEX files_pending ON files (created_at) WHERE status = 'pending';
