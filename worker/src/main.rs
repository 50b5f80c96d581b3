use std::process::ExitCode;

use parley_shared::config::Config;
use parley_shared::observability;
use parley_worker::Worker;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> ExitCode {
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    observability::init_tracing(config.log_format);
    let shutdown = CancellationToken::new();
    tokio::spawn(parley_shared::shutdown::cancel_on_signal(shutdown.clone()));
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
