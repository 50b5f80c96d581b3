//! Unsubscribe links: RFC 8058's one-click `POST`, the page, the ledger entry they make, the
//! headers and the `{{unsubscribe_url}}` of marketing email, and a rotation of the keys.

use parley_tests::TestApp;
use parley_tests::provider::FakeProvider;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::{recipients, send_now};
use crate::suppressions::{contact, email_template_with as email_template};

/// Each contact's status and error code in `broadcast`.
async fn statuses(app: &TestApp, broadcast: &str) -> Vec<(Uuid, String, Value)> {
    let mut out: Vec<(Uuid, String, Value)> = recipients(app, broadcast)
        .await
        .iter()
        .map(|r| {
            (
                r["contactId"].as_str().unwrap().parse().unwrap(),
                r["status"].as_str().unwrap().to_owned(),
                r["errorCode"].clone(),
            )
        })
        .collect();
    out.sort_by_key(|(c, ..)| *c);
    out
}

fn sorted(mut v: Vec<(Uuid, String, Value)>) -> Vec<(Uuid, String, Value)> {
    v.sort_by_key(|(c, ..)| *c);
    v
}

/// `POST`s `body` to `url` as a form.
async fn form(app: &TestApp, url: &str, body: &str) -> reqwest::Response {
    app.client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// RFC 8058's one-click `POST`.
async fn one_click(app: &TestApp, url: &str) -> reqwest::Response {
    form(app, url, "List-Unsubscribe=One-Click").await
}

async fn unsubscribed_entries(app: &TestApp) -> Vec<Value> {
    app.get("/api/v1/suppressions?reason=unsubscribed")
        .await
        .data()
        .as_array()
        .unwrap()
        .clone()
}

/// An app on a database of its own, and a worker sending email through a fake provider with
/// links to the app, and `extra` settings.
async fn rig(extra: &[(&str, &str)]) -> (FakeProvider, TestApp, parley_tests::TestWorker) {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let mut settings = vec![
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
        ("PARLEY_PUBLIC_URL", app.base.as_str()),
    ];
    settings.extend_from_slice(extra);
    let worker = app.spawn_worker(&settings).await;
    (provider, app, worker)
}

#[tokio::test]
async fn one_click_unsubscribes_once_a_tampered_link_is_404_and_the_page_resubscribes() {
    let (provider, app, _worker) =
        rig(&[("PARLEY_UNSUBSCRIBE_MAILTO", "unsubscribe@example.com")]).await;
    let a = contact(&app, "A@example.com").await;
    let b = contact(&app, "b@example.com").await;
    let marketing = email_template(&app, "marketing", "News. Leave: {{unsubscribe_url}}").await;
    let first = send_now(&app, &marketing, &[a, b]).await;
    app.ended_broadcast(&first, 30).await;

    // Each marketing email carries its own link, in its body and its headers.
    let calls = provider.calls();
    assert_eq!(calls.len(), 2);
    let link_of = |to: &str| -> String {
        let call = calls
            .iter()
            .find(|c| c.body["to"].as_str().unwrap().eq_ignore_ascii_case(to))
            .expect("sent");
        let url = call.body["unsubscribeUrl"].as_str().unwrap().to_owned();
        assert!(
            url.starts_with(&format!("{}/unsubscribe/", app.base)),
            "{url}"
        );
        assert_eq!(
            call.body["content"],
            format!("News. Leave: {url}"),
            "the body's link is the headers'"
        );
        assert_eq!(
            call.body["headers"]["List-Unsubscribe"],
            format!("<{url}>, <mailto:unsubscribe@example.com?subject=unsubscribe>")
        );
        assert_eq!(
            call.body["headers"]["List-Unsubscribe-Post"],
            "List-Unsubscribe=One-Click"
        );
        url
    };
    let link_a = link_of("a@example.com");
    let link_b = link_of("b@example.com");
    assert_ne!(link_a, link_b);

    // A tampered or cut link is 404 and changes nothing.
    let mut tampered = link_a.clone().into_bytes();
    let last = tampered.len() - 5;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for bad in [
        tampered,
        link_a[..link_a.len() - 1].to_owned(),
        format!("{link_a}A"),
    ] {
        let r = one_click(&app, &bad).await;
        assert_eq!(r.status(), 404, "{bad}");
        let get = app.client.get(&bad).send().await.unwrap();
        assert_eq!(get.status(), 404);
    }
    assert_eq!(unsubscribed_entries(&app).await, Vec::<Value>::new());

    // RFC 8058: the one-click POST unsubscribes at once: 200, no cookie, no redirect.
    for _ in 0..2 {
        let r = one_click(&app, &link_a).await;
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("set-cookie").is_none());
        assert!(r.headers().get("location").is_none());
    }
    let entries = unsubscribed_entries(&app).await;
    assert_eq!(entries.len(), 1, "a repeat is harmless");
    assert_eq!(entries[0]["email"], "a@example.com");
    assert_eq!(entries[0]["channel"], "email");
    assert_eq!(entries[0]["source"], "unsubscribe");
    let events: Vec<Value> = app
        .events()
        .await
        .into_iter()
        .filter(|(name, _)| name == "contact.unsubscribed")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["contactId"], a.to_string());
    assert_eq!(events[0]["broadcastId"], first.as_str());
    assert_eq!(events[0]["source"], "one_click");
    let b1 = app.get(&format!("/api/v1/broadcasts/{first}")).await;
    assert_eq!(b1.data()["unsubscribedCount"], 1);
    // No delivery receipts came: over the messages sent.
    assert_eq!(b1.data()["unsubscribeRate"], 0.5);

    // Marketing skips the address; transactional mail still reaches it.
    let second = send_now(&app, &marketing, &[a, b]).await;
    app.ended_broadcast(&second, 30).await;
    assert_eq!(
        statuses(&app, &second).await,
        sorted(vec![
            (a, "skipped".into(), json!("suppressed_unsubscribed")),
            (b, "sent".into(), Value::Null),
        ])
    );
    let utility = email_template(&app, "utility", "Your receipt").await;
    let third = send_now(&app, &utility, &[a]).await;
    app.ended_broadcast(&third, 30).await;
    assert_eq!(
        statuses(&app, &third).await,
        vec![(a, "sent".into(), Value::Null)]
    );
    let utility_call = provider.calls().last().unwrap().body.clone();
    assert!(utility_call.get("headers").is_none(), "{utility_call}");

    // The page: no script, a policy of its own; it offers to resubscribe, and does.
    let page = app.client.get(&link_a).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("default-src 'none'"), "{policy}");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    let html = page.text().await.unwrap();
    assert!(!html.contains("<script"));
    assert!(html.contains("value=\"resubscribe\""), "{html}");
    assert_eq!(
        unsubscribed_entries(&app).await.len(),
        1,
        "a GET changes nothing"
    );
    let r = form(&app, &link_a, "action=resubscribe").await;
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("value=\"unsubscribe\""));
    assert_eq!(unsubscribed_entries(&app).await, Vec::<Value>::new());
    // Unsubscribing again counts the contact in the broadcast once.
    assert_eq!(one_click(&app, &link_a).await.status(), 200);
    let b1 = app.get(&format!("/api/v1/broadcasts/{first}")).await;
    assert_eq!(b1.data()["unsubscribedCount"], 1);
    let r = form(&app, &link_a, "action=resubscribe").await;
    assert_eq!(r.status(), 200);
    // An entry from elsewhere is not the link's to remove: the page says so.
    app.post(
        "/api/v1/suppressions",
        json!({"entries": [{"email": "a@example.com", "reason": "unsubscribed"}]}),
    )
    .await
    .expect(201);
    let r = form(&app, &link_a, "action=resubscribe").await;
    assert!(r.text().await.unwrap().contains("You do not get"));
    assert_eq!(unsubscribed_entries(&app).await.len(), 1);
    let api_entry = unsubscribed_entries(&app).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.delete(&format!("/api/v1/suppressions/{api_entry}"))
        .await
        .expect(200);
    let fourth = send_now(&app, &marketing, &[a]).await;
    app.ended_broadcast(&fourth, 30).await;
    assert_eq!(
        statuses(&app, &fourth).await,
        vec![(a, "sent".into(), Value::Null)]
    );

    // A key added since: the links signed before it still work.
    let services = app.services().await;
    parley_usecases::unsubscribe::rotate(services.ctx())
        .await
        .unwrap();
    let r = one_click(&app, &link_b).await;
    assert_eq!(r.status(), 200);
    assert_eq!(unsubscribed_entries(&app).await.len(), 1);
}

