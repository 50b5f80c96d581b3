//! What one client can hold while its bodies arrive, and whose address it is: a slow-body flood
//! from other addresses leaves another organization answered, an address's connections are
//! capped (a trusted proxy's are not), and behind a trusted proxy the address counted is the
//! one it forwarded for.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use parley_tests::{TestApp, metrics_text};
use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A connection to `to` from `127.0.0.<n>` (every 127/8 address is this machine's).
async fn connect_from(n: u8, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)), 0))
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// What a connection gets within a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Status(u16),
    /// Closed without an answer read (a server that answers before reading a body and closes
    /// may reset the connection, and the answer with it).
    Closed,
    Waiting,
}

/// What `stream` gets within `secs`.
async fn outcome(stream: &mut TcpStream, secs: u64) -> Outcome {
    let mut head = [0u8; 12];
    let read = tokio::time::timeout(Duration::from_secs(secs), stream.read_exact(&mut head)).await;
    match read {
        Ok(Ok(_)) => std::str::from_utf8(&head[9..12])
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or(Outcome::Closed, Outcome::Status),
        Ok(Err(_)) => Outcome::Closed,
        Err(_) => Outcome::Waiting,
    }
}

/// The status `stream` is answered within `secs`.
async fn status_within(stream: &mut TcpStream, secs: u64) -> Option<u16> {
    match outcome(stream, secs).await {
        Outcome::Status(s) => Some(s),
        _ => None,
    }
}

/// A request with a body of `len` bytes of which all but the last are sent: it holds whatever
/// a request reading its body holds, until the server gives up on it.
async fn held_body(from: u8, app: &TestApp, head: &str, len: usize) -> TcpStream {
    let mut stream = connect_from(from, app.addr).await;
    let head = format!("{head}host: {}\r\ncontent-length: {len}\r\n\r\n", app.addr);
    // Refused early, the server may close before all of it is written: that is fine.
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&vec![b' '; len - 1]).await;
    stream
}

/// 12 requests of B's at once, lists and creates, each given 5 s: their statuses.
async fn b_requests(
    app: &TestApp,
    b: &str,
    round: usize,
) -> Vec<Result<u16, tokio::time::error::Elapsed>> {
    futures::future::join_all((0..12usize).map(|i| async move {
        let contact = serde_json::json!({"name": format!("B {round}-{i}"), "source": "test"});
        let request = if i.is_multiple_of(2) {
            app.send(Method::GET, "/api/v1/contacts?pageSize=20", Some(b), None)
        } else {
            app.send(Method::POST, "/api/v1/contacts", Some(b), Some(&contact))
        };
        tokio::time::timeout(Duration::from_secs(5), request)
            .await
            .map(|r| r.status)
    }))
    .await
}

