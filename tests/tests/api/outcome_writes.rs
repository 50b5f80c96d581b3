//! Recipient outcomes on their way to Postgres: the worker's one writer of outcomes, and
//! outcome writes beside a fan-out. No worker runs: each test plays the dispatcher
//! (`fan_out`) and the send jobs.

use std::collections::HashMap;
use std::time::Duration;

use parley_db::sending::{begin_dispatch, record};
use parley_domain::sending::RecipientOutcome;
use parley_jobs::redis_conn::Redis;
use parley_tests::{TestApp, seed, wait_until};
use parley_types::ids::{BroadcastId, OrgId, RecipientId};
use parley_usecases::sending;
use parley_worker::claims::{Claims, TakenClaims};
use parley_worker::outcomes::{Chunk, Outcomes};
use serde_json::json;
use sqlx::Connection;
use uuid::Uuid;

use crate::broadcasts::{send_now, template};

#[derive(Clone, Copy)]
enum Audience {
    Contacts,
    Segment,
}

/// A sendNow broadcast of `contacts` recipients whose dispatch lease the test holds, and
/// claims on a Redis prefix of its own.
struct Dispatching {
    app: TestApp,
    /// What the use cases reach, as `app`'s workers have it.
    services: parley_usecases::Services,
    audience: Audience,
    redis: Redis,
    claims: Claims,
    id: BroadcastId,
    org: OrgId,
    lease: Duration,
    token: Uuid,
}

impl Dispatching {
    async fn new(contacts: usize) -> Dispatching {
        Self::to(contacts, Audience::Contacts).await
    }

    async fn to(contacts: usize, audience: Audience) -> Dispatching {
        let app = TestApp::builder().own_database().start().await;
        let contacts = seed::contacts(&app, contacts).await;
        let t = template(&app, "email", "Hello").await;
        let id: BroadcastId = match audience {
            Audience::Contacts => send_now(&app, &t, &contacts).await,
            Audience::Segment => {
                let segment = app
                    .post(
                        "/api/v1/segments",
                        json!({"name": "Seeded", "filter": {"source": "seed"}}),
                    )
                    .await
                    .id();
                app.post(
                    "/api/v1/broadcasts",
                    json!({"broadcastName": "B", "templateId": t, "segmentId": segment,
                           "sendNow": true,
                           "templateVariables": {"body": [{"type": "text", "value": "A-1"}]}}),
                )
                .await
                .expect(201)
                .id()
            }
        }
        .parse()
        .unwrap();
        let (lease, token) = (Duration::from_secs(60), Uuid::now_v7());
        let org = begin_dispatch(&app.pool, id, lease, token, 20)
            .await
            .unwrap()
            .expect("the lease")
            .organization_id;
        let prefix = format!("parley-test-outcomes-{}", Uuid::now_v7().simple());
        let redis = Redis::connect(&parley_tests::redis_target(), &prefix)
            .await
            .unwrap();
        Dispatching {
            services: app.services().await,
            app,
            claims: Claims::new(redis.clone()),
            redis,
            audience,
            id,
            org,
            lease,
            token,
        }
    }

    /// Writes the next `n` recipients (one slice); their ids, and whether they were the last.
    fn fan_out(
        &self,
        n: i32,
    ) -> impl Future<Output = Result<Option<(Vec<RecipientId>, bool)>, sqlx::Error>> + use<> {
        let (services, audience, id, org, lease, token) = (
            self.services.clone(),
            self.audience,
            self.id,
            self.org,
            self.lease,
            self.token,
        );
        async move {
            let segment = matches!(audience, Audience::Segment);
            sending::fan_out(services.ctx(), id, org, segment, n, lease, token).await
        }
    }

    /// Whether a session of the test's database comes to wait on a lock (within 10 s).
    async fn a_session_waits(&self) -> bool {
        wait_until(10, || async {
            sqlx::query_scalar::<_, bool>(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock')",
            )
            .fetch_one(&self.app.pool)
            .await
            .unwrap()
        })
        .await
    }

    /// The broadcast's `total` and `sent` counters.
    async fn totals(&self) -> (i32, i32) {
        sqlx::query_as("SELECT total, sent FROM broadcast_totals WHERE broadcast_id = $1")
            .bind(self.id)
            .fetch_one(&self.app.pool)
            .await
            .unwrap()
    }

    async fn statuses(&self) -> HashMap<RecipientId, String> {
        sqlx::query_as("SELECT id, status FROM broadcast_recipients WHERE broadcast_id = $1")
            .bind(self.id)
            .fetch_all(&self.app.pool)
            .await
            .unwrap()
            .into_iter()
            .collect()
    }

    /// A session of its own, in a transaction that holds the lock `sql` takes until the
    /// session is closed.
    async fn lock_with(&self, sql: String) -> sqlx::PgConnection {
        let mut holder = sqlx::PgConnection::connect(&self.app.database_url)
            .await
            .unwrap();
        sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut holder)
            .await
            .unwrap();
        holder
    }
}

