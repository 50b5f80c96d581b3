-- SLA policies, the SLA state of each conversation and ticket, the checks that fall due at
-- its warning times and deadlines, and hourly figures for SLA statistics.

CREATE TABLE sla_policies (
    id                        uuid PRIMARY KEY,
    organization_id           uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name                      text NOT NULL,
    description               text,
    -- NULL matches any priority (or channel); a policy that names one is more specific.
    priority                  text CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    channel                   text CHECK (channel IN ('messaging_a', 'email', 'social_a', 'social_b')),
    first_response_seconds    integer NOT NULL CHECK (first_response_seconds > 0),
    next_response_seconds     integer NOT NULL CHECK (next_response_seconds > 0),
    resolution_seconds        integer NOT NULL CHECK (resolution_seconds > 0),
    business_hours_only       boolean NOT NULL,
    warning_threshold_seconds integer NOT NULL CHECK (warning_threshold_seconds >= 0),
    is_active                 boolean NOT NULL DEFAULT true,
    created_at                timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at                timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id)
);
CREATE INDEX sla_policies_list ON sla_policies (organization_id, created_at, id);
CREATE INDEX sla_policies_active ON sla_policies (organization_id, created_at) WHERE is_active;
SELECT manage_updated_at('sla_policies');

-- One per conversation or ticket that a policy applied to. The policy's targets are copied,
-- so editing a policy changes no running clock. A target is met when it is achieved before
-- its deadline, and breached (at most once, with the time the breach was recorded) when not.
CREATE TABLE sla_states (
    id                         uuid PRIMARY KEY,
    organization_id            uuid NOT NULL,
    subject_type               text NOT NULL CHECK (subject_type IN ('conversation', 'ticket')),
    conversation_id            uuid UNIQUE,
    ticket_id                  uuid UNIQUE,
    sla_policy_id              uuid,
    priority                   text NOT NULL CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    business_hours_only        boolean NOT NULL,
    warning_threshold_seconds  integer NOT NULL,
    first_response_seconds     integer NOT NULL,
    next_response_seconds      integer NOT NULL,
    resolution_seconds         integer NOT NULL,
    first_response_deadline    timestamptz NOT NULL,
    first_response_at          timestamptz,
    first_response_warned_at   timestamptz,
    first_response_breached_at timestamptz,
    -- A next-response cycle opens with a customer message after the first response and
    -- closes with the next agent reply; the deadline is that of the open cycle.
    next_response_deadline     timestamptz,
    next_response_started_at   timestamptz,
    next_response_at           timestamptz,
    next_response_count        integer NOT NULL DEFAULT 0,
    next_response_total_seconds bigint NOT NULL DEFAULT 0,
    next_response_warned_at    timestamptz,
    next_response_breached_at  timestamptz,
    resolution_deadline        timestamptz NOT NULL,
    resolved_at                timestamptz,
    resolution_warned_at       timestamptz,
    resolution_breached_at     timestamptz,
    paused_at                  timestamptz,
    total_paused_seconds       bigint NOT NULL DEFAULT 0,
    created_at                 timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at                 timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id),
    CHECK ((subject_type = 'conversation') = (conversation_id IS NOT NULL)),
    CHECK ((subject_type = 'ticket') = (ticket_id IS NOT NULL)),
    CONSTRAINT sla_states_conversation_fkey FOREIGN KEY (organization_id, conversation_id)
        REFERENCES conversations (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT sla_states_ticket_fkey FOREIGN KEY (organization_id, ticket_id)
        REFERENCES tickets (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT sla_states_policy_fkey FOREIGN KEY (organization_id, sla_policy_id)
        REFERENCES sla_policies (organization_id, id) ON DELETE SET NULL (sla_policy_id)
);
CREATE INDEX sla_states_created ON sla_states (organization_id, created_at);
SELECT manage_updated_at('sla_states');

-- Every warning time and deadline still to watch: the ticker moves due rows into the
-- `sla-check` queue (marking them enqueued) in bounded batches; a check job deletes the rows
-- it has run. A moved deadline moves its row (and makes it unenqueued again); a met target
-- or a paused clock deletes its rows.
CREATE TABLE sla_checks (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    sla_state_id    uuid NOT NULL REFERENCES sla_states (id) ON DELETE CASCADE,
    target          text NOT NULL CHECK (target IN ('first_response', 'next_response', 'resolution')),
    kind            text NOT NULL CHECK (kind IN ('warning', 'deadline')),
    due_at          timestamptz NOT NULL,
    enqueued_at     timestamptz,
    UNIQUE (sla_state_id, target, kind)
);
CREATE INDEX sla_checks_due ON sla_checks (due_at) WHERE enqueued_at IS NULL;
CREATE INDEX sla_checks_enqueued ON sla_checks (enqueued_at) WHERE enqueued_at IS NOT NULL;

-- Where a state stands overall: breached if any target was, met once resolved without a
-- breach, in progress otherwise.
CREATE FUNCTION sla_outcome(s sla_states) RETURNS text IMMUTABLE LANGUAGE sql AS $$
    SELECT CASE
        WHEN s.first_response_breached_at IS NOT NULL OR s.next_response_breached_at IS NOT NULL
             OR s.resolution_breached_at IS NOT NULL THEN 'breached'
        WHEN s.resolved_at IS NOT NULL THEN 'met'
        ELSE 'in_progress' END
$$;

-- A state's share of the statistics: the columns of `sla_stats_hourly`.
CREATE TYPE sla_tally AS (
    total         integer,
    met           integer,
    breached      integer,
    in_progress   integer,
    fr_met        integer,
    fr_breached   integer,
    fr_count      integer,
    fr_seconds    bigint,
    nr_met        integer,
    nr_breached   integer,
    nr_count      integer,
    nr_seconds    bigint,
    res_met       integer,
    res_breached  integer,
    res_count     integer,
    res_seconds   bigint
);

CREATE FUNCTION sla_tally(s sla_states) RETURNS sla_tally IMMUTABLE LANGUAGE sql AS $$
    SELECT ROW(
        1,
        (sla_outcome(s) = 'met')::int,
        (sla_outcome(s) = 'breached')::int,
        (sla_outcome(s) = 'in_progress')::int,
        (s.first_response_at IS NOT NULL AND s.first_response_breached_at IS NULL)::int,
        (s.first_response_breached_at IS NOT NULL)::int,
        (s.first_response_at IS NOT NULL)::int,
        coalesce(extract(epoch FROM s.first_response_at - s.created_at)::bigint, 0),
        (s.next_response_count > 0 AND s.next_response_breached_at IS NULL)::int,
        (s.next_response_breached_at IS NOT NULL)::int,
        s.next_response_count,
        s.next_response_total_seconds,
        (s.resolved_at IS NOT NULL AND s.resolution_breached_at IS NULL)::int,
        (s.resolution_breached_at IS NOT NULL)::int,
        (s.resolved_at IS NOT NULL)::int,
        coalesce(extract(epoch FROM s.resolved_at - s.created_at)::bigint, 0)
    )::sla_tally
$$;

-- SLA states summed by organization, the hour they started, and priority; sharded by session
-- like the broadcast counters, so workers recording breaches at once do not queue on a row.
-- Statistics read whole hours here and only the partial hours at the edges of a range from
-- the states themselves.
CREATE TABLE sla_stats_hourly (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    hour            timestamptz NOT NULL,
    priority        text NOT NULL,
    shard           smallint NOT NULL,
    total           integer NOT NULL DEFAULT 0,
    met             integer NOT NULL DEFAULT 0,
    breached        integer NOT NULL DEFAULT 0,
    in_progress     integer NOT NULL DEFAULT 0,
    fr_met          integer NOT NULL DEFAULT 0,
    fr_breached     integer NOT NULL DEFAULT 0,
    fr_count        integer NOT NULL DEFAULT 0,
    fr_seconds      bigint NOT NULL DEFAULT 0,
    nr_met          integer NOT NULL DEFAULT 0,
    nr_breached     integer NOT NULL DEFAULT 0,
    nr_count        integer NOT NULL DEFAULT 0,
    nr_seconds      bigint NOT NULL DEFAULT 0,
    res_met         integer NOT NULL DEFAULT 0,
    res_breached    integer NOT NULL DEFAULT 0,
    res_count       integer NOT NULL DEFAULT 0,
    res_seconds     bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, hour, priority, shard)
);

