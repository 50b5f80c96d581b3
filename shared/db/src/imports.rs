//! Contact imports: the import's row, and each batch of rows upserted by email or phone in one
//! transaction with the import's counters, so a job that dies resumes where the last batch
//! ended.

use parley_types::ids::{ImportId, OrgId};
use std::collections::HashMap;
use std::time::Duration;

use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use parley_domain::imports::{
    ContactImport, ImportFormat, ImportRow, ImportStatus, MAX_LISTED_ERRORS, RejectedRow,
};
use parley_types::time::Timestamp;

struct Row {
    id: Uuid,
    format: ImportFormat,
    file_id: Option<Uuid>,
    status: ImportStatus,
    rows: i32,
    created: i32,
    updated: i32,
    unchanged: i32,
    rejected: i32,
    errors: Json<Vec<RejectedRow>>,
    error_message: Option<String>,
    started_at: Option<Timestamp>,
    completed_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<Row> for ContactImport {
    fn from(r: Row) -> Self {
        ContactImport {
            id: r.id,
            format: r.format,
            file_id: r.file_id,
            status: r.status,
            rows: r.rows,
            created: r.created,
            updated: r.updated,
            unchanged: r.unchanged,
            rejected: r.rejected,
            errors: r.errors.0,
            error_message: r.error_message,
            started_at: r.started_at,
            completed_at: r.completed_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Records a new import; `data` is the file inline, or `download_url` where to fetch it.
pub async fn create(
    db: impl PgExecutor<'_>,
    org: OrgId,
    format: ImportFormat,
    data: Option<&[u8]>,
    file_id: Option<Uuid>,
    download_url: Option<&str>,
) -> Result<ContactImport, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        r#"INSERT INTO contact_imports (id, organization_id, format, data, file_id, download_url)
         VALUES ($1, $2, $3, $4, $5, $6)
         RETURNING id, format AS "format: ImportFormat", file_id,
            status AS "status: ImportStatus", rows, created, updated, unchanged, rejected,
            errors AS "errors: Json<Vec<RejectedRow>>", error_message, started_at, completed_at,
            created_at, updated_at"#,
        parley_types::ids::new_id(),
        org.uuid(),
        format.as_str(),
        data,
        file_id,
        download_url,
    )
    .fetch_one(db)
    .await?;
    Ok(row.into())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: ImportId,
) -> Result<Option<ContactImport>, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        r#"SELECT id, format AS "format: ImportFormat", file_id,
            status AS "status: ImportStatus", rows, created, updated, unchanged, rejected,
            errors AS "errors: Json<Vec<RejectedRow>>", error_message, started_at, completed_at,
            created_at, updated_at
         FROM contact_imports WHERE organization_id = $1 AND id = $2"#,
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(ContactImport::from))
}

/// What a job needs to run an import it now holds.
pub struct ImportJob {
    pub organization_id: Uuid,
    pub format: ImportFormat,
    pub data: Option<Vec<u8>>,
    pub download_url: Option<String>,
    /// Data rows already done by earlier jobs: skipped.
    pub rows_done: i32,
    /// What this job holds the import by: writes without it are refused.
    pub token: Uuid,
    /// Jobs that took the import, this one included.
    pub attempts: i16,
}

/// A job's writes to an import it no longer holds (its lease ran out and another job took it).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("the import's lease was lost to another job")]
    LeaseLost,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Takes an unfinished import for `lease` (renewed on a timer and by every batch); `None`
/// when it is finished, gone, held by a running job, or when `per_org` imports of its
/// organization (or the number its operator set, [`crate::org_limits`]) run already (it waits, queued: [`next_waiting`] or the reconciler starts it).
/// Two imports starting in the same instant may both pass the count: the bound is
/// `per_org`, give or take a simultaneous start.
pub async fn begin(
    db: impl PgExecutor<'_>,
    id: ImportId,
    lease: Duration,
    per_org: i64,
) -> Result<Option<ImportJob>, sqlx::Error> {
    let token = Uuid::now_v7();
    let row = sqlx::query!(
        r#"UPDATE contact_imports i SET status = 'running',
            started_at = coalesce(started_at, clock_timestamp()),
            lease_until = clock_timestamp() + make_interval(secs => $2),
            lease_token = $3, attempts = attempts + 1
         WHERE id = $1 AND status IN ('queued', 'running')
           AND (lease_until IS NULL OR lease_until < clock_timestamp())
           AND (SELECT count(*) FROM contact_imports o
                WHERE o.organization_id = i.organization_id AND o.status = 'running'
                  AND o.id <> i.id AND o.lease_until > clock_timestamp())
               < coalesce((SELECT l.imports FROM organization_limits l
                           WHERE l.organization_id = i.organization_id), $4::bigint)
         RETURNING organization_id, format AS "format: ImportFormat", data, download_url, rows,
            attempts"#,
        id.uuid(),
        lease.as_secs_f64(),
        token,
        per_org,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| ImportJob {
        organization_id: r.organization_id,
        format: r.format,
        data: r.data,
        download_url: r.download_url,
        rows_done: r.rows,
        token,
        attempts: r.attempts,
    }))
}

