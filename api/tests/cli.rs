//! The `parley-api` commands, run as a newcomer would run them.

use std::process::Command;

use serde_json::Value;

fn database_url() -> String {
    parley_tests::database_url()
}

fn parley_api(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_parley-api"))
        .args(args)
        .env_clear()
        .env("DATABASE_URL", database_url())
        .env("REDIS_URL", "redis://127.0.0.1:6379")
        // Every log line there is: they go to stderr, the result alone to stdout (a slow
        // COMMIT's warning once landed in the JSON a script reads).
        .env("RUST_LOG", "debug")
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .current_dir(std::env::temp_dir())
        .output()
        .expect("parley-api runs")
}

fn json_line(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "one JSON line: {stdout}");
    serde_json::from_str(&stdout).unwrap()
}

#[tokio::test]
async fn org_create_and_key_create_print_a_key() {
    parley_tests::prepare_database().await;
    assert!(parley_api(&["migrate"]).status.success());
    let org = json_line(&parley_api(&["org", "create", "--name", "CLI test org"]));
    let org_id = org["organizationId"].as_str().unwrap();
    let key = org["apiKey"].as_str().unwrap();
    assert!(key.starts_with("prl_") && key.len() == 36);

    let second = json_line(&parley_api(&[
        "key",
        "create",
        "--org",
        org_id,
        "--scopes",
        "contacts:read,leads:write",
        "--limit",
        "500",
    ]));
    assert_eq!(second["organizationId"], org_id);
    let second_key = second["apiKey"].as_str().unwrap();

    let pool = sqlx::PgPool::connect(&database_url()).await.unwrap();
    let rows: Vec<(Vec<String>, Option<i64>)> = sqlx::query_as(
        "SELECT scopes, daily_limit FROM api_keys WHERE organization_id = $1::uuid ORDER BY created_at",
    )
    .bind(org_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            (vec!["*".to_owned()], None),
            (
                vec!["contacts:read".to_owned(), "leads:write".to_owned()],
                Some(500)
            ),
        ]
    );
    let hash: Vec<u8> = sqlx::query_scalar(
        "SELECT key_hash FROM api_keys WHERE organization_id = $1::uuid AND daily_limit = 500",
    )
    .bind(org_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    use sha2::Digest;
    assert_eq!(hash, sha2::Sha256::digest(second_key.as_bytes()).to_vec());
}

#[tokio::test]
async fn key_create_refuses_unknown_organizations_and_scopes() {
    parley_tests::prepare_database().await;
    assert!(parley_api(&["migrate"]).status.success());
    let nobody = "00000000-0000-7000-8000-000000000000";
    let out = parley_api(&[
        "key",
        "create",
        "--org",
        nobody,
        "--scopes",
        "contacts:read",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no organization"));

    let org = json_line(&parley_api(&["org", "create", "--name", "CLI scopes"]));
    let org_id = org["organizationId"].as_str().unwrap();
    let out = parley_api(&["key", "create", "--org", org_id, "--scopes", "planets:read"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("scopes[0]"));
}

#[tokio::test]
async fn org_limits_sets_shows_and_gives_back_an_organizations_own_limits() {
    parley_tests::prepare_database().await;
    assert!(parley_api(&["migrate"]).status.success());
    let org = json_line(&parley_api(&["org", "create", "--name", "CLI limits"]));
    let org_id = org["organizationId"].as_str().unwrap();
    let set = json_line(&parley_api(&[
        "org",
        "limits",
        "--org",
        org_id,
        "--send-jobs",
        "10",
        "--rate",
        "email=50",
    ]));
    assert_eq!(set["organizationId"], org_id);
    assert_eq!(set["sendJobs"], 10);
    assert_eq!(set["imports"], Value::Null);
    assert_eq!(set["rates"], serde_json::json!({"email": 50}));
    // Shown unchanged, then one given back.
    let shown = json_line(&parley_api(&["org", "limits", "--org", org_id]));
    assert_eq!(shown["sendJobs"], 10);
    // Given back under the flag's former name, still read for a release.
    let back = json_line(&parley_api(&[
        "org",
        "limits",
        "--org",
        org_id,
        "--delivery-jobs",
        "default",
    ]));
    assert_eq!(back["sendJobs"], Value::Null);
    assert_eq!(back["rates"], serde_json::json!({"email": 50}));
    // Out of range, unknown channels and organizations are refused.
    for bad in [
        &["--send-jobs", "0"][..],
        &["--rate", "fax=5"][..],
        &["--imports", "1001"][..],
    ] {
        let mut args = vec!["org", "limits", "--org", org_id];
        args.extend_from_slice(bad);
        assert!(!parley_api(&args).status.success(), "{bad:?} was taken");
    }
    let nobody = "00000000-0000-7000-8000-000000000000";
    let out = parley_api(&["org", "limits", "--org", nobody, "--imports", "3"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no organization"));
}

/// What `parley-api <command>` says on stderr when it refuses to start with `env` (exit code
/// 2, the configuration's).
fn refused_at_start(command: &str, env: &[(&str, &str)]) -> String {
    let mut parley = Command::new(env!("CARGO_BIN_EXE_parley-api"));
    parley
        .arg(command)
        .env_clear()
        .env("REDIS_URL", "redis://127.0.0.1:6379")
        .current_dir(std::env::temp_dir());
    for (name, value) in env {
        parley.env(name, value);
    }
    let out = parley.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn missing_or_malformed_configuration_is_one_line_naming_the_variable() {
    let stderr = refused_at_start("migrate", &[]);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");

    let stderr = refused_at_start(
        "migrate",
        &[
            ("DATABASE_URL", &database_url()),
            ("PARLEY_API_ADDR", "not-an-address"),
        ],
    );
    assert!(
        stderr.contains("PARLEY_API_ADDR") && stderr.trim().lines().count() == 1,
        "{stderr}"
    );
}

/// The shipped manifests' placeholder secret never opens anything: `serve` refuses to start on
/// it, naming the setting and not its value.
#[test]
fn a_placeholder_secret_is_refused_at_start() {
    let shipped = "change-me-to-a-random-token-of-32-characters-or-more";
    let stderr = refused_at_start(
        "serve",
        &[
            ("DATABASE_URL", &database_url()),
            ("PARLEY_ADMIN_TOKEN", shipped),
            ("PARLEY_API_ADDR", "127.0.0.1:0"),
            ("PARLEY_API_METRICS_ADDR", "127.0.0.1:0"),
        ],
    );
    assert!(
        stderr.contains("PARLEY_ADMIN_TOKEN") && stderr.contains("placeholder"),
        "{stderr}"
    );
    assert!(!stderr.contains(shipped), "{stderr}");
}

#[tokio::test]
async fn probe_exits_0_on_a_2xx_only() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // A one-shot HTTP server answering 200, then one answering 503.
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        for answer in ["200 OK", "503 Service Unavailable"] {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 {answer}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
        }
    });
    let url = format!("http://{addr}/readyz");
    assert!(parley_api(&["probe", &url]).status.success());
    assert!(!parley_api(&["probe", &url]).status.success());
    server.join().unwrap();
    let closed = parley_api(&["probe", "http://127.0.0.1:9/readyz"]);
    assert!(!closed.status.success());
}
