//! Logs and metrics setup shared by both binaries.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use parley_config::LogFormat;
use parley_types::metric_names::{SLA_BREACH_LAG, WEBHOOK_LATENCY};

/// Latency buckets in seconds, from 1 ms to 30 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Lags that may run to minutes or hours (a breach recorded late, a webhook delivered after
/// retries), in seconds: the alert on breach lag needs buckets past its 60 s.
const LAG_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0, 21600.0, 86400.0,
];

/// How often histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Installs the Prometheus recorder once per process and returns its handle. The `metrics`
/// facade is process-wide by design; tests that start several apps in one process share it.
///
/// The recorder keeps each histogram sample until its upkeep folds them into the buckets;
/// without one they pile up between scrapes (a worker that nobody scraped grew by 26 MiB over
/// a million sends), so a thread runs it every few seconds.
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = recorder();
            let upkept = handle.clone();
            let upkeep = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(UPKEEP_EVERY);
                        upkept.run_upkeep();
                    }
                });
            if let Err(err) = upkeep {
                tracing::error!(%err, "metrics upkeep not started; histograms grow until scraped");
            }
            handle
        })
        .clone()
}

fn recorder() -> PrometheusHandle {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(SLA_BREACH_LAG.into()), LAG_BUCKETS))
        .and_then(|b| b.set_buckets_for_metric(Matcher::Full(WEBHOOK_LATENCY.into()), LAG_BUCKETS))
        .and_then(|b| b.install_recorder())
        .unwrap_or_else(|err| {
            // Only reachable if another recorder was installed first.
            tracing::error!(%err, "metrics recorder not installed");
            PrometheusBuilder::new().build_recorder().handle()
        })
}

/// Where log lines go: a service logs to stdout; a command whose stdout is its result (a key,
/// a document) logs to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTo {
    Stdout,
    Stderr,
}

pub fn init_tracing(format: LogFormat, to: LogTo) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=warn"));
    let writer = match to {
        LogTo::Stdout => BoxMakeWriter::new(std::io::stdout),
        LogTo::Stderr => BoxMakeWriter::new(std::io::stderr),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
