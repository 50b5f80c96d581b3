//! A send explained before it goes out (docs/api.md, "Previewing a send"): the audience of a
//! draft or scheduled broadcast decided contact by contact by the send's own rule, a page at a
//! time, and counted.

use parley_db as db;
use parley_db::preview::{Audience, Previewed};
use parley_domain::broadcasts::BroadcastStatus;
use parley_domain::preview::{BroadcastPreview, Tally};
use parley_domain::sending::Decided;
use parley_jobs::frequency_caps;
use parley_jobs::redis_conn::Redis;
use parley_types::error::AppError;
use parley_types::ids::{BroadcastId, OrgId};

use crate::{Ctx, Result, found};

/// Contacts decided per statement.
const PAGE: usize = 5_000;

/// What `id` would do if it were sent: each contact of its audience decided by
/// [`SendContext::decide`](parley_domain::sending::SendContext::decide) at `max(now,
/// scheduledAt)`, those to send checked by the frequency cap's own rule in a dry run
/// (`frequency_caps::over`) against the sends Redis holds now, an A/B broadcast's contacts
/// drawn as the fan-out draws them. Only drafts and scheduled broadcasts (409 otherwise).
/// Reads only; a connection is taken per page, so a long preview holds none of the pool's
/// between its statements.
#[tracing::instrument(skip_all, fields(organization_id = %org, broadcast_id = %id))]
pub async fn preview(
    ctx: Ctx<'_>,
    redis: &Redis,
    org: OrgId,
    id: BroadcastId,
) -> Result<BroadcastPreview> {
    let b = found(
        db::sending::send_context(ctx.pool, id)
            .await?
            .filter(|b| b.organization_id == org),
    )?;
    if !matches!(
        b.status,
        BroadcastStatus::Draft | BroadcastStatus::Scheduled
    ) {
        return Err(AppError::invalid_state(format!(
            "only a draft or a scheduled broadcast is previewed; this one is {}",
            b.status
        ))
        .into());
    }
    let Previewed { audience, ab } =
        found(db::preview::audience(&mut *ctx.pool.acquire().await?, org, id).await?)?;
    let (mut tally, ab) = match ab {
        Some((settings, names)) => (Tally::with_variants(names), Some(settings)),
        None => (Tally::default(), None),
    };
    let now = ctx.clock.now();
    // A draft's `scheduledAt` (or its creation) is past or its own time to come.
    let at = now.max(b.scheduled_at);
    let plan = b.send_plan();
    let cap = b.frequency_cap();
    let reasons = b.suppression_reasons();
    let topic = b.obeyed_topic();
    let mut after = None;
    let mut offset = 0;
    loop {
        let mut conn = ctx.pool.acquire().await?;
        let ids = match &audience {
            Audience::Contacts(all) => {
                let page = &all[offset.min(all.len())..(offset + PAGE).min(all.len())];
                offset += page.len();
                page.to_vec()
            }
            Audience::Segment(filter) => {
                let page =
                    db::preview::segment_page(&mut conn, org, filter, after, PAGE as i64).await?;
                after = page.last().copied();
                page
            }
        };
        if ids.is_empty() {
            break;
        }
        let full = ids.len() == PAGE;
        let claimed =
            db::preview::as_claimed(&mut conn, org, &ids, b.channel, &reasons, topic).await?;
        let decided: Vec<_> = claimed
            .into_iter()
            .map(|(contact, c)| (contact, b.decide(&plan, c, at.0)))
            .collect();
        // Released before Redis is asked.
        drop(conn);
        let capped = match cap {
            Some(cap) => {
                let to_send: Vec<_> = decided
                    .iter()
                    .filter_map(|(_, d)| match d {
                        Decided::Send(r) => Some(r.contact),
                        _ => None,
                    })
                    .collect();
                frequency_caps::over(redis, org, b.channel, cap, &to_send, at)
                    .await
                    .map_err(|err| AppError::ServiceUnavailable(err.to_string()))?
            }
            None => Default::default(),
        };
        for (contact, d) in &decided {
            let variant = ab.and_then(|s| {
                parley_domain::ab_tests::draw(id, *contact, s.test_percent, s.variants as usize)
            });
            tally.add(*contact, d, capped.contains(contact), variant);
        }
        if !full {
            break;
        }
    }
    Ok(tally.finish(at))
}
