-- API processes keep the keys they have seen in memory (api/src/key_cache.rs) and drop one when
-- its id is notified on `parley_api_key_revoked`. Every change of a key row notifies, whoever
-- makes it: a revocation through the API, a hand-written UPDATE, a key deleted with its
-- organization. An UPDATE that changes nothing (revoking a revoked key) does not.
CREATE FUNCTION notify_api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('parley_api_key_revoked', OLD.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER api_keys_changed AFTER UPDATE ON api_keys FOR EACH ROW
    WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION notify_api_key_changed();
CREATE TRIGGER api_keys_deleted AFTER DELETE ON api_keys FOR EACH ROW
    EXECUTE FUNCTION notify_api_key_changed();

-- An organization holds at most 1,000 active keys (parley_db::api_keys::MAX_ACTIVE_KEYS); a
-- creation counts them through this index, whatever number it revoked before.
CREATE INDEX api_keys_active ON api_keys (organization_id) WHERE revoked_at IS NULL;
