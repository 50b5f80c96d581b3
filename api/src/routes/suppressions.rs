//! The suppression ledger (docs/api.md, Suppressions).

use std::sync::Arc;
use std::time::Duration;

use crate::envelope::{Deleted, Envelope, ListEnvelope, Reply};
use crate::error::AppResult;
use crate::org_permits::{OrgPermits, Permit};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use parley_domain::suppressions::{
    AddSuppressions, CSV_HEADER, Suppression, SuppressionFilter, SuppressionsAdded,
};
use parley_types::error::AppError;
use parley_types::ids::OrgId;
use parley_types::ids::SuppressionId;
use parley_types::list::PageParams;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::suppressions;

/// Entries the export reads per statement.
const EXPORT_BATCH: i64 = 1000;
/// How long one export may stream.
const EXPORT_FOR: Duration = Duration::from_secs(600);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add, list))
        .routes(routes!(export))
        .routes(routes!(remove))
}

/// Add entries to the suppression ledger: 1 to 1,000, each naming exactly one of `email`,
/// `phone` and `contactId`. An entry already in the ledger (the same address or contact,
/// channel and reason) is left as it is and counted in `existing`.
#[utoipa::path(post, path = "/api/v1/suppressions", tag = "suppressions",
    request_body = AddSuppressions,
    responses((status = 201, description = "The entries written", body = Envelope<SuppressionsAdded>)))]
async fn add(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<AddSuppressions>,
) -> AppResult<Reply<SuppressionsAdded>> {
    let added = suppressions::add(state.use_cases(), &tenant.caller(), req).await?;
    Ok(Reply::created(added))
}

/// List the suppression ledger's entries.
#[utoipa::path(get, path = "/api/v1/suppressions", tag = "suppressions",
    params(PageParams, SuppressionFilter),
    responses((status = 200, description = "A page of entries", body = ListEnvelope<Suppression>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<SuppressionFilter>,
) -> AppResult<Reply<Vec<Suppression>>> {
    Ok(Reply::page(
        suppressions::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Export the ledger's entries (with the list's filters) as CSV, oldest first:
/// `id,email,phone,contact_id,channel,reason,source,created_at`. Streamed, a thousand
/// entries a statement; one export of an organization at a time (429 `rate_limited`
/// otherwise), for at most ten minutes.
#[utoipa::path(get, path = "/api/v1/suppressions/export", tag = "suppressions",
    params(SuppressionFilter),
    responses((status = 200, description = "The entries as CSV", content_type = "text/csv", body = String)))]
async fn export(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(filter): Query<SuppressionFilter>,
) -> AppResult<Response> {
    let org = tenant.org_id;
    let deadline = Instant::now() + EXPORT_FOR;
    let permit = Arc::new(ExportPermit::take(&state.exports, org, deadline)?);
    // The first batch is read before answering, so that its error is an error answer.
    let first =
        suppressions::export_batch(state.use_cases(), org, &filter, None, EXPORT_BATCH).await?;
    let head = futures::stream::once(std::future::ready(Ok::<_, std::io::Error>(
        Bytes::from_static(CSV_HEADER.as_bytes()),
    )));
    let rest = futures::stream::unfold(Some(first), move |batch| {
        let (state, filter, permit) = (state.clone(), filter.clone(), permit.clone());
        async move {
            let (rows, after) = batch?;
            let mut text = String::with_capacity(rows.len() * 120);
            rows.iter().for_each(|r| text.push_str(&r.csv_line()));
            let Some(after) = after else {
                permit.give_back();
                return Some((Ok(Bytes::from(text)), None));
            };
            if Instant::now() >= deadline {
                return Some((
                    Err(std::io::Error::other("past the export's deadline")),
                    None,
                ));
            }
            match suppressions::export_batch(
                state.use_cases(),
                org,
                &filter,
                Some(after),
                EXPORT_BATCH,
            )
            .await
            {
                Ok(next) => Some((Ok(Bytes::from(text)), Some(next))),
                // The answer ends without the end of its chunked body: the client's read
                // fails rather than seeing a short file.
                Err(e) => {
                    tracing::warn!(error = %e, "a suppressions export stopped");
                    Some((Err(std::io::Error::other(e.to_string())), None))
                }
            }
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
        Body::from_stream(futures::StreamExt::chain(head, rest)),
    )
        .into_response())
}

/// An organization's export under way: its permit, held while the body streams (after the
/// handler returned, outside the request's in-flight slot, turn and timeout) and given back at its end, when
/// the client goes, or at the deadline, whichever comes first.
struct ExportPermit {
    permit: Arc<Mutex<Option<Permit>>>,
    deadline: AbortHandle,
}

impl ExportPermit {
    fn take(exports: &OrgPermits, org: OrgId, deadline: Instant) -> Result<Self, AppError> {
        let permit = Arc::new(Mutex::new(Some(exports.take(org.uuid())?)));
        let held = permit.clone();
        let timer = tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            held.lock().take();
        });
        Ok(ExportPermit {
            permit,
            deadline: timer.abort_handle(),
        })
    }

    fn give_back(&self) {
        self.permit.lock().take();
    }
}

impl Drop for ExportPermit {
    fn drop(&mut self) {
        self.give_back();
        self.deadline.abort();
    }
}

/// Remove an entry: its address or contact is sent to again, unless another entry holds it.
#[utoipa::path(delete, path = "/api/v1/suppressions/{id}", tag = "suppressions",
    params(("id" = Uuid, Path, description = "Suppression entry id")),
    responses((status = 200, description = "The entry is gone", body = Envelope<Deleted>)))]
async fn remove(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SuppressionId>,
) -> AppResult<Reply<Deleted>> {
    suppressions::remove(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exports() -> OrgPermits {
        OrgPermits::new("exports", "suppression exports", 1, false)
    }

    /// Waits for `done`, for 5 s at most (the real clock: the workspace's tests run without
    /// tokio's paused one).
    async fn until(done: impl Fn() -> bool) -> bool {
        let give_up = Instant::now() + Duration::from_secs(5);
        while !done() {
            if Instant::now() > give_up {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    #[tokio::test]
    async fn an_export_holds_its_organizations_place_until_it_ends_or_is_dropped() {
        let (exports, org) = (exports(), OrgId::generate());
        let later = Instant::now() + Duration::from_secs(600);
        let export = ExportPermit::take(&exports, org, later).unwrap();
        assert!(
            ExportPermit::take(&exports, org, later).is_err(),
            "one at a time"
        );
        let other = ExportPermit::take(&exports, OrgId::generate(), later);
        assert!(other.is_ok(), "another organization's is its own");
        export.give_back();
        export.give_back();
        let again = ExportPermit::take(&exports, org, later).unwrap();
        drop(export);
        assert!(
            ExportPermit::take(&exports, org, later).is_err(),
            "still held by `again`"
        );
        drop(again);
        assert!(
            ExportPermit::take(&exports, org, later).is_ok(),
            "dropped: given back"
        );
    }

    #[tokio::test]
    async fn the_deadline_gives_the_place_back_while_the_export_still_lives() {
        let (exports, org) = (exports(), OrgId::generate());
        let soon = Instant::now() + Duration::from_millis(500);
        let _export = ExportPermit::take(&exports, org, soon).unwrap();
        assert!(ExportPermit::take(&exports, org, soon).is_err());
        assert!(
            until(|| ExportPermit::take(&exports, org, Instant::now()).is_ok()).await,
            "the place is not given back at the deadline"
        );
    }
}
