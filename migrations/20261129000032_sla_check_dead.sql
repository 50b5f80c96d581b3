-- When an SLA check counts as dead work (the operator's dead list, retry and discard): due
-- longer than `after_secs` ago and not enqueued since then (or never). One definition for the
-- list and the actions, so that an action touches only what the list calls dead. A SQL
-- function of one expression, which the planner inlines.
CREATE FUNCTION sla_check_dead(due_at timestamptz, enqueued_at timestamptz, after_secs float8)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT due_at < statement_timestamp() - make_interval(secs => after_secs)
        AND (enqueued_at IS NULL
             OR enqueued_at < statement_timestamp() - make_interval(secs => after_secs))
$$;
