-- A contact's data on request (issue 45, docs/api.md "A contact's data"): erasing a contact keeps
-- each of its addresses in the suppression ledger as a one-way hash (`address_hash`), which the
-- send compares with every recipient's addresses, so that a later import bringing the address
-- back does not make the person a recipient again.

-- The ALTER below is instant once it has its lock; waiting long for it would queue the send path
-- behind this migration. The indexes read the ledger, the leads and the contacts once each,
-- blocking their writes meanwhile (docs/operations.md, Upgrading: bounces and complaints).
SET LOCAL lock_timeout = '10s';

-- The hash an address is kept by: SHA-256 of the organization's id and the address, lowercase
-- (emails are compared lowercase; a number in E.164 has no letters). The organization's id salts
-- it, so that one organization's hashes say nothing of another's (a pseudonym: whoever holds
-- the database can test a guessed address). The only definition: the send, the preview, the
-- ledger's filters and the erasure all call it. STABLE as `convert_to` is, so that Postgres
-- inlines it into the statements that call it.
CREATE FUNCTION address_hash(org uuid, address text) RETURNS bytea
    LANGUAGE sql STABLE STRICT PARALLEL SAFE
    AS $$ SELECT sha256(convert_to(org::text || ' ' || lower(address), 'UTF8')) $$;

-- An entry names an address, a phone number, a contact or an erased address's hash. The new
-- constraints are NOT VALID: every existing row met the stricter ones they replace, and a
-- validation would read the whole ledger under this statement's exclusive lock.
ALTER TABLE suppressions
    ADD COLUMN address_hash bytea,
    ADD CONSTRAINT suppressions_address_hash_check CHECK (length(address_hash) = 32) NOT VALID,
    DROP CONSTRAINT suppressions_check,
    ADD CONSTRAINT suppressions_subject_check
        CHECK (num_nonnulls(email, phone, contact_id, address_hash) = 1) NOT VALID,
    DROP CONSTRAINT suppressions_reason_check,
    ADD CONSTRAINT suppressions_reason_check CHECK (reason IN
        ('unsubscribed', 'hard_bounce', 'complaint', 'soft_bounce_limit', 'manual', 'erased'))
        NOT VALID;

-- One entry per hash, channel and reason (as `suppressions_entry_key` for the others, whose
-- key is NULL for these rows).
CREATE UNIQUE INDEX suppressions_hash_key ON suppressions
    (organization_id, address_hash, (coalesce(channel, '')), reason)
    WHERE address_hash IS NOT NULL;
-- The send looks its recipients' hashes up by this one: by the key above, the planner also
-- matched the reasons a message obeys, one descent per hash and reason (18 a recipient, 54
-- buffers against 9; docs/benchmarks.md, Suppression ledger).
CREATE INDEX suppressions_hash_idx ON suppressions (organization_id, address_hash)
    WHERE address_hash IS NOT NULL;

-- The leads converted into a contact, or holding one of its addresses: the contact's export
-- lists the first, its erasure deletes both.
CREATE INDEX leads_contact ON leads (organization_id, contact_id, created_at, id)
    WHERE contact_id IS NOT NULL;
CREATE INDEX leads_email ON leads (organization_id, lower(email)) WHERE email IS NOT NULL;
CREATE INDEX leads_phone ON leads (organization_id, phone) WHERE phone IS NOT NULL;

-- An erasure keeps an address that another contact has (its email, phone or external id):
-- each is looked up by its own index; the external id had none.
CREATE INDEX IF NOT EXISTS contacts_external_id ON contacts (organization_id, lower(external_id))
    WHERE external_id IS NOT NULL;
