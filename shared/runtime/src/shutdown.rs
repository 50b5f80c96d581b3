//! Turns SIGTERM and Ctrl-C into a cancelled [`CancellationToken`], which every long-running
//! part of a process watches.

use tokio_util::sync::CancellationToken;

pub async fn cancel_on_signal(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(err) => {
            tracing::error!(%err, "cannot listen for SIGTERM; only Ctrl-C stops this process");
            let _ = ctrl_c.await;
            token.cancel();
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
        _ = token.cancelled() => return,
    }
    tracing::info!("shutdown signal received; draining");
    token.cancel();
}