/// Renews the lease `token` holds; false when it no longer holds it.
pub async fn renew(
    db: impl PgExecutor<'_>,
    id: ImportId,
    token: Uuid,
    lease: Duration,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE contact_imports SET lease_until = clock_timestamp() + make_interval(secs => $3)
         WHERE id = $1 AND lease_token = $2 AND status = 'running'",
        id.uuid(),
        token,
        lease.as_secs_f64(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The organization's import that has waited longest for its turn (queued, held by no job),
/// marked enqueued now: the caller enqueues it.
pub async fn next_waiting(
    db: impl PgExecutor<'_>,
    org: OrgId,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE contact_imports SET enqueued_at = clock_timestamp()
         WHERE id = (
            SELECT id FROM contact_imports
            WHERE organization_id = $1 AND status = 'queued' AND lease_until IS NULL
            ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING id",
        org.uuid(),
    )
    .fetch_optional(db)
    .await
}

/// What one batch did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchCounts {
    pub created: i32,
    pub updated: i32,
    pub unchanged: i32,
}

/// A batch of rows as parsed: distinct keys (`folded` more rows were folded into them), the
/// rejected rows, and the data rows read from the file's start when it ends.
pub struct ImportBatch<'a> {
    pub rows: &'a [ImportRow],
    pub rejected: &'a [RejectedRow],
    pub folded: usize,
    pub rows_read: i64,
}

/// The fence of a batch: whether `token` still holds the running import, whose row stays
/// locked until the transaction ends, so only the job holding the import writes.
pub async fn fence_batch(
    tx: &mut PgConnection,
    import: ImportId,
    token: Uuid,
) -> Result<bool, sqlx::Error> {
    let held = sqlx::query_scalar!(
        "SELECT true FROM contact_imports
         WHERE id = $1 AND lease_token = $2 AND status = 'running' FOR UPDATE",
        import.uuid(),
        token,
    )
    .fetch_optional(&mut *tx)
    .await?;
    Ok(held.is_some())
}

/// The organization's contacts with one of these emails (lowercase): email -> id.
pub async fn contacts_by_email(
    db: impl PgExecutor<'_>,
    org: OrgId,
    emails: &[String],
) -> Result<HashMap<String, Uuid>, sqlx::Error> {
    Ok(sqlx::query!(
        r#"SELECT id, lower(email) AS "email!" FROM contacts
         WHERE organization_id = $1 AND lower(email) = ANY($2)"#,
        org.uuid(),
        emails,
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| (r.email, r.id))
    .collect())
}

/// The organization's oldest contact with each of these phones: phone -> id.
pub async fn contacts_by_phone(
    db: impl PgExecutor<'_>,
    org: OrgId,
    phones: &[String],
) -> Result<HashMap<String, Uuid>, sqlx::Error> {
    if phones.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(sqlx::query!(
        r#"SELECT DISTINCT ON (phone) id, phone AS "phone!" FROM contacts
         WHERE organization_id = $1 AND phone = ANY($2)
         ORDER BY phone, created_at, id"#,
        org.uuid(),
        phones,
    )
    .fetch_all(db)
    .await?
    .into_iter()
    .map(|r| (r.phone, r.id))
    .collect())
}

macro_rules! column {
    ($rows:expr, $field:ident) => {
        $rows
            .iter()
            .map(|r| r.$field.clone())
            .collect::<Vec<Option<String>>>()
    };
}

/// Gives matched contacts their rows' non-empty fields (an email differing only in case is no
/// change); returns how many changed.
pub async fn update_matched(
    db: impl PgExecutor<'_>,
    org: OrgId,
    matched: &[(ImportRow, Uuid)],
) -> Result<usize, sqlx::Error> {
    let rows: Vec<&ImportRow> = matched.iter().map(|(r, _)| r).collect();
    let ids: Vec<Uuid> = matched.iter().map(|(_, id)| *id).collect();
    Ok(sqlx::query_scalar!(
        r#"UPDATE contacts c SET
            name = coalesce(u.name, c.name),
            email = CASE WHEN lower(u.email) = lower(c.email) THEN c.email
                         ELSE coalesce(u.email, c.email) END,
            phone = coalesce(u.phone, c.phone), source = coalesce(u.source, c.source),
            country = coalesce(u.country, c.country), language = coalesce(u.language, c.language),
            position = coalesce(u.position, c.position),
            external_id = coalesce(u.external_id, c.external_id),
            timezone = coalesce(u.timezone, c.timezone)
         FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::text[], $11::text[])
              AS u(id, name, email, phone, source, country, language, position, external_id,
                   timezone)
         WHERE c.organization_id = $1 AND c.id = u.id
           AND (u.name IS DISTINCT FROM NULL AND u.name IS DISTINCT FROM c.name
             OR u.email IS DISTINCT FROM NULL AND lower(u.email) IS DISTINCT FROM lower(c.email)
             OR u.phone IS DISTINCT FROM NULL AND u.phone IS DISTINCT FROM c.phone
             OR u.source IS DISTINCT FROM NULL AND u.source IS DISTINCT FROM c.source
             OR u.country IS DISTINCT FROM NULL AND u.country IS DISTINCT FROM c.country
             OR u.language IS DISTINCT FROM NULL AND u.language IS DISTINCT FROM c.language
             OR u.position IS DISTINCT FROM NULL AND u.position IS DISTINCT FROM c.position
             OR u.external_id IS DISTINCT FROM NULL AND u.external_id IS DISTINCT FROM c.external_id
             OR u.timezone IS DISTINCT FROM NULL AND u.timezone IS DISTINCT FROM c.timezone)
         RETURNING c.id"#,
        org.uuid(),
        &ids,
        &column!(rows, name) as _,
        &column!(rows, email) as _,
        &column!(rows, phone) as _,
        &column!(rows, source) as _,
        &column!(rows, country) as _,
        &column!(rows, language) as _,
        &column!(rows, position) as _,
        &column!(rows, external_id) as _,
        &column!(rows, timezone) as _,
    )
    .fetch_all(db)
    .await?
    .len())
}

