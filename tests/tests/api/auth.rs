use parley_tests::TestApp;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn requests_without_a_valid_key_are_401() {
    let app = TestApp::builder().start().await;
    let garbage = "prl_".to_owned() + &"x".repeat(32);
    for key in [
        None,
        Some("nope"),
        Some("Basic abc"),
        Some(garbage.as_str()),
    ] {
        let resp = app.send(Method::GET, "/api/v1/contacts", key, None).await;
        resp.expect_error(401, "unauthorized");
        assert_eq!(resp.headers["www-authenticate"], "Bearer");
    }
    let resp = app
        .client
        .get(format!("{}/api/v1/contacts", app.base))
        .header("authorization", format!("Token {}", app.key))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401, "only the Bearer scheme is accepted");
}

#[tokio::test]
async fn an_address_that_fails_too_often_is_refused_without_a_lookup() {
    let app = parley_tests::TestApp::builder()
        .env(&[("PARLEY_AUTH_FAILURES_PER_MINUTE", "3")])
        .start()
        .await;
    let made_up = |i: usize| format!("prl_{}{i:02}", "x".repeat(30));
    // Malformed tokens cost no lookup and do not count.
    for _ in 0..5 {
        app.send(Method::GET, "/api/v1/contacts", Some("nope"), None)
            .await
            .expect_error(401, "unauthorized");
    }
    for i in 0..3 {
        app.send(Method::GET, "/api/v1/contacts", Some(&made_up(i)), None)
            .await
            .expect_error(401, "unauthorized");
    }
    // The fourth made-up key of the minute, and any key after it, from this address: 429,
    // before any lookup (the organization's own key is refused too).
    let refused = app
        .send(Method::GET, "/api/v1/contacts", Some(&made_up(3)), None)
        .await;
    refused.expect_error(429, "rate_limited");
    let wait: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    app.send(Method::GET, "/api/v1/contacts", Some(&app.key), None)
        .await
        .expect_error(429, "rate_limited");
}

