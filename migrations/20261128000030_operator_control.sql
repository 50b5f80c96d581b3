-- Issue 30: operator control. Pauses of an organization's sending and of a queue, operator
-- keys, the operator actions (their log is the audit log; bulk ones carry their progress) and
-- the indexes that list dead work newest first across organizations (docs/operations.md,
-- "Operator control").

-- An organization whose sending an operator paused: its recipients are held as their jobs
-- come (`held` with no `hold_until`) until it is resumed.
ALTER TABLE organizations ADD COLUMN sending_paused_at timestamptz;
-- IF NOT EXISTS: built CONCURRENTLY first on a large table (docs/operations.md, "Upgrading:
-- operator control").
CREATE INDEX IF NOT EXISTS broadcast_recipients_paused ON broadcast_recipients (organization_id)
    WHERE status = 'held' AND hold_until IS NULL;

-- Queues an operator paused: the workers stop taking their jobs, which wait in Redis.
CREATE TABLE paused_queues (
    queue     text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    paused_by text NOT NULL
);

-- Operators' keys (`parley-api admin key create`), by SHA-256 of the secret.
CREATE TABLE operator_keys (
    id         uuid PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    key_hash   bytea NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    revoked_at timestamptz
);

-- Every operator action: who, when, what, how many. A retry or discard runs as a job of the
-- workers' ticker (a batch a tick) and keeps its progress here.
CREATE TABLE operator_actions (
    id              uuid PRIMARY KEY,
    actor           text NOT NULL,
    action          text NOT NULL CHECK (action IN ('retry', 'discard', 'pause_queue',
                        'resume_queue', 'pause_organization', 'resume_organization')),
    queue           text,
    organization_id uuid,
    -- What the action applies to: a dead-work filter and the ids it names, or nothing.
    filter          jsonb NOT NULL DEFAULT '{}',
    ids             uuid[] NOT NULL DEFAULT '{}',
    status          text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    -- Items the filter matched when the action was made (at most its limit), and done.
    matched         integer NOT NULL DEFAULT 0,
    done            integer NOT NULL DEFAULT 0,
    max_items       integer NOT NULL DEFAULT 0,
    -- How far a running action got (dead work is read newest first), and who runs it.
    cursor_at       timestamptz,
    cursor_id       uuid,
    lease_until     timestamptz,
    -- Batches that failed in a row; at MAX_FAILURES (worker/src/operator.rs) it is `failed`.
    failures        smallint NOT NULL DEFAULT 0,
    error           text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at     timestamptz
);
CREATE INDEX operator_actions_recent ON operator_actions (created_at, id);
CREATE INDEX operator_actions_running ON operator_actions (created_at) WHERE status = 'running';

-- Dead work: listed newest first, and taken out of the list when discarded (the record stays;
-- any way out of `failed` clears `discarded_at`). IF NOT EXISTS: a large deployment builds the
-- indexes CONCURRENTLY first (docs/operations.md, "Upgrading: operator control").
ALTER TABLE broadcast_recipients ADD COLUMN IF NOT EXISTS discarded_at timestamptz;
ALTER TABLE webhook_deliveries ADD COLUMN IF NOT EXISTS discarded_at timestamptz;
ALTER TABLE contact_imports ADD COLUMN IF NOT EXISTS discarded_at timestamptz;
CREATE INDEX IF NOT EXISTS broadcast_recipients_dead ON broadcast_recipients (failed_at, id)
    WHERE status = 'failed' AND discarded_at IS NULL;
CREATE INDEX IF NOT EXISTS broadcast_recipients_dead_by_org
    ON broadcast_recipients (organization_id, failed_at, id)
    WHERE status = 'failed' AND discarded_at IS NULL;
CREATE INDEX IF NOT EXISTS webhook_deliveries_dead ON webhook_deliveries (updated_at, id)
    WHERE status = 'failed' AND discarded_at IS NULL;
CREATE INDEX IF NOT EXISTS contact_imports_dead ON contact_imports (updated_at, id)
    WHERE status = 'failed' AND discarded_at IS NULL;
-- SLA checks that could not run: due long ago and still there.
CREATE INDEX IF NOT EXISTS sla_checks_by_due ON sla_checks (due_at, id);
