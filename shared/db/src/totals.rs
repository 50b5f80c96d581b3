//! Totals kept per organization of the lists whose unfiltered page would otherwise count the
//! organization's rows on every request. Statement-level triggers (migration
//! `list_totals`) add each statement's inserted and deleted rows to one of
//! 16 rows per organization and list, the transaction's, so that concurrent writes of
//! one organization seldom wait on the same row; a read sums the shards.

use parley_types::ids::OrgId;
use sqlx::PgExecutor;

/// A list whose total is kept.
#[derive(Debug, Clone, Copy)]
pub enum List {
    Contacts,
}

impl List {
    /// Its name in `list_totals`: the table's.
    fn name(self) -> &'static str {
        match self {
            List::Contacts => "contacts",
        }
    }
}

/// The organization's rows in `list`.
pub async fn kept(db: impl PgExecutor<'_>, org: OrgId, list: List) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT coalesce(sum(n), 0)::bigint AS "n!" FROM list_totals
         WHERE organization_id = $1 AND list = $2"#,
        org.uuid(),
        list.name(),
    )
    .fetch_one(db)
    .await
}