/// Bodies of all but their last byte, 40 connections from each of two addresses with one
/// organization's key, beside another organization's requests from a third: the flood gets
/// 429 past its address's and its organization's readers, the rest of it 408 after the grace,
/// and holds no in-flight slot meanwhile; the other organization's every request is answered
/// within 5 s (a slot held by the flood would hold it until the flood's 408 or the request
/// timeout). A flood without a key, on the route that takes a ticket's token, is answered
/// before its body is read.
#[tokio::test]
async fn a_slow_body_flood_leaves_another_organization_answered() {
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_MAX_IN_FLIGHT", "16"),
            ("PARLEY_MAX_BODY_BYTES", "65536"),
            ("PARLEY_BODY_GRACE_SECS", "3"),
            ("PARLEY_BODY_READERS_PER_ADDRESS", "8"),
            ("PARLEY_BODY_READERS_PER_ORG", "12"),
        ])
        .start()
        .await;
    let (_, b_key) = app.new_org("Organization B").await;
    let head = format!(
        "POST /api/v1/contacts HTTP/1.1\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\n",
        app.key
    );
    let mut flood = Vec::new();
    for from in [2, 3] {
        for _ in 0..40 {
            flood.push(held_body(from, &app, &head, 65_536).await);
        }
    }
    // B, 12 requests at once (three quarters of the in-flight slots, which the flood would
    // fill if it held them) three times, while the flood holds.
    let mut answered = Vec::new();
    for round in 0..3 {
        answered.extend(b_requests(&app, &b_key, round).await);
    }
    for status in &answered {
        assert!(
            matches!(status, Ok(200 | 201)),
            "B's request: {status:?} ({answered:?})"
        );
    }
    // The flood's ends: refused at once past its bounds (429, the connection closed with the
    // body unread), cut off after the grace (408).
    let mut ends = Vec::new();
    for stream in &mut flood {
        ends.push(outcome(stream, 10).await);
    }
    let count = |o: Outcome| ends.iter().filter(|x| **x == o).count();
    let cut_off = count(Outcome::Status(408));
    assert_eq!(
        count(Outcome::Status(429)) + cut_off + count(Outcome::Closed),
        ends.len(),
        "each refused or cut off: {ends:?}"
    );
    assert!(
        (1..=12).contains(&cut_off),
        "at most the organization's 12 readers held on: {ends:?}"
    );
    let metrics = metrics_text(app.metrics_addr).await;
    for series in [
        "parley_org_limit_hits_total{limit=\"body_readers\"}",
        "parley_http_refused_total{reason=\"slow_body\"}",
    ] {
        assert!(metrics.contains(series), "{series} in\n{metrics}");
    }

    // Without a key: a ticket's token is checked before the body is read.
    let ticket = uuid::Uuid::now_v7();
    let head =
        format!("GET /api/v1/tickets/{ticket}/sla HTTP/1.1\r\nx-ticket-access-token: guess\r\n");
    let mut guesses = Vec::new();
    for _ in 0..20 {
        guesses.push(held_body(4, &app, &head, 65_536).await);
    }
    for stream in &mut guesses {
        let end = outcome(stream, 2).await;
        assert!(
            matches!(end, Outcome::Status(401 | 429) | Outcome::Closed),
            "{end:?}"
        );
    }
}

/// An address holds at most its connections (the next is answered 429 and closed); a trusted
/// proxy's are not counted, and another address is not affected.
#[tokio::test]
async fn an_address_past_its_connections_is_refused_and_a_trusted_proxy_is_not() {
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_MAX_CONNECTIONS_PER_ADDRESS", "4"),
            ("PARLEY_TRUSTED_PROXIES", "127.0.0.3"),
        ])
        .start()
        .await;
    let healthz = |mut s: TcpStream| async move {
        s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        status_within(&mut s, 5).await
    };
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect_from(2, app.addr).await);
    }
    // The fifth is answered and closed without sending anything.
    let mut refused = connect_from(2, app.addr).await;
    assert_eq!(status_within(&mut refused, 5).await, Some(429));
    let closed =
        tokio::time::timeout(Duration::from_secs(5), refused.read_to_end(&mut Vec::new())).await;
    assert!(closed.is_ok(), "closed after its answer");
    app.get("/api/v1/contacts").await.expect(200);
    let mut proxied = Vec::new();
    for _ in 0..10 {
        proxied.push(connect_from(3, app.addr).await);
    }
    for s in proxied {
        assert_eq!(healthz(s).await, Some(200));
    }
    assert_eq!(healthz(idle.pop().unwrap()).await, Some(200));
    drop(idle);
    // Closed, they count no more.
    let again = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if healthz(connect_from(2, app.addr).await).await == Some(200) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(again.is_ok(), "the address may connect again");
}

