-- One suppression ledger per organization: who is not sent to, on which channel, and why
-- (docs/api.md, Suppressions). An entry names an email address (lowercase), a phone number
-- (E.164) or a contact; `channel` NULL suppresses on every channel.
CREATE TABLE suppressions (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email           text CHECK (email = lower(email)),
    phone           text,
    contact_id      uuid,
    channel         text CHECK (channel IN ('messaging_a', 'email', 'social_a', 'social_b')),
    reason          text NOT NULL CHECK (reason IN
                        ('unsubscribed', 'hard_bounce', 'complaint', 'soft_bounce_limit', 'manual')),
    source          text NOT NULL CHECK (source IN ('api', 'receipt', 'unsubscribe', 'import')),
    created_at      timestamptz NOT NULL,
    CHECK (num_nonnulls(email, phone, contact_id) = 1),
    CONSTRAINT suppressions_contact_fkey FOREIGN KEY (organization_id, contact_id)
        REFERENCES contacts (organization_id, id) ON DELETE CASCADE
);

-- One entry per address (or contact), channel and reason: adding it again keeps the first,
-- and a bounce recorded after an unsubscribe is an entry of its own (transactional messages
-- obey the one and not the other).
CREATE UNIQUE INDEX suppressions_entry_key ON suppressions
    (organization_id, (coalesce(email, phone, contact_id::text)), (coalesce(channel, '')), reason);
-- A send looks its recipients up by each of the three.
CREATE INDEX suppressions_email_idx ON suppressions (organization_id, email) WHERE email IS NOT NULL;
CREATE INDEX suppressions_phone_idx ON suppressions (organization_id, phone) WHERE phone IS NOT NULL;
CREATE INDEX suppressions_contact_idx ON suppressions (organization_id, contact_id)
    WHERE contact_id IS NOT NULL;
-- Lists and the export, by (created_at, id); by reason too.
CREATE INDEX suppressions_list_idx ON suppressions (organization_id, created_at, id);
CREATE INDEX suppressions_reason_idx ON suppressions (organization_id, reason, created_at, id);
