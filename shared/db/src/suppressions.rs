//! The suppression ledger's statements. What a send reads of it is in
//! `sending::send_job::pending_for_send`.

use std::collections::{HashMap, HashSet};

use parley_domain::Channel;
use parley_domain::suppressions::{
    MAX_SOFT_BOUNCE_DAYS, Suppression, SuppressionFilter, SuppressionReason, SuppressionSource,
};
use parley_types::ids::{ContactId, OrgId, RecipientId, SuppressionId};
use parley_types::list::{Cursor, Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

/// An entry's columns as [`Suppression`] reads them.
const COLUMNS: &str = "s.*, s.address_hash IS NOT NULL AS erased";

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
         RETURNING id, organization_id, email, phone, contact_id, false AS "erased!",
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
    // An address finds its entries and an erased contact's entries of it, by its hash.
    if let Some(email) = &f.email {
        let email = email.as_str().to_owned();
        qb.push(" AND (s.email = lower(")
            .push_bind(email.clone())
            .push(") OR s.address_hash = address_hash(")
            .push_bind(org)
            .push(", ")
            .push_bind(email)
            .push("))");
    }
    if let Some(phone) = &f.phone {
        let phone = phone.as_str().to_owned();
        qb.push(" AND (s.phone = ")
            .push_bind(phone.clone())
            .push(" OR s.address_hash = address_hash(")
            .push_bind(org)
            .push(", ")
            .push_bind(phone)
            .push("))");
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
        select: format!("SELECT {COLUMNS} FROM suppressions s").into(),
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
    let mut qb = QueryBuilder::new(format!("SELECT {COLUMNS} FROM suppressions s"));
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

/// The email and phone of the contacts named by organization and id; a deleted contact is
/// left out.
pub async fn addresses(
    conn: &mut PgConnection,
    contacts: &[(OrgId, ContactId)],
) -> Result<HashMap<ContactId, (Option<String>, Option<String>)>, sqlx::Error> {
    let orgs: Vec<OrgId> = contacts.iter().map(|(o, _)| *o).collect();
    let ids: Vec<ContactId> = contacts.iter().map(|(_, c)| *c).collect();
    let rows = sqlx::query!(
        "SELECT c.id, c.email, c.phone
         FROM unnest($1::uuid[], $2::uuid[]) AS u(org, id)
         JOIN contacts c ON c.organization_id = u.org AND c.id = u.id",
        &orgs as _,
        &ids as _,
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (ContactId::from(r.id), (r.email, r.phone)))
        .collect())
}

/// The advisory locks soft bounces are counted under: unrelated addresses may share one (and
/// wait on each other for the rest of a receipts transaction), in exchange for a bound on the
/// locks a call holds.
pub const SOFT_BOUNCE_LOCKS: i32 = 64;

/// One message's soft bounce, by what an entry for it would name ([`Subject::key`]).
///
/// [`Subject::key`]: parley_domain::suppressions::Subject::key
#[derive(Debug, Clone)]
pub struct SoftBounce {
    pub organization_id: OrgId,
    pub recipient_id: RecipientId,
    pub channel: Channel,
    pub subject: String,
    pub at: Timestamp,
}

/// Records soft bounces (one per message; a time in the future counts as now) and returns
/// the (organization, channel, subject) that reached their organization's `softBounceLimit`
/// with them. The subjects' buckets (one of [`SOFT_BOUNCE_LOCKS`] by the subject's hash) are
/// locked for the transaction first, in one order, so two calls bouncing the same address
/// count each other's bounces; a call takes at most that many advisory locks (Postgres' lock
/// table is shared and small), whatever its number of addresses.
pub async fn record_soft_bounces(
    conn: &mut PgConnection,
    bounces: &[SoftBounce],
) -> Result<HashSet<(OrgId, Channel, String)>, sqlx::Error> {
    if bounces.is_empty() {
        return Ok(HashSet::new());
    }
    let orgs: Vec<OrgId> = bounces.iter().map(|b| b.organization_id).collect();
    let recipients: Vec<RecipientId> = bounces.iter().map(|b| b.recipient_id).collect();
    let channels: Vec<&str> = bounces.iter().map(|b| b.channel.as_str()).collect();
    let subjects: Vec<&str> = bounces.iter().map(|b| b.subject.as_str()).collect();
    let times: Vec<Timestamp> = bounces.iter().map(|b| b.at).collect();
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtext('parley.soft_bounces'), k.bucket)
         FROM (SELECT DISTINCT
                   abs(hashtext(u.org::text || ' ' || u.channel || ' ' || u.subject) % $4) AS bucket
               FROM unnest($1::uuid[], $2::text[], $3::text[]) AS u(org, channel, subject)) k
         ORDER BY k.bucket",
        &orgs as _,
        &channels as _,
        &subjects as _,
        SOFT_BOUNCE_LOCKS,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO soft_bounces (recipient_id, organization_id, channel, subject, occurred_at)
         SELECT u.recipient, u.org, u.channel, u.subject, least(u.at, statement_timestamp())
         FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::timestamptz[])
              AS u(recipient, org, channel, subject, at)
         ON CONFLICT (recipient_id) DO NOTHING",
        &recipients as _,
        &orgs as _,
        &channels as _,
        &subjects as _,
        &times as _,
    )
    .execute(&mut *conn)
    .await?;
    // Each subject counted once, up to the limit only, by the index of the subject's bounces.
    let reached = sqlx::query!(
        r#"SELECT u.org AS "org!", u.channel AS "channel!: Channel", u.subject AS "subject!"
         FROM (SELECT DISTINCT * FROM unnest($1::uuid[], $2::text[], $3::text[])
               AS d(org, channel, subject)) u
         JOIN organizations o ON o.id = u.org
         WHERE (SELECT count(*) FROM (
                    SELECT 1 FROM soft_bounces s
                    WHERE s.organization_id = u.org AND s.channel = u.channel
                      AND s.subject = u.subject
                      AND s.occurred_at > statement_timestamp()
                          - make_interval(days => (o.soft_bounce_limit->>'days')::int)
                    LIMIT (o.soft_bounce_limit->>'count')::int) n)
               >= (o.soft_bounce_limit->>'count')::int"#,
        &orgs as _,
        &channels as _,
        &subjects as _,
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(reached
        .into_iter()
        .map(|r| (OrgId::from(r.org), r.channel, r.subject))
        .collect())
}

/// Deletes up to `limit` soft bounces older than the longest window an organization may set.
pub async fn sweep_soft_bounces(db: impl PgExecutor<'_>, limit: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM soft_bounces WHERE recipient_id = ANY (ARRAY(
            SELECT recipient_id FROM soft_bounces
            WHERE occurred_at < statement_timestamp() - make_interval(days => $1)
            LIMIT $2))",
        i32::from(MAX_SOFT_BOUNCE_DAYS),
        limit,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}
