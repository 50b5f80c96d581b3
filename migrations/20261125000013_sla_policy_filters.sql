-- The SLA policies list filters by `isActive`, `priority` and `channel`, like the other lists
-- whose filters each have an index (ops/bench/lists: `isActive=false` over 100,000 policies
-- read them all).
CREATE INDEX sla_policies_by_active ON sla_policies (organization_id, is_active, created_at, id);
CREATE INDEX sla_policies_by_priority ON sla_policies (organization_id, priority, created_at, id);
CREATE INDEX sla_policies_by_channel ON sla_policies (organization_id, channel, created_at, id);
