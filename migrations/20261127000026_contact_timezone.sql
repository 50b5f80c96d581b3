-- A contact's time zone: an IANA name, checked by the API and the imports (issue 29: the zone
-- that local-time sending and quiet hours are to count in).
-- NOT VALID: every existing row holds NULL, so there is nothing to check, and a validation
-- would read the whole table under this statement's exclusive lock. New writes are checked.
ALTER TABLE contacts ADD COLUMN timezone text,
    ADD CONSTRAINT contacts_timezone_length CHECK (length(timezone) <= 64) NOT VALID;

-- The contacts' rows as the API reads them, with the new column last (a view keeps its
-- columns' order; contacts_by_ids and contacts_page return its rows and follow it).
CREATE OR REPLACE VIEW contact_rows AS
SELECT c.id, c.organization_id, c.type AS kind, c.name, c.email, c.phone, c.avatar, c.country,
       c.language, c.position, c.source, c.external_id, c.channel_data, c.company_id,
       co.name AS company_name, co.domain AS company_domain, c.widget_guest_id,
       c.do_not_contact, c.is_anonymous, c.is_potential_client, c.messaging_a_opted_out,
       c.messaging_a_opted_out_at, c.created_at, c.updated_at, c.timezone
FROM contacts c LEFT JOIN companies co ON co.id = c.company_id;
