-- One running recovery per webhook, held by the database (two recover calls at once cannot
-- both start one).
CREATE UNIQUE INDEX webhook_recoveries_one_running ON webhook_recoveries (webhook_id)
    WHERE status = 'running';
