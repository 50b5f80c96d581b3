//! Operator control (issue 30), over HTTP and from the CLI, with real workers: the operator
//! credential on every `/admin` route, dead work with its reasons, bulk retry by filter sending
//! each item once, an organization's pause holding only its sends, and the audit log.

use clap::Parser;
use parley_api::cli::{Cli, Command};
use parley_tests::provider::{FakeProvider, Reply};
use parley_tests::receiver::{Answer, Receiver};
use parley_tests::{Resp, TestApp, seed, test_config};
use reqwest::Method;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::{send_now, template};
use crate::fairness;

const TOKEN: &str = "operator-token-for-tests-0123456789abcdef";

async fn app_with(extra: &[(&str, &str)]) -> TestApp {
    let mut env = vec![("PARLEY_ADMIN_TOKEN", TOKEN)];
    env.extend_from_slice(extra);
    TestApp::builder().own_database().env(&env).start().await
}

async fn admin(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> Resp {
    app.send(method, path, Some(TOKEN), body.as_ref()).await
}

async fn get(app: &TestApp, path: &str) -> Value {
    admin(app, Method::GET, path, None)
        .await
        .expect(200)
        .data()
        .clone()
}

/// Waits for an action to end; returns it.
async fn finished(app: &TestApp, action: &Value) -> Value {
    let path = format!("/admin/v1/actions/{}", action["id"].as_str().unwrap());
    let until = |b: &Value| b["data"]["status"] != "running";
    let done = app.wait_for_with(&path, Some(TOKEN), 30, until).await;
    assert_eq!(done["data"]["status"], "completed", "{done}");
    done["data"].clone()
}

/// Asks for a retry of every dead recipient of `broadcast`; returns the action (202).
async fn retry_broadcast(app: &TestApp, broadcast: &str) -> Resp {
    let action = admin(
        app,
        Method::POST,
        "/admin/v1/dead/retry",
        Some(json!({"filter": {"queue": "recipient-send", "broadcastId": broadcast}})),
    )
    .await;
    action.expect(202);
    action
}

fn items(page: &Value) -> Vec<Value> {
    page["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn every_admin_route_takes_the_operator_credential_and_no_tenant_key() {
    // Two refused tokens a route: more than an address's failures a minute by default.
    let app = app_with(&[("PARLEY_AUTH_FAILURES_PER_MINUTE", "1000")]).await;
    let doc = app.get("/api/v1/openapi.json").await.body;
    let mut routes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/admin/") {
            continue;
        }
        let mut path = path
            .replace("{id}", &app.org_id.to_string())
            .replace("{name}", "sla-check");
        if path == "/admin/v1/dead" {
            path.push_str("?queue=sla-check");
        }
        for method in item.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let body = (method == Method::POST).then(|| json!({"filter": {"queue": "sla-check"}}));
            routes += 1;
            for key in [None, Some(app.key.as_str()), Some("not-a-token")] {
                let resp = app.send(method.clone(), &path, key, body.as_ref()).await;
                assert_eq!(
                    resp.status, 401,
                    "{method} {path} with {key:?}: {}",
                    resp.body
                );
                assert_eq!(resp.code(), "unauthorized");
            }
            let resp = admin(&app, method.clone(), &path, body).await;
            // An unknown action or organization is 404, a second pause 409: but never 401.
            assert!(
                matches!(resp.status, 200 | 202 | 404 | 409),
                "{method} {path} with the operator token: {} {}",
                resp.status,
                resp.body
            );
        }
    }
    assert!(
        routes >= 11,
        "only {routes} operator routes in the document"
    );
    // The operator page is public (it holds no data) and calls only the operator API.
    let page = app
        .client
        .get(format!("{}/admin", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    let script = app
        .client
        .get(format!("{}/admin/app.js", app.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(script.contains("\"/admin/v1\"") && !script.contains("/api/v1"));
}

#[tokio::test]
async fn dead_work_shows_its_reasons_and_a_bulk_retry_sends_each_once() {
    let provider = FakeProvider::start().await;
    let receiver = Receiver::start().await;
    let env = [
        ("PARLEY_CHANNEL_SOCIAL_A_URL", provider.url.as_str()),
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PARLEY_WEBHOOK_MAX_ATTEMPTS", "1"),
        ("PARLEY_WEBHOOK_TIMEOUT_MS", "1000"),
    ];
    let app = app_with(&env).await;
    let _worker = app.spawn_worker(&env).await;
    // Three recipients the provider refuses, and a webhook delivery its receiver refuses.
    provider.always(Reply::Status {
        status: 400,
        retry_after: None,
        code: Some("invalid_recipient"),
    });
    receiver.always(Answer::Status(500));
    let hook = app
        .post(
            "/api/v1/webhooks",
            json!({"url": receiver.url, "events": ["lead.created"]}),
        )
        .await
        .expect(201)
        .id();
    app.post("/api/v1/leads", json!({"name": "Ada"}))
        .await
        .expect(201);
    let contacts = seed::contacts(&app, 3).await;
    let t = template(&app, "social_a", "Hello").await;
    let broadcast = send_now(&app, &t, &contacts).await;
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, |b| {
        b["data"]["status"] == "failed"
    })
    .await;
    let org = app.org_id;
    let dead_recipients = format!("/admin/v1/dead?queue=recipient-send&organizationId={org}");
    let page = get(&app, &dead_recipients).await;
    let dead = items(&page);
    assert_eq!(dead.len(), 3, "{page}");
    for d in &dead {
        assert_eq!(d["errorCode"], "invalid_recipient");
        assert_eq!(d["broadcastId"], broadcast.as_str());
        assert_eq!(d["queue"], "recipient-send");
    }
    // The queue's former name still reads for a release, and answers under the new one.
    let former = get(
        &app,
        &format!("/admin/v1/dead?queue=recipient-delivery&organizationId={org}"),
    )
    .await;
    assert_eq!(items(&former), dead, "{former}");
    let dead_hooks = format!("/admin/v1/dead?queue=webhook-delivery&webhookId={hook}");
    let hooks = {
        let until = |b: &Value| b["data"]["items"].as_array().is_some_and(|i| i.len() == 1);
        app.wait_for_with(&dead_hooks, Some(TOKEN), 30, until).await["data"].clone()
    };
    assert_eq!(items(&hooks)[0]["errorCode"], "http_500", "{hooks}");
    assert_eq!(items(&hooks)[0]["attempts"], 1);
    // Keyset pages: two, then one, then none.
    let first = get(&app, &format!("{dead_recipients}&pageSize=2")).await;
    assert_eq!(items(&first).len(), 2);
    let cursor = first["nextCursor"].as_str().unwrap();
    let second = get(
        &app,
        &format!("{dead_recipients}&pageSize=2&cursor={cursor}"),
    )
    .await;
    assert_eq!(items(&second).len(), 1);
    assert!(second["nextCursor"].is_null());
    // A filter names a queue and only what that queue holds.
    admin(&app, Method::GET, "/admin/v1/dead", None)
        .await
        .expect_error(422, "validation_error");
    admin(
        &app,
        Method::GET,
        &format!("/admin/v1/dead?queue=webhook-delivery&broadcastId={broadcast}"),
        None,
    )
    .await
    .expect_error(422, "validation_error");

    // A misspelt field is refused, not taken for "every organization".
    admin(
        &app,
        Method::POST,
        "/admin/v1/dead/discard",
        Some(json!({"filter": {"queue": "recipient-send", "organisationId": org}})),
    )
    .await
    .expect_error(422, "validation_error");
    admin(
        &app,
        Method::GET,
        &format!("/admin/v1/dead?queue=recipient-send&organisationId={org}"),
        None,
    )
    .await
    .expect_error(422, "validation_error");
    assert_eq!(items(&get(&app, &dead_recipients).await).len(), 3);

    // The provider takes them now: retry everything of that broadcast.
    provider.always(Reply::Accept);
    let action = retry_broadcast(&app, &broadcast).await;
    assert_eq!(action.data()["matched"], 3);
    let done = finished(&app, action.data()).await;
    assert_eq!(done["done"], 3);
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, |b| {
            b["data"]["status"] == "completed"
        })
        .await;
    assert_eq!(b["data"]["sentCount"], 3, "{b}");
    assert_eq!(b["data"]["failedCount"], 0, "{b}");
    let accepted: Vec<_> = provider
        .calls()
        .into_iter()
        .filter(|c| c.status == 200)
        .map(|c| c.idempotency_key)
        .collect();
    assert_eq!(accepted.len(), 3, "each retried recipient sent once");
    let unique: std::collections::HashSet<_> = accepted.iter().collect();
    assert_eq!(unique.len(), 3);
    assert!(items(&get(&app, &dead_recipients).await).is_empty());

    // The webhook delivery: retried once it answers, then discarded when it fails again.
    receiver.always(Answer::Status(200));
    let action = admin(
        &app,
        Method::POST,
        "/admin/v1/dead/retry",
        Some(json!({"filter": {"queue": "webhook-delivery"}, "ids": [items(&hooks)[0]["id"]]})),
    )
    .await;
    action.expect(202);
    finished(&app, action.data()).await;
    receiver.received_at_least(2, 30).await;
    assert!(items(&get(&app, &dead_hooks).await).is_empty());
    receiver.always(Answer::Status(500));
    app.post("/api/v1/leads", json!({"name": "Bo"}))
        .await
        .expect(201);
    app.wait_for_with(&dead_hooks, Some(TOKEN), 30, |b| {
        b["data"]["items"].as_array().is_some_and(|i| i.len() == 1)
    })
    .await;
    let action = admin(
        &app,
        Method::POST,
        "/admin/v1/dead/discard",
        Some(json!({"filter": {"queue": "webhook-delivery", "errorCode": "http_500"}})),
    )
    .await;
    action.expect(202);
    assert_eq!(finished(&app, action.data()).await["done"], 1);
    assert!(items(&get(&app, &dead_hooks).await).is_empty());

    // The audit log: newest first, who, what and how many.
    let audit = items(&get(&app, "/admin/v1/audit").await);
    let log: Vec<(String, String, i64)> = audit
        .iter()
        .map(|a| {
            (
                a["action"].as_str().unwrap().to_owned(),
                a["actor"].as_str().unwrap().to_owned(),
                a["done"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        log,
        vec![
            ("discard".to_owned(), "token".to_owned(), 1),
            ("retry".to_owned(), "token".to_owned(), 1),
            ("retry".to_owned(), "token".to_owned(), 3),
        ]
    );
}

#[tokio::test]
async fn pausing_an_organization_holds_only_its_sends_and_resuming_sends_each_once() {
    let provider = FakeProvider::start().await;
    let env = [("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str())];
    let app = app_with(&env).await;
    let _worker = app.spawn_worker(&env).await;
    let org = app.org_id;
    let pause = format!("/admin/v1/organizations/{org}/pause");
    admin(&app, Method::POST, &pause, None).await.expect(200);
    admin(&app, Method::POST, &pause, None)
        .await
        .expect_error(409, "invalid_state");
    // Another organization sends as usual meanwhile; ours is held, `high` too.
    let (_, other_key, theirs) = fairness::org(&app, "next door", 3).await;
    let their_broadcast = fairness::send_now(&app, &other_key, &theirs, "normal").await;
    let ours = fairness::contacts_of(&app, org, 3).await;
    let broadcast = fairness::send_now(&app, &app.key, &ours, "high").await;
    let until = |b: &Value| b["data"]["status"] == "completed";
    app.wait_for_with(
        &format!("/api/v1/broadcasts/{their_broadcast}"),
        Some(&other_key),
        30,
        until,
    )
    .await;
    let held = app
        .wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, |b| {
            b["data"]["heldCount"] == 3
        })
        .await;
    assert_eq!(held["data"]["status"], "sending");
    assert_eq!(held["data"]["sentCount"], 0);
    assert_eq!(
        provider.calls().len(),
        3,
        "only the other organization's were sent"
    );
    let pauses = get(&app, "/admin/v1/pauses").await;
    assert_eq!(
        pauses["organizations"][0]["organizationId"],
        org.to_string()
    );
    assert_eq!(pauses["organizations"][0]["heldRecipients"], 3);
    let queues = get(&app, "/admin/v1/queues").await;
    let backlog = queues["topOrganizations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["organizationId"] == org.to_string())
        .cloned()
        .expect("the paused organization's backlog is listed");
    assert_eq!(backlog["heldRecipients"], 3);
    assert_eq!(backlog["sendingPaused"], true);
    assert!(
        queues["queues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["name"] == "recipient-send" && q["consumers"].as_u64() >= Some(1)),
        "{queues}"
    );

    let resumed = admin(
        &app,
        Method::POST,
        &format!("/admin/v1/organizations/{org}/resume"),
        None,
    )
    .await;
    resumed.expect(200);
    finished(&app, resumed.data()).await;
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, until)
        .await;
    assert_eq!(b["data"]["sentCount"], 3);
    let calls = provider.calls();
    assert_eq!(calls.len(), 6, "each held recipient sent once");
    let keys: std::collections::HashSet<_> = calls.iter().map(|c| &c.idempotency_key).collect();
    assert_eq!(keys.len(), 6);
    let audit = items(&get(&app, "/admin/v1/audit").await);
    let actions: Vec<&str> = audit
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["resume_organization", "pause_organization"]);
    assert_eq!(audit[0]["done"], 3, "the resume released three recipients");
}

#[tokio::test]
async fn a_paused_queue_is_left_alone_until_resumed() {
    let app = app_with(&[]).await;
    let _worker = app.spawn_worker(&[]).await;
    admin(
        &app,
        Method::POST,
        "/admin/v1/queues/broadcast-dispatch/pause",
        None,
    )
    .await
    .expect(200);
    // The worker reads pauses every few ticks; one started meanwhile reads them first.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let _late = app.spawn_worker(&[]).await;
    let contacts = seed::contacts(&app, 2).await;
    let t = template(&app, "email", "Hi").await;
    let broadcast = send_now(&app, &t, &contacts).await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let b = app.get(&format!("/api/v1/broadcasts/{broadcast}")).await;
    assert_eq!(
        b.data()["sentCount"],
        0,
        "no dispatch ran while paused: {}",
        b.body
    );
    let queues = get(&app, "/admin/v1/queues").await;
    let dispatch = queues["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "broadcast-dispatch")
        .cloned()
        .unwrap();
    assert_eq!(dispatch["paused"], true);
    assert!(dispatch["ready"].as_u64().unwrap() >= 1, "{dispatch}");
    admin(
        &app,
        Method::POST,
        "/admin/v1/queues/broadcast-dispatch/resume",
        None,
    )
    .await
    .expect(200);
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, |b| {
        b["data"]["status"] == "completed"
    })
    .await;

    // The recipient queue's former name pauses and resumes it too, stored under its name.
    let queue_paused = |queues: &Value, name: &str| {
        queues["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .map(|q| q["paused"].clone())
    };
    for (pause, resume) in [
        ("recipient-delivery", "recipient-send"),
        ("recipient-send", "recipient-delivery"),
    ] {
        let path = |name: &str, what: &str| format!("/admin/v1/queues/{name}/{what}");
        admin(&app, Method::POST, &path(pause, "pause"), None)
            .await
            .expect(200);
        let queues = get(&app, "/admin/v1/queues").await;
        assert_eq!(queue_paused(&queues, "recipient-send"), Some(json!(true)));
        assert_eq!(queue_paused(&queues, "recipient-delivery"), None);
        // Stored under the name workers of the release before read too, shown under its own.
        let stored: Vec<String> = sqlx::query_scalar("SELECT queue FROM paused_queues")
            .fetch_all(&app.pool)
            .await
            .unwrap();
        assert_eq!(stored, vec!["recipient-delivery".to_owned()]);
        let pauses = get(&app, "/admin/v1/pauses").await;
        assert_eq!(pauses["queues"][0]["queue"], "recipient-send", "{pauses}");
        admin(&app, Method::POST, &path(resume, "pause"), None)
            .await
            .expect_error(409, "invalid_state");
        admin(&app, Method::POST, &path(resume, "resume"), None)
            .await
            .expect(200);
        let queues = get(&app, "/admin/v1/queues").await;
        assert_eq!(queue_paused(&queues, "recipient-send"), Some(json!(false)));
    }
}

/// Runs `parley-api admin <args>` in this process against the test's database and Redis;
/// returns what it printed.
async fn cli(app: &TestApp, args: &[&str]) -> String {
    let cli = Cli::try_parse_from(["parley-api", "admin"].iter().chain(args)).expect("parses");
    let Some(Command::Admin { command, json }) = cli.command else {
        panic!("not an admin command");
    };
    let config = test_config(
        &app.redis_prefix,
        &[("DATABASE_URL", app.database_url.as_str())],
    );
    let mut out = Vec::new();
    parley_api::admin_cli::run_to(command, json, config, &mut out)
        .await
        .expect("the command succeeds");
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn the_cli_does_what_the_api_does_and_its_keys_open_the_api() {
    let app = app_with(&[]).await;
    let org = app.org_id.to_string();
    let table = cli(&app, &["queues"]).await;
    assert!(
        table.starts_with("queue") && table.contains("recipient-send"),
        "{table}"
    );
    let paused: Value =
        serde_json::from_str(&cli(&app, &["pause-org", &org, "--json"]).await).unwrap();
    assert_eq!(paused["action"], "pause_organization");
    assert!(paused["actor"].as_str().unwrap().starts_with("cli:"));
    let pauses = cli(&app, &["pauses"]).await;
    assert!(pauses.contains(&org), "{pauses}");
    cli(&app, &["resume-org", &org]).await;
    let dead: Value =
        serde_json::from_str(&cli(&app, &["dead", "--queue", "sla-check", "--json"]).await)
            .unwrap();
    assert_eq!(dead["items"], json!([]));
    let retry: Value = serde_json::from_str(
        &cli(
            &app,
            &["retry", "--queue", "contact-import", "--wait", "--json"],
        )
        .await,
    )
    .unwrap();
    assert_eq!(
        (retry["status"].as_str(), retry["matched"].as_i64()),
        (Some("completed"), Some(0))
    );
    // An operator key made by the CLI opens the operator API, and is recorded by name.
    let made: Value =
        serde_json::from_str(&cli(&app, &["key", "create", "--name", "alice"]).await).unwrap();
    let key = made["operatorKey"].as_str().unwrap().to_owned();
    let resp = app
        .send(
            Method::POST,
            &format!("/admin/v1/organizations/{}/pause", Uuid::now_v7()),
            Some(&key),
            None,
        )
        .await;
    resp.expect_error(404, "not_found");
    app.send(
        Method::POST,
        "/admin/v1/queues/sla-check/pause",
        Some(&key),
        None,
    )
    .await
    .expect(200);
    let audit = cli(&app, &["audit"]).await;
    assert!(audit.lines().nth(1).unwrap().contains("alice"), "{audit}");
    cli(&app, &["key", "revoke", "--name", "alice"]).await;
    app.send(Method::GET, "/admin/v1/queues", Some(&key), None)
        .await
        .expect_error(401, "unauthorized");
}

/// A broadcast to `n` new contacts on `social_a` whose every recipient `provider` refused
/// (`invalid_recipient`), once it has `failed`; its id.
async fn refused_broadcast(app: &TestApp, provider: &FakeProvider, n: usize) -> String {
    provider.always(Reply::Status {
        status: 400,
        retry_after: None,
        code: Some("invalid_recipient"),
    });
    let contacts = seed::contacts(app, n).await;
    let t = template(app, "social_a", "Hello").await;
    let broadcast = send_now(app, &t, &contacts).await;
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 120, |b| {
        b["data"]["status"] == "failed"
    })
    .await;
    broadcast
}

#[tokio::test]
async fn a_recipient_that_may_have_been_sent_is_retried_only_when_its_code_is_named() {
    let provider = FakeProvider::start().await;
    let env = [("PARLEY_CHANNEL_SOCIAL_A_URL", provider.url.as_str())];
    let app = app_with(&env).await;
    let _worker = app.spawn_worker(&env).await;
    let broadcast = refused_broadcast(&app, &provider, 2).await;
    // One of them timed out at the provider, which may have taken the message.
    let uncertain: Uuid = sqlx::query_scalar(
        "UPDATE broadcast_recipients SET error_code = 'timeout'
         WHERE id = (SELECT id FROM broadcast_recipients WHERE broadcast_id = $1 LIMIT 1)
         RETURNING id",
    )
    .bind(Uuid::parse_str(&broadcast).unwrap())
    .fetch_one(&app.pool)
    .await
    .unwrap();
    provider.always(Reply::Accept);
    let retry = |filter: Value| {
        let app = &app;
        async move {
            let action = admin(
                app,
                Method::POST,
                "/admin/v1/dead/retry",
                Some(json!({"filter": filter})),
            )
            .await;
            action.expect(202);
            finished(app, action.data()).await
        }
    };
    let first = retry(json!({"queue": "recipient-send", "broadcastId": broadcast})).await;
    assert_eq!(first["done"], 1, "the timed-out one is left: {first}");
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, |b| {
        b["data"]["status"] == "completed"
    })
    .await;
    let dead = get(
        &app,
        &format!("/admin/v1/dead?queue=recipient-send&broadcastId={broadcast}"),
    )
    .await;
    assert_eq!(items(&dead).len(), 1);
    assert_eq!(items(&dead)[0]["id"], uncertain.to_string());
    let second = retry(json!({"queue": "recipient-send", "broadcastId": broadcast,
                              "errorCode": "timeout"}))
    .await;
    assert_eq!(second["done"], 1);
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 30, |b| {
            b["data"]["status"] == "completed" && b["data"]["sentCount"] == 2
        })
        .await;
    assert_eq!(b["data"]["failedCount"], 0);
    let accepted = provider.calls().iter().filter(|c| c.status == 200).count();
    assert_eq!(accepted, 2, "each sent once");
}

#[tokio::test]
async fn an_action_whose_batches_keep_failing_ends_failed_with_its_error() {
    // No worker: the resume stays running until its batches are recorded by hand.
    let app = app_with(&[]).await;
    let org = app.org_id;
    for verb in ["pause", "resume"] {
        admin(
            &app,
            Method::POST,
            &format!("/admin/v1/organizations/{org}/{verb}"),
            None,
        )
        .await
        .expect(200);
    }
    let audit = items(&get(&app, "/admin/v1/audit").await);
    let id: Uuid = audit[0]["id"].as_str().unwrap().parse().unwrap();
    let path = format!("/admin/v1/actions/{id}");
    // Leased by hand, as a worker's tick would.
    let leased: parley_types::time::Timestamp = sqlx::query_scalar(
        "UPDATE operator_actions SET lease_until = clock_timestamp() + interval '1 hour'
         WHERE id = $1 RETURNING lease_until",
    )
    .bind(id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    // A worker whose lease ran out and was taken over records nothing.
    let stale = parley_types::time::Timestamp(leased.0 - chrono::Duration::seconds(30));
    parley_db::operator::batch_failed(&app.pool, id, stale, "stale", 5)
        .await
        .unwrap();
    assert!(get(&app, &path).await["error"].is_null());
    for n in 1..=5 {
        parley_db::operator::batch_failed(&app.pool, id, leased, &format!("boom {n}"), 5)
            .await
            .unwrap();
        let a = get(&app, &path).await;
        let expected = if n < 5 { "running" } else { "failed" };
        assert_eq!(a["status"], expected, "after {n} failures: {a}");
        assert_eq!(a["error"], format!("boom {n}"));
    }
    assert!(get(&app, &path).await["finishedAt"].is_string());
}

#[tokio::test]
async fn every_refused_operator_token_counts_as_a_failure_of_its_address() {
    let app = app_with(&[("PARLEY_AUTH_FAILURES_PER_MINUTE", "3")]).await;
    let queues = |token: String| {
        let app = &app;
        async move {
            app.send(Method::GET, "/admin/v1/queues", Some(&token), None)
                .await
                .status
        }
    };
    // Guesses at the token (no lookup) and at operator keys (a lookup) count alike.
    assert_eq!(queues("guess-0".to_owned()).await, 401);
    assert_eq!(queues(format!("prlop_{:0>40}", 1)).await, 401);
    assert_eq!(queues(format!("{TOKEN}x")).await, 401);
    assert_eq!(
        queues(TOKEN.to_owned()).await,
        429,
        "three failures block the address, the right token too, to the end of the minute"
    );
    // No credential at all is no guess.
    let other = app_with(&[("PARLEY_AUTH_FAILURES_PER_MINUTE", "1")]).await;
    for _ in 0..3 {
        assert_eq!(
            other
                .send(Method::GET, "/admin/v1/queues", None, None)
                .await
                .status,
            401
        );
    }
    assert_eq!(
        other
            .send(Method::GET, "/admin/v1/queues", Some(TOKEN), None)
            .await
            .status,
        200
    );
}

/// With `PARLEY_ADMIN_ADDR` the operator API and page are served there, and not on the
/// public address.
#[tokio::test]
async fn the_operator_api_may_listen_on_its_own_address() {
    let app = app_with(&[("PARLEY_ADMIN_ADDR", "127.0.0.1:0")]).await;
    let admin = app.admin_addr.expect("an admin address");
    app.send(Method::GET, "/admin/v1/queues", Some(TOKEN), None)
        .await
        .expect_error(404, "route_not_found");
    let page = app
        .client
        .get(format!("{}/admin", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    let there = app
        .client
        .get(format!("http://{admin}/admin/v1/queues"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(there.status(), 200);
    let page = app
        .client
        .get(format!("http://{admin}/admin"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    // The tenant API is not there.
    let api = app
        .client
        .get(format!("http://{admin}/api/v1/contacts"))
        .bearer_auth(&app.key)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 404);
    app.get("/api/v1/contacts").await.expect(200);
}

/// `n` dead SLA checks of the test's organization (due an hour ago, never run), their states'
/// foreign keys off for this fixture; their ids.
async fn dead_sla_checks(app: &TestApp, n: i32) -> Vec<Uuid> {
    let mut tx = app.pool.begin().await.unwrap();
    sqlx::query("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await
        .unwrap();
    let ids: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO sla_checks (id, organization_id, sla_state_id, target, kind, due_at)
         SELECT gen_random_uuid(), $1, gen_random_uuid(), 'resolution', 'deadline',
                now() - interval '1 hour' - g * interval '1 ms'
         FROM generate_series(1, $2) g RETURNING id",
    )
    .bind(app.org_id)
    .bind(n)
    .fetch_all(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    ids
}

/// A retry of 2,500 items runs a batch of 1,000 at each tick of the worker (100 ms here), not
/// one a lease (30 s): done within seconds.
#[tokio::test]
async fn a_bulk_retry_runs_its_batches_in_consecutive_ticks() {
    let app = app_with(&[]).await;
    // A worker that runs no SLA check (its queues are imports only): the retried checks stay.
    let _worker = app
        .spawn_worker(&[("PARLEY_WORKER_QUEUES", "contact-import")])
        .await;
    dead_sla_checks(&app, 2_500).await;
    let action = admin(
        &app,
        Method::POST,
        "/admin/v1/dead/retry",
        Some(json!({"filter": {"queue": "sla-check", "organizationId": app.org_id}})),
    )
    .await;
    action.expect(202);
    assert_eq!(action.data()["matched"], 2_500);
    let path = format!(
        "/admin/v1/actions/{}",
        action.data()["id"].as_str().unwrap()
    );
    let until = |b: &Value| b["data"]["status"] != "running";
    let done = app.wait_for_with(&path, Some(TOKEN), 10, until).await;
    assert_eq!(done["data"]["status"], "completed", "{done}");
    assert_eq!(done["data"]["done"], 2_500, "{done}");
}

/// A retry of all of one broadcast's 2,500 failed recipients: its later batches find the
/// broadcast sending what its first ones retried, and retry theirs too; each is sent once.
#[tokio::test]
async fn a_bulk_retry_of_one_broadcast_retries_every_batch_while_it_sends() {
    let provider = FakeProvider::start().await;
    let env = [
        ("PARLEY_CHANNEL_SOCIAL_A_URL", provider.url.as_str()),
        // Every message is refused on purpose: the broadcast must fail, not pause.
        ("PARLEY_BROADCAST_AUTO_PAUSE_FAILURES", "1000000"),
    ];
    let app = app_with(&env).await;
    let _worker = app.spawn_worker(&env).await;
    let broadcast = refused_broadcast(&app, &provider, 2_500).await;
    let path = format!("/api/v1/broadcasts/{broadcast}");
    provider.always(Reply::Accept);
    let action = retry_broadcast(&app, &broadcast).await;
    let done = finished(&app, action.data()).await;
    assert_eq!(done["done"], 2_500, "{done}");
    let b = app
        .wait_for(&path, 120, |b| b["data"]["status"] == "completed")
        .await;
    assert_eq!(b["data"]["sentCount"], 2_500, "{b}");
    let accepted: Vec<String> = provider
        .calls()
        .into_iter()
        .filter(|c| c.status == 200)
        .map(|c| c.idempotency_key)
        .collect();
    let unique: std::collections::HashSet<&String> = accepted.iter().collect();
    assert_eq!(
        (accepted.len(), unique.len()),
        (2_500, 2_500),
        "each sent once"
    );
}

/// A check the scheduler enqueued after it was listed (it is running) is neither retried nor
/// discarded by id.
#[tokio::test]
async fn a_dead_sla_check_that_came_back_to_life_is_left_alone() {
    use parley_domain::operator::DeadQueue;
    let app = app_with(&[]).await;
    let ids = dead_sla_checks(&app, 2).await;
    sqlx::query("UPDATE sla_checks SET enqueued_at = clock_timestamp() WHERE id = $1")
        .bind(ids[0])
        .execute(&app.pool)
        .await
        .unwrap();
    let mut tx = app.pool.begin().await.unwrap();
    let retried = parley_db::operator::retry(&mut tx, DeadQueue::SlaCheck, &ids)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(retried.count, 1, "only the one still dead");
    let running: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT enqueued_at FROM sla_checks WHERE id = $1")
            .bind(ids[0])
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(running.is_some(), "the running one keeps its enqueue");
    let discarded = parley_db::operator::discard(&app.pool, DeadQueue::SlaCheck, &ids)
        .await
        .unwrap();
    assert_eq!(discarded, 1);
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM sla_checks WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(left, [ids[0]], "the running one stays");
}
