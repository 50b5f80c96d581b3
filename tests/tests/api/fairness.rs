//! Tenant isolation: one organization's large broadcast, its webhook backlog, its own send
//! rate or its segment counts do not hold back another organization's work; a `high`
//! broadcast goes ahead of queued bulk work; the limits an operator sets for one organization
//! replace the defaults for it alone.

use std::time::Duration;

use parley_db::org_limits::{Changes, Setting};
use parley_jobs::{Jobs, Lane, QueueName};
use parley_tests::TestApp;
use parley_tests::email_worker::EmailWorker;
use parley_tests::receiver::{Answer, Receiver};
use parley_types::enums::Channel;
use parley_types::ids::{OrgId, RecipientId};
use serde_json::{Value, json};
use uuid::Uuid;

/// `n` contacts of `org`, written straight to Postgres.
pub(crate) async fn contacts_of(app: &TestApp, org: Uuid, n: usize) -> Vec<Uuid> {
    let ids: Vec<Uuid> = (0..n).map(|_| Uuid::now_v7()).collect();
    sqlx::query(
        "INSERT INTO contacts (id, organization_id, name, email, source)
         SELECT id, $1, 'Contact ' || n, 'c' || n || '-' || id || '@example.com', 'seed'
         FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, n)",
    )
    .bind(org)
    .bind(&ids)
    .execute(&app.pool)
    .await
    .expect("seed contacts");
    ids
}

/// A new organization with `n` contacts: its id, its key and the contacts.
pub(crate) async fn org(app: &TestApp, name: &str, n: usize) -> (Uuid, String, Vec<Uuid>) {
    let (org, key) = app.new_org(name).await;
    let contacts = contacts_of(app, org, n).await;
    (org, key, contacts)
}

/// An organization's email broadcast to `contacts`, sent now with `priority`; its id.
pub(crate) async fn send_now(
    app: &TestApp,
    key: &str,
    contacts: &[Uuid],
    priority: &str,
) -> String {
    let template = app
        .send(
            reqwest::Method::POST,
            "/api/v1/templates",
            Some(key),
            Some(&json!({"name": "T", "channel": "email", "body": "Hi"})),
        )
        .await;
    template.expect(201);
    let created = app
        .send(
            reqwest::Method::POST,
            "/api/v1/broadcasts",
            Some(key),
            Some(&json!({"broadcastName": "B", "templateId": template.id(),
                         "contactIds": contacts, "sendNow": true, "priority": priority})),
        )
        .await;
    created.expect(201);
    assert_eq!(created.data()["priority"], priority);
    created.id()
}

pub(crate) async fn broadcast(app: &TestApp, key: &str, id: &str) -> Value {
    app.send(
        reqwest::Method::GET,
        &format!("/api/v1/broadcasts/{id}"),
        Some(key),
        None,
    )
    .await
    .data()
    .clone()
}

/// Waits (at most `secs`) until broadcast `id` has sent something.
async fn wait_sending(app: &TestApp, key: &str, id: &str, secs: u64) {
    let started = parley_tests::wait_until(secs, || async {
        broadcast(app, key, id).await["sentCount"].as_i64() > Some(0)
    })
    .await;
    assert!(started, "broadcast {id} sent nothing in {secs} s");
}

/// Waits (at most `secs`) until broadcast `id` completed; returns A's broadcast as it was
/// then.
async fn completed_while(
    app: &TestApp,
    key: &str,
    id: &str,
    other_key: &str,
    other: &str,
    secs: u64,
) -> Value {
    let done = parley_tests::wait_until(secs, || async {
        broadcast(app, key, id).await["status"] == "completed"
    })
    .await;
    assert!(done, "broadcast {id} did not complete in {secs} s");
    broadcast(app, other_key, other).await
}

