-- Indexes behind the list filters the first migration left without one.
CREATE INDEX users_active ON users (organization_id, is_active, created_at, id);
CREATE INDEX users_agent_status ON users (organization_id, agent_status, created_at, id);
CREATE INDEX templates_category ON templates (organization_id, category, created_at, id);
CREATE INDEX templates_language ON templates (organization_id, language, created_at, id);
CREATE INDEX faqs_published ON faqs (collection_id, is_published, created_at, id);
CREATE INDEX faqs_featured ON faqs (collection_id, is_featured, created_at, id);
CREATE INDEX message_attributes_active ON message_attributes (organization_id, is_active, created_at, id);
