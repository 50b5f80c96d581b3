//! The worker as a process: stopped with SIGTERM (a deploy) or killed with SIGKILL in the
//! middle of a send, and two or four of them on one broadcast. Every recipient still ends terminal
//! once, under one idempotency key.

use std::collections::{HashMap, HashSet};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use parley_tests::provider::FakeProvider;
use parley_tests::receiver::{Answer, Receiver};
use parley_tests::{TestApp, seed};
use serde_json::{Value, json};

/// Starts `parley-worker` against the test's database and Redis prefix.
async fn worker(app: &TestApp, provider: &FakeProvider) -> Child {
    worker_with(
        app,
        &[
            ("PARLEY_CHANNEL_EMAIL_URL", &provider.url),
            ("PARLEY_CHANNEL_EMAIL_RATE", "200"),
        ],
    )
    .await
}

/// A worker process, once its `/readyz` answers 200 (it reaches Postgres and Redis and its
/// consumers are starting).
async fn worker_with(app: &TestApp, extra: &[(&str, &str)]) -> Child {
    worker_serving(app, extra).await.0
}

/// [`worker_with`], and the address of its `/metrics`.
async fn worker_serving(app: &TestApp, extra: &[(&str, &str)]) -> (Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut command = Command::new(env!("CARGO_BIN_EXE_worker-under-test"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", &app.database_url)
        .env("REDIS_URL", &app.redis_url)
        .env("PARLEY_REDIS_PREFIX", &app.redis_prefix)
        .env("PARLEY_WORKER_METRICS_ADDR", &addr)
        .env("PARLEY_DB_MAX_CONNECTIONS", "4")
        .env("PARLEY_TICK_MS", "100")
        .env("PARLEY_RECONCILE_AFTER_SECS", "2")
        .env("PARLEY_CLAIM_LEASE_SECS", "3")
        .env("RUST_LOG", "warn")
        .current_dir(std::env::temp_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    for (k, v) in extra {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("parley-worker starts");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ready = reqwest::get(format!("http://{addr}/readyz"))
            .await
            .is_ok_and(|r| r.status() == 200);
        if ready {
            return (child, addr);
        }
        if let Some(status) = child.try_wait().expect("the worker's status") {
            panic!("the worker exited before it was ready: {status}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the worker answers /readyz with 200"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn all_recipients(app: &TestApp, id: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(
            pages <= 10000,
            "the cursor walks more than 10000 pages: it does not end"
        );
        let page = app
            .get(&format!(
                "/api/v1/broadcasts/{id}/recipients?pageSize=100{cursor}"
            ))
            .await;
        out.extend(page.data().as_array().unwrap().iter().cloned());
        if page.body["meta"]["hasNext"] != true {
            return out;
        }
        cursor = format!(
            "&cursor={}",
            page.body["meta"]["endCursor"].as_str().unwrap()
        );
    }
}

fn ended(b: &Value) -> bool {
    matches!(b["data"]["status"].as_str(), Some("completed" | "failed"))
}

/// Each recipient sent and accepted once, under its own id as the only key.
fn assert_each_recipient_sent_once(recipients: &[Value], provider: &FakeProvider) {
    assert!(
        recipients.iter().all(|r| r["status"] == "sent"),
        "every recipient is sent"
    );
    let ids: HashSet<&str> = recipients
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let accepted = provider.accepted();
    assert_eq!(
        accepted.len(),
        recipients.len(),
        "one accepted message per recipient"
    );
    assert!(
        accepted.keys().all(|k| ids.contains(k.as_str())),
        "no key but a recipient's id"
    );
    for r in recipients {
        let id = r["id"].as_str().unwrap();
        assert_eq!(
            r["externalMessageId"].as_str(),
            accepted.get(id).map(String::as_str)
        );
    }
}

/// Recipients the provider was asked to send more than once (under the same key).
fn sent_twice(provider: &FakeProvider) -> HashSet<String> {
    let mut calls: HashMap<String, usize> = HashMap::new();
    for c in provider.calls() {
        *calls.entry(c.idempotency_key).or_default() += 1;
    }
    calls
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| k)
        .collect()
}

#[tokio::test]
async fn a_worker_killed_mid_send_is_taken_over_and_resends_almost_nothing() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    // The default lease and reconciliation delay: what brings the work back is the dead
    // worker's claims running out and its in-flight jobs returning to the queue.
    let env = [
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
        ("PARLEY_CHANNEL_EMAIL_RATE", "100"),
        ("PARLEY_CLAIM_LEASE_SECS", "6"),
        ("PARLEY_RECONCILE_AFTER_SECS", "30"),
    ];
    let first = Killed(worker_with(&app, &env).await);
    let id = seed::email_broadcast(&app, 1_000).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 60, |b| {
        b["data"]["sentCount"].as_i64() >= Some(300)
    })
    .await;
    drop(first); // SIGKILL: no drain, claims and in-flight jobs left behind
    // What the dead worker left: the provider's calls so far, and the outcomes Postgres holds
    // (read once a commit it had sent could have landed; the lease keeps the rest untouched).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let called_before_kill: HashSet<String> = provider
        .calls()
        .into_iter()
        .map(|c| c.idempotency_key)
        .collect();
    let recorded_at_kill: HashSet<String> = all_recipients(&app, &id)
        .await
        .iter()
        .filter(|r| r["status"] != "pending")
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(recorded_at_kill.len() < 1_000, "the kill came mid-send");
    let _second = Killed(worker_with(&app, &env).await);
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 120, ended)
        .await;
    assert_eq!(b["data"]["status"], "completed");
    assert_eq!(b["data"]["sentCount"], 1_000);
    assert_each_recipient_sent_once(&all_recipients(&app, &id).await, &provider);
    // Sent twice: only recipients the provider was asked for before the kill and whose outcome
    // Postgres did not hold yet (sent, not yet written). How many those are depends on how fast
    // outcomes are written (ops/bench/faults measures it on release binaries: 0.06-0.12%); this
    // debug build beside the whole suite saw 7, 16 and once 58 (CI) before unsubscribe links,
    // and 42, 94, 109 and 112 with them under `ops/test`'s six test threads (17 and 43 with the
    // links' signing left out: each send signs one in a debug build of the crypto crates). So
    // the set gets an exact bound and the count a loose one: a second and a half of sends at
    // the rate of 100 a second.
    let in_flight: HashSet<&String> = called_before_kill.difference(&recorded_at_kill).collect();
    let twice = sent_twice(&provider);
    assert!(
        twice.iter().all(|k| in_flight.contains(k)),
        "a recipient sent twice was not in flight at the kill: {} sent twice, {} in flight",
        twice.len(),
        in_flight.len()
    );
    assert!(
        twice.len() <= 150,
        "{} of 1,000 recipients were sent twice",
        twice.len()
    );
}

#[tokio::test]
async fn a_receipt_sent_before_the_provider_answers_ends_applied() {
    let secret = "receipt-secret";
    let provider = FakeProvider::start().await;
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_CHANNEL_EMAIL_SECRET", secret)])
        .start()
        .await;
    // The provider posts each message's `delivered` receipt before it answers the send, so
    // the receipt reaches Parley before the worker can write the message id.
    let answers: Arc<Mutex<Vec<Value>>> = Arc::default();
    provider.before_answer(Arc::new({
        let (client, base, answers) = (app.client.clone(), app.base.clone(), answers.clone());
        move |message_id| {
            let (client, base, answers) = (client.clone(), base.clone(), answers.clone());
            Box::pin(async move {
                let body = json!([{"messageId": message_id, "status": "delivered"}]).to_string();
                let signature = parley_domain::signature::sign(secret, body.as_bytes());
                let answer: Value =
                    parley_tests::post_receipts(&client, &base, "email", body, signature)
                        .await
                        .json()
                        .await
                        .expect("a JSON answer");
                answers.lock().unwrap().push(answer["data"].clone());
            })
        }
    }));
    let _worker = Killed(worker(&app, &provider).await);
    let id = seed::email_broadcast(&app, 3).await;
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 60, |b| {
            b["data"]["deliveredCount"] == 3
        })
        .await;
    assert_eq!(b["data"]["status"], "completed");
    assert_eq!(
        *answers.lock().unwrap(),
        vec![json!({"received": 1, "applied": 0, "deferred": 1}); 3],
        "each receipt came before its outcome was written"
    );
    let recipients = all_recipients(&app, &id).await;
    assert!(recipients.iter().all(|r| r["status"] == "delivered"));
}

#[tokio::test]
async fn sigterm_mid_send_drains_and_a_new_worker_finishes_the_broadcast() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let env = [
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
        ("PARLEY_CHANNEL_EMAIL_RATE", "200"),
        // Jobs in flight hold up to 800 recipients, 4 s of sending at 200/s: the drain is
        // cut short and the rest is found again from Postgres.
        ("PARLEY_WORKER_DRAIN_SECS", "2"),
    ];
    let mut first = Killed(worker_with(&app, &env).await);
    let id = seed::email_broadcast(&app, 2_000).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 60, |b| {
        b["data"]["sentCount"].as_i64() >= Some(100)
    })
    .await;
    let asked = std::time::Instant::now();
    parley_tests::terminate(&first.0);
    let status = loop {
        if let Some(status) = first.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(6),
            "the worker stops within PARLEY_WORKER_DRAIN_SECS"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "a drained worker exits 0: {status}");
    let stopped = app.get(&format!("/api/v1/broadcasts/{id}")).await;
    assert!(
        stopped.data()["sentCount"].as_i64() < Some(2_000),
        "the stop came mid-send"
    );
    let _second = Killed(worker_with(&app, &env).await);
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 120, ended)
        .await;
    assert_eq!(b["data"]["status"], "completed");
    assert_eq!(b["data"]["sentCount"], 2_000);
    assert_each_recipient_sent_once(&all_recipients(&app, &id).await, &provider);
}