#[tokio::test]
async fn a_small_broadcast_is_sent_while_another_organizations_large_one_is_sending() {
    let rig = EmailWorker::start(TestApp::builder(), Duration::from_millis(50), &[]).await;
    let app = &rig.app;
    // 30 jobs of 200 at 50 ms a message: seconds of work for A.
    let (_, a_key, a_contacts) = org(&rig.app, "Organization A", 6_000).await;
    let (_, b_key, b_contacts) = org(&rig.app, "Organization B", 5).await;
    let a = send_now(app, &a_key, &a_contacts, "normal").await;
    wait_sending(app, &a_key, &a, 30).await;
    let b = send_now(app, &b_key, &b_contacts, "normal").await;
    let a_then = completed_while(app, &b_key, &b, &a_key, &a, 30).await;
    assert_eq!(
        a_then["status"], "sending",
        "A's broadcast ended before B's 5 recipients were sent: {a_then}"
    );
    assert!(
        a_then["pendingCount"].as_i64().unwrap() > 1_000,
        "B waited for most of A's broadcast: {a_then}"
    );
    assert_eq!(broadcast(app, &b_key, &b).await["sentCount"], 5);
}

#[tokio::test]
async fn a_high_priority_broadcast_goes_ahead_of_queued_bulk_work() {
    // One job at a time, and no organization limit in the way: only the order counts.
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::from_millis(50),
        &[
            ("PARLEY_WORKER_CONCURRENCY", "1"),
            ("PARLEY_SEND_JOBS_PER_ORG", "100"),
            ("PARLEY_SEND_READY_JOBS", "2"),
        ],
    )
    .await;
    let app = &rig.app;
    let (org, key, bulk_contacts) = org(&rig.app, "Organization A", 4_000).await;
    let urgent_contacts = contacts_of(app, org, 3).await;
    let bulk = send_now(app, &key, &bulk_contacts, "normal").await;
    wait_sending(app, &key, &bulk, 30).await;
    let urgent = send_now(app, &key, &urgent_contacts, "high").await;
    let bulk_then = completed_while(app, &key, &urgent, &key, &bulk, 60).await;
    assert!(
        bulk_then["pendingCount"].as_i64().unwrap() > 1_000,
        "the high-priority broadcast waited for the bulk one: {bulk_then}"
    );
}

#[tokio::test]
async fn one_organizations_send_rate_spaces_its_sends_without_slowing_another() {
    // 100 messages a second per organization; A's 8 jobs would hold every slot of the worker
    // while they wait for their turn, but A holds at most 3 of its 4.
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_CHANNEL_EMAIL_RATE", "100")],
    )
    .await;
    let app = &rig.app;
    let (_, a_key, a_contacts) = org(&rig.app, "Organization A", 1_600).await;
    let (_, b_key, b_contacts) = org(&rig.app, "Organization B", 5).await;
    let a = send_now(app, &a_key, &a_contacts, "normal").await;
    wait_sending(app, &a_key, &a, 30).await;
    let started = std::time::Instant::now();
    let b = send_now(app, &b_key, &b_contacts, "normal").await;
    let a_then = completed_while(app, &b_key, &b, &a_key, &a, 30).await;
    let b_took = started.elapsed();
    // A's rate held: at 100 a second, at most about 100 more than the seconds elapsed allow.
    let a_sent = a_then["sentCount"].as_i64().unwrap();
    assert!(a_then["status"] == "sending", "{a_then}");
    assert!(
        a_sent < 1_000,
        "A sent {a_sent} at 100 a second while B's broadcast took {b_took:?}"
    );
}

