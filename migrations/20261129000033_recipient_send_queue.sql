-- The recipient queue is named `recipient-send` (it was `recipient-delivery`; docs/glossary.md).
-- Stored actions follow, so lists and filters show one name (the code reads the former name
-- too). Pauses are not renamed: for this release they are stored under the former name, which
-- workers of both versions read, so that a pause holds through a rolling upgrade
-- (`QueueName::shared_name`).
UPDATE operator_actions SET queue = 'recipient-send' WHERE queue = 'recipient-delivery';
UPDATE operator_actions
   SET filter = jsonb_set(filter, '{queue}', '"recipient-send"')
 WHERE filter->>'queue' = 'recipient-delivery';