/// The value of the series of `name` whose labels include every one of `labels`, in a
/// Prometheus text exposition; `None` when absent.
fn series(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

async fn scrape(addr: &str) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("/metrics answers")
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn two_and_four_worker_processes_share_a_broadcast_without_double_sends() {
    for workers in [2, 4] {
        let provider = FakeProvider::start().await;
        let app = TestApp::builder().own_database().start().await;
        let env = [
            ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
            ("PARLEY_CHANNEL_EMAIL_RATE", "400"),
        ];
        let mut running = Vec::new();
        for _ in 0..workers {
            let (child, addr) = worker_serving(&app, &env).await;
            running.push((Killed(child), addr));
        }
        let id = seed::email_broadcast(&app, 1_000).await;
        let b = app
            .wait_for(&format!("/api/v1/broadcasts/{id}"), 120, ended)
            .await;
        assert_eq!(b["data"]["sentCount"], 1_000, "{workers} workers");
        let recipients = all_recipients(&app, &id).await;
        assert_each_recipient_sent_once(&recipients, &provider);
        assert!(
            sent_twice(&provider).is_empty(),
            "{workers} workers: sent twice"
        );
        // Each worker counts what it sent: the sum across them is the broadcast.
        let mut sent = 0.0;
        for (_, addr) in &running {
            let text = scrape(addr).await;
            sent += series(
                &text,
                "parley_broadcast_recipients_total",
                &[r#"channel="email""#, r#"status="sent""#],
            )
            .expect("the sent counter");
        }
        assert_eq!(sent, 1_000.0, "{workers} workers: counters summed");
    }
}

/// A queue's depth is one value in Redis: across three workers exactly one reports it, so a
/// dashboard's sum() reads it as its max() does. A backlog gauge only a kind of worker sets is
/// exported only by that kind.
#[tokio::test]
async fn shared_gauges_are_reported_by_one_worker_of_several() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    // No worker consumes broadcast-dispatch: the broadcast's job stays waiting in its queue.
    let env = [
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
        ("PARLEY_WORKER_QUEUES", "sla-check"),
    ];
    let mut addrs = Vec::new();
    let mut running = Vec::new();
    for _ in 0..3 {
        let (child, addr) = worker_serving(&app, &env).await;
        running.push(Killed(child));
        addrs.push(addr);
    }
    seed::email_broadcast(&app, 3).await;
    let reporter = one_reports_the_depth(&addrs).await;
    // A worker that stops gives its lease up: another reports at its next export, well within
    // the lease it would otherwise wait out (15 s).
    parley_tests::terminate(&running[reporter].0);
    running[reporter].0.wait().expect("the worker exits");
    addrs.remove(reporter);
    running.remove(reporter);
    let stopped = std::time::Instant::now();
    one_reports_the_depth(&addrs).await;
    assert!(
        stopped.elapsed() < Duration::from_secs(8),
        "the lease was handed on when its holder stopped ({:?})",
        stopped.elapsed()
    );
}

#[tokio::test]
async fn a_worker_runs_on_the_threads_it_is_given() {
    let app = TestApp::builder().own_database().start().await;
    for threads in ["1", "3"] {
        let (child, addr) = worker_serving(&app, &[("PARLEY_WORKER_THREADS", threads)]).await;
        let _running = Killed(child);
        let text = scrape(&addr).await;
        assert_eq!(
            series(&text, "parley_worker_runtime_threads", &[]),
            Some(threads.parse().unwrap()),
            "{text}"
        );
    }
}

/// Waits until a worker reports the broadcast-dispatch queue's waiting job and checks that it
/// is the only one; answers its index.
async fn one_reports_the_depth(addrs: &[String]) -> usize {
    let ready = [r#"queue="broadcast-dispatch""#, r#"state="ready""#];
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut values = Vec::new();
        for addr in addrs {
            let text = scrape(addr).await;
            values.push(series(&text, "parley_queue_depth", &ready).expect("the depth gauge"));
            assert!(
                series(&text, "parley_sla_checks_backlog", &[]).is_some(),
                "an sla-check worker exports the SLA backlog"
            );
            assert!(
                series(&text, "parley_webhook_outbox_backlog", &[]).is_none(),
                "only webhook workers export the outbox backlog"
            );
        }
        let sum: f64 = values.iter().sum();
        let max = values.iter().copied().fold(0.0, f64::max);
        let reporting: Vec<usize> = (0..values.len()).filter(|i| values[*i] > 0.0).collect();
        if max >= 1.0 {
            assert_eq!(
                reporting.len(),
                1,
                "one worker reports the depth: {values:?}"
            );
            assert_eq!(sum, max, "sum() reads the depth once: {values:?}");
            return reporting[0];
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no worker reported the waiting job: {values:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn webhook_events_survive_a_killed_worker_and_a_flushed_redis() {
    let receiver = Receiver::start().await;
    receiver.always(Answer::Sleep(Duration::from_millis(150)));
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true")])
        .start()
        .await;
    let env = [
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PARLEY_WEBHOOK_RETRY_BASE_MS", "100"),
        ("PARLEY_WEBHOOK_TIMEOUT_MS", "2000"),
        ("PARLEY_WEBHOOK_CONCURRENCY_PER_ENDPOINT", "4"),
    ];
    let first = Killed(worker_with(&app, &env).await);
    app.post(
        "/api/v1/webhooks",
        json!({"url": receiver.url, "events": ["lead.created"]}),
    )
    .await
    .expect(201);
    let mut leads = HashSet::new();
    for i in 0..40 {
        leads.insert(
            app.post("/api/v1/leads", json!({"name": format!("Lead {i}")}))
                .await
                .id(),
        );
    }
    receiver.received_at_least(4, 30).await;
    drop(first); // SIGKILL with deliveries in flight
    app.flush_redis().await;
    let _second = Killed(worker_with(&app, &env).await);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let delivered: HashSet<String> = receiver
            .received()
            .iter()
            .map(|r| r.json()["data"]["id"].as_str().unwrap().to_owned())
            .collect();
        if delivered == leads {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} of 40 events delivered",
            delivered.len()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The receiver can dedupe: one delivery id per event.
    let mut ids_per_lead: HashMap<String, HashSet<String>> = HashMap::new();
    for r in receiver.received() {
        ids_per_lead
            .entry(r.json()["data"]["id"].as_str().unwrap().to_owned())
            .or_default()
            .insert(r.header("x-parley-delivery").to_owned());
    }
    assert!(ids_per_lead.values().all(|ids| ids.len() == 1));
}
