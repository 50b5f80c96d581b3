-- Conversations with their messages, and tickets with their replies and activities.

-- Per-organization counters behind reference numbers: taking the next number locks the
-- organization's row for the rest of the transaction, so numbers increase without gaps.
CREATE TABLE organization_counters (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    value           bigint NOT NULL,
    PRIMARY KEY (organization_id, name)
);

CREATE TABLE conversations (
    id                      uuid PRIMARY KEY,
    organization_id         uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    reference_number        bigint NOT NULL,
    contact_id              uuid NOT NULL,
    category_id             uuid,
    integration_id          text,
    channel                 text NOT NULL
                            CHECK (channel IN ('messaging_a', 'email', 'social_a', 'social_b')),
    status                  text NOT NULL DEFAULT 'active'
                            CHECK (status IN ('active', 'pending', 'snoozed', 'closed')),
    priority                text NOT NULL DEFAULT 'medium'
                            CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    subject                 text,
    summary                 text,
    language                text,
    channel_data            text,
    guest_mood              text,
    deal_value              numeric(14, 2),
    deal_currency           text,
    deal_description        text,
    deal_closed             boolean NOT NULL DEFAULT false,
    is_deal_related         boolean NOT NULL DEFAULT false,
    ai_handled              boolean NOT NULL DEFAULT false,
    ai_paused_at            timestamptz,
    is_read                 boolean NOT NULL DEFAULT false,
    is_spam                 boolean NOT NULL DEFAULT false,
    is_starred              boolean NOT NULL DEFAULT false,
    handover_status         text NOT NULL DEFAULT 'none'
                            CHECK (handover_status IN ('none', 'requested', 'accepted', 'completed', 'timed_out')),
    handover_reason         text CHECK (handover_reason IN
                            ('guest_request', 'ai_escalation', 'agent_request', 'sentiment', 'other')),
    handover_requested_by   text CHECK (handover_requested_by IN ('guest', 'ai', 'agent', 'system')),
    handover_notes          text,
    handover_requested_at   timestamptz,
    handover_accepted_at    timestamptz,
    handover_completed_at   timestamptz,
    handover_timed_out_at   timestamptz,
    estimated_wait_seconds  integer,
    handover_queue_position integer,
    message_count           integer NOT NULL DEFAULT 0,
    last_message_at         timestamptz,
    last_customer_message_at timestamptz,
    snooze_until            timestamptz,
    snoozed_at              timestamptz,
    closed_at               timestamptz,
    created_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id),
    UNIQUE (organization_id, reference_number),
    -- Deleting a contact deletes its conversations (its data goes with it).
    CONSTRAINT conversations_contact_fkey FOREIGN KEY (organization_id, contact_id)
        REFERENCES contacts (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT conversations_category_fkey FOREIGN KEY (organization_id, category_id)
        REFERENCES conversation_categories (organization_id, id) ON DELETE SET NULL (category_id)
);
CREATE INDEX conversations_list ON conversations (organization_id, created_at, id);
CREATE INDEX conversations_status ON conversations (organization_id, status, created_at, id);
CREATE INDEX conversations_channel ON conversations (organization_id, channel, created_at, id);
CREATE INDEX conversations_priority ON conversations (organization_id, priority, created_at, id);
CREATE INDEX conversations_contact ON conversations (contact_id, created_at, id);
CREATE INDEX conversations_category ON conversations (category_id, created_at, id);
CREATE INDEX conversations_starred ON conversations (organization_id, created_at, id) WHERE is_starred;
-- The ticker wakes snoozed conversations when their time comes.
CREATE INDEX conversations_snoozed ON conversations (snooze_until) WHERE status = 'snoozed';
SELECT manage_updated_at('conversations');