#[tokio::test]
async fn another_organizations_requests_are_answered_while_one_counts_its_segments_in_parallel() {
    let app = TestApp::builder().own_database().start().await;
    let (a_org, a_key) = app.new_org("Organization A").await;
    let (_, b_key) = app.new_org("Organization B").await;
    contacts_of(&app, a_org, 10_050).await;
    let segment = app
        .send(
            reqwest::Method::POST,
            "/api/v1/segments",
            Some(&a_key),
            Some(&json!({"name": "Everyone", "filter": {}})),
        )
        .await;
    segment.expect(201);
    let path = format!("/api/v1/segments/{}/count", segment.id());
    // Past the bound a count says so instead of counting on.
    let one = app
        .send(reqwest::Method::GET, &path, Some(&a_key), None)
        .await;
    one.expect(200);
    assert_eq!(one.data()["contacts"], 10_000, "{}", one.body);
    assert_eq!(one.data()["totalExact"], false, "{}", one.body);
    // 40 counts at once: A gets its two permits' worth and 429 for the rest; B is answered.
    let counts = futures::future::join_all(
        (0..40).map(|_| app.send(reqwest::Method::GET, &path, Some(&a_key), None)),
    );
    let lists = futures::future::join_all((0..10).map(|_| {
        app.send(
            reqwest::Method::GET,
            "/api/v1/contacts?pageSize=20",
            Some(&b_key),
            None,
        )
    }));
    let (counts, lists) = tokio::join!(counts, lists);
    for list in &lists {
        list.expect(200);
    }
    let statuses: Vec<u16> = counts.iter().map(|r| r.status).collect();
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&429),
        "no count was refused: {statuses:?}"
    );
    let refused = counts.iter().find(|r| r.status == 429).unwrap();
    assert_eq!(refused.code(), "rate_limited");
}

#[tokio::test]
async fn an_organization_at_its_requests_in_flight_is_refused_and_another_is_answered() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_REQUESTS_PER_ORG", "1"),
            ("PARLEY_REQUESTS_QUEUED_PER_ORG", "0"),
            // A body up to this is read before the turn; a broadcast's may be longer, and the
            // rest of it is read inside the turn.
            ("PARLEY_MAX_BODY_BYTES", "200"),
        ])
        .start()
        .await;
    let (_, b_key) = app.new_org("Organization B").await;
    // A's one request in flight: past its first 200 bytes, its body does not end until we
    // finish it.
    let body = format!("{{\"name\": \"Held\"}}{}", " ".repeat(300));
    let hold = || app.post_held("/api/v1/broadcasts", &app.key, body.as_bytes(), 250);
    let mut held = hold().await;
    // Once it holds A's turn, A's next request is refused at once (no queue here). Had one
    // of these requests held the turn when the held one came, that one was refused: hold again.
    let refused = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let r = app.get("/api/v1/contacts").await;
            if r.status == 429 {
                break r;
            }
            assert!(matches!(r.status, 200 | 503), "{}: {}", r.status, r.body);
            if held.try_read(&mut [0; 16]).is_ok() {
                held = hold().await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the held request took A's turn");
    assert_eq!(refused.code(), "rate_limited");
    // B is answered meanwhile.
    app.send(reqwest::Method::GET, "/api/v1/contacts", Some(&b_key), None)
        .await
        .expect(200);
    // The held request ends: its handler answers it (a broadcast without its fields), and
    // A's turn is free again.
    held.write_all(&body.as_bytes()[250..]).await.unwrap();
    let mut answer = vec![0; 12];
    held.read_exact(&mut answer).await.unwrap();
    assert_eq!(
        &answer,
        b"HTTP/1.1 422",
        "{}",
        String::from_utf8_lossy(&answer)
    );
    app.get("/api/v1/contacts").await.expect(200);
}

/// A sends to `first` and, once that sends, to `second`, and B to its contacts, while A may
/// have one broadcast sending: waits until B's completed, checks A's second is still queued
/// then, and returns A's two broadcasts and A's first as it was then.
async fn one_sending_at_a_time(
    app: &TestApp,
    (a_key, first, second): (&str, &[Uuid], &[Uuid]),
    (b_key, b_contacts): (&str, &[Uuid]),
) -> (String, String, Value) {
    let a1 = send_now(app, a_key, first, "normal").await;
    wait_sending(app, a_key, &a1, 30).await;
    let a2 = send_now(app, a_key, second, "normal").await;
    let b = send_now(app, b_key, b_contacts, "normal").await;
    let a1_then = completed_while(app, b_key, &b, a_key, &a1, 30).await;
    assert_eq!(broadcast(app, a_key, &a2).await["status"], "queued");
    (a1, a2, a1_then)
}

