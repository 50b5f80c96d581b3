-- A contact's messages (GET /contacts/{id}/messages, issue 29) are read by the contact: the
-- recipients' unique index leads with the contact instead of the broadcast. The same pairs are
-- unique, so it still refuses a contact twice in a broadcast, and no index is added to what
-- each recipient writes; reads by broadcast use broadcast_recipients_list. On a large table
-- this builds the index under a lock that holds writes to the recipients until it is built
-- (docs/operations.md: build it beforehand with CONCURRENTLY; IF NOT EXISTS then skips it).
CREATE UNIQUE INDEX IF NOT EXISTS broadcast_recipients_contact ON broadcast_recipients (contact_id, broadcast_id);
ALTER TABLE broadcast_recipients DROP CONSTRAINT broadcast_recipients_broadcast_id_contact_id_key;