-- Adds `sign` times the tallies of `states` to the hourly figures.
CREATE FUNCTION sla_stats_apply(states sla_states[], sign integer) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO sla_stats_hourly AS h (organization_id, hour, priority, shard, total, met,
        breached, in_progress, fr_met, fr_breached, fr_count, fr_seconds, nr_met, nr_breached,
        nr_count, nr_seconds, res_met, res_breached, res_count, res_seconds)
    SELECT organization_id, date_trunc('hour', created_at, 'UTC'), priority, counter_shard(),
        sign * sum((t).total), sign * sum((t).met), sign * sum((t).breached),
        sign * sum((t).in_progress), sign * sum((t).fr_met), sign * sum((t).fr_breached),
        sign * sum((t).fr_count), sign * sum((t).fr_seconds), sign * sum((t).nr_met),
        sign * sum((t).nr_breached), sign * sum((t).nr_count), sign * sum((t).nr_seconds),
        sign * sum((t).res_met), sign * sum((t).res_breached), sign * sum((t).res_count),
        sign * sum((t).res_seconds)
    FROM (SELECT s.organization_id, s.created_at, s.priority, sla_tally(s) AS t
          FROM unnest(states) s) x
    GROUP BY 1, 2, 3
    ORDER BY 1, 2, 3
    ON CONFLICT (organization_id, hour, priority, shard) DO UPDATE SET
        total = h.total + excluded.total,
        met = h.met + excluded.met,
        breached = h.breached + excluded.breached,
        in_progress = h.in_progress + excluded.in_progress,
        fr_met = h.fr_met + excluded.fr_met,
        fr_breached = h.fr_breached + excluded.fr_breached,
        fr_count = h.fr_count + excluded.fr_count,
        fr_seconds = h.fr_seconds + excluded.fr_seconds,
        nr_met = h.nr_met + excluded.nr_met,
        nr_breached = h.nr_breached + excluded.nr_breached,
        nr_count = h.nr_count + excluded.nr_count,
        nr_seconds = h.nr_seconds + excluded.nr_seconds,
        res_met = h.res_met + excluded.res_met,
        res_breached = h.res_breached + excluded.res_breached,
        res_count = h.res_count + excluded.res_count,
        res_seconds = h.res_seconds + excluded.res_seconds