#[tokio::test]
async fn an_organization_past_its_sending_broadcasts_waits_queued_and_others_do_not() {
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::from_millis(50),
        &[("PARLEY_BROADCASTS_PER_ORG", "1")],
    )
    .await;
    let app = &rig.app;
    let (a_org, a_key, first) = org(&rig.app, "Organization A", 2_000).await;
    let second = contacts_of(app, a_org, 5).await;
    let (_, b_key, b_contacts) = org(&rig.app, "Organization B", 5).await;
    // B has a spot of its own; A's second broadcast waits for A's first.
    let (a1, a2, a1_then) =
        one_sending_at_a_time(app, (&a_key, &first, &second), (&b_key, &b_contacts)).await;
    assert_eq!(a1_then["status"], "sending", "{a1_then}");
    let done = parley_tests::wait_until(60, || async {
        broadcast(app, &a_key, &a2).await["status"] == "completed"
    })
    .await;
    assert!(
        done,
        "A's second broadcast did not start when the first ended"
    );
    let a1_end = broadcast(app, &a_key, &a1).await;
    let a2_end = broadcast(app, &a_key, &a2).await;
    assert_eq!(a1_end["status"], "completed");
    // The first stops counting once its last outcome is written (none pending), which may be
    // a moment before its end is: the second starts after that outcome, not its end.
    // Read from Postgres: the answers give milliseconds.
    let (last_outcome, started): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as(
            "SELECT (SELECT max(greatest(sent_at, failed_at)) FROM broadcast_recipients
                     WHERE broadcast_id = $1::uuid),
                    (SELECT started_at FROM broadcasts WHERE id = $2::uuid)",
        )
        .bind(a1.as_str())
        .bind(a2.as_str())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(
        started >= last_outcome,
        "A's second broadcast started before its first's last outcome ({last_outcome}): \
         {a2_end} {a1_end}"
    );
}

#[tokio::test]
async fn recipients_waiting_in_their_lane_are_late_not_lost() {
    // Lost after one second: the broadcast's jobs wait in its lane far longer than that.
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::from_millis(50),
        &[("PARLEY_RECONCILE_AFTER_SECS", "1")],
    )
    .await;
    let app = &rig.app;
    let (_, key, contacts) = org(&rig.app, "Organization A", 4_000).await;
    let id = send_now(app, &key, &contacts, "normal").await;
    let done = parley_tests::wait_until(120, || async {
        broadcast(app, &key, &id).await["status"] == "completed"
    })
    .await;
    assert!(done, "the broadcast did not complete");
    let b = broadcast(app, &key, &id).await;
    assert_eq!(b["sentCount"], 4_000, "{b}");
    let requeued: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = $1::uuid AND requeues > 0",
    )
    .bind(&id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(requeued, 0, "parked recipients were taken for lost");
    let keys: std::collections::HashSet<String> = rig
        .provider
        .calls()
        .into_iter()
        .map(|c| c.idempotency_key)
        .collect();
    assert_eq!(keys.len(), 4_000);
}

#[tokio::test]
async fn due_sla_checks_are_taken_organization_by_organization() {
    let app = TestApp::builder().own_database().start().await;
    let (a, _) = app.new_org("Organization A").await;
    let (b, _) = app.new_org("Organization B").await;
    // Check rows alone (their states' foreign keys off for this fixture): A's 1,000 fell due an
    // hour ago, B's one a minute ago.
    let mut tx = app.pool.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO sla_checks (id, organization_id, sla_state_id, target, kind, due_at)
         SELECT gen_random_uuid(), o.org, gen_random_uuid(), 'resolution', 'deadline',
                now() - o.ago
         FROM (VALUES ($1::uuid, interval '1 hour', 1000), ($2::uuid, interval '1 minute', 1))
              AS o(org, ago, n), generate_series(1, o.n)",
    )
    .bind(a)
    .bind(b)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let taken =
        parley_db::sla::take_due_checks(&app.pool, 500, None, parley_types::time::Timestamp::now())
            .await
            .unwrap();
    let (of_a, of_b): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE organization_id = $2),
                count(*) FILTER (WHERE organization_id = $3)
         FROM sla_checks WHERE id = ANY($1)",
    )
    .bind(&taken)
    .bind(a)
    .bind(b)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(of_b, 1, "B's due check waited behind A's");
    assert_eq!(
        of_a,
        parley_db::sla::DUE_PER_ORG,
        "A gave more than its share"
    );
}

