//! Delivery receipts from channel providers: `POST /api/v1/channels/{channel}/receipts`,
//! signed like a webhook with the channel's `PARLEY_CHANNEL_<CHANNEL>_SECRET` instead of an
//! API key.

use axum::extract::State;
use axum::http::HeaderMap;
use parley_shared::db;
use parley_shared::db::delivery::Receipt;
use parley_shared::domain::Channel;
use parley_shared::domain::broadcasts::{ReceiptIn, ReceiptsApplied};
use parley_shared::envelope::{Envelope, Reply};
use parley_shared::error::{AppError, AppResult};
use parley_shared::metric_names::RECIPIENTS;
use parley_shared::signature;
use parley_shared::time::Timestamp;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Path, RawBody, parse_json};
use crate::state::AppState;

/// Receipts one request may carry.
const MAX_RECEIPTS: usize = 10_000;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(receive))
}

/// Apply delivery receipts. Each recipient only moves forward (`read` before `delivered`
/// ends `read`); counters follow. Signed with `X-Parley-Signature: sha256=<hex HMAC-SHA256
/// of the raw body under the channel's secret>`.
#[utoipa::path(post, path = "/api/v1/channels/{channel}/receipts", tag = "channels",
    params(("channel" = Channel, Path, description = "The channel whose provider sends the receipts")),
    request_body = Vec<ReceiptIn>,
    responses((status = 200, description = "How many receipts were applied", body = Envelope<ReceiptsApplied>)))]
async fn receive(
    State(s): State<AppState>,
    Path(channel): Path<Channel>,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> AppResult<Reply<ReceiptsApplied>> {
    let Some(secret) = s.config.channel(channel).secret else {
        return Err(AppError::Unauthorized);
    };
    let signed = headers
        .get(signature::HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|sig| signature::verify(&secret, &body, sig));
    if !signed {
        return Err(AppError::Unauthorized);
    }
    let receipts: Vec<ReceiptIn> = parse_json(&body)?;
    parley_shared::fields::check_len("body", receipts.len(), MAX_RECEIPTS)?;
    let now = Timestamp::now();
    let receipts: Vec<Receipt> = receipts
        .into_iter()
        .map(|r| Receipt {
            message_id: r.message_id.into(),
            status: r.status.into(),
            at: r.at.unwrap_or(now),
            error_code: r.error_code.map(Into::into),
        })
        .collect();
    let applied = db::delivery::apply_receipts(&s.pool, channel, &receipts).await?;
    for status in &applied {
        metrics::counter!(RECIPIENTS, "channel" => channel.as_str(), "status" => status.as_str())
            .increment(1);
    }
    Ok(Reply::ok(ReceiptsApplied {
        received: receipts.len(),
        applied: applied.len(),
    }))
}
