//! The HTTP server: hyper's HTTP/1.1 connections under the router, so connections get what
//! `axum::serve` does not let us set. A client must send each request's line and headers
//! within the header-read timeout (a connection that dribbles them, or idles between requests,
//! is closed); the request head is bounded in size and in headers; and the open connections
//! are capped, accepting more only as others close. Stops accepting when cancelled, then lets
//! requests in flight finish for at most the drain time.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// The largest request head (request line and headers) a connection reads: far above any
/// legitimate request (an API key is 36 bytes), far below what costs memory.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Headers one request may carry.
pub const MAX_HEADERS: usize = 64;

/// What bounds the server's connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub header_read_timeout: Duration,
    pub max_connections: usize,
    /// How long a stopping server waits for requests in flight.
    pub drain: Duration,
}

/// The address of the client a request came from (the connection's peer).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub std::net::IpAddr);

pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        // At the cap, wait for a connection to close before accepting: the kernel's backlog
        // holds the next ones meanwhile.
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => permit.expect("the semaphore stays open"),
            () = shutdown.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let (stream, peer) = stream;
        let _ = stream.set_nodelay(true);
        // The client's address, for the limit on failed authentications.
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(Peer(peer.ip()));
                req
            },
        ));
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A client that goes away, or is cut off by the header timeout, ends here.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain time; closing them");
    }
    Ok(())
}