/// A webhook of the organization whose key is `key`, for `lead.created`, to `url`.
async fn subscribe(app: &TestApp, key: &str, url: &str) {
    app.send(
        reqwest::Method::POST,
        "/api/v1/webhooks",
        Some(key),
        Some(&json!({"url": url, "events": ["lead.created"]})),
    )
    .await
    .expect(201);
}

async fn pending_deliveries(app: &TestApp, org: Uuid) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries WHERE organization_id = $1 AND status = 'pending'",
    )
    .bind(org)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn one_organizations_webhook_backlog_does_not_hold_back_anothers_events() {
    let env = [
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PARLEY_WEBHOOK_TIMEOUT_MS", "5000"),
    ];
    let app = TestApp::builder().own_database().env(&env).start().await;
    let (a_org, a_key) = app.new_org("Organization A").await;
    let (_, b_key) = app.new_org("Organization B").await;
    // A: 50 webhooks answering after 50 ms each (each endpoint with slots to spare, so A's
    // jobs all send), and 200 events for each (as an import or a broadcast of A's would fire
    // them), written before any worker runs.
    let a_receiver = Receiver::start().await;
    a_receiver.always(Answer::Sleep(Duration::from_millis(50)));
    for _ in 0..50 {
        subscribe(&app, &a_key, &a_receiver.url).await;
    }
    sqlx::query(
        "INSERT INTO webhook_events (id, organization_id, event, data)
         SELECT uuid_v7(), $1, 'lead.created', '{}'::jsonb FROM generate_series(1, 200)",
    )
    .bind(a_org)
    .execute(&app.pool)
    .await
    .unwrap();
    let b_receiver = Receiver::start().await;
    subscribe(&app, &b_key, &b_receiver.url).await;
    let _worker = app.spawn_worker(&env).await;
    a_receiver.received_at_least(100, 60).await;
    // B's one event, while A's 10,000 deliveries are being sent.
    app.send(
        reqwest::Method::POST,
        "/api/v1/leads",
        Some(&b_key),
        Some(&json!({"name": "B's lead"})),
    )
    .await
    .expect(201);
    let b_at = b_receiver.received_at_least(1, 60).await[0].at;
    // In arrival order it would have come after nearly all of A's (the workers' webhook
    // slots were all A's); in turn, it came while most of them still waited.
    let a_before = a_receiver.received().iter().filter(|r| r.at < b_at).count();
    assert!(
        a_before < 3_000,
        "B's event waited for A's backlog: {a_before} of A's 10,000 deliveries went first"
    );
    assert!(
        pending_deliveries(&app, a_org).await > 0,
        "A's backlog ended first"
    );
}