#[tokio::test]
async fn the_public_routes_are_bounded() {
    let (provider, app, _worker) = rig(&[]).await;
    let a = contact(&app, "a@example.com").await;
    let marketing = email_template(&app, "marketing", "News").await;
    let id = send_now(&app, &marketing, &[a]).await;
    app.ended_broadcast(&id, 30).await;
    let link = provider.calls()[0].body["unsubscribeUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    // A body announced past 16 KiB, or not announced, is refused unread; a POST that says
    // nothing is 422.
    let big = app
        .client
        .post(&link)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "List-Unsubscribe=One-Click&pad={}",
            "x".repeat(16 * 1024)
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(big.status(), 413);
    let path = link.strip_prefix(&app.base).unwrap();
    let host = app.base.strip_prefix("http://").unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let chunked = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\n\r\n\
         1a\r\nList-Unsubscribe=One-Click\r\n0\r\n\r\n"
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, chunked.as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 12];
    tokio::io::AsyncReadExt::read_exact(&mut stream, &mut head)
        .await
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 413", "a body without its length");
    let empty = app.client.post(&link).body("").send().await.unwrap();
    assert_eq!(empty.status(), 422);
    assert_eq!(unsubscribed_entries(&app).await, Vec::<Value>::new());
    // Valid calls never count against the address (mailbox providers share theirs);
    // 60 forged ones a minute do, and then the address waits.
    for _ in 0..100 {
        assert_eq!(app.client.get(&link).send().await.unwrap().status(), 200);
    }
    let forged = format!("{}/unsubscribe/{}", app.base, "A".repeat(90));
    let mut answers = Vec::new();
    for _ in 0..61 {
        answers.push(
            app.client
                .get(&forged)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert!(answers[..60].iter().all(|s| *s == 404), "{answers:?}");
    assert_eq!(answers[60], 429);
    assert_eq!(app.client.get(&link).send().await.unwrap().status(), 429);
}
