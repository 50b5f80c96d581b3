//! Delivery receipts from channel providers: each moves a recipient forward only. A receipt
//! that arrives before its recipient's outcome is written (so before its message id is known)
//! is kept in `early_receipts` and applied by the worker's ticker once the id is known.

use std::collections::{HashMap, HashSet};

use sqlx::PgConnection;
use uuid::Uuid;

use parley_domain::Channel;
use parley_domain::broadcasts::RecipientStatus;
use parley_types::time::Timestamp;

/// One delivery receipt.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub message_id: String,
    pub status: RecipientStatus,
    pub at: Timestamp,
    pub error_code: Option<String>,
}

/// What a call did with its receipts.
#[derive(Debug, Default)]
pub struct ReceiptsOutcome {
    /// The status each applied receipt moved a recipient to.
    pub changed: Vec<RecipientStatus>,
    /// Receipts for messages not recorded yet, kept to be applied when they are.
    pub deferred: usize,
}

/// Applies receipts of `channel`: each recipient moves forward only (a `read` before its
/// `delivered` counts both; a `delivered` after `read` changes nothing). Receipts whose message
/// is not recorded yet are kept for the ticker ([`apply_early`]). In the caller's transaction.
pub async fn apply(
    conn: &mut PgConnection,
    channel: Channel,
    receipts: &[Receipt],
) -> Result<ReceiptsOutcome, sqlx::Error> {
    let applied = apply_in(&mut *conn, channel, receipts).await?;
    let early: Vec<&Receipt> = receipts
        .iter()
        .filter(|r| !applied.matched.contains(&r.message_id))
        .collect();
    keep_early(&mut *conn, channel, &early).await?;
    Ok(ReceiptsOutcome {
        changed: applied.changed,
        deferred: early.len(),
    })
}