#[tokio::test]
async fn an_organizations_own_number_of_slots_bounds_its_ready_jobs() {
    // No worker: the ready lists stay as the lanes filled them.
    let app = TestApp::builder().own_database().start().await;
    let jobs = Jobs::new(&app.redis().await);
    let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
    jobs.set_org_slots(QueueName::RecipientSend, &[(a, 1)])
        .await
        .unwrap();
    jobs.set_org_slots(QueueName::WebhookDelivery, &[(a, 2)])
        .await
        .unwrap();
    let ids = |n: usize| -> Vec<RecipientId> { (0..n).map(|_| RecipientId::generate()).collect() };
    for org in [a, b] {
        let lane = Lane {
            organization_id: org,
            id: Uuid::now_v7(),
            high: false,
        };
        jobs.enqueue_sends(&lane, &ids(2_000)).await.unwrap();
        let webhook = Uuid::now_v7();
        let deliveries: Vec<(Uuid, Uuid, Uuid)> =
            (0..500).map(|_| (org, webhook, Uuid::now_v7())).collect();
        jobs.deliver_webhooks(&deliveries).await.unwrap();
    }
    // A has 1 delivery slot and 2 webhook slots of its own; B the defaults, 3 and 8.
    let send = jobs.depth(QueueName::RecipientSend).await.unwrap();
    assert_eq!((send.ready, send.parked), (1 + 3, 20 - 4), "{send:?}");
    let webhooks = jobs.depth(QueueName::WebhookDelivery).await.unwrap();
    assert_eq!(
        (webhooks.ready, webhooks.parked),
        (2 + 8, 40 - 10),
        "{webhooks:?}"
    );
    // Raised, A's next refill takes its new share (under the ready list's 8).
    jobs.set_org_slots(QueueName::RecipientSend, &[(a, 4)])
        .await
        .unwrap();
    jobs.refill(QueueName::RecipientSend).await.unwrap();
    let send = jobs.depth(QueueName::RecipientSend).await.unwrap();
    assert_eq!(send.ready, 4 + 3, "{send:?}");
}

