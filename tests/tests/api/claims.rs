//! Claims on recipients against the real Redis: a job's claims outlive their lease while the job
//! lives, takes back what Redis lost, and gives up (does not send, does not write) what
//! another job took over.

use std::time::Duration;

use parley_jobs::redis_conn::Redis;
use parley_worker::claims::{Claims, TakenClaims};
use uuid::Uuid;

async fn holder(redis: &Redis, id: Uuid) -> Option<String> {
    let mut conn = redis.conn.clone();
    redis::cmd("GET")
        .arg(Claims::new(redis.clone()).key(id))
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// The tests' Redis under a prefix of its own.
async fn fresh_redis() -> Redis {
    let prefix = format!("parley-test-claims-{}", Uuid::now_v7().simple());
    Redis::connect(&parley_tests::redis_target(), &prefix)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_hold_is_kept_taken_back_after_a_redis_loss_and_given_up_to_another_job() {
    let redis = fresh_redis().await;
    let claims = Claims::new(redis.clone());
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
    let lease = Duration::from_millis(600);
    let taken = TakenClaims::take(&claims, &ids, lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.ids(), ids.as_slice());
    assert!(
        TakenClaims::take(&claims, &ids, lease)
            .await
            .unwrap()
            .is_none(),
        "a second job takes none of them"
    );
    let mine = holder(&redis, ids[0]).await.unwrap();

    // Redis loses one claim; another job takes a second one.
    let mut conn = redis.conn.clone();
    let _: () = redis::pipe()
        .del(claims.key(ids[0]))
        .set(claims.key(ids[1]), "another-job")
        .query_async(&mut conn)
        .await
        .unwrap();
    let holders = claims.holders_now(&ids).await;
    assert_eq!(
        taken.fence().mine(&ids, holders.as_deref()),
        vec![ids[0], ids[2]],
        "the outcome of a recipient another job holds is not written"
    );
    assert!(taken.is_lost(ids[1]), "nor is it sent");
    assert!(!taken.is_lost(ids[0]));

    // The heartbeat takes the lost key back, and keeps the claims past their lease.
    assert!(
        parley_tests::wait_until(5, || async {
            holder(&redis, ids[0]).await.as_deref() == Some(mine.as_str())
        })
        .await,
        "the claim Redis lost is taken again"
    );
    tokio::time::sleep(lease * 2).await;
    assert_eq!(holder(&redis, ids[2]).await.as_deref(), Some(mine.as_str()));
    assert_eq!(
        holder(&redis, ids[1]).await.as_deref(),
        Some("another-job"),
        "another job's claim is left alone"
    );

    taken.give_back().await;
    assert_eq!(holder(&redis, ids[0]).await, None);
    assert_eq!(holder(&redis, ids[2]).await, None);
    assert_eq!(holder(&redis, ids[1]).await.as_deref(), Some("another-job"));
    let _: () = redis::cmd("DEL")
        .arg(claims.key(ids[1]))
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// A job's take run twice (a cluster client sends a script again when its reply was lost)
/// answers the same both times: the ids this job holds count as taken, another job's do not.
#[tokio::test]
async fn a_take_run_twice_answers_the_same() {
    let claims = Claims::new(fresh_redis().await);
    let ids: Vec<Uuid> = (0..3).map(|_| Uuid::now_v7()).collect();
    let (mine, theirs) = (Uuid::now_v7(), Uuid::now_v7());
    let lease = Duration::from_secs(5);
    assert_eq!(
        claims.take(&ids[..1], theirs, lease).await.unwrap(),
        vec![ids[0]]
    );
    assert_eq!(claims.take(&ids, mine, lease).await.unwrap(), ids[1..]);
    assert_eq!(
        claims.take(&ids, mine, lease).await.unwrap(),
        ids[1..],
        "the second run holds what the first took"
    );
    claims.give_back(&ids, mine).await.unwrap();
    claims.give_back(&ids, theirs).await.unwrap();
}
