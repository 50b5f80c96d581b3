//! Delivery receipts from channel providers: each moves a recipient forward only, except a
//! bounce, which fails a delivered one; bounces and complaints also mark it. A receipt
//! that arrives before its recipient's outcome is written (so before its message id is known)
//! is kept in `early_receipts` and applied by the worker's ticker once the id is known.

use std::collections::{HashMap, HashSet};

use sqlx::PgConnection;
use uuid::Uuid;

use parley_domain::Channel;
use parley_domain::broadcasts::{ReceiptStatus, RecipientStatus};
use parley_domain::suppressions::{BounceType, ReceiptReport, Reported};
use parley_types::ids::{ContactId, OrgId, RecipientId};
use parley_types::time::Timestamp;

/// One delivery receipt.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub message_id: String,
    pub status: ReceiptStatus,
    /// With `bounced` only.
    pub bounce_type: Option<BounceType>,
    pub at: Timestamp,
    pub error_code: Option<String>,
}

/// What a call did with its receipts.
#[derive(Debug, Default)]
pub struct ReceiptsOutcome {
    /// The status each applied receipt moved a recipient to, by channel.
    pub changed: Vec<(Channel, RecipientStatus)>,
    /// Receipts that changed a recipient: moved it forward, or marked it bounced or
    /// complained (the first such receipt of its message).
    pub applied: usize,
    /// The bounces and complaints marked, for the ledger.
    pub reports: Vec<ReceiptReport>,
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
    let mut outcome = ReceiptsOutcome::default();
    let matched = apply_in(&mut *conn, channel, receipts, &mut outcome).await?;
    let early: Vec<&Receipt> = receipts
        .iter()
        .filter(|r| !matched.contains(&r.message_id))
        .collect();
    keep_early(&mut *conn, channel, &early).await?;
    outcome.deferred = early.len();
    Ok(outcome)
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
    let bounces: Vec<Option<&str>> = receipts
        .iter()
        .map(|r| r.bounce_type.map(|b| b.as_str()))
        .collect();
    sqlx::query!(
        "INSERT INTO early_receipts
            (channel, external_message_id, status, occurred_at, error_code, bounce_type)
         SELECT $1, u.id, u.status, u.at, u.code, u.bounce
         FROM unnest($2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[])
              AS u(id, status, at, code, bounce)
         ON CONFLICT DO NOTHING",
        channel.as_str(),
        &ids as _,
        &statuses as _,
        &at as _,
        &codes as _,
        &bounces as _,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Applies kept receipts whose message is now recorded, at most `limit`, and drops those that
/// waited longer than ten minutes (which also bounds what each pass looks through).
pub async fn apply_early(
    conn: &mut PgConnection,
    limit: i64,
) -> Result<ReceiptsOutcome, sqlx::Error> {
    sqlx::query!(
        "DELETE FROM early_receipts WHERE received_at < statement_timestamp() - interval '10 minutes'"
    )
    .execute(&mut *conn)
    .await?;
    let ready = sqlx::query!(
        r#"SELECT e.channel, e.external_message_id, e.status, e.occurred_at, e.error_code,
                e.bounce_type
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
            bounce_type: r.bounce_type,
            at: r.occurred_at,
            error_code: r.error_code.clone(),
        });
    }
    // Channel by channel in one order, so that two workers' passes lock recipients alike.
    let mut by_channel: Vec<(Channel, Vec<Receipt>)> = by_channel.into_iter().collect();
    by_channel.sort_by_key(|(channel, _)| channel.as_str());
    let mut outcome = ReceiptsOutcome::default();
    for (channel, receipts) in &by_channel {
        apply_in(&mut *conn, *channel, receipts, &mut outcome).await?;
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
    Ok(outcome)
}

/// Applies receipts of `channel` in `conn`'s transaction, adding what it did to `outcome`;
/// returns the message ids it found recipients of.
async fn apply_in(
    conn: &mut PgConnection,
    channel: Channel,
    receipts: &[Receipt],
    outcome: &mut ReceiptsOutcome,
) -> Result<HashSet<String>, sqlx::Error> {
    let message_ids: Vec<&str> = receipts.iter().map(|r| r.message_id.as_str()).collect();
    let current = sqlx::query!(
        r#"SELECT r.id, r.organization_id, r.broadcast_id, r.contact_id,
                r.external_message_id AS "external_message_id!", r.status, r.sent_to,
                r.bounced_at IS NOT NULL AS "bounced!", r.complained_at IS NOT NULL AS "complained!"
         FROM broadcast_recipients r
         JOIN broadcasts b ON b.id = r.broadcast_id
         WHERE r.external_message_id = ANY($1) AND b.channel = $2
         ORDER BY r.id FOR UPDATE OF r"#,
        &message_ids as _,
        channel.as_str(),
    )
    .fetch_all(&mut *conn)
    .await?;
    // Receipts by message id: one pass, so a call costs what its receipts and rows do.
    let mut by_message: HashMap<&str, Vec<&Receipt>> = HashMap::new();
    for r in receipts {
        by_message.entry(r.message_id.as_str()).or_default().push(r);
    }
    // A message id is the provider's: should two organizations' recipients share one (a
    // provider reusing ids), its receipts apply to neither, rather than suppress an address
    // in an organization the message was not sent by.
    let mut orgs_of: HashMap<&str, HashSet<Uuid>> = HashMap::new();
    for row in &current {
        orgs_of
            .entry(row.external_message_id.as_str())
            .or_default()
            .insert(row.organization_id);
    }
    let shared: HashSet<String> = orgs_of
        .into_iter()
        .filter(|(_, orgs)| orgs.len() > 1)
        .map(|(id, _)| id.to_owned())
        .collect();
    if !shared.is_empty() {
        tracing::warn!(%channel, messages = shared.len(),
            "receipts name message ids that recipients of several organizations have; not applied");
    }
    let mut matched = HashSet::new();
    let mut rows = ReceiptRows::default();
    for row in current {
        if shared.contains(&row.external_message_id) {
            matched.insert(row.external_message_id);
            continue;
        }
        let mut now = row.status;
        let mut marks = Marks {
            bounced: row.bounced,
            complained: row.complained,
            ..Marks::default()
        };
        // Milestones reached by this call, with the time each receipt gave.
        let mut reached: Vec<(RecipientStatus, Timestamp, Option<String>)> = Vec::new();
        // Apply this recipient's receipts in one order, so order of arrival is moot.
        let mut mine = by_message
            .get(row.external_message_id.as_str())
            .cloned()
            .unwrap_or_default();
        mine.sort_by_key(|r| (r.status.order(), r.bounce_type != Some(BounceType::Hard)));
        let report = |reported, at| ReceiptReport {
            organization_id: OrgId::from(row.organization_id),
            recipient_id: RecipientId::from(row.id),
            contact_id: ContactId::from(row.contact_id),
            channel,
            sent_to: row.sent_to.clone(),
            reported,
            at,
        };
        for r in mine {
            let step = match r.status {
                ReceiptStatus::Bounced => {
                    let Some(kind) = r.bounce_type else { continue };
                    if marks.bounced || !now.may_bounce() {
                        continue;
                    }
                    marks.bounced = true;
                    marks.bounce = Some((kind, r.at));
                    outcome.reports.push(report(Reported::Bounce(kind), r.at));
                    outcome.applied += 1;
                    if now != RecipientStatus::Failed {
                        let code = r
                            .error_code
                            .clone()
                            .unwrap_or_else(|| format!("bounced_{kind}"));
                        now = RecipientStatus::Failed;
                        reached.push((now, r.at, Some(code)));
                        outcome.changed.push((channel, now));
                    }
                    continue;
                }
                ReceiptStatus::Complained => {
                    if !marks.complained {
                        marks.complained = true;
                        marks.complaint = Some(r.at);
                        outcome.reports.push(report(Reported::Complaint, r.at));
                        outcome.applied += 1;
                    }
                    continue;
                }
                other => other.step(),
            };
            if let Some(next) = step.filter(|next| now.may_become(*next)) {
                now = next;
                reached.push((next, r.at, r.error_code.clone()));
                outcome.changed.push((channel, next));
                outcome.applied += 1;
            }
        }
        if !reached.is_empty() || marks.bounce.is_some() || marks.complaint.is_some() {
            rows.push(
                row.id,
                row.organization_id,
                row.broadcast_id,
                now,
                &reached,
                &marks,
            );
        }
        matched.insert(row.external_message_id);
    }
    if !rows.ids.is_empty() {
        // First, so that the counter rows the recipients' trigger adds to below are locked
        // here, in one order, once: two calls' statements cannot take them in crossed orders.
        count_marks(&mut *conn, &rows).await?;
        // Each milestone takes its own receipt's time, or the time of the first later one
        // (a `read` with no `delivered` was delivered by then); set milestones and marks stay.
        sqlx::query!(
            "UPDATE broadcast_recipients r SET
                status = u.status,
                delivered_at = coalesce(r.delivered_at, u.delivered_at),
                read_at = coalesce(r.read_at, u.read_at),
                replied_at = coalesce(r.replied_at, u.replied_at),
                failed_at = coalesce(u.failed_at, r.failed_at),
                error_code = CASE WHEN u.failed_at IS NOT NULL
                    THEN coalesce(u.code, 'delivery_failed') ELSE r.error_code END,
                bounce_type = coalesce(r.bounce_type, u.bounce_type),
                bounced_at = coalesce(r.bounced_at, u.bounced_at),
                complained_at = coalesce(r.complained_at, u.complained_at)
             FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::timestamptz[],
                         $6::timestamptz[], $7::text[], $8::text[], $9::timestamptz[], $10::timestamptz[])
                  AS u(id, status, delivered_at, read_at, replied_at, failed_at, code, bounce_type,
                       bounced_at, complained_at)
             WHERE r.id = u.id",
            &rows.ids,
            &rows.statuses as _,
            &rows.delivered as _,
            &rows.read as _,
            &rows.replied as _,
            &rows.failed as _,
            &rows.codes as _,
            &rows.bounce_types as _,
            &rows.bounced as _,
            &rows.complained as _,
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(matched)
}

/// Adds the bounces and complaints first marked by `rows` to their broadcasts' counters (the
/// marks are set once, under the recipients' row locks, so each counts once). Every broadcast
/// of `rows` is written, with nothing to add if need be, in the order of its id: that locks
/// the session's counter row of each (the shard the recipients' trigger writes too) in one
/// order.
async fn count_marks(conn: &mut PgConnection, rows: &ReceiptRows) -> Result<(), sqlx::Error> {
    let bounced: Vec<i32> = rows
        .bounced
        .iter()
        .map(|b| i32::from(b.is_some()))
        .collect();
    let complained: Vec<i32> = rows
        .complained
        .iter()
        .map(|c| i32::from(c.is_some()))
        .collect();
    sqlx::query!(
        "INSERT INTO broadcast_counters AS k (organization_id, broadcast_id, shard, bounced, complained)
         SELECT u.org, u.broadcast, counter_shard(), sum(u.bounced), sum(u.complained)
         FROM unnest($1::uuid[], $2::uuid[], $3::int4[], $4::int4[])
              AS u(org, broadcast, bounced, complained)
         GROUP BY u.org, u.broadcast
         ORDER BY u.broadcast
         ON CONFLICT (broadcast_id, shard) DO UPDATE SET
            bounced = k.bounced + excluded.bounced,
            complained = k.complained + excluded.complained",
        &rows.orgs,
        &rows.broadcasts,
        &bounced,
        &complained,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A recipient's bounce and complaint: whether it has one (before or by this call), and the
/// ones this call marks.
#[derive(Default)]
struct Marks {
    bounced: bool,
    complained: bool,
    bounce: Option<(BounceType, Timestamp)>,
    complaint: Option<Timestamp>,
}

/// Receipt changes as columns, for one `UPDATE ... FROM unnest(...)`.
#[derive(Default)]
struct ReceiptRows {
    ids: Vec<Uuid>,
    orgs: Vec<Uuid>,
    broadcasts: Vec<Uuid>,
    statuses: Vec<&'static str>,
    delivered: Vec<Option<Timestamp>>,
    read: Vec<Option<Timestamp>>,
    replied: Vec<Option<Timestamp>>,
    failed: Vec<Option<Timestamp>>,
    codes: Vec<Option<String>>,
    bounce_types: Vec<Option<&'static str>>,
    bounced: Vec<Option<Timestamp>>,
    complained: Vec<Option<Timestamp>>,
}

impl ReceiptRows {
    fn push(
        &mut self,
        id: Uuid,
        org: Uuid,
        broadcast: Uuid,
        status: RecipientStatus,
        reached: &[(RecipientStatus, Timestamp, Option<String>)],
        marks: &Marks,
    ) {
        // The time of milestone `rank`: its own receipt's, else the first later receipt's. The
        // highest rank this call reached counts, so a `delivered` then a bounce in one call
        // keeps its delivery time, as in two calls.
        let highest = reached.iter().map(|(s, ..)| s.rank()).max().unwrap_or(0);
        let at = |rank: u8| {
            if status.rank().max(highest) < rank {
                return None;
            }
            reached
                .iter()
                .filter(|(s, ..)| s.rank() >= rank)
                .min_by_key(|(s, ..)| s.rank())
                .map(|(_, t, _)| *t)
        };
        let failed = reached.iter().find(|(s, ..)| *s == RecipientStatus::Failed);
        self.ids.push(id);
        self.orgs.push(org);
        self.broadcasts.push(broadcast);
        self.statuses.push(status.as_str());
        self.delivered.push(at(2));
        self.read.push(at(3));
        self.replied.push(at(4));
        self.failed.push(failed.map(|(_, t, _)| *t));
        self.codes.push(failed.and_then(|(_, _, c)| c.clone()));
        self.bounce_types
            .push(marks.bounce.map(|(b, _)| b.as_str()));
        self.bounced.push(marks.bounce.map(|(_, t)| t));
        self.complained.push(marks.complaint);
    }
}
