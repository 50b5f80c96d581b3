//! A contact's data on request (docs/api.md, "A contact's data"): its export, read through the
//! statements that list each part, and its erasure, in one transaction.

use parley_db as db;
use parley_domain::contact_data::{
    ACTIVITIES, CONVERSATION_MESSAGES, CONVERSATIONS, ContactErased, ContactExport,
    ConversationExport, ExportSection, LEADS, MESSAGES, SUPPRESSIONS, TICKETS,
};
use parley_domain::contacts::Contact;
use parley_domain::conversations::ConversationFilter;
use parley_domain::leads::LeadFilter;
use parley_domain::tickets::TicketFilter;
use parley_types::ids::{ContactId, ConversationId, OrgId};
use parley_types::list::PageRequest;
use parley_types::time::Timestamp;

use crate::{Caller, Ctx, Result, changed, exists, found};

/// The first page of `size` items, oldest first (a conversation's messages).
fn oldest_first(size: u32) -> PageRequest {
    PageRequest {
        descending: false,
        ..PageRequest::first(size)
    }
}

/// Everything the organization keeps of its contact, each section cut at its limit
/// (`truncated` names those cut); 404 for another organization's contact. The sections are
/// read one after the other, not as one snapshot.
#[tracing::instrument(skip_all, fields(organization_id = %org, contact_id = %id))]
pub async fn export(ctx: Ctx<'_>, org: OrgId, id: ContactId) -> Result<ContactExport> {
    let exported_at = Timestamp::now();
    let mut truncated = Vec::new();
    let mut cut = |section: ExportSection, more: bool| {
        if more {
            truncated.push(section);
        }
    };

    let mut conn = ctx.pool.acquire().await?;
    let mut contact = found(db::contacts::get(&mut conn, org, id).await?)?;
    let mut activities = db::contacts::activities(&mut *conn, id, ACTIVITIES + 1).await?;
    cut(
        ExportSection::Activities,
        activities.len() as i64 > ACTIVITIES,
    );
    activities.truncate(ACTIVITIES as usize);
    contact.activities = Some(activities);
    let sent = db::contact_data::sent_addresses(&mut *conn, org, id).await?;
    let addresses: Vec<String> =
        db::contact_data::erasable(&mut *conn, org, id, &own_addresses(&contact), &sent)
            .await?
            .into_iter()
            .map(|(address, _)| address)
            .collect();
    let mut suppressions =
        db::contact_data::ledger_entries(&mut *conn, org, id, &addresses, SUPPRESSIONS + 1).await?;
    cut(
        ExportSection::Suppressions,
        suppressions.len() as i64 > SUPPRESSIONS,
    );
    suppressions.truncate(SUPPRESSIONS as usize);
    drop(conn);

    let (messages, meta) =
        db::broadcasts::messages_of_contact(ctx.pool, org, id, &PageRequest::first(MESSAGES))
            .await?
            .into_parts();
    cut(ExportSection::Messages, meta.has_next);

    let filter = ConversationFilter {
        contact_id: Some(id.uuid()),
        ..Default::default()
    };
    let (listed, meta) = db::conversations::list(
        ctx.pool,
        org,
        &filter,
        None,
        &PageRequest::first(CONVERSATIONS),
        ctx.clock.now(),
    )
    .await?
    .into_parts();
    cut(ExportSection::Conversations, meta.has_next);
    let mut conversations = Vec::with_capacity(listed.len());
    let mut budget = CONVERSATION_MESSAGES;
    let mut more_messages = false;
    for conversation in listed {
        let messages = if budget == 0 {
            // Spent: whether a message is left out, asked of each conversation until one is.
            if !more_messages {
                let (left, _) = db::conversations::messages(
                    ctx.pool,
                    org,
                    ConversationId::from(conversation.id),
                    &oldest_first(1),
                )
                .await?
                .into_parts();
                more_messages = !left.is_empty();
            }
            Vec::new()
        } else {
            let (messages, meta) = db::conversations::messages(
                ctx.pool,
                org,
                ConversationId::from(conversation.id),
                &oldest_first(budget),
            )
            .await?
            .into_parts();
            more_messages |= meta.has_next;
            budget -= messages.len() as u32;
            messages
        };
        conversations.push(ConversationExport {
            conversation,
            messages,
        });
    }
    cut(ExportSection::ConversationMessages, more_messages);

    let filter = TicketFilter {
        customer_id: Some(id.uuid()),
        ..Default::default()
    };
    let (tickets, meta) = db::tickets::list(
        ctx.pool,
        org,
        &filter,
        None,
        &PageRequest::first(TICKETS),
        ctx.clock.now(),
    )
    .await?
    .into_parts();
    cut(ExportSection::Tickets, meta.has_next);

    let filter = LeadFilter {
        contact_id: Some(id.uuid()),
        ..Default::default()
    };
    let (leads, meta) = db::leads::list(ctx.pool, org, &filter, &PageRequest::first(LEADS))
        .await?
        .into_parts();
    cut(ExportSection::Leads, meta.has_next);

    let subscriptions = crate::topics::subscriptions(ctx, org, id).await?;
    Ok(ContactExport {
        exported_at,
        contact,
        messages,
        conversations,
        tickets,
        leads,
        subscriptions,
        suppressions,
        truncated,
    })
}

/// What a contact is sent to: its email, its phone and its external id (the social channels').
fn own_addresses(contact: &Contact) -> Vec<&str> {
    [
        contact.email.as_deref(),
        contact.phone.as_deref(),
        contact.external_id.as_deref(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Erases the organization's contact (404 when there is none), in one transaction, one
/// erasure of the organization at a time: its
/// addresses (its own, and those its messages went to), but those another contact has, stay
/// in the suppression ledger as hashes only, so that no later import or change makes the
/// person a recipient again; what names them elsewhere is removed
/// (`parley_db::contact_data::{unrecord, forget}`); the contact goes with its tags,
/// activities, topic preferences, conversations and entries.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, contact_id = %id))]
pub async fn erase(ctx: Ctx<'_>, caller: &Caller, id: ContactId) -> Result<ContactErased> {
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    db::contact_data::serialize_erasures(&mut tx, org).await?;
    exists(db::contacts::hold(&mut tx, org, id).await?)?;
    let contact = found(db::contacts::get(&mut tx, org, id).await?)?;
    let own = own_addresses(&contact);
    let sent = db::contact_data::sent_addresses(&mut *tx, org, id).await?;
    let candidates: Vec<String> = own
        .iter()
        .map(|a| (*a).to_owned())
        .chain(sent.iter().cloned())
        .collect();
    // The recipients' row locks first (see `unrecord`), then the ledger.
    db::contact_data::unrecord(&mut tx, org, id, &candidates).await?;
    let erasable = db::contact_data::erasable(&mut *tx, org, id, &own, &sent).await?;
    let entries =
        db::contact_data::hash_ledger(&mut tx, org, id, &erasable, Timestamp::now()).await?;
    let erased: Vec<String> = erasable.into_iter().map(|(address, _)| address).collect();
    let folded: Vec<String> = candidates.iter().map(|a| a.to_lowercase()).collect();
    db::contact_data::forget(&mut tx, org, id, &erased, &candidates, &folded).await?;
    changed(db::contacts::delete(&mut *tx, org, id).await?)?;
    tx.commit().await?;
    Ok(ContactErased {
        id,
        hashed_addresses: erased.len() as i64,
        ledger_entries: entries,
    })
}
