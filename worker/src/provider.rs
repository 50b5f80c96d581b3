//! Channel providers over one HTTP contract (docs/api.md, Broadcasts): `POST {recipientId, channel, to,
//! content, templateId, variables}` with `Idempotency-Key: <recipientId>`; a 2xx with
//! `{"messageId"}` is sent, 429 and 5xx are retried with exponential backoff and jitter
//! (honouring `Retry-After`), other 4xx fail the recipient. A channel without a URL uses the
//! built-in sandbox provider, which accepts every message.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use parley_domain::Channel;
use serde::Serialize;
use uuid::Uuid;

use crate::outbound::read_prefix;
use crate::status_watch::{Go, stopped};
use parley_types::fields::storable;
use parley_types::metric_names::{PROVIDER_CALLS, PROVIDER_DURATION};

/// The longest `Retry-After` honoured in place; longer ones wait this long.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
const TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message<'a> {
    pub recipient_id: Uuid,
    /// Which send of the recipient this is (0, then N after the Nth `retry-failed`): not in
    /// the body, in the key ([`Message::idempotency_key`]).
    #[serde(skip)]
    pub send_generation: i32,
    pub channel: Channel,
    pub to: &'a str,
    pub content: &'a str,
    pub template_id: Uuid,
    pub variables: &'a serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<&'a str>,
    /// A marketing message's unsubscribe link (docs/api.md, Unsubscribing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsubscribe_url: Option<&'a str>,
    /// Headers the provider puts on the email: a marketing email's `List-Unsubscribe` and
    /// `List-Unsubscribe-Post`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<EmailHeaders>,
}

/// A marketing email's unsubscribe headers, named as they go on the email.
#[derive(Debug, Serialize)]
pub struct EmailHeaders {
    #[serde(rename = "List-Unsubscribe")]
    pub list_unsubscribe: String,
    #[serde(rename = "List-Unsubscribe-Post")]
    pub list_unsubscribe_post: &'static str,
}

impl Message<'_> {
    /// The provider's `Idempotency-Key`: `<recipientId>` for the first send, and
    /// `<recipientId>.r<N>` after the Nth `retry-failed`, so that a provider that honours keys
    /// treats a retry as a new message and a repeat of one send as a duplicate.
    pub fn idempotency_key(&self) -> String {
        match self.send_generation {
            0 => self.recipient_id.to_string(),
            n => format!("{}.r{n}", self.recipient_id),
        }
    }
}

/// How a send ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendResult {
    /// The provider took the message.
    Accepted { message_id: Option<String> },
    /// The provider refused the message (a 4xx other than 429).
    Rejected { code: String, message: String },
    /// Retries ran out on 429, 5xx or network errors.
    GaveUp { code: String, message: String },
    /// The broadcast stopped before the message went out.
    Stopped,
}

#[derive(Debug)]
enum CallError {
    Rejected {
        code: String,
        message: String,
    },
    Retryable {
        code: String,
        message: String,
        retry_after: Option<Duration>,
    },
    Stopped,
}

pub struct Provider {
    client: reqwest::Client,
    /// Parsed once, not at each call (docs/decisions.md, "Provider URLs parsed once").
    urls: HashMap<Channel, reqwest::Url>,
    retry: ExponentialBuilder,
}

impl Provider {
    pub fn new(urls: HashMap<Channel, String>, retry_base: Duration, max_attempts: usize) -> Self {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(256)
            .build()
            .expect("the HTTP client builds");
        let retry = ExponentialBuilder::default()
            .with_min_delay(retry_base)
            .with_factor(2.0)
            .with_max_delay(Duration::from_secs(60))
            .with_jitter()
            .with_max_times(max_attempts.saturating_sub(1));
        let urls = urls
            .into_iter()
            .map(|(channel, url)| {
                let url = reqwest::Url::parse(&url).expect("the configuration checked the URL");
                (channel, url)
            })
            .collect();
        Provider {
            client,
            urls,
            retry,
        }
    }

