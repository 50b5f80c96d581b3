-- Issue 14: segments, saved contact filters a broadcast may name as its audience instead of
-- `contactIds`. The dispatcher resolves one when the broadcast starts sending (the filter is
-- copied onto the broadcast then) and walks the matching contacts by id, a slice per
-- transaction, as it walks `contact_ids`.
CREATE TABLE segments (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    filter          jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id)
);
CREATE UNIQUE INDEX segments_name_key ON segments (organization_id, lower(name));
CREATE INDEX segments_list ON segments (organization_id, created_at, id);
SELECT manage_updated_at('segments');

ALTER TABLE broadcasts
    ADD COLUMN segment_id uuid,
    -- The segment's filter as the fan-out started: later changes to the segment do not move
    -- an audience half written.
    ADD COLUMN audience_filter jsonb,
    -- Segment fan-out progress: recipients exist for the matching contacts up to this id.
    ADD COLUMN fanout_after uuid,
    ADD CONSTRAINT broadcasts_segment_fkey FOREIGN KEY (organization_id, segment_id)
        REFERENCES segments (organization_id, id);
CREATE INDEX broadcasts_segment ON broadcasts (segment_id) WHERE segment_id IS NOT NULL;
