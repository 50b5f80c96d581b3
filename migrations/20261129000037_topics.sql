-- Subscription topics (issue 45, docs/api.md "Topics"): an organization's topics, each
-- contact's unsubscribes from them, and the topic a broadcast names.

-- The foreign key on broadcasts is added NOT VALID (every existing row's topic is NULL: nothing to
-- check), so it locks the table for an instant; the partial index reads it once. Waiting long for
-- either lock would queue the send path behind this migration.
SET LOCAL lock_timeout = '10s';

CREATE TABLE topics (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    description     text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id)
);
CREATE UNIQUE INDEX topics_name_key ON topics (organization_id, lower(name));
CREATE INDEX topics_list ON topics (organization_id, created_at, id);
SELECT manage_updated_at('topics');

-- A contact gets every topic's messages until it unsubscribes from the topic: a row here, with
-- who made it (`api`, `unsubscribe`: a link or its page, `import`). Subscribing again deletes it.
CREATE TABLE topic_unsubscribes (
    organization_id uuid NOT NULL,
    contact_id      uuid NOT NULL,
    topic_id        uuid NOT NULL,
    source          text NOT NULL CHECK (source IN ('api', 'unsubscribe', 'import')),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (contact_id, topic_id),
    CONSTRAINT topic_unsubscribes_contact_fkey FOREIGN KEY (organization_id, contact_id)
        REFERENCES contacts (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT topic_unsubscribes_topic_fkey FOREIGN KEY (organization_id, topic_id)
        REFERENCES topics (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX topic_unsubscribes_topic ON topic_unsubscribes (topic_id);

ALTER TABLE broadcasts
    ADD COLUMN topic_id uuid,
    ADD CONSTRAINT broadcasts_topic_fkey FOREIGN KEY (organization_id, topic_id)
        REFERENCES topics (organization_id, id) NOT VALID;
CREATE INDEX broadcasts_topic ON broadcasts (topic_id) WHERE topic_id IS NOT NULL;
