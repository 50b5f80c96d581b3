use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    parley_worker::process::run().await
}