fn sent(n: usize) -> RecipientOutcome {
    RecipientOutcome::Sent {
        message_id: Some(format!("m-{n}")),
        to: format!("r{n}@example.com"),
    }
}

/// The claims of a job on `ids`.
async fn claim(d: &Dispatching, ids: &[RecipientId]) -> TakenClaims<RecipientId> {
    TakenClaims::take(&d.claims, ids, Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the claims")
}

/// A writer, and its first statement (the outcome of `r[0]`, a job's chunk that is not its
/// last) waiting on the recipient's row, locked by `holder`: the chunks handed meanwhile wait
/// for the next statement. Two more jobs hold `r[1]` and `r[2]`.
struct Held {
    d: Dispatching,
    r: Vec<RecipientId>,
    outcomes: Outcomes,
    first: tokio::task::JoinHandle<anyhow::Result<Chunk>>,
    holder: sqlx::PgConnection,
    jobs: [TakenClaims<RecipientId>; 2],
}

impl Held {
    async fn new() -> Held {
        let d = Dispatching::new(3).await;
        let (r, _) = d.fan_out(3).await.unwrap().unwrap();
        let holder = d
            .lock_with(format!(
                "SELECT 1 FROM broadcast_recipients WHERE id = '{}' FOR UPDATE",
                r[0]
            ))
            .await;
        let outcomes = Outcomes::spawn(d.services.clone(), d.claims.clone());
        let job = claim(&d, &r[0..1]).await;
        let first = tokio::spawn(outcomes.write(vec![(r[0], sent(0))], job.fence(), false));
        assert!(d.a_session_waits().await, "the first statement waits");
        let jobs = [claim(&d, &r[1..2]).await, claim(&d, &r[2..3]).await];
        Held {
            d,
            r,
            outcomes,
            first,
            holder,
            jobs,
        }
    }

    /// Hands `outcome` of `r[i]` (i = 1 or 2) as its job's chunk.
    fn write(
        &self,
        i: usize,
        outcome: RecipientOutcome,
        last: bool,
    ) -> impl Future<Output = anyhow::Result<Chunk>> + use<> {
        self.outcomes
            .write(vec![(self.r[i], outcome)], self.jobs[i - 1].fence(), last)
    }
}

#[tokio::test]
async fn one_statement_writes_the_outcomes_several_jobs_handed_meanwhile() {
    // A worker's send jobs hand their outcomes to one writer; each statement takes all
    // that came while the previous one ran, so statements follow processes, not jobs.
    let h = Held::new().await;
    let (second, third) = (h.write(1, sent(1), false), h.write(2, sent(2), false));
    h.holder.close().await.unwrap();
    assert_eq!(
        h.first.await.unwrap().unwrap(),
        vec![(h.r[0], sent(0))],
        "a job gets its chunk back, written"
    );
    second.await.unwrap();
    third.await.unwrap();
    assert_eq!(
        h.outcomes.statements(),
        2,
        "the second and third chunks in one statement"
    );
    assert!(h.d.statuses().await.values().all(|s| s == "sent"));
    assert_eq!(h.d.totals().await, (3, 3));
}

#[tokio::test]
async fn an_outcome_postgres_refuses_fails_its_own_job_only() {
    // Postgres refuses a whole statement for one bad row: the writer writes its chunks again
    // one by one, so that another job's outcomes (messages sent) are not lost with it.
    let h = Held::new().await;
    let refused = RecipientOutcome::Failed {
        code: "x".into(),
        message: "a NUL \0 that Postgres' text refuses".into(),
    };
    let (bad, good) = (h.write(1, refused, false), h.write(2, sent(2), false));
    h.holder.close().await.unwrap();
    h.first.await.unwrap().unwrap();
    assert!(bad.await.is_err(), "the refused chunk's job learns it");
    good.await.expect("the other chunk is written");
    assert_eq!(h.outcomes.statements(), 4, "together, then each alone");
    let (r, statuses) = (&h.r, h.d.statuses().await);
    assert_eq!(
        [&statuses[&r[0]], &statuses[&r[1]], &statuses[&r[2]]],
        ["sent", "pending", "sent"]
    );
    assert_eq!(h.d.totals().await, (3, 2));
}

#[tokio::test]
async fn only_a_jobs_last_chunk_gets_a_statement_beside_the_one_running() {
    // A job whose sends are done holds its slot until its last chunk is written: that chunk
    // gets a statement of its own beside the one running. Any other chunk waits for it, so
    // that statements follow the worker processes.
    let h = Held::new().await;
    let waits = tokio::spawn(h.write(1, sent(1), false));
    tokio::time::timeout(Duration::from_secs(10), h.write(2, sent(2), true))
        .await
        .expect("written while the first statement still waits")
        .unwrap();
    assert!(!h.first.is_finished());
    assert!(
        !waits.is_finished(),
        "a chunk that is not a job's last waits"
    );
    h.holder.close().await.unwrap();
    h.first.await.unwrap().unwrap();
    waits.await.unwrap().unwrap();
    assert_eq!(h.outcomes.statements(), 3);
    assert_eq!(h.d.totals().await, (3, 3));
}

#[tokio::test]
async fn the_outcome_of_a_recipient_another_job_took_over_is_not_written() {
    // The writer checks the claims of a statement's recipients (of all its jobs, in one
    // MGET) right before it: another job that took one over (this job's lease ran out) writes
    // its own outcome.
    let d = Dispatching::new(3).await;
    let (r, _) = d.fan_out(3).await.unwrap().unwrap();
    let outcomes = Outcomes::spawn(d.services.clone(), d.claims.clone());
    let jobs = [claim(&d, &r[0..2]).await, claim(&d, &r[2..3]).await];
    let mut conn = d.redis.conn.clone();
    let _: () = redis::cmd("SET")
        .arg(d.claims.key(r[2]))
        .arg("another-job")
        .query_async(&mut conn)
        .await
        .unwrap();
    let (first, second) = (
        outcomes.write(
            vec![(r[0], sent(0)), (r[1], sent(1))],
            jobs[0].fence(),
            true,
        ),
        outcomes.write(vec![(r[2], sent(2))], jobs[1].fence(), true),
    );
    assert_eq!(first.await.unwrap().len(), 2);
    assert_eq!(second.await.unwrap(), vec![], "what was written comes back");
    assert_eq!(outcomes.statements(), 1, "both chunks in one statement");
    assert!(jobs[1].is_lost(r[2]), "the job knows it lost it");
    assert!(!jobs[0].is_lost(r[0]) && !jobs[0].is_lost(r[1]));
    let statuses = d.statuses().await;
    assert_eq!(
        [&statuses[&r[0]], &statuses[&r[1]], &statuses[&r[2]]],
        ["sent", "sent", "pending"]
    );
}

#[tokio::test]
async fn a_fan_out_in_progress_lets_outcome_writes_through() {
    outcome_writes_pass_a_fan_out_in_progress(Audience::Contacts).await;
}

#[tokio::test]
async fn a_segments_fan_out_in_progress_lets_outcome_writes_through() {
    outcome_writes_pass_a_fan_out_in_progress(Audience::Segment).await;
}

async fn outcome_writes_pass_a_fan_out_in_progress(audience: Audience) {
    // A fan-out slice holds the broadcast's row for its whole transaction (up to 16,000
    // recipients written). Held `FOR UPDATE`, it stopped every outcome write that added a
    // counter shard of the broadcast, whose foreign-key check takes a key-share lock on the row.
    // The test holds its second slice mid-insert.
    let d = Dispatching::to(3, audience).await;
    let (first, _) = d.fan_out(2).await.unwrap().unwrap();
    // The next slice's insert waits on an advisory lock the test holds.
    sqlx::raw_sql(
        "CREATE FUNCTION test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$;
         CREATE TRIGGER test_hold BEFORE INSERT ON broadcast_recipients
             FOR EACH STATEMENT EXECUTE FUNCTION test_hold();",
    )
    .execute(&d.app.pool)
    .await
    .unwrap();
    let holder = d
        .lock_with("SELECT pg_advisory_xact_lock(4242)".into())
        .await;
    let slice = tokio::spawn(d.fan_out(2));
    assert!(d.a_session_waits().await, "the slice waits mid-insert");
    // An outcome written by a session whose counter shard the broadcast does not have yet.
    // Sessions land on shards by their backend; a new session soon lands on a new shard.
    let mut tries = 0;
    let writer = loop {
        tries += 1;
        assert!(
            tries <= 200,
            "no session found a counter shard the broadcast lacks"
        );
        let session = sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .connect_with(
                d.app
                    .database_url
                    .parse::<sqlx::postgres::PgConnectOptions>()
                    .unwrap()
                    .options([("lock_timeout", "5s")]),
            )
            .await
            .unwrap();
        let new_shard: bool = sqlx::query_scalar(
            "SELECT NOT EXISTS (SELECT 1 FROM broadcast_counters
                                WHERE broadcast_id = $1 AND shard = counter_shard())",
        )
        .bind(d.id)
        .fetch_one(&session)
        .await
        .unwrap();
        if new_shard {
            break session;
        }
    };
    record(&writer, &[(first[0], sent(1))])
        .await
        .expect("the outcome is written while the slice is held");
    holder.close().await.unwrap();
    let (rest, done) = slice.await.unwrap().unwrap().unwrap();
    assert_eq!((rest.len(), done), (1, true));
    assert_eq!(d.totals().await, (3, 1), "the counters hold both writes");
}
