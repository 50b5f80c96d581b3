//! The `parley-worker` process: configuration from the environment, logs, a worker until
//! SIGTERM or Ctrl-C, and the exit code (2 for a configuration error). The binary is this one
//! call, so process tests can run it under another name (`tests/src/bin/worker-under-test.rs`).

use std::process::ExitCode;

use parley_config::Config;
use parley_runtime::observability;
use tokio_util::sync::CancellationToken;

use crate::Worker;

pub async fn run() -> ExitCode {
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    observability::init_tracing(config.log_format);
    let shutdown = CancellationToken::new();
    tokio::spawn(parley_runtime::shutdown::cancel_on_signal(shutdown.clone()));
    let result = async {
        let worker = Worker::build(config, None).await?;
        tracing::info!(metrics = %worker.metrics_addr()?, "parley-worker started");
        worker.run_until(shutdown).await
    }
    .await;
    match result {
        Ok(()) => {
            tracing::info!("parley-worker stopped");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
