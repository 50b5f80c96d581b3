//! A channel provider on 127.0.0.1 speaking the providers' HTTP contract (docs/api.md, Broadcasts), scripted per test.
//! Like a real provider it honours `Idempotency-Key`: a key it already accepted gets the same
//! `messageId` back and is not a second message.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub enum Reply {
    Accept,
    Status {
        status: u16,
        retry_after: Option<u64>,
        code: Option<&'static str>,
    },
    /// This status with this JSON body, as written (for answers a provider should not give).
    Raw {
        status: u16,
        body: Value,
    },
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Reply::Status {
            status,
            retry_after: None,
            code: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Call {
    pub idempotency_key: String,
    pub body: Value,
    pub at: Instant,
    pub status: u16,
}

/// Runs with a message's id after the provider accepted it and before it answers.
pub type BeforeAnswer = Arc<
    dyn Fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

#[derive(Default)]
struct Inner {
    calls: Vec<Call>,
    script: VecDeque<Reply>,
    per_key: HashMap<String, VecDeque<Reply>>,
    default: Option<Reply>,
    delay: Duration,
    accepted: HashMap<String, String>,
    before_answer: Option<BeforeAnswer>,
}

#[derive(Clone)]
pub struct FakeProvider {
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    stop: CancellationToken,
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        if Arc::strong_count(&self.inner) <= 2 {
            self.stop.cancel();
        }
    }
}

impl FakeProvider {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/send", axum::routing::post(receive))
            .with_state(inner.clone());
        let (addr, stop) = crate::loopback::serve(app).await;
        FakeProvider {
            url: format!("http://{addr}/send"),
            inner,
            stop,
        }
    }

    /// Replies for the next calls, whatever their key; then the default (accept).
    pub fn script(&self, replies: Vec<Reply>) {
        self.inner.lock().script = replies.into();
    }

    /// Replies for the next calls with this idempotency key.
    pub fn script_for(&self, key: &str, replies: Vec<Reply>) {
        self.inner
            .lock()
            .per_key
            .insert(key.to_owned(), replies.into());
    }

    pub fn always(&self, reply: Reply) {
        self.inner.lock().default = Some(reply);
    }

    pub fn delay(&self, d: Duration) {
        self.inner.lock().delay = d;
    }

    /// Runs `hook` with the message id of each accepted message before answering the send:
    /// what the provider does then (a receipt, say) happens before the worker hears back.
    pub fn before_answer(&self, hook: BeforeAnswer) {
        self.inner.lock().before_answer = Some(hook);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.inner.lock().calls.clone()
    }

    /// Messages accepted, one per idempotency key.
    pub fn accepted(&self) -> HashMap<String, String> {
        self.inner.lock().accepted.clone()
    }
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let delay = inner.lock().delay;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (response, accepted) = answer(&inner, key, body);
    let hook = inner.lock().before_answer.clone();
    if let (Some(hook), Some(id)) = (hook, accepted) {
        hook(id).await;
    }
    response
}

/// The scripted answer to a call, and the message id when it is accepted.
fn answer(inner: &Mutex<Inner>, key: String, body: Value) -> (Response, Option<String>) {
    let mut s = inner.lock();
    let reply = s
        .per_key
        .get_mut(&key)
        .and_then(VecDeque::pop_front)
        .or_else(|| s.script.pop_front())
        .or_else(|| s.default.clone())
        .unwrap_or(Reply::Accept);
    let mut accepted = None;
    let (status, response) = match reply {
        Reply::Accept => {
            let n = s.accepted.len();
            // Unique across providers, as a real provider's ids are.
            let id = s
                .accepted
                .entry(key.clone())
                .or_insert_with(|| format!("msg-{n}-{}", uuid::Uuid::now_v7().simple()))
                .clone();
            accepted = Some(id.clone());
            (200, Json(json!({"messageId": id})).into_response())
        }
        Reply::Status {
            status,
            retry_after,
            code,
        } => {
            let mut r = (
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                Json(json!({"code": code.unwrap_or("provider_error"), "message": format!("scripted {status}")})),
            )
                .into_response();
            if let Some(ra) = retry_after {
                r.headers_mut().insert("retry-after", ra.into());
            }
            (status, r)
        }
        Reply::Raw { status, body } => (
            status,
            (
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                Json(body),
            )
                .into_response(),
        ),
    };
    s.calls.push(Call {
        idempotency_key: key,
        body,
        at: Instant::now(),
        status,
    });
    (response, accepted)
}
