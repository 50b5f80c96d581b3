//! Integration tests over HTTP against the real Postgres and Redis. Each test makes its own
//! organization (and Redis prefix), so they run in parallel.

mod ab_tests;
mod auth;
mod broadcasts;
mod claims;
mod cluster;
mod contacts;
mod conversations;
mod errors;
mod fairness;
mod faq;
mod files;
mod hostile;
mod idempotency;
mod import_bodies;
mod imports;
mod leads;
mod lists;
mod observability;
mod openapi;
mod operator;
mod outcome_writes;
mod pooler;
mod resources;
mod scopes;
mod segments;
mod send_rules;
mod sla;
mod suppressions;
mod tenancy;
mod tickets;
mod topics;
mod unsubscribe;
mod validation;
mod webhooks;
mod worker;
