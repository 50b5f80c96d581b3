//! The suppression ledger: entries added in bulk, listed, exported and removed. What a send
//! obeys of it is decided in `parley_domain::sending` (docs/api.md, Suppressions).

use std::collections::HashMap;

use parley_db as db;
use parley_domain::suppressions::{
    AddSuppressions, Suppression, SuppressionFilter, SuppressionSource, SuppressionsAdded,
};
use parley_domain::webhooks::EventName;
use parley_types::ids::{OrgId, SuppressionId};
use parley_types::list::{Cursor, Keyed, Page, PageRequest};
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
    // Written in one order whatever the request's, so that two requests naming the same
    // entries wait on each other instead of deadlocking; answered in the request's order.
    let mut in_order: Vec<&Suppression> = entries.iter().collect();
    in_order.sort_by(|a, b| a.entry_key().cmp(&b.entry_key()));
    let written = db::suppressions::add(&mut *tx, in_order.into_iter().cloned()).await?;
    let events: Vec<(Uuid, EventName, serde_json::Value)> = written
        .iter()
        .map(|s| {
            Ok((
                s.organization_id,
                EventName::ContactSuppressed,
                serde_json::to_value(s)?,
            ))
        })
        .collect::<std::result::Result<_, serde_json::Error>>()?;
    db::outbox::emit_many(&mut tx, &events).await?;
    tx.commit().await?;
    let mut by_id: HashMap<Uuid, Suppression> = written.into_iter().map(|s| (s.id, s)).collect();
    let added: Vec<Suppression> = entries.iter().filter_map(|e| by_id.remove(&e.id)).collect();
    let existing = (entries.len() - added.len()) as u32;
    Ok(SuppressionsAdded { added, existing })
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
