//! Delivery receipts from channel providers: `POST /api/v1/channels/{channel}/receipts`,
//! signed like a webhook with the channel's `PARLEY_CHANNEL_<CHANNEL>_SECRET` instead of an
//! API key. Nothing proportional to the request happens before the signature is checked,
//! beyond reading the body within its limit: the header is parsed (a few candidates at most)
//! before the body is read, then one MAC is computed.

use crate::envelope::{Envelope, Reply};
use crate::error::{ApiError, AppError, AppResult};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use parley_domain::Channel;
use parley_domain::broadcasts::{ReceiptIn, ReceiptsApplied};
use parley_domain::signature;
use parley_types::error::{FieldError, MAX_DETAILS};
use parley_types::metric_names::RECIPIENTS;
use parley_types::time::Timestamp;
use parley_usecases::receipts::Receipt;
use secrecy::{ExposeSecret, SecretString};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Path, RawBody, parse_json};
use crate::middleware::guard::Limits;
use crate::state::AppState;

/// Receipts one request may carry.
const MAX_RECEIPTS: usize = 10_000;
/// Room for [`MAX_RECEIPTS`] receipts with long message ids.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Receipt calls served at once, and how long one may take (its body included), within the
/// API's own limits: a caller that has not proved itself yet (a well-formed but wrong
/// signature, a slow body) can hold no more than these of the API's capacity.
pub const LIMITS: Limits = Limits {
    request_timeout: std::time::Duration::from_secs(10),
    max_in_flight: 32,
};

/// A request to a channel that has a secret, offering well-formed signatures; checked before
/// the body is read ([`signature_first`]).
#[derive(Clone)]
struct Signed {
    channel: Channel,
    secret: SecretString,
    candidates: signature::Candidates,
}

/// Answers 401 before the body is read (before `crate::middleware::bodies`) when the channel
/// has no secret or the signature header offers no well-formed candidate; hands what it
/// parsed to the handler.
pub async fn signature_first(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let (mut parts, body) = req.into_parts();
    match Signed::parse(&mut parts, &state).await {
        Ok(signed) => {
            parts.extensions.insert(signed);
            next.run(axum::extract::Request::from_parts(parts, body))
                .await
        }
        Err(err) => axum::response::IntoResponse::into_response(err),
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match parts.extensions.remove::<Signed>() {
            Some(signed) => Ok(signed),
            None => Signed::parse(parts, state).await,
        }
    }
}

impl Signed {
    async fn parse(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Path(channel) = Path::<Channel>::from_request_parts(parts, state).await?;
        let secret = state
            .config
            .channel(channel)
            .secret
            .ok_or(AppError::Unauthorized)?;
        let candidates = parts
            .headers
            .get(signature::HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(signature::Candidates::parse)
            .ok_or(AppError::Unauthorized)?;
        Ok(Signed {
            channel,
            secret,
            candidates,
        })
    }
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(receive))
}

/// Apply delivery receipts. Each recipient only moves forward (`read` before `delivered`
/// ends `read`); counters follow. `bounced` (with `bounceType`) fails the message and
/// `complained` marks it; both feed the suppression ledger. Signed with `X-Parley-Signature: sha256=<hex HMAC-SHA256
/// of the raw body under the channel's secret>`.
#[utoipa::path(post, path = "/api/v1/channels/{channel}/receipts", tag = "channels",
    params(("channel" = Channel, Path, description = "The channel whose provider sends the receipts")),
    request_body = Vec<ReceiptIn>,
    responses((status = 200, description = "How many receipts were applied", body = Envelope<ReceiptsApplied>)))]
async fn receive(
    State(state): State<AppState>,
    signed: Signed,
    RawBody(body): RawBody,
) -> AppResult<Reply<ReceiptsApplied>> {
    if !signed
        .candidates
        .verify(signed.secret.expose_secret(), &body)
    {
        return Err(AppError::Unauthorized.into());
    }
    let channel = signed.channel;
    let receipts: Vec<ReceiptIn> = parse_json(&body)?;
    parley_types::fields::check_len("body", receipts.len(), MAX_RECEIPTS)?;
    let errors: Vec<FieldError> = receipts
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.check(i).err())
        .take(MAX_DETAILS)
        .collect();
    if !errors.is_empty() {
        return Err(AppError::Validation(errors).into());
    }
    let now = Timestamp::now();
    let receipts: Vec<Receipt> = receipts
        .into_iter()
        .map(|r| Receipt {
            message_id: r.message_id.into(),
            status: r.status,
            bounce_type: r.bounce_type,
            at: r.at.unwrap_or(now),
            error_code: r.error_code.map(Into::into),
        })
        .collect();
    let outcome = parley_usecases::receipts::apply(state.use_cases(), channel, &receipts).await?;
    for (channel, status) in &outcome.changed {
        metrics::counter!(RECIPIENTS, "channel" => channel.as_str(), "status" => status.as_str())
            .increment(1);
    }
    Ok(Reply::ok(ReceiptsApplied {
        received: receipts.len(),
        applied: outcome.applied,
        deferred: outcome.deferred,
    }))
}
