-- A collection's FAQs, filtered by featured, published or category or not at all: the list's
-- bounded count (up to 10,001 matches) also checks each FAQ's organization, which these
-- indexes did not hold, so the count read the table: 21 ms for page 1 of `isFeatured=true`
-- in a collection of 1,000,000 FAQs, against 3.9 at 10,000. Holding the organization makes
-- the count an index-only scan (2.4 ms).
--
-- Built in the migration's transaction, which locks the FAQs while the four indexes are
-- built (seconds at a million FAQs; FAQs are written by people, and tables this size rare).

DROP INDEX faqs_list;
CREATE INDEX faqs_list ON faqs (collection_id, created_at, id) INCLUDE (organization_id);
DROP INDEX faqs_featured;
CREATE INDEX faqs_featured ON faqs (collection_id, is_featured, created_at, id)
    INCLUDE (organization_id);
DROP INDEX faqs_published;
CREATE INDEX faqs_published ON faqs (collection_id, is_published, created_at, id)
    INCLUDE (organization_id);
DROP INDEX faqs_category;
CREATE INDEX faqs_category ON faqs (collection_id, category_id, created_at, id)
    INCLUDE (organization_id);