#[tokio::test]
async fn a_lane_an_earlier_refill_emptied_is_taken_again_when_jobs_are_parked_in_it() {
    // No worker: the ready list stays as the lanes filled it.
    let app = TestApp::builder().own_database().start().await;
    let redis = app.redis().await;
    let jobs = Jobs::new(&redis);
    let (org, id) = (Uuid::now_v7(), Uuid::now_v7());
    let lane = Lane {
        organization_id: org,
        id,
        high: false,
    };
    let one = || vec![RecipientId::generate()];
    jobs.enqueue_sends(&lane, &one()).await.unwrap();
    assert_eq!(jobs.depth(QueueName::RecipientSend).await.unwrap().ready, 1);
    // The refill took the lane's last job and dropped the lane and the organization from their
    // rings; one of before the rings' membership sets left the sets naming them.
    let queue = parley_jobs::queue_name(redis.prefix(), QueueName::RecipientSend);
    let prefix = format!("{queue}:fair:");
    let mut conn = redis.conn.clone();
    let (lane_left, ring_left): (i64, i64) = redis::pipe()
        .llen(format!("{prefix}lane:{id}"))
        .llen(format!("{prefix}org:bulk:{org}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!((lane_left, ring_left), (0, 0));
    let _: () = redis::pipe()
        .sadd(format!("{prefix}org:bulk:{org}:in"), id.to_string())
        .sadd(format!("{prefix}orgs:bulk:in"), org.to_string())
        // Room in the ready list and the organization's slots for the next job.
        .del(format!("{queue}:active"))
        .del(format!("{prefix}busy:{org}"))
        .query_async(&mut conn)
        .await
        .unwrap();
    // Parked again, the lane is in turn again.
    jobs.enqueue_sends(&lane, &one()).await.unwrap();
    let depth = jobs.depth(QueueName::RecipientSend).await.unwrap();
    assert_eq!((depth.ready, depth.parked), (1, 0), "{depth:?}");
}

#[tokio::test]
async fn lanes_left_by_a_partial_loss_of_keys_are_mended_when_the_reconciler_reads_them() {
    // No worker: the ready list stays as the lanes filled it.
    let app = TestApp::builder().own_database().start().await;
    let redis = app.redis().await;
    let jobs = Jobs::new(&redis);
    let queue = parley_jobs::queue_name(redis.prefix(), QueueName::RecipientSend);
    let prefix = format!("{queue}:fair:");
    let mut conn = redis.conn.clone();
    let lane = |organization_id| Lane {
        organization_id,
        id: Uuid::now_v7(),
        high: false,
    };
    let (gone, astray) = (lane(Uuid::now_v7()), lane(Uuid::now_v7()));
    // Each organization's one slot is taken by its first job, the rest stay parked.
    jobs.set_org_slots(
        QueueName::RecipientSend,
        &[(gone.organization_id, 1), (astray.organization_id, 1)],
    )
    .await
    .unwrap();
    let ids = |n: usize| -> Vec<RecipientId> { (0..n).map(|_| RecipientId::generate()).collect() };
    jobs.enqueue_sends(&gone, &ids(400)).await.unwrap();
    jobs.enqueue_sends(&astray, &ids(400)).await.unwrap();
    // Keys deleted one by one under a running deployment: one lane lost its jobs but not its
    // head's note, the other lost its rings, its head parked a minute ago.
    let minute_ago = chrono::Utc::now().timestamp_millis() - 60_000;
    let _: () = redis::pipe()
        .del(format!("{prefix}lane:{}", gone.id))
        .del(format!("{prefix}org:bulk:{}", astray.organization_id))
        .del(format!("{prefix}orgs:bulk"))
        .zadd(format!("{prefix}heads"), astray.id.to_string(), minute_ago)
        .del(format!("{queue}:active"))
        .del(format!("{prefix}busy:{}", astray.organization_id))
        .query_async(&mut conn)
        .await
        .unwrap();
    let waiting = jobs.waiting_since().await.unwrap();
    let waiting: Vec<Uuid> = waiting.since.iter().map(|(b, _)| *b).collect();
    assert!(
        !waiting.contains(&gone.id),
        "an empty lane counts as waiting: its lost work would never be found"
    );
    assert!(waiting.contains(&astray.id));
    // The lane astray is in turn again: the next refill takes its job.
    jobs.refill(QueueName::RecipientSend).await.unwrap();
    let depth = jobs.depth(QueueName::RecipientSend).await.unwrap();
    assert_eq!(depth.ready, 1, "{depth:?}");
}

#[tokio::test]
async fn a_webhook_lane_that_lost_its_jobs_holds_back_no_recovery() {
    // No worker. A webhook's lane loses its jobs but not its head's note: left there, the
    // note's age would be the queue's oldest wait, which bounds the relay's lost deliveries.
    let app = TestApp::builder().own_database().start().await;
    let redis = app.redis().await;
    let jobs = Jobs::new(&redis);
    let (org, webhook) = (Uuid::now_v7(), Uuid::now_v7());
    let deliveries: Vec<(Uuid, Uuid, Uuid)> =
        (0..500).map(|_| (org, webhook, Uuid::now_v7())).collect();
    jobs.deliver_webhooks(&deliveries).await.unwrap();
    let queue = parley_jobs::queue_name(redis.prefix(), QueueName::WebhookDelivery);
    let hour_ago = chrono::Utc::now().timestamp_millis() - 3_600_000;
    let mut conn = redis.conn.clone();
    let _: () = redis::pipe()
        .del(format!("{queue}:fair:lane:{webhook}"))
        .zadd(format!("{queue}:fair:heads"), webhook.to_string(), hour_ago)
        .del(format!("{queue}:active"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = jobs.depth(QueueName::WebhookDelivery).await.unwrap();
    assert!(
        before.oldest_age > Some(Duration::from_secs(3_000)),
        "{before:?}"
    );
    jobs.mend_lanes(QueueName::WebhookDelivery).await.unwrap();
    let after = jobs.depth(QueueName::WebhookDelivery).await.unwrap();
    assert_eq!(after.oldest_age, None, "{after:?}");
}

#[tokio::test]
async fn an_operators_limits_for_one_organization_replace_the_defaults() {
    // No rate and 20 sending broadcasts by default; organizations labelled in the metrics.
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_METRICS_ORG_LABEL", "true")],
    )
    .await;
    let app = &rig.app;
    let (a_org, a_key, first) = org(&rig.app, "Organization A", 1_600).await;
    let second = contacts_of(app, a_org, 5).await;
    let (b_org, b_key, b_contacts) = org(&rig.app, "Organization B", 5).await;
    // For A alone, as `parley-api org limits` sets them: 100 emails a second, one broadcast
    // sending at a time, 2 send jobs.
    let changes = Changes {
        broadcasts: Setting::Value(1),
        send_jobs: Setting::Value(2),
        rates: vec![(Channel::Email, Setting::Value(100))],
        ..Changes::default()
    };
    let set =
        parley_usecases::org_limits::set(app.services().await.ctx(), OrgId::from(a_org), &changes)
            .await
            .unwrap()
            .expect("A exists");
    assert_eq!(
        (set.broadcasts, set.send_jobs, set.imports),
        (Some(1), Some(2), None)
    );
    assert_eq!(set.rates.get(&Channel::Email), Some(&100));
    // The worker reads them within 20 ticks: its slots in Redis say when.
    let redis = app.redis().await;
    let caps = format!(
        "{}:fair:caps",
        parley_jobs::queue_name(redis.prefix(), QueueName::RecipientSend)
    );
    let read = parley_tests::wait_until(30, || async {
        let mut conn = redis.conn.clone();
        let slots: Option<u32> = redis::cmd("HGET")
            .arg(&caps)
            .arg(a_org.to_string())
            .query_async(&mut conn)
            .await
            .unwrap();
        slots == Some(2)
    })
    .await;
    assert!(read, "the worker did not read A's limits");
    // A's second broadcast waits for its first, and A's rate held A only.
    let (_, _, a1_then) =
        one_sending_at_a_time(app, (&a_key, &first, &second), (&b_key, &b_contacts)).await;
    assert_eq!(a1_then["status"], "sending", "{a1_then}");
    let a_sent = a1_then["sentCount"].as_i64().unwrap();
    assert!(a_sent < 1_000, "A sent {a_sent} at 100 a second");
    // The hits of A's rate are counted under A's name, and none under B's.
    let metrics = parley_tests::metrics_text(rig.worker.metrics_addr).await;
    let hits = |org: Uuid| {
        metrics.lines().any(|l| {
            l.starts_with("parley_org_limit_hits_total{")
                && l.contains("limit=\"channel_rate\"")
                && l.contains(&format!("organization=\"{org}\""))
        })
    };
    assert!(hits(a_org), "no hit of A's rate in:\n{metrics}");
    assert!(!hits(b_org), "B has no rate");
    // Back to the defaults: nothing of A's is left.
    let reset = Changes {
        broadcasts: Setting::Default,
        send_jobs: Setting::Default,
        rates: vec![(Channel::Email, Setting::Default)],
        ..Changes::default()
    };
    let back =
        parley_usecases::org_limits::set(app.services().await.ctx(), OrgId::from(a_org), &reset)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(back.broadcasts, None);
    assert!(back.rates.is_empty());
    assert!(
        parley_db::org_limits::all(&app.pool, 100)
            .await
            .unwrap()
            .iter()
            .all(|l| l.organization_id != a_org)
    );
    // Rates of unknown channels or out of range are refused by Postgres too, so every worker
    // can read every row.
    for bad in [
        r#"{"fax": 5}"#,
        r#"{"email": 0}"#,
        r#"{"email": 1.5}"#,
        r#"{"email": "5"}"#,
    ] {
        let refused = sqlx::query(
            "INSERT INTO organization_limits (organization_id, rates) VALUES ($1, $2::jsonb)",
        )
        .bind(a_org)
        .bind(bad)
        .execute(&app.pool)
        .await;
        assert!(refused.is_err(), "{bad} was stored");
    }
    assert!(
        parley_usecases::org_limits::set(app.services().await.ctx(), OrgId::generate(), &changes)
            .await
            .unwrap()
            .is_none(),
        "an organization that does not exist"
    );
}