$$;

CREATE FUNCTION sla_states_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sla_stats_apply(ARRAY(SELECT n::sla_states FROM new_rows n), 1);
    RETURN NULL;
END
$$;

CREATE FUNCTION sla_states_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only rows whose figures changed count: warnings, pauses and moved deadlines do not.
    PERFORM sla_stats_apply(ARRAY(
        SELECT o::sla_states FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE (sla_tally(n::sla_states), n.priority)
              IS DISTINCT FROM (sla_tally(o::sla_states), o.priority)), -1);
    PERFORM sla_stats_apply(ARRAY(
        SELECT n::sla_states FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE (sla_tally(n::sla_states), n.priority)
              IS DISTINCT FROM (sla_tally(o::sla_states), o.priority)), 1);
    RETURN NULL;
END
$$;

CREATE FUNCTION sla_states_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM sla_stats_apply(ARRAY(SELECT o::sla_states FROM old_rows o), -1);
    RETURN NULL;
END
$$;

CREATE TRIGGER sla_states_tally_insert AFTER INSERT ON sla_states
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sla_states_inserted();
CREATE TRIGGER sla_states_tally_update AFTER UPDATE ON sla_states
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sla_states_updated();
CREATE TRIGGER sla_states_tally_delete AFTER DELETE ON sla_states
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sla_states_deleted();
