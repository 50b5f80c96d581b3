//! Tenant isolation: one organization's large broadcast, its own send rate or its segment
//! counts do not hold back another organization's work; a `high` broadcast goes ahead of
//! queued bulk work.

use std::time::Duration;

use parley_tests::provider::FakeProvider;
use parley_tests::{TestApp, spawn_isolated_app};
use serde_json::{Value, json};
use uuid::Uuid;

/// `n` contacts of `org`, written straight to Postgres.
async fn contacts_of(app: &TestApp, org: Uuid, n: usize) -> Vec<Uuid> {
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

/// One worker sending email through a provider that answers after `delay`.
struct Rig {
    app: TestApp,
    provider: FakeProvider,
    _worker: parley_tests::TestWorker,
}

impl Rig {
    async fn start(delay: Duration, worker_env: &[(&str, &str)]) -> Rig {
        let provider = FakeProvider::start().await;
        provider.delay(delay);
        let app = spawn_isolated_app(&[]).await;
        let mut env = vec![("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str())];
        env.extend_from_slice(worker_env);
        let _worker = app.spawn_worker(&env).await;
        Rig {
            app,
            provider,
            _worker,
        }
    }

    /// A new organization with `n` contacts: its id, its key and the contacts.
    async fn org(&self, name: &str, n: usize) -> (Uuid, String, Vec<Uuid>) {
        let (org, key) = self.app.new_org(name).await;
        let contacts = contacts_of(&self.app, org, n).await;
        (org, key, contacts)
    }
}

/// An organization's email broadcast to `contacts`, sent now with `priority`; its id.
async fn send_now(app: &TestApp, key: &str, contacts: &[Uuid], priority: &str) -> String {
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

async fn broadcast(app: &TestApp, key: &str, id: &str) -> Value {
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
    let rig = Rig::start(Duration::from_millis(50), &[]).await;
    let app = &rig.app;
    // 30 jobs of 200 at 50 ms a message: seconds of work for A.
    let (_, a_key, a_contacts) = rig.org("Organization A", 6_000).await;
    let (_, b_key, b_contacts) = rig.org("Organization B", 5).await;
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
    let rig = Rig::start(
        Duration::from_millis(50),
        &[
            ("PARLEY_WORKER_CONCURRENCY", "1"),
            ("PARLEY_DELIVERY_JOBS_PER_ORG", "100"),
            ("PARLEY_DELIVERY_READY_JOBS", "2"),
        ],
    )
    .await;
    let app = &rig.app;
    let (org, key, bulk_contacts) = rig.org("Organization A", 4_000).await;
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
    let rig = Rig::start(Duration::ZERO, &[("PARLEY_CHANNEL_EMAIL_RATE", "100")]).await;
    let app = &rig.app;
    let (_, a_key, a_contacts) = rig.org("Organization A", 1_600).await;
    let (_, b_key, b_contacts) = rig.org("Organization B", 5).await;
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
    let app = spawn_isolated_app(&[]).await;
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
async fn an_organization_past_its_sending_broadcasts_waits_queued_and_others_do_not() {
    let rig = Rig::start(
        Duration::from_millis(50),
        &[("PARLEY_BROADCASTS_PER_ORG", "1")],
    )
    .await;
    let app = &rig.app;
    let (a_org, a_key, first) = rig.org("Organization A", 2_000).await;
    let second = contacts_of(app, a_org, 5).await;
    let (_, b_key, b_contacts) = rig.org("Organization B", 5).await;
    let a1 = send_now(app, &a_key, &first, "normal").await;
    wait_sending(app, &a_key, &a1, 30).await;
    let a2 = send_now(app, &a_key, &second, "normal").await;
    let b = send_now(app, &b_key, &b_contacts, "normal").await;
    // B has a spot of its own; A's second broadcast waits for A's first.
    let a1_then = completed_while(app, &b_key, &b, &a_key, &a1, 30).await;
    assert_eq!(a1_then["status"], "sending", "{a1_then}");
    assert_eq!(broadcast(app, &a_key, &a2).await["status"], "queued");
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
    assert!(
        a2_end["startedAt"].as_str() >= a1_end["completedAt"].as_str(),
        "A's second broadcast started before its first ended: {a2_end} {a1_end}"
    );
}

#[tokio::test]
async fn recipients_waiting_in_their_lane_are_late_not_lost() {
    // Lost after one second: the broadcast's jobs wait in its lane far longer than that.
    let rig = Rig::start(
        Duration::from_millis(50),
        &[("PARLEY_RECONCILE_AFTER_SECS", "1")],
    )
    .await;
    let app = &rig.app;
    let (_, key, contacts) = rig.org("Organization A", 4_000).await;
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
    let app = spawn_isolated_app(&[]).await;
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