/// Stores receipts for messages not recorded yet; a repeat of one already kept is ignored.
async fn keep_early(
    conn: &mut PgConnection,
    channel: Channel,
    receipts: &[&Receipt],
) -> Result<(), sqlx::Error> {
    if receipts.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = receipts.iter().map(|r| r.message_id.as_str()).collect();
    let statuses: Vec<&str> = receipts.iter().map(|r| r.status.as_str()).collect();
    let at: Vec<chrono::DateTime<chrono::Utc>> = receipts.iter().map(|r| r.at.0).collect();
    let codes: Vec<Option<&str>> = receipts.iter().map(|r| r.error_code.as_deref()).collect();
    sqlx::query!(
        "INSERT INTO early_receipts (channel, external_message_id, status, occurred_at, error_code)
         SELECT $1, u.id, u.status, u.at, u.code
         FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[]) AS u(id, status, at, code)
         ON CONFLICT DO NOTHING",
        channel.as_str(),
        &ids as _,
        &statuses as _,
        &at as _,
        &codes as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Applies kept receipts whose message is now recorded, at most `limit`, and drops those that
/// waited longer than ten minutes (which also bounds what each pass looks through). Returns the statuses applied, by channel.
pub async fn apply_early(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<Vec<(Channel, RecipientStatus)>, sqlx::Error> {
    sqlx::query!(
        "DELETE FROM early_receipts WHERE received_at < statement_timestamp() - interval '10 minutes'"
    )
    .execute(&mut *conn)
    .await?;
    let ready = sqlx::query!(
        r#"SELECT e.channel, e.external_message_id, e.status, e.occurred_at, e.error_code
         FROM early_receipts e
         WHERE EXISTS (
             SELECT 1 FROM broadcast_recipients r JOIN broadcasts b ON b.id = r.broadcast_id
             WHERE r.external_message_id = e.external_message_id AND b.channel = e.channel)
         ORDER BY e.received_at
         LIMIT $1
         FOR UPDATE OF e SKIP LOCKED"#,
        limit,
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_channel: HashMap<Channel, Vec<Receipt>> = HashMap::new();
    for r in &ready {
        by_channel.entry(r.channel).or_default().push(Receipt {
            message_id: r.external_message_id.clone(),
            status: r.status,
            at: r.occurred_at,
            error_code: r.error_code.clone(),
        });
    }
    let mut applied = Vec::new();
    for (channel, receipts) in &by_channel {
        let done = apply_in(&mut *conn, *channel, receipts).await?;
        applied.extend(done.changed.into_iter().map(|s| (*channel, s)));
    }
    let channels: Vec<&str> = ready.iter().map(|r| r.channel.as_str()).collect();
    let ids: Vec<&str> = ready
        .iter()
        .map(|r| r.external_message_id.as_str())
        .collect();
    let statuses: Vec<&str> = ready.iter().map(|r| r.status.as_str()).collect();
    sqlx::query!(
        "DELETE FROM early_receipts e
         USING unnest($1::text[], $2::text[], $3::text[]) AS u(channel, id, status)
         WHERE e.channel = u.channel AND e.external_message_id = u.id AND e.status = u.status",
        &channels as _,
        &ids as _,
        &statuses as _,
    )
    .execute(&mut *conn)
    .await?;
    Ok(applied)
}

/// What [`apply_in`] did: the statuses reached, and the message ids it found recipients of.
struct Applied {
    changed: Vec<RecipientStatus>,
    matched: HashSet<String>,
}

/// Applies receipts of `channel` in `conn`'s transaction.
async fn apply_in(
    conn: &mut PgConnection,
    channel: Channel,
    receipts: &[Receipt],
) -> Result<Applied, sqlx::Error> {
    let message_ids: Vec<&str> = receipts.iter().map(|r| r.message_id.as_str()).collect();
    let current: Vec<(Uuid, String, RecipientStatus)> = sqlx::query!(
        r#"SELECT r.id, r.external_message_id AS "external_message_id!", r.status
         FROM broadcast_recipients r
         JOIN broadcasts b ON b.id = r.broadcast_id
         WHERE r.external_message_id = ANY($1) AND b.channel = $2
         ORDER BY r.id FOR UPDATE OF r"#,
        &message_ids as _,
        channel.as_str(),
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.id, r.external_message_id, r.status))
    .collect();
    // Receipts by message id: one pass, so a call costs what its receipts and rows do.
    let mut by_message: HashMap<&str, Vec<&Receipt>> = HashMap::new();
    for r in receipts {
        by_message.entry(r.message_id.as_str()).or_default().push(r);
    }
    let mut changed = Vec::new();
    let mut matched = HashSet::new();
    let mut rows = ReceiptRows::default();
    for (id, message_id, status) in current {
        let mut now = status;
        // Milestones reached by this call, with the time each receipt gave.
        let mut reached: Vec<(RecipientStatus, Timestamp, Option<String>)> = Vec::new();
        // Apply this recipient's receipts from the lowest rank up, so order of arrival is moot.
        let mut mine = by_message
            .get(message_id.as_str())
            .cloned()
            .unwrap_or_default();
        mine.sort_by_key(|r| (r.status == RecipientStatus::Failed, r.status.rank()));
        for r in mine {
            if now.may_become(r.status) {
                now = r.status;
                reached.push((r.status, r.at, r.error_code.clone()));
                changed.push(r.status);
            }
        }
        if !reached.is_empty() {
            rows.push(id, now, &reached);
        }
        matched.insert(message_id);
    }
    if !rows.ids.is_empty() {
        // Each milestone takes its own receipt's time, or the time of the first later one
        // (a `read` with no `delivered` was delivered by then); set milestones stay.
        sqlx::query!(
        "UPDATE broadcast_recipients r SET
                status = u.status,
                delivered_at = coalesce(r.delivered_at, u.delivered_at),
                read_at = coalesce(r.read_at, u.read_at),
                replied_at = coalesce(r.replied_at, u.replied_at),
                failed_at = coalesce(u.failed_at, r.failed_at),
                error_code = CASE WHEN u.status = 'failed' THEN coalesce(u.code, 'delivery_failed') ELSE r.error_code END
             FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[],
                         $6::timestamptz[], $7::text[])
                  AS u(id, status, delivered_at, read_at, replied_at, failed_at, code)
             WHERE r.id = u.id",
        &rows.ids,
        &rows.statuses as _,
        &rows.delivered as _,
        &rows.read as _,
        &rows.replied as _,
        &rows.failed as _,
        &rows.codes as _,
    )
        .execute(&mut *conn)
        .await?;
    }
    Ok(Applied { changed, matched })
}

/// Receipt changes as columns, for one `UPDATE ... FROM unnest(...)`.
#[derive(Default)]
struct ReceiptRows {
    ids: Vec<Uuid>,
    statuses: Vec<&'static str>,
    delivered: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    read: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    replied: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    failed: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    codes: Vec<Option<String>>,
}

impl ReceiptRows {
    fn push(
        &mut self,
        id: Uuid,
        status: RecipientStatus,
        reached: &[(RecipientStatus, Timestamp, Option<String>)],
    ) {
        // The time of milestone `rank`: its own receipt's, else the first later receipt's.
        let at = |rank: u8| {
            if status.rank() < rank {
                return None;
            }
            reached
                .iter()
                .filter(|(s, ..)| s.rank() >= rank)
                .min_by_key(|(s, ..)| s.rank())
                .map(|(_, t, _)| t.0)
        };
        let failed = reached.iter().find(|(s, ..)| *s == RecipientStatus::Failed);
        self.ids.push(id);
        self.statuses.push(status.as_str());
        self.delivered.push(at(2));
        self.read.push(at(3));
        self.replied.push(at(4));
        self.failed.push(failed.map(|(_, t, _)| t.0));
        self.codes.push(failed.and_then(|(_, _, c)| c.clone()));
    }
}