    /// Sends one message, retrying as the contract says, until sent, refused, out of
    /// attempts, or the broadcast stops.
    pub async fn send(&self, msg: &Message<'_>, status: Go) -> SendResult {
        let Some(url) = self.urls.get(&msg.channel) else {
            metrics::counter!(PROVIDER_CALLS, "channel" => msg.channel.as_str(), "outcome" => "sandbox")
                .increment(1);
            return SendResult::Accepted {
                message_id: Some(format!("sandbox-{}", msg.recipient_id)),
            };
        };
        // Shared by the attempts, not copied for each.
        let body = match serde_json::to_vec(msg) {
            Ok(b) => bytes::Bytes::from(b),
            Err(err) => {
                return SendResult::Rejected {
                    code: "unencodable".into(),
                    message: err.to_string(),
                };
            }
        };
        let sleep_status = status.clone();
        let result = (|| self.call(url, msg, &body, &status))
            .retry(self.retry)
            .when(|e| matches!(e, CallError::Retryable { .. }))
            .adjust(|e, backoff| match e {
                CallError::Retryable {
                    retry_after: Some(ra),
                    ..
                } => Some((*ra).min(MAX_RETRY_AFTER)),
                _ => backoff,
            })
            .sleep(move |d| {
                let status = sleep_status.clone();
                async move {
                    // A pause cuts the wait short; the next attempt then sees it and stops.
                    tokio::select! {
                        _ = tokio::time::sleep(d) => {}
                        _ = stopped(status) => {}
                    }
                }
            })
            .await;
        match result {
            Ok(message_id) => SendResult::Accepted { message_id },
            Err(CallError::Rejected { code, message }) => SendResult::Rejected { code, message },
            Err(CallError::Retryable { code, message, .. }) => SendResult::GaveUp { code, message },
            Err(CallError::Stopped) => SendResult::Stopped,
        }
    }

    async fn call(
        &self,
        url: &reqwest::Url,
        msg: &Message<'_>,
        body: &bytes::Bytes,
        status: &Go,
    ) -> Result<Option<String>, CallError> {
        if !*status.borrow() {
            return Err(CallError::Stopped);
        }
        let channel = msg.channel.as_str();
        let started = Instant::now();
        let response = self
            .client
            .post(url.clone())
            .header("content-type", "application/json")
            .header("idempotency-key", msg.idempotency_key())
            .body(body.clone())
            .send()
            .await;
        metrics::histogram!(PROVIDER_DURATION, "channel" => channel)
            .record(started.elapsed().as_secs_f64());
        let outcome = classify(response).await;
        let label = match &outcome {
            Ok(_) => "sent",
            Err(CallError::Rejected { .. }) => "rejected",
            Err(CallError::Retryable { .. }) => "retryable",
            Err(CallError::Stopped) => "stopped",
        };
        metrics::counter!(PROVIDER_CALLS, "channel" => channel, "outcome" => label).increment(1);
        outcome
    }
}

/// Bytes of a provider's answer read; the rest is not.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The longest `messageId` kept (receipts look recipients up by it).
const MAX_MESSAGE_ID_CHARS: usize = 255;
const MAX_CODE_CHARS: usize = 100;
const MAX_MESSAGE_CHARS: usize = 500;

async fn classify(
    response: reqwest::Result<reqwest::Response>,
) -> Result<Option<String>, CallError> {
    let response = match response {
        Ok(r) => r,
        Err(err) => {
            let code = if err.is_timeout() {
                "timeout"
            } else {
                "network_error"
            };
            return Err(CallError::Retryable {
                code: code.to_owned(),
                message: storable(&err.to_string(), MAX_MESSAGE_CHARS),
                retry_after: None,
            });
        }
    };
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let text = read_prefix(response, MAX_ANSWER_BYTES).await;
    let json: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    // What the provider says is stored: bounded, and without what Postgres cannot hold.
    let field = |name: &str, max: usize| {
        json.as_ref()
            .and_then(|j| j.get(name))
            .and_then(|v| v.as_str())
            .map(|s| storable(s, max))
    };
    if status.is_success() {
        return Ok(field("messageId", MAX_MESSAGE_ID_CHARS));
    }
    let code = field("code", MAX_CODE_CHARS)
        .or_else(|| field("error", MAX_CODE_CHARS))
        .unwrap_or_else(|| format!("http_{}", status.as_u16()));
    let message =
        field("message", MAX_MESSAGE_CHARS).unwrap_or_else(|| storable(&text, MAX_MESSAGE_CHARS));
    if status.as_u16() == 429 || status.is_server_error() {
        Err(CallError::Retryable {
            code,
            message,
            retry_after,
        })
    } else {
        Err(CallError::Rejected { code, message })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_has_a_key_of_its_own() {
        let id = Uuid::now_v7();
        let vars = serde_json::Value::Null;
        let message = |send_generation| Message {
            recipient_id: id,
            send_generation,
            channel: Channel::Email,
            to: "a@example.com",
            content: "Hi",
            template_id: id,
            variables: &vars,
            subject: None,
            unsubscribe_url: None,
            headers: None,
        };
        assert_eq!(message(0).idempotency_key(), id.to_string());
        assert_eq!(message(2).idempotency_key(), format!("{id}.r2"));
        let body = serde_json::to_value(message(2)).unwrap();
        assert!(body.get("sendGeneration").is_none(), "{body}");
    }
}
