-- Issue 25: tenant isolation.
-- A broadcast's priority: `high` (transactional) lanes are taken before any bulk lane
-- (docs/jobs.md, Fair share).
ALTER TABLE broadcasts ADD COLUMN priority text NOT NULL DEFAULT 'normal'
    CHECK (priority IN ('normal', 'high'));

-- Migrations run in a transaction, so these indexes are not built CONCURRENTLY: writes to
-- the tables wait while they build (seconds at a million rows).
-- Segment filters on country and language are answered through an index, so a bounded count
-- stops after its bound instead of reading every contact of the organization.
CREATE INDEX contacts_country ON contacts (organization_id, country) WHERE country IS NOT NULL;
CREATE INDEX contacts_language ON contacts (organization_id, language) WHERE language IS NOT NULL;

-- Running imports per organization are counted through this index.
CREATE INDEX contact_imports_running ON contact_imports (organization_id)
    WHERE status = 'running';

-- Sending broadcasts per organization are counted through this index (PARLEY_BROADCASTS_PER_ORG).
CREATE INDEX broadcasts_sending ON broadcasts (organization_id) WHERE status = 'sending';

-- The SLA scheduler takes due checks organization by organization (a skip scan of this index).
CREATE INDEX sla_checks_due_by_org ON sla_checks (organization_id, due_at) WHERE enqueued_at IS NULL;