/// Creates a contact for each row (`source` `import` unless given); returns how many. A
/// contact created meanwhile with one of these emails (through the API) is left as it is: its
/// row counts as unchanged.
pub async fn insert_new(
    db: impl PgExecutor<'_>,
    org: OrgId,
    rows: &[ImportRow],
) -> Result<usize, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|_| parley_types::ids::new_id()).collect();
    Ok(sqlx::query_scalar!(
        r#"INSERT INTO contacts (id, organization_id, name, email, phone, source, country,
            language, position, external_id, timezone)
         SELECT u.id, $1, u.name, u.email, u.phone, coalesce(u.source, 'import'), u.country,
            u.language, u.position, u.external_id, u.timezone
         FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::text[], $11::text[])
              AS u(id, name, email, phone, source, country, language, position, external_id,
                   timezone)
         ON CONFLICT (organization_id, lower(email)) DO NOTHING
         RETURNING id"#,
        org.uuid(),
        &ids,
        &column!(rows, name) as _,
        &column!(rows, email) as _,
        &column!(rows, phone) as _,
        &column!(rows, source) as _,
        &column!(rows, country) as _,
        &column!(rows, language) as _,
        &column!(rows, position) as _,
        &column!(rows, external_id) as _,
        &column!(rows, timezone) as _,
    )
    .fetch_all(db)
    .await?
    .len())
}

/// Adds a batch's counts and rejected rows (the first [`MAX_LISTED_ERRORS`] kept) to the
/// import, with the data rows read so far, and renews its lease.
pub async fn record_batch(
    db: impl PgExecutor<'_>,
    import: ImportId,
    counts: BatchCounts,
    rejected: &[RejectedRow],
    rows_read: i64,
    lease: Duration,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE contact_imports SET rows = $2, created = created + $3, updated = updated + $4,
            unchanged = unchanged + $5, rejected = rejected + $6,
            errors = CASE WHEN jsonb_array_length(errors) >= $8 THEN errors
                          ELSE (SELECT coalesce(jsonb_agg(e), '[]') FROM (
                                  SELECT e FROM jsonb_array_elements(errors || $7) e LIMIT $8) x)
                     END,
            lease_until = clock_timestamp() + make_interval(secs => $9)
         WHERE id = $1",
        import.uuid(),
        i32::try_from(rows_read).unwrap_or(i32::MAX),
        counts.created,
        counts.updated,
        counts.unchanged,
        rejected.len() as i32,
        Json(rejected) as _,
        MAX_LISTED_ERRORS as i64,
        lease.as_secs_f64(),
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Ends an import held by `token`: `completed`, or `failed` with why (the file could not be
/// read). Its data is dropped.
pub async fn finish(
    db: impl PgExecutor<'_>,
    id: ImportId,
    token: Uuid,
    failure: Option<&str>,
) -> Result<(), ImportError> {
    let done = sqlx::query!(
        "UPDATE contact_imports SET status = CASE WHEN $3::text IS NULL THEN 'completed' ELSE 'failed' END,
            error_message = $3, completed_at = clock_timestamp(), lease_until = NULL,
            lease_token = NULL, data = NULL, download_url = NULL
         WHERE id = $1 AND lease_token = $2 AND status = 'running'",
        id.uuid(),
        token,
        failure,
    )
    .execute(db)
    .await?;
    if done.rows_affected() == 0 {
        return Err(ImportError::LeaseLost);
    }
    Ok(())
}

/// Unfinished imports whose job is lost: enqueued longer ago than `after` and held by no
/// job; marked enqueued now, at most `limit`.
pub async fn stale(
    db: impl PgExecutor<'_>,
    after: Duration,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE contact_imports SET enqueued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM contact_imports
            WHERE status IN ('queued', 'running')
              AND enqueued_at < statement_timestamp() - make_interval(secs => $1)
              AND (lease_until IS NULL OR lease_until < statement_timestamp())
            ORDER BY enqueued_at LIMIT $2)
         RETURNING id",
        after.as_secs_f64(),
        limit,
    )
    .fetch_all(db)
    .await
}
