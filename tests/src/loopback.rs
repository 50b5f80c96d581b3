//! Local HTTP servers for tests: the scripted provider and the webhook receiver.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

/// Serves `app` on a free port of 127.0.0.1 until the token is cancelled.
pub async fn serve(app: axum::Router) -> (SocketAddr, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let s = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(s.cancelled_owned())
            .await;
    });
    (addr, stop)
}
