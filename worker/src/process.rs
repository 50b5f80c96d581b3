//! The `parley-worker` process: configuration from the environment, its runtime
//! (`PARLEY_WORKER_THREADS`), logs, a worker until SIGTERM or Ctrl-C, and the exit code (2 for
//! a configuration error). The binary is this one call, so process tests can run it under
//! another name (`tests/src/bin/worker-under-test.rs`).

use std::process::ExitCode;

use parley_config::Config;
use parley_runtime::observability;
use tokio_util::sync::CancellationToken;

use crate::Worker;

pub fn main() -> ExitCode {
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(threads) = config.worker.threads {
        runtime.worker_threads(threads);
    }
    match runtime.build() {
        Ok(runtime) => runtime.block_on(run(config)),
        Err(err) => {
            eprintln!("error: no runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> ExitCode {
    observability::init_tracing(config.log_format, observability::LogTo::Stdout);
    config.warn_of_former_names();
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
