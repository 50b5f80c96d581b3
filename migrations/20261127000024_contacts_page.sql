-- The contacts' rows as the API reads them (with their company), in functions so that their
-- plans are made once per connection and kept. As prepared statements, the rows by id and the
-- unfiltered page were planned again at every execution: for an array of ids, a LIMIT or an
-- OFFSET given as parameters, Postgres' generic plan assumes many rows, so it never chose it,
-- and planning a join among the contacts' ten indexes cost several times the execution
-- (pg_stat_statements, issue 28: 235 us of planning a created contact, 214 us a page, against
-- 20 to 54 us of execution; docs/benchmarks.md). The plans do not depend on the values: an
-- index on the contact's id for ids, the contacts_list index from the cursor (or the start) for
-- a page. A plan is made again after what invalidates it (an ANALYZE, a change of the tables).
-- The parameters' names clash with no column: `#variable_conflict error` keeps it so even on
-- a server set to prefer columns.

-- A contact as the API reads it.
CREATE VIEW contact_rows AS
SELECT c.id, c.organization_id, c.type AS kind, c.name, c.email, c.phone, c.avatar, c.country,
       c.language, c.position, c.source, c.external_id, c.channel_data, c.company_id,
       co.name AS company_name, co.domain AS company_domain, c.widget_guest_id,
       c.do_not_contact, c.is_anonymous, c.is_potential_client, c.messaging_a_opted_out,
       c.messaging_a_opted_out_at, c.created_at, c.updated_at
FROM contacts c LEFT JOIN companies co ON co.id = c.company_id;

-- The contacts of `org` among `ids`, in no particular order.
CREATE FUNCTION contacts_by_ids(org uuid, ids uuid[]) RETURNS SETOF contact_rows
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict error
BEGIN
    RETURN QUERY SELECT * FROM contact_rows r WHERE r.organization_id = org AND r.id = ANY(ids);
END
$$;

-- A page of the organization's contacts without a filter, after the cursor (`after_at`,
-- `after_id`; from the start when null) in the asked order, `lim` rows past `skip`.
CREATE FUNCTION contacts_page(
    org uuid, after_at timestamptz, after_id uuid, descending boolean, lim bigint, skip bigint)
RETURNS SETOF contact_rows
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict error
BEGIN
    IF descending THEN
        RETURN QUERY
        SELECT * FROM contact_rows r
        WHERE r.organization_id = org
          AND (r.created_at, r.id) < (coalesce(after_at, 'infinity'),
                                      coalesce(after_id, 'ffffffff-ffff-ffff-ffff-ffffffffffff'))
        ORDER BY r.created_at DESC, r.id DESC LIMIT lim OFFSET skip;
    ELSE
        RETURN QUERY
        SELECT * FROM contact_rows r
        WHERE r.organization_id = org
          AND (r.created_at, r.id) > (coalesce(after_at, '-infinity'),
                                      coalesce(after_id, '00000000-0000-0000-0000-000000000000'))
        ORDER BY r.created_at, r.id LIMIT lim OFFSET skip;
    END IF;
END
$$;
