-- Work the reconciler had to enqueue again because no outcome was recorded for it. Past a
-- ceiling the recipient or delivery is given up (failed), so nothing is sent forever when its
-- outcome cannot be written. Counted when the reconciler re-enqueues, never on the hot path.
ALTER TABLE broadcast_recipients ADD COLUMN requeues smallint NOT NULL DEFAULT 0;
ALTER TABLE webhook_deliveries ADD COLUMN requeues smallint NOT NULL DEFAULT 0;