/// Behind a trusted proxy, failed authentications count by the address it forwarded for
/// (what the client prepended is not believed); without one, the header is ignored.
#[tokio::test]
async fn failed_authentications_count_by_the_address_a_trusted_proxy_forwarded_for() {
    let bad = format!("prl_{}", "x".repeat(32));
    let get = |app: &TestApp, key: String, forwarded: &'static str| {
        let req = app
            .client
            .get(format!("{}/api/v1/contacts", app.base))
            .bearer_auth(key)
            .header("x-forwarded-for", forwarded);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let behind = TestApp::builder()
        .env(&[
            ("PARLEY_TRUSTED_PROXIES", "127.0.0.0/8"),
            ("PARLEY_AUTH_FAILURES_PER_MINUTE", "3"),
        ])
        .start()
        .await;
    for _ in 0..3 {
        assert_eq!(get(&behind, bad.clone(), "203.0.113.9").await, 401);
    }
    assert_eq!(get(&behind, bad.clone(), "203.0.113.9").await, 429);
    // A made-up address before the proxy's does not help.
    assert_eq!(
        get(&behind, bad.clone(), "198.51.100.1, 203.0.113.9").await,
        429
    );
    // Another client behind the same proxy is not blocked.
    assert_eq!(get(&behind, behind.key.clone(), "203.0.113.10").await, 200);

    let direct = TestApp::builder()
        .env(&[("PARLEY_AUTH_FAILURES_PER_MINUTE", "3")])
        .start()
        .await;
    for forwarded in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
        assert_eq!(get(&direct, bad.clone(), forwarded).await, 401);
    }
    assert_eq!(
        get(&direct, bad.clone(), "203.0.113.4").await,
        429,
        "an untrusted peer's header is not believed"
    );
}

/// A route that takes no body and no credential (the document, `/docs`, the operator page),
/// and every `GET` (a ticket's SLA read with its token among them), refuses a body without
/// reading it.
#[tokio::test]
async fn a_body_where_none_is_taken_is_refused_unread() {
    let app = TestApp::builder().start().await;
    let t = app
        .post("/api/v1/tickets", serde_json::json!({"subject": "Mine"}))
        .await
        .data()
        .clone();
    let heads = [
        "GET /api/v1/openapi.json HTTP/1.1\r\n".to_owned(),
        "GET /docs/ HTTP/1.1\r\n".to_owned(),
        "GET /admin HTTP/1.1\r\n".to_owned(),
        format!(
            "GET /api/v1/contacts HTTP/1.1\r\nauthorization: Bearer {}\r\n",
            app.key
        ),
        format!(
            "GET /api/v1/tickets/{}/sla HTTP/1.1\r\nx-ticket-access-token: {}\r\n",
            t["id"].as_str().unwrap(),
            t["accessToken"].as_str().unwrap()
        ),
    ];
    for head in heads {
        let mut stream = held_body(2, &app, &head, 1_000_000).await;
        assert_eq!(status_within(&mut stream, 2).await, Some(413), "{head}");
    }
}

/// Receipts are read before their signature can be checked: from however many addresses,
/// those that have not proved themselves share one organization's readers, and a tenant's
/// requests go on beside them.
#[tokio::test]
async fn unsigned_receipts_share_one_organizations_share_of_bodies() {
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_CHANNEL_EMAIL_SECRET", "receipts-secret"),
            ("PARLEY_BODY_READERS_PER_ORG", "4"),
            ("PARLEY_BODY_GRACE_SECS", "3"),
        ])
        .start()
        .await;
    let head = format!(
        "POST /api/v1/channels/email/receipts HTTP/1.1\r\ncontent-type: application/json\r\nx-parley-signature: sha256={}\r\n",
        "ab".repeat(32)
    );
    let mut forged = Vec::new();
    for from in 2..10 {
        forged.push(held_body(from, &app, &head, 65_536).await);
    }
    // The tenant's own body goes on meanwhile.
    app.post(
        "/api/v1/contacts",
        serde_json::json!({"name": "Ada", "source": "test"}),
    )
    .await
    .expect(201);
    let mut ends = Vec::new();
    for stream in &mut forged {
        ends.push(outcome(stream, 10).await);
    }
    let refused = ends
        .iter()
        .filter(|e| matches!(e, Outcome::Status(429) | Outcome::Closed))
        .count();
    let cut_off = ends.iter().filter(|e| **e == Outcome::Status(408)).count();
    assert_eq!((refused, cut_off), (4, 4), "{ends:?}");
}
