-- The recipient queue is named `recipient-send` (it was `recipient-delivery`; docs/glossary.md).
-- Stored names follow, so lists and filters show one name. The code still reads the former
-- name for a release, so a row an older process writes during a rolling upgrade is read too.
UPDATE paused_queues SET queue = 'recipient-send' WHERE queue = 'recipient-delivery';
UPDATE operator_actions SET queue = 'recipient-send' WHERE queue = 'recipient-delivery';
UPDATE operator_actions
   SET filter = jsonb_set(filter, '{queue}', '"recipient-send"')
 WHERE filter->>'queue' = 'recipient-delivery';
