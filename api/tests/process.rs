//! The API as a process: one JSON log line per request carrying its request id and no
//! secret, and SIGTERM letting a request in flight finish before the process exits 0.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Api {
    child: Child,
    base: String,
    key: String,
    /// Its stdout, read to its end by a thread of its own.
    out: Option<std::thread::JoinHandle<String>>,
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_parley-api"));
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("DATABASE_URL", parley_tests::database_url())
        .env("REDIS_URL", parley_tests::redis_url())
        .env("PARLEY_AUTO_MIGRATE", "false")
        .current_dir(std::env::temp_dir());
    for (k, v) in env {
        command.env(k, v);
    }
    command
}

/// Starts `parley-api serve` on a port of its own choosing (read from its "listening" log
/// line, so no other process can hold it) with JSON logs on stdout, and a key of a new
/// organization.
async fn start() -> Api {
    parley_tests::prepare_database().await;
    let out = command(&["org", "create", "--name", "Process test"], &[])
        .output()
        .expect("org create runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let org: Value = serde_json::from_slice(&out.stdout).unwrap();
    let prefix = format!("parley-test-{}", std::process::id());
    let mut child = command(
        &["serve"],
        &[
            ("PARLEY_API_ADDR", "127.0.0.1:0"),
            ("PARLEY_API_METRICS_ADDR", "127.0.0.1:0"),
            ("PARLEY_REDIS_PREFIX", &prefix),
            ("PARLEY_LOG_FORMAT", "json"),
            ("RUST_LOG", "info"),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("parley-api starts");
    // Its stdout, line by line as it comes, and whole at the end.
    let (lines, arrived) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            all.push_str(&line);
            all.push('\n');
            let _ = lines.send(line);
        }
        all
    });
    let mut api = Api {
        child,
        base: String::new(),
        key: org["apiKey"].as_str().unwrap().to_owned(),
        out: Some(out),
    };
    let addr = loop {
        let Ok(line) = arrived.recv_timeout(Duration::from_secs(20)) else {
            let err = read_all(api.child.stderr.take());
            panic!("the API says where it listens: {err}");
        };
        if let Ok(line) = serde_json::from_str::<Value>(&line)
            && line["message"] == "parley-api listening"
        {
            break line["addr"].as_str().unwrap().to_owned();
        }
    };
    api.base = format!("http://{addr}");
    let deadline = Instant::now() + Duration::from_secs(20);
    // Ready, not merely listening: /readyz answers 200 once Postgres and Redis answer it.
    let ready = |r: Result<reqwest::Response, reqwest::Error>| r.is_ok_and(|r| r.status() == 200);
    while !ready(reqwest::get(format!("{}/readyz", api.base)).await) {
        assert!(
            Instant::now() < deadline,
            "the API answers /readyz with 200"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api
}

/// Waits for the process to exit; answers its status, stdout and stderr.
fn finish(api: &mut Api, within: Duration) -> (std::process::ExitStatus, String, String) {
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = api.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the API exits after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = api
        .out
        .take()
        .expect("stdout read once")
        .join()
        .expect("stdout read");
    let err = read_all(api.child.stderr.take());
    (status, out, err)
}

/// All a child's pipe says, to its end.
fn read_all(pipe: Option<impl Read>) -> String {
    let mut text = String::new();
    pipe.expect("piped").read_to_string(&mut text).unwrap();
    text
}

#[tokio::test]
async fn json_logs_carry_the_request_id_and_never_the_key() {
    let mut api = start().await;
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1/contacts", api.base))
        .bearer_auth(&api.key)
        .header("x-request-id", "req-logs-0001")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-request-id"], "req-logs-0001");
    parley_tests::terminate(&api.child);
    let (status, out, err) = finish(&mut api, Duration::from_secs(10));
    assert!(status.success(), "{status}: {err}");

    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not JSON: {l}")))
        .collect();
    let ours: Vec<&Value> = lines
        .iter()
        .filter(|l| l.to_string().contains("req-logs-0001"))
        .collect();
    assert_eq!(ours.len(), 1, "one line for the request: {out}");
    let line = ours[0];
    assert_eq!(line["message"], "request");
    assert_eq!(line["status"], 200);
    assert_eq!(line["span"]["request_id"], "req-logs-0001");
    assert_eq!(line["span"]["path"], "/api/v1/contacts");
    assert!(
        line["span"]["organization_id"].is_string(),
        "the organization is on the line: {line}"
    );
    for text in [&out, &err] {
        assert!(!text.contains(&api.key), "the key is never logged");
        assert!(!text.contains(&api.key[..12]), "nor its start");
        assert!(!text.to_ascii_lowercase().contains("bearer"));
    }
}

#[tokio::test]
async fn sigterm_lets_the_request_in_flight_finish() {
    let mut api = start().await;
    let client = reqwest::Client::new();
    let contact = client
        .post(format!("{}/api/v1/contacts", api.base))
        .bearer_auth(&api.key)
        .json(&json!({"source": "test", "name": "Ada"}))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["data"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Hold the contact's row so that an update waits in the middle of its request.
    let pool = sqlx::PgPool::connect(&parley_tests::database_url())
        .await
        .unwrap();
    let mut lock = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM contacts WHERE id = $1::uuid FOR UPDATE")
        .bind(&contact)
        .execute(&mut *lock)
        .await
        .unwrap();
    let in_flight = tokio::spawn({
        let url = format!("{}/api/v1/contacts/{contact}", api.base);
        let key = api.key.clone();
        async move {
            client
                .patch(url)
                .bearer_auth(key)
                .json(&json!({"name": "Ada Lovelace"}))
                .send()
                .await
        }
    });
    // The fact to wait for: the update's statement is blocked by our lock.
    let holder: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *lock)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(holder)
        .fetch_one(&pool)
        .await
        .unwrap();
        if blocked > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the update reaches the locked row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!in_flight.is_finished(), "the update waits on the row");

    parley_tests::terminate(&api.child);
    // The fact that SIGTERM was handled: the listener is closed. The process is still there,
    // waiting for the request in flight.
    let addr = api.base.trim_start_matches("http://").to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&addr).is_ok() {
        assert!(
            Instant::now() < deadline,
            "a draining API accepts no new connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        api.child.try_wait().unwrap().is_none(),
        "the API waits for the request in flight"
    );

    lock.commit().await.unwrap();
    let resp = in_flight
        .await
        .unwrap()
        .expect("the request in flight is answered");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["data"]["name"], "Ada Lovelace");
    let (status, _, err) = finish(&mut api, Duration::from_secs(10));
    assert!(status.success(), "{status}: {err}");
}
