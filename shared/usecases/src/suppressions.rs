//! The suppression ledger: entries added in bulk, listed, exported and removed. What a send
//! obeys of it is decided in `parley_domain::sending` (docs/api.md, Suppressions).

use std::collections::HashMap;

use parley_db as db;
use parley_domain::Channel;
use parley_domain::suppressions::{
    AddSuppressions, BounceType, ReceiptReport, Reported, Subject, Suppression, SuppressionFilter,
    SuppressionReason, SuppressionSource, SuppressionsAdded,
};
use parley_domain::webhooks::EventName;
use parley_types::ids::{ContactId, OrgId, SuppressionId};
use parley_types::list::{Cursor, Keyed, Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{Caller, Ctx, Result, changed};

/// Adds entries from the API, each written with its `contact.suppressed` event; an entry
/// naming a contact that is not the organization's is 422 (with its index), and nothing is
/// written.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, entries = req.entries.len()))]
pub async fn add(ctx: Ctx<'_>, caller: &Caller, req: AddSuppressions) -> Result<SuppressionsAdded> {
    let entries = req.into_entries(caller.org_id, SuppressionSource::Api, ctx.clock.now())?;
    let mut tx = ctx.pool.begin().await?;
    let named: Vec<(usize, Uuid)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.contact_id.map(|c| (i, c)))
        .collect();
    db::refs::check_ids_of(
        &mut tx,
        db::refs::RefTable::Contacts,
        caller.org_id,
        "entries",
        "contactId",
        &named,
    )
    .await?;
    let written = write(&mut tx, &entries).await?;
    tx.commit().await?;
    let mut by_id: HashMap<Uuid, Suppression> = written.into_iter().map(|s| (s.id, s)).collect();
    let added: Vec<Suppression> = entries.iter().filter_map(|e| by_id.remove(&e.id)).collect();
    let existing = (entries.len() - added.len()) as u32;
    Ok(SuppressionsAdded { added, existing })
}

/// Writes entries with their `contact.suppressed` events, in one order whatever the caller's
/// (so that two transactions naming the same entries wait on each other instead of
/// deadlocking); returns those written (an entry already in the ledger is left as it is).
/// Postgres' own error, so that the import job can retry it.
pub(crate) async fn write(
    conn: &mut PgConnection,
    entries: &[Suppression],
) -> std::result::Result<Vec<Suppression>, sqlx::Error> {
    let mut in_order: Vec<&Suppression> = entries.iter().collect();
    in_order.sort_by(|a, b| a.entry_key().cmp(&b.entry_key()));
    let written = db::suppressions::add(&mut *conn, in_order.into_iter().cloned()).await?;
    let events: Vec<(Uuid, EventName, serde_json::Value)> = written
        .iter()
        .map(|s| {
            Ok((
                s.organization_id,
                EventName::ContactSuppressed,
                serde_json::to_value(s)?,
            ))
        })
        .collect::<std::result::Result<_, serde_json::Error>>()
        .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    db::outbox::emit_many(&mut *conn, &events).await?;
    Ok(written)
}

/// Turns receipts' bounces and complaints into entries for the channel they came on, in the
/// receipts' transaction (source `receipt`): a hard bounce or a complaint at once, soft
/// bounces once their organization's `softBounceLimit` is reached. An entry names the
/// address the message went to ([`ReceiptReport::subject`]).
pub(crate) async fn from_receipts(
    conn: &mut PgConnection,
    reports: &[ReceiptReport],
    now: Timestamp,
) -> Result<()> {
    if reports.is_empty() {
        return Ok(());
    }
    let contacts: Vec<(OrgId, ContactId)> = reports
        .iter()
        .map(|r| (r.organization_id, r.contact_id))
        .collect();
    let addresses = db::suppressions::addresses(&mut *conn, &contacts).await?;
    let mut entries = Vec::new();
    let mut soft = Vec::new();
    let mut subjects: HashMap<(OrgId, Channel, String), Subject> = HashMap::new();
    for r in reports {
        let current = addresses
            .get(&r.contact_id)
            .map(|(email, phone)| (email.as_deref(), phone.as_deref()));
        let Some(subject) = r.subject(current) else {
            continue;
        };
        let reason = match r.reported {
            Reported::Bounce(BounceType::Hard) => SuppressionReason::HardBounce,
            Reported::Complaint => SuppressionReason::Complaint,
            Reported::Bounce(BounceType::Soft) => {
                soft.push(db::suppressions::SoftBounce {
                    organization_id: r.organization_id,
                    recipient_id: r.recipient_id,
                    channel: r.channel,
                    subject: subject.key(),
                    at: r.at,
                });
                subjects.insert((r.organization_id, r.channel, subject.key()), subject);
                continue;
            }
        };
        entries.push(Suppression::new(
            r.organization_id,
            subject,
            Some(r.channel),
            reason,
            SuppressionSource::Receipt,
            now,
        ));
    }
    for reached in db::suppressions::record_soft_bounces(&mut *conn, &soft).await? {
        let (org, channel, _) = &reached;
        if let Some(subject) = subjects.remove(&reached) {
            entries.push(Suppression::new(
                *org,
                subject,
                Some(*channel),
                SuppressionReason::SoftBounceLimit,
                SuppressionSource::Receipt,
                now,
            ));
        }
    }
    write(conn, &entries).await?;
    Ok(())
}

/// Removes an entry: its address or contact is sent to again (unless another entry holds it).
pub async fn remove(ctx: Ctx<'_>, caller: &Caller, id: SuppressionId) -> Result<()> {
    changed(db::suppressions::remove(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's entries.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &SuppressionFilter,
    page: &PageRequest,
) -> Result<Page<Suppression>> {
    Ok(db::suppressions::list(ctx.pool, org, f, page).await?)
}

/// The export's next batch: up to `n` entries after `after`, oldest first, and where the one
/// after it starts (`None` at the end).
pub async fn export_batch(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &SuppressionFilter,
    after: Option<Cursor>,
    n: i64,
) -> Result<(Vec<Suppression>, Option<Cursor>)> {
    let rows = db::suppressions::batch_after(ctx.pool, org, f, after, n).await?;
    let next = (rows.len() as i64 == n)
        .then(|| rows.last().map(Keyed::cursor))
        .flatten();
    Ok((rows, next))
}
