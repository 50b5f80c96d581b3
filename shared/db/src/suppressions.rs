//! The suppression ledger's statements. What a send reads of it is in
//! `sending::send_job::pending_for_send`.

use parley_domain::Channel;
use parley_domain::suppressions::{
    Suppression, SuppressionFilter, SuppressionReason, SuppressionSource,
};
use parley_types::ids::{OrgId, SuppressionId};
use parley_types::list::{Cursor, Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

/// Writes `entries` (addresses lowercased by Postgres' `lower`, as the send compares them);
/// one already in the ledger (the same address or contact, channel and reason) is left as it
/// is. Returns the entries written.
pub async fn add(
    db: impl PgExecutor<'_>,
    entries: impl IntoIterator<Item = Suppression>,
) -> Result<Vec<Suppression>, sqlx::Error> {
    let entries: Vec<Suppression> = entries.into_iter().collect();
    let ids: Vec<Uuid> = entries.iter().map(|e| e.id).collect();
    let orgs: Vec<Uuid> = entries.iter().map(|e| e.organization_id).collect();
    let emails: Vec<Option<&str>> = entries.iter().map(|e| e.email.as_deref()).collect();
    let phones: Vec<Option<&str>> = entries.iter().map(|e| e.phone.as_deref()).collect();
    let contacts: Vec<Option<Uuid>> = entries.iter().map(|e| e.contact_id).collect();
    let channels: Vec<Option<&str>> = entries
        .iter()
        .map(|e| e.channel.map(|c| c.as_str()))
        .collect();
    let reasons: Vec<&str> = entries.iter().map(|e| e.reason.as_str()).collect();
    let sources: Vec<&str> = entries.iter().map(|e| e.source.as_str()).collect();
    let times: Vec<Timestamp> = entries.iter().map(|e| e.created_at).collect();
    sqlx::query_as!(
        Suppression,
        r#"INSERT INTO suppressions
            (id, organization_id, email, phone, contact_id, channel, reason, source, created_at)
         SELECT u.id, u.org, lower(u.email), u.phone, u.contact, u.channel, u.reason, u.source,
                u.at
         FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::uuid[], $6::text[],
                     $7::text[], $8::text[], $9::timestamptz[])
              AS u(id, org, email, phone, contact, channel, reason, source, at)
         ON CONFLICT (organization_id, (coalesce(email, phone, contact_id::text)),
                      (coalesce(channel, '')), reason) DO NOTHING
         RETURNING id, organization_id, email, phone, contact_id,
                   channel AS "channel: Channel", reason AS "reason: SuppressionReason",
                   source AS "source: SuppressionSource", created_at"#,
        &ids,
        &orgs,
        &emails as &[Option<&str>],
        &phones as &[Option<&str>],
        &contacts as &[Option<Uuid>],
        &channels as &[Option<&str>],
        &reasons as &[&str],
        &sources as &[&str],
        &times as _,
    )
    .fetch_all(db)
    .await
}

/// Removes an entry; `false` when the organization has none of that id.
pub async fn remove(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: SuppressionId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM suppressions WHERE organization_id = $1 AND id = $2",
        org as _,
        id as _,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &SuppressionFilter) {
    qb.push(" WHERE s.organization_id = ").push_bind(org);
    if let Some(reason) = f.reason {
        qb.push(" AND s.reason = ").push_bind(reason.as_str());
    }
    if let Some(channel) = f.channel {
        qb.push(" AND s.channel = ").push_bind(channel.as_str());
    }
    if let Some(email) = &f.email {
        qb.push(" AND s.email = lower(")
            .push_bind(email.as_str().to_owned())
            .push(")");
    }
    if let Some(phone) = &f.phone {
        qb.push(" AND s.phone = ")
            .push_bind(phone.as_str().to_owned());
    }
    if let Some(contact) = f.contact_id {
        qb.push(" AND s.contact_id = ").push_bind(contact);
    }
}

/// A page of the organization's entries.
pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &SuppressionFilter,
    page: &PageRequest,
) -> Result<Page<Suppression>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT s.* FROM suppressions s".into(),
        count_from: "FROM suppressions s",
        alias: "s",
    };
    super::page(pool, q, |qb| push_filter(qb, org, f), page).await
}

/// Up to `n` of the organization's entries after `after`, oldest first: the export's next
/// batch, read by the list's index whatever the ledger's size.
pub async fn batch_after(
    pool: &PgPool,
    org: OrgId,
    f: &SuppressionFilter,
    after: Option<Cursor>,
    n: i64,
) -> Result<Vec<Suppression>, sqlx::Error> {
    let mut qb = QueryBuilder::new("SELECT s.* FROM suppressions s");
    push_filter(&mut qb, org, f);
    if let Some(c) = after {
        qb.push(" AND (s.created_at, s.id) > (")
            .push_bind(c.created_at)
            .push(", ")
            .push_bind(c.id)
            .push(")");
    }
    qb.push(" ORDER BY s.created_at, s.id LIMIT ").push_bind(n);
    qb.build_query_as().fetch_all(pool).await
}