CREATE TABLE conversation_assignees (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    user_id         uuid NOT NULL,
    assigned_by     uuid,
    assigned_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (conversation_id, user_id),
    CONSTRAINT conversation_assignees_conversation_fkey FOREIGN KEY (organization_id, conversation_id)
        REFERENCES conversations (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT conversation_assignees_user_fkey FOREIGN KEY (organization_id, user_id)
        REFERENCES users (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT conversation_assignees_by_fkey FOREIGN KEY (organization_id, assigned_by)
        REFERENCES users (organization_id, id) ON DELETE SET NULL (assigned_by)
);
CREATE INDEX conversation_assignees_user ON conversation_assignees (user_id, conversation_id);
SELECT manage_updated_at('conversation_assignees');

CREATE TABLE conversation_teams (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    team_id         uuid NOT NULL,
    assigned_by     uuid,
    assigned_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (conversation_id, team_id),
    CONSTRAINT conversation_teams_conversation_fkey FOREIGN KEY (organization_id, conversation_id)
        REFERENCES conversations (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT conversation_teams_team_fkey FOREIGN KEY (organization_id, team_id)
        REFERENCES teams (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT conversation_teams_by_fkey FOREIGN KEY (organization_id, assigned_by)
        REFERENCES users (organization_id, id) ON DELETE SET NULL (assigned_by)
);
CREATE INDEX conversation_teams_team ON conversation_teams (team_id, conversation_id);
SELECT manage_updated_at('conversation_teams');

CREATE TABLE conversation_tags (
    organization_id uuid NOT NULL,
    conversation_id uuid NOT NULL,
    tag_id          uuid NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (conversation_id, tag_id),
    CONSTRAINT conversation_tags_conversation_fkey FOREIGN KEY (organization_id, conversation_id)
        REFERENCES conversations (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT conversation_tags_tag_fkey FOREIGN KEY (organization_id, tag_id)
        REFERENCES tags (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX conversation_tags_tag ON conversation_tags (tag_id, conversation_id);
SELECT manage_updated_at('conversation_tags');

CREATE TABLE messages (
    id                      uuid PRIMARY KEY,
    organization_id         uuid NOT NULL,
    conversation_id         uuid NOT NULL,
    content                 text,
    type                    text NOT NULL DEFAULT 'text'
                            CHECK (type IN ('text', 'image', 'video', 'audio', 'file', 'template', 'location')),
    -- `contact`: inbound from the customer; `user`, `ai`, `system`: outbound.
    sender_type             text NOT NULL CHECK (sender_type IN ('contact', 'user', 'ai', 'system')),
    sender_id               uuid,
    external_id             text,
    email_message_id        text,
    source_node_id          text,
    suggested_replies       text,
    should_request_feedback boolean NOT NULL DEFAULT false,
    template_context        integer[] NOT NULL DEFAULT '{}',
    delivered_at            timestamptz,
    created_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id),
    CONSTRAINT messages_conversation_fkey FOREIGN KEY (organization_id, conversation_id)
        REFERENCES conversations (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX messages_conversation ON messages (conversation_id, created_at, id);
SELECT manage_updated_at('messages');

CREATE TABLE message_attachments (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL,
    message_id        uuid NOT NULL,
    file_id           uuid NOT NULL,
    type              text NOT NULL CHECK (type IN ('image', 'video', 'audio', 'document', 'other')),
    caption           text,
    external_media_id text,
    thumbnail_url     text,
    duration          integer,
    metadata          jsonb NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT message_attachments_message_fkey FOREIGN KEY (organization_id, message_id)
        REFERENCES messages (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT message_attachments_file_fkey FOREIGN KEY (organization_id, file_id)
        REFERENCES files (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX message_attachments_message ON message_attachments (message_id);
CREATE INDEX message_attachments_file ON message_attachments (file_id);
SELECT manage_updated_at('message_attachments');

CREATE TABLE tickets (
    id                uuid PRIMARY KEY,
    organization_id   uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    reference_number  bigint NOT NULL,
    subject           text NOT NULL,
    description       text,
    customer_id       uuid,
    category_id       uuid,
    team_id           uuid,
    conversation_id   uuid,
    email_message_id  text,
    external_id       text,
    resolution_notes  text,
    access_token      text NOT NULL,
    channel_data      text,
    channel           text NOT NULL DEFAULT 'email'
                      CHECK (channel IN ('messaging_a', 'email', 'social_a', 'social_b')),
    status            text NOT NULL DEFAULT 'open'
                      CHECK (status IN ('open', 'pending', 'on_hold', 'resolved', 'closed')),
    priority          text NOT NULL DEFAULT 'medium'
                      CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    estimated_hours   numeric(10, 2),
    actual_hours      numeric(10, 2),
    reply_count       integer NOT NULL DEFAULT 0,
    email_thread_ids  text[] NOT NULL DEFAULT '{}',
    due_date          timestamptz,
    first_response_at timestamptz,
    last_reply_at     timestamptz,
    resolved_at       timestamptz,
    closed_at         timestamptz,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (organization_id, id),
    UNIQUE (organization_id, reference_number),
    CONSTRAINT tickets_customer_fkey FOREIGN KEY (organization_id, customer_id)
        REFERENCES contacts (organization_id, id) ON DELETE SET NULL (customer_id),
    CONSTRAINT tickets_category_fkey FOREIGN KEY (organization_id, category_id)
        REFERENCES conversation_categories (organization_id, id) ON DELETE SET NULL (category_id),
    CONSTRAINT tickets_team_fkey FOREIGN KEY (organization_id, team_id)
        REFERENCES teams (organization_id, id) ON DELETE SET NULL (team_id),
    CONSTRAINT tickets_conversation_fkey FOREIGN KEY (organization_id, conversation_id)
        REFERENCES conversations (organization_id, id) ON DELETE SET NULL (conversation_id)
);
CREATE INDEX tickets_list ON tickets (organization_id, created_at, id);
CREATE INDEX tickets_status ON tickets (organization_id, status, created_at, id);
CREATE INDEX tickets_priority ON tickets (organization_id, priority, created_at, id);
CREATE INDEX tickets_channel ON tickets (organization_id, channel, created_at, id);
CREATE INDEX tickets_customer ON tickets (customer_id, created_at, id);
CREATE INDEX tickets_team ON tickets (team_id, created_at, id);
CREATE INDEX tickets_category ON tickets (category_id, created_at, id);
CREATE INDEX tickets_conversation ON tickets (conversation_id);
SELECT manage_updated_at('tickets');

CREATE TABLE ticket_assignees (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    ticket_id       uuid NOT NULL,
    user_id         uuid NOT NULL,
    assigned_by     uuid,
    assigned_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (ticket_id, user_id),
    CONSTRAINT ticket_assignees_ticket_fkey FOREIGN KEY (organization_id, ticket_id)
        REFERENCES tickets (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT ticket_assignees_user_fkey FOREIGN KEY (organization_id, user_id)
        REFERENCES users (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT ticket_assignees_by_fkey FOREIGN KEY (organization_id, assigned_by)
        REFERENCES users (organization_id, id) ON DELETE SET NULL (assigned_by)
);
CREATE INDEX ticket_assignees_user ON ticket_assignees (user_id, ticket_id);
SELECT manage_updated_at('ticket_assignees');

CREATE TABLE ticket_tags (
    organization_id uuid NOT NULL,
    ticket_id       uuid NOT NULL,
    tag_id          uuid NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (ticket_id, tag_id),
    CONSTRAINT ticket_tags_ticket_fkey FOREIGN KEY (organization_id, ticket_id)
        REFERENCES tickets (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT ticket_tags_tag_fkey FOREIGN KEY (organization_id, tag_id)
        REFERENCES tags (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX ticket_tags_tag ON ticket_tags (tag_id, ticket_id);
SELECT manage_updated_at('ticket_tags');

CREATE TABLE ticket_replies (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    ticket_id       uuid NOT NULL,
    content         text NOT NULL,
    -- `agent` (a user of the organization) or `customer` (the ticket's contact).
    author_type     text NOT NULL CHECK (author_type IN ('agent', 'customer')),
    author_id       uuid,
    is_internal     boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ticket_replies_ticket_fkey FOREIGN KEY (organization_id, ticket_id)
        REFERENCES tickets (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX ticket_replies_ticket ON ticket_replies (ticket_id, created_at, id);
SELECT manage_updated_at('ticket_replies');

CREATE TABLE ticket_activities (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    ticket_id       uuid NOT NULL,
    -- Who did it: an API key (its name), a user, the customer, or the service itself.
    actor           text NOT NULL,
    actor_id        uuid,
    actor_type      text NOT NULL CHECK (actor_type IN ('api_key', 'user', 'contact', 'system')),
    type            text NOT NULL,
    description     text NOT NULL,
    metadata        jsonb NOT NULL DEFAULT '{}',
    old_value       text,
    new_value       text,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    CONSTRAINT ticket_activities_ticket_fkey FOREIGN KEY (organization_id, ticket_id)
        REFERENCES tickets (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX ticket_activities_ticket ON ticket_activities (ticket_id, created_at, id);
SELECT manage_updated_at('ticket_activities');

CREATE TABLE ticket_attachments (
    id              uuid PRIMARY KEY,
    organization_id uuid NOT NULL,
    ticket_id       uuid NOT NULL,
    file_id         uuid NOT NULL,
    type            text NOT NULL CHECK (type IN ('image', 'video', 'audio', 'document', 'other')),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (ticket_id, file_id),
    CONSTRAINT ticket_attachments_ticket_fkey FOREIGN KEY (organization_id, ticket_id)
        REFERENCES tickets (organization_id, id) ON DELETE CASCADE,
    CONSTRAINT ticket_attachments_file_fkey FOREIGN KEY (organization_id, file_id)
        REFERENCES files (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX ticket_attachments_file ON ticket_attachments (file_id);
SELECT manage_updated_at('ticket_attachments');