#[tokio::test]
async fn wrong_ticket_access_tokens_count_as_failed_authentications() {
    let app = parley_tests::TestApp::builder()
        .env(&[("PARLEY_AUTH_FAILURES_PER_MINUTE", "3")])
        .start()
        .await;
    let created = app
        .post("/api/v1/tickets", json!({"subject": "Mine"}))
        .await;
    created.expect(201);
    let t = created.data().clone();
    let path = format!("/api/v1/tickets/{}/sla", t["id"].as_str().unwrap());
    let with_token = |token: String| {
        let (app, path) = (&app, &path);
        async move {
            app.client
                .get(format!("{}{path}", app.base))
                .header("X-Ticket-Access-Token", token)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    let right = t["accessToken"].as_str().unwrap().to_owned();
    assert_eq!(with_token(right.clone()).await, 200);
    for _ in 0..3 {
        assert_eq!(with_token("x".repeat(32)).await, 401);
    }
    // Past the address's failures of the minute, the right token and the organization's own
    // key are refused too, before any lookup.
    assert_eq!(with_token(right).await, 429);
    app.send(Method::GET, "/api/v1/contacts", Some(&app.key), None)
        .await
        .expect_error(429, "rate_limited");
}

/// The status of `secret`'s requests once they are refused (401), or the last one after 2 s.
async fn status_once_refused(app: &TestApp, secret: &str) -> u16 {
    let mut status = 200;
    for _ in 0..100 {
        status = app
            .send(Method::GET, "/api/v1/organization", Some(secret), None)
            .await
            .status;
        if status == 401 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    status
}

/// A key the API keeps in memory, revoked in SQL without the notification, and still served:
/// (id, secret). Keys are kept once the API hears its own heartbeat, a moment after it starts,
/// so each try is a new key.
async fn key_revoked_behind_the_apis_back(app: &TestApp) -> (String, String) {
    for _ in 0..50 {
        let created = app
            .post("/api/v1/api-keys", json!({"name": "kept", "scopes": ["*"]}))
            .await;
        created.expect(201);
        let secret = created.data()["key"].as_str().unwrap().to_owned();
        app.send(Method::GET, "/api/v1/organization", Some(&secret), None)
            .await
            .expect(200);
        // Without the notification: the session's triggers do not fire.
        let mut tx = app.pool.begin().await.unwrap();
        sqlx::query("SET LOCAL session_replication_role = replica")
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE id = $1::uuid")
            .bind(created.id())
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let again = app
            .send(Method::GET, "/api/v1/organization", Some(&secret), None)
            .await;
        if again.status == 200 {
            return (created.id(), secret);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the API never kept a key in 5 s");
}

/// A key revoked by hand in SQL is refused at once too: a trigger notifies any change of a key.
#[tokio::test]
async fn a_key_revoked_by_hand_in_sql_is_refused_within_moments() {
    let app = TestApp::builder().start().await;
    // From here the API keeps keys.
    key_revoked_behind_the_apis_back(&app).await;
    let created = app
        .post(
            "/api/v1/api-keys",
            json!({"name": "by hand", "scopes": ["*"]}),
        )
        .await;
    created.expect(201);
    let secret = created.data()["key"].as_str().unwrap().to_owned();
    app.send(Method::GET, "/api/v1/organization", Some(&secret), None)
        .await
        .expect(200);
    sqlx::query("UPDATE api_keys SET revoked_at = now() WHERE id = $1::uuid")
        .bind(created.id())
        .execute(&app.pool)
        .await
        .unwrap();
    let status = status_once_refused(&app, &secret).await;
    assert_eq!(status, 401, "the revocation was not heard in 2 s");
}

/// An organization holds at most 1,000 active keys; revoking one makes room.
#[tokio::test]
async fn an_organization_holds_at_most_a_thousand_active_keys() {
    let app = TestApp::builder().start().await;
    // The test's own key is one; 999 more by SQL.
    sqlx::query(
        "INSERT INTO api_keys (id, organization_id, name, prefix, key_hash, scopes)
         SELECT gen_random_uuid(), $1, 'k' || g, 'prl_seed', sha256(($1::text || g)::bytea),
                ARRAY['contacts:read']
         FROM generate_series(1, 999) g",
    )
    .bind(app.org_id)
    .execute(&app.pool)
    .await
    .unwrap();
    let body = json!({"name": "one too many", "scopes": ["contacts:read"]});
    app.post("/api/v1/api-keys", body.clone())
        .await
        .expect_error(409, "invalid_state");
    let one: String = sqlx::query_scalar(
        "SELECT id::text FROM api_keys WHERE organization_id = $1 AND name = 'k1'",
    )
    .bind(app.org_id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    app.delete(&format!("/api/v1/api-keys/{one}"))
        .await
        .expect(200);
    app.post("/api/v1/api-keys", body).await.expect(201);
}

/// A lost listener connection turns the cache off at once: a key revoked behind the API's
/// back is refused as soon as the connection goes, without waiting for its expiry.
#[tokio::test]
async fn a_lost_listener_connection_stops_the_cache_at_once() {
    let app = TestApp::builder().own_database().start().await;
    let (_, secret) = key_revoked_behind_the_apis_back(&app).await;
    let ended: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND query LIKE 'LISTEN %parley_api_key_revoked%'",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(ended, vec![true], "one listener");
    let status = status_once_refused(&app, &secret).await;
    assert_eq!(
        status, 401,
        "the cache was still used 2 s after its listener was gone"
    );
}

/// Keys are kept in the API's memory: a revocation reaches it by a notification. Revoked
/// behind the API's back (no notification), a known key is still served from memory; the
/// notification then drops it.
#[tokio::test]
async fn a_known_key_is_served_from_memory_until_its_revocation_is_heard() {
    let app = TestApp::builder().start().await;
    let (id, secret) = key_revoked_behind_the_apis_back(&app).await;
    sqlx::query("SELECT pg_notify('parley_api_key_revoked', $1)")
        .bind(&id)
        .execute(&app.pool)
        .await
        .unwrap();
    let status = status_once_refused(&app, &secret).await;
    assert_eq!(status, 401, "the notified revocation was not heard in 2 s");
}

/// A key without a daily limit is counted in the API's memory and written to Redis in
/// batches: each answer counts its request, and Redis holds the total a moment later.
#[tokio::test]
async fn an_unlimited_keys_requests_are_counted_and_reach_redis() {
    let app = TestApp::builder().start().await;
    let created = app
        .post(
            "/api/v1/api-keys",
            json!({"name": "unlimited", "scopes": ["*"]}),
        )
        .await;
    created.expect(201);
    let secret = created.data()["key"].as_str().unwrap().to_owned();
    for used in 1..=5 {
        let resp = app
            .send(Method::GET, "/api/v1/organization", Some(&secret), None)
            .await;
        resp.expect(200);
        assert_eq!(
            resp.body["meta"]["apiKeyUsage"],
            json!({"used": used, "limit": null, "unlimited": true})
        );
    }
    let redis = app.redis().await;
    let counter = redis.key(&format!(
        "usage:{}:{}",
        created.id(),
        chrono::Utc::now().format("%Y-%m-%d")
    ));
    let mut stored = None;
    for _ in 0..100 {
        stored = redis::cmd("GET")
            .arg(&counter)
            .query_async::<Option<i64>>(&mut redis.conn.clone())
            .await
            .unwrap();
        if stored == Some(5) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(stored, Some(5), "Redis holds the five requests");
}

#[tokio::test]
async fn a_revoked_key_is_refused_at_once() {
    let app = TestApp::builder().start().await;
    let created = app
        .post(
            "/api/v1/api-keys",
            json!({"name": "temp", "scopes": ["contacts:read"]}),
        )
        .await;
    created.expect(201);
    let secret = created.data()["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("prl_") && secret.len() == 36, "{secret}");
    app.send(Method::GET, "/api/v1/contacts", Some(&secret), None)
        .await
        .expect(200);
    app.delete(&format!("/api/v1/api-keys/{}", created.id()))
        .await
        .expect(200);
    app.send(Method::GET, "/api/v1/contacts", Some(&secret), None)
        .await
        .expect_error(401, "unauthorized");
    let listed = app.get("/api/v1/api-keys").await;
    let revoked = listed
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == created.id())
        .unwrap();
    assert!(revoked["revokedAt"].is_string());
    assert!(
        revoked.get("key").is_none(),
        "a listing never shows a secret"
    );
}

#[tokio::test]
async fn keys_are_stored_hashed() {
    let app = TestApp::builder().start().await;
    let stored: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT key_hash FROM api_keys WHERE organization_id = $1")
            .bind(app.org_id)
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(stored, vec![parley_domain::auth::hash_key(&app.key)]);
    let clear: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM api_keys WHERE organization_id = $1 AND (prefix = $2 OR name = $2)",
    )
    .bind(app.org_id)
    .bind(&app.key)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(clear, 0);
}

#[tokio::test]
async fn a_key_cannot_grant_scopes_it_does_not_hold() {
    let app = TestApp::builder().start().await;
    let manager = app.key_with(&["api-keys:manage", "contacts:read"]).await;
    let ok = app
        .send(
            Method::POST,
            "/api/v1/api-keys",
            Some(&manager),
            Some(&json!({"name": "reader", "scopes": ["contacts:read"]})),
        )
        .await;
    ok.expect(201);
    for scopes in [
        json!(["*"]),
        json!(["contacts:write"]),
        json!(["webhooks:manage"]),
    ] {
        let resp = app
            .send(
                Method::POST,
                "/api/v1/api-keys",
                Some(&manager),
                Some(&json!({"name": "escalate", "scopes": scopes})),
            )
            .await;
        resp.expect_error(403, "forbidden");
    }
}

#[tokio::test]
async fn meta_reports_daily_usage_and_the_limit_is_a_429() {
    let app = TestApp::builder().start().await;
    let key = app.key_for(app.org_id, &["contacts:read"], Some(3)).await;
    for used in 1..=3 {
        let resp = app
            .send(Method::GET, "/api/v1/contacts", Some(&key), None)
            .await;
        resp.expect(200);
        assert_eq!(
            resp.body["meta"]["apiKeyUsage"],
            json!({"used": used, "limit": 3, "unlimited": false})
        );
    }
    let resp = app
        .send(Method::GET, "/api/v1/contacts", Some(&key), None)
        .await;
    resp.expect_error(429, "rate_limited");
    let retry_after: u64 = resp.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry_after));
    assert_eq!(resp.body["meta"]["apiKeyUsage"]["used"], 3);
    // Unlimited keys say so; errors after authentication carry the usage too.
    let resp = app
        .get(&format!("/api/v1/contacts/{}", uuid::Uuid::now_v7()))
        .await;
    resp.expect_error(404, "not_found");
    assert_eq!(resp.body["meta"]["apiKeyUsage"]["unlimited"], true);
}

#[tokio::test]
async fn concurrent_requests_never_exceed_the_limit() {
    let app = TestApp::builder().start().await;
    let key = app.key_for(app.org_id, &["contacts:read"], Some(10)).await;
    let mut handles = Vec::new();
    for _ in 0..30 {
        let client = app.client.clone();
        let url = format!("{}/api/v1/contacts", app.base);
        let key = key.clone();
        handles.push(tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }));
    }
    let mut ok = 0;
    for h in handles {
        if h.await.unwrap() == 200 {
            ok += 1;
        }
    }
    assert_eq!(ok, 10);
}

/// The organization is kept in memory beside the keys: renamed in SQL without the
/// notification it is still served (so it is kept), renamed by hand with it the new name is
/// served within moments, and a PATCH is read back at once by the process that made it.
#[tokio::test]
async fn a_kept_organization_follows_its_changes() {
    let app = TestApp::builder().start().await;
    let name = |r: &parley_tests::Resp| r.data()["organizationName"].as_str().unwrap().to_owned();
    let mut kept = false;
    for i in 0..50 {
        let before = name(&app.get("/api/v1/organization").await);
        // Without the notification: the session's triggers do not fire.
        let mut tx = app.pool.begin().await.unwrap();
        sqlx::query("SET LOCAL session_replication_role = replica")
            .execute(&mut *tx)
            .await
            .unwrap();
        sqlx::query("UPDATE organizations SET name = $2 WHERE id = $1")
            .bind(app.org_id)
            .bind(format!("behind the back {i}"))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        if name(&app.get("/api/v1/organization").await) == before {
            kept = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(kept, "the API never kept its organization in 5 s");

    sqlx::query("UPDATE organizations SET name = 'by hand' WHERE id = $1")
        .bind(app.org_id)
        .execute(&app.pool)
        .await
        .unwrap();
    let mut seen = String::new();
    for _ in 0..100 {
        seen = name(&app.get("/api/v1/organization").await);
        if seen == "by hand" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(seen, "by hand", "the change was not heard in 2 s");

    app.patch(
        "/api/v1/organization",
        json!({"organizationName": "patched"}),
    )
    .await
    .expect(200);
    assert_eq!(name(&app.get("/api/v1/organization").await), "patched");
}

/// A ticket's token reads its SLA in a lane of its own beside its organization's keys: with
/// the organization's one turn held, the token is answered, and a flood of token reads cannot
/// take the keys' turn.
#[tokio::test]
async fn a_ticket_token_takes_turns_apart_from_its_organizations_keys() {
    use tokio::io::AsyncWriteExt;
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_REQUESTS_PER_ORG", "1"),
            ("PARLEY_REQUESTS_QUEUED_PER_ORG", "0"),
            ("PARLEY_MAX_BODY_BYTES", "200"),
        ])
        .start()
        .await;
    let t = app
        .post("/api/v1/tickets", json!({"subject": "Mine"}))
        .await
        .data()
        .clone();
    let path = format!("/api/v1/tickets/{}/sla", t["id"].as_str().unwrap());
    let token = t["accessToken"].as_str().unwrap().to_owned();
    // The organization's one turn, held by a broadcast whose long body does not end.
    let body = format!("{{\"name\": \"Held\"}}{}", " ".repeat(300));
    let mut held = app
        .post_held("/api/v1/broadcasts", &app.key, body.as_bytes(), 250)
        .await;
    let refused = tokio::time::timeout(std::time::Duration::from_secs(3), async {
        loop {
            // A held request that was answered came while a `GET` had the turn, and was
            // refused it: it holds nothing, so it is sent again.
            let mut answer = [0u8; 64];
            if matches!(held.try_read(&mut answer), Ok(n) if n > 0) {
                held = app
                    .post_held("/api/v1/broadcasts", &app.key, body.as_bytes(), 250)
                    .await;
            }
            let r = app.get("/api/v1/contacts").await;
            if r.status == 429 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        refused.is_ok(),
        "the held request took the organization's turn"
    );
    let read = app
        .client
        .get(format!("{}{path}", app.base))
        .header("X-Ticket-Access-Token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200, "the token's lane is its own");
    held.write_all(&body.as_bytes()[250..]).await.unwrap();
}
