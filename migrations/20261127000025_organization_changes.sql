-- API processes keep the organizations they have read in memory beside the keys
-- (api/src/key_cache.rs) and drop one when `organization:<id>` is notified on the keys'
-- channel. Every change of an organization row notifies, whoever makes it (PATCH
-- /organization, a hand-written UPDATE, a deletion); an UPDATE that changes nothing does not.
CREATE FUNCTION notify_organization_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('parley_api_key_revoked', 'organization:' || OLD.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER organizations_changed AFTER UPDATE ON organizations FOR EACH ROW
    WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION notify_organization_changed();
CREATE TRIGGER organizations_deleted AFTER DELETE ON organizations FOR EACH ROW
    EXECUTE FUNCTION notify_organization_changed();
