-- One index entry per delivery in the relay's indexes by webhook. Deliveries of one webhook due
-- at the same time (a relay batch makes them so) shared a posting list, and a scan marks a
-- posting list dead only once every delivery in it is dead: until then each pass walked again
-- the entries of every delivery taken from it (a few hundred, measured by the test
-- `taking_due_deliveries_reads_what_it_takes_not_the_backlog`). Entries of their own are
-- marked dead one by one, by the first scan that finds them dead to every transaction.
ALTER INDEX webhook_deliveries_waiting SET (deduplicate_items = off);
ALTER INDEX webhook_deliveries_in_job SET (deduplicate_items = off);
-- Entries already merged stay merged until the index is rebuilt.
REINDEX INDEX webhook_deliveries_waiting;
REINDEX INDEX webhook_deliveries_in_job;
