//! Postgres errors as the rules' [`AppError`]: which constraint stands for which field, and
//! which failures pass.

use parley_types::error::AppError;

/// Which field a unique index or foreign key stands for, so a clash names the field.
const CONSTRAINT_FIELDS: &[(&str, &str)] = &[
    ("contacts_email_key", "email"),
    ("users_email_key", "email"),
    ("tags_name_key", "name"),
    ("companies_name_key", "name"),
    ("teams_name_key", "name"),
    ("segments_name_key", "name"),
    ("faq_collections_slug_key", "slug"),
    ("faq_categories_name_key", "name"),
    ("faqs_slug_key", "slug"),
    ("conversation_categories_slug_key", "slug"),
    ("message_attributes_key_key", "key"),
    ("contacts_company_fkey", "companyId"),
    ("contact_tags_tag_fkey", "tagIds"),
    ("lead_tags_tag_fkey", "tagIds"),
    ("leads_assignee_fkey", "assigneeId"),
    ("teams_created_by_fkey", "createdBy"),
    ("team_members_user_fkey", "userIds"),
    ("faqs_category_fkey", "categoryId"),
    ("suppressions_contact_fkey", "contactId"),
    ("topics_name_key", "name"),
];

/// Foreign keys that refuse to delete a record still in use: a 409, not a 422.
const IN_USE: &[(&str, &str)] = &[
    (
        "broadcasts_template_fkey",
        "the template is used by broadcasts",
    ),
    (
        "broadcast_variants_template_fkey",
        "the template is used by broadcasts",
    ),
    (
        "broadcasts_segment_fkey",
        "the segment is the audience of broadcasts",
    ),
    ("broadcasts_topic_fkey", "the topic is named by broadcasts"),
];

fn constraint_field(constraint: Option<&str>) -> Option<&'static str> {
    let constraint = constraint?;
    CONSTRAINT_FIELDS
        .iter()
        .find(|(name, _)| *name == constraint)
        .map(|(_, field)| *field)
}

/// What a database error means to a client: a missing row is 404, a unique clash 409 naming
/// the field, a foreign key 422 (or 409 for a record still in use), a transient failure 503;
/// anything else is internal.
pub fn app_error(err: sqlx::Error) -> AppError {
    {
        match &err {
            sqlx::Error::RowNotFound => AppError::NotFound,
            _ if is_transient_error(&err) => AppError::ServiceUnavailable(err.to_string()),
            sqlx::Error::Database(db) => {
                let field = constraint_field(db.constraint());
                match db.code().as_deref() {
                    // unique_violation
                    Some("23505") => AppError::Conflict {
                        field: field.map(str::to_owned),
                        message: match field {
                            Some(f) => format!("another record already has this {f}"),
                            None => "the record clashes with an existing one".to_owned(),
                        },
                    },
                    Some("23503")
                        if let Some((_, why)) =
                            IN_USE.iter().find(|(c, _)| Some(*c) == db.constraint()) =>
                    {
                        AppError::Conflict {
                            field: None,
                            message: (*why).to_owned(),
                        }
                    }
                    // foreign_key_violation: an id that is not in the organization
                    Some("23503") => AppError::validation(
                        field.unwrap_or("id"),
                        "not_found",
                        "refers to a record that does not exist in this organization",
                    ),
                    // A value Postgres cannot hold reached it unchecked (too long, out of
                    // range, NUL). Every input is checked before; should one slip through,
                    // the client still gets a 4xx and the log an error to fix. Other data
                    // errors are the service's own: 500.
                    Some("22001" | "22003" | "22007" | "22008" | "22021" | "22P05") => {
                        tracing::error!(error = %err, "a value reached Postgres unchecked");
                        AppError::validation(
                            "body",
                            "invalid_value",
                            "a value does not fit where it is stored",
                        )
                    }
                    _ => AppError::Internal(err.into()),
                }
            }
            _ => AppError::Internal(err.into()),
        }
    }
}

/// Whether the same statement may succeed when tried again: the connection or the pool
/// failed, or Postgres answered with a [transient](is_transient) error.
pub fn is_transient_error(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| is_transient(&code)),
        _ => false,
    }
}

/// Postgres errors that pass: the same request may succeed when retried.
pub fn is_transient(code: &str) -> bool {
    matches!(
        code,
        // serialization_failure, deadlock_detected, read_only_sql_transaction (a replica, or
        // a primary being demoted), lock_not_available (lock timeout), query_canceled
        // (statement timeout)
        "40001" | "40P01" | "25006" | "55P03" | "57014"
        // admin_shutdown, crash_shutdown, cannot_connect_now
        | "57P01" | "57P02" | "57P03"
    )
        // connection_exception, insufficient_resources (too many connections, out of memory,
        // disk full)
        || code.starts_with("08")
        || code.starts_with("53")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_postgres_errors_are_transient() {
        for code in [
            "40001", "40P01", "25006", "57014", "57P01", "08006", "53300",
        ] {
            assert!(is_transient(code), "{code}");
        }
        for code in ["23505", "22021", "42P01", "XX000"] {
            assert!(!is_transient(code), "{code}");
        }
    }

    #[test]
    fn every_constraint_maps_to_a_field() {
        assert_eq!(constraint_field(Some("contacts_email_key")), Some("email"));
        assert_eq!(constraint_field(Some("unknown")), None);
    }
}
