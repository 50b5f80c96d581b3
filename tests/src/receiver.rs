//! A webhook receiver on 127.0.0.1 that keeps every request as it arrived (raw body and
//! headers) and answers as the test scripts it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub enum Answer {
    Status(u16),
    StatusRetryAfter(u16, u64),
    /// Waits this long, then answers 200.
    Sleep(Duration),
    Redirect(String),
    /// This status and these bytes as the body.
    Body(u16, &'static [u8]),
}

#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

struct Inner {
    received: Vec<Received>,
    /// How many requests have arrived, for those waiting on them.
    arrived: tokio::sync::watch::Sender<usize>,
    script: VecDeque<Answer>,
    always: Option<Answer>,
    in_flight: usize,
    peak_in_flight: usize,
}

pub struct Receiver {
    /// `http://127.0.0.1:<port>/hook`
    pub url: String,
    inner: Arc<Mutex<Inner>>,
    stop: CancellationToken,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receiver {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            received: Vec::new(),
            arrived: tokio::sync::watch::Sender::new(0),
            script: VecDeque::new(),
            always: None,
            in_flight: 0,
            peak_in_flight: 0,
        }));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .route("/elsewhere", axum::routing::post(receive))
            .with_state(inner.clone());
        let (addr, stop) = crate::loopback::serve(app).await;
        Receiver {
            url: format!("http://{addr}/hook"),
            inner,
            stop,
        }
    }

    /// Answers for the next requests, in order; then 200 (or what `always` says).
    pub fn script(&self, answers: Vec<Answer>) {
        self.inner.lock().script = answers.into();
    }

    pub fn always(&self, answer: Answer) {
        self.inner.lock().always = Some(answer);
    }

    /// The most requests it has been answering at once.
    pub fn peak_in_flight(&self) -> usize {
        self.inner.lock().peak_in_flight
    }

    /// The requests it is answering now.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight
    }

    pub fn received(&self) -> Vec<Received> {
        self.inner.lock().received.clone()
    }

    /// Waits until `n` requests have arrived (at most `secs` seconds): woken by each arrival,
    /// not polling. The requests so far.
    pub async fn received_at_least(&self, n: usize, secs: u64) -> Vec<Received> {
        let mut arrived = self.inner.lock().arrived.subscribe();
        // The watch's guard is dropped inside: `receive` sends while it holds the lock that
        // `received` takes.
        let came = tokio::time::timeout(Duration::from_secs(secs), async {
            arrived.wait_for(|&got| got >= n).await.is_ok()
        })
        .await;
        if came != Ok(true) {
            panic!("{} of {n} requests after {secs}s", self.received().len());
        }
        self.received()
    }
}

async fn receive(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let answer = {
        let mut s = inner.lock();
        s.received.push(Received {
            headers,
            body,
            at: Instant::now(),
        });
        s.arrived.send_replace(s.received.len());
        s.in_flight += 1;
        s.peak_in_flight = s.peak_in_flight.max(s.in_flight);
        s.script
            .pop_front()
            .or_else(|| s.always.clone())
            .unwrap_or(Answer::Status(200))
    };
    let _counted = InFlight(inner);
    answer_with(answer).await
}

/// Counts a request out of `in_flight` when its handler ends: answered, or dropped because its
/// client went away (a sender's timeout).
struct InFlight(Arc<Mutex<Inner>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().in_flight -= 1;
    }
}

async fn answer_with(answer: Answer) -> Response {
    match answer {
        Answer::Status(code) => {
            (StatusCode::from_u16(code).unwrap_or(StatusCode::OK), "ok").into_response()
        }
        Answer::StatusRetryAfter(code, secs) => {
            let mut r = (
                StatusCode::from_u16(code).unwrap_or(StatusCode::OK),
                "later",
            )
                .into_response();
            r.headers_mut().insert("retry-after", secs.into());
            r
        }
        Answer::Sleep(d) => {
            tokio::time::sleep(d).await;
            (StatusCode::OK, "slept").into_response()
        }
        Answer::Body(code, bytes) => {
            (StatusCode::from_u16(code).unwrap_or(StatusCode::OK), bytes).into_response()
        }
        Answer::Redirect(to) => {
            let mut r = StatusCode::FOUND.into_response();
            r.headers_mut()
                .insert("location", to.parse().expect("location"));
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_whose_client_gave_up_is_no_longer_in_flight() {
        let receiver = Receiver::start().await;
        receiver.always(Answer::Sleep(Duration::from_secs(60)));
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        for _ in 0..2 {
            let sent = client.post(&receiver.url).body("{}").send().await;
            assert!(sent.is_err_and(|e| e.is_timeout()));
            assert!(
                crate::wait_until(5, || async { receiver.in_flight() == 0 }).await,
                "the dropped handler is counted out"
            );
        }
        assert_eq!(receiver.peak_in_flight(), 1);
    }
}
