//! The HTTP server: hyper's HTTP/1.1 connections under the router, so connections get what
//! `axum::serve` does not let us set. A client must send each request's line and headers
//! within the header-read timeout (a connection that dribbles them, or idles between requests,
//! is closed); the request head is bounded in size and in headers; the open connections are
//! capped, accepting more only as others close, and so are one client address's (a connection
//! past them is answered 429 and closed at once; a trusted proxy's are not counted). Each
//! request carries its [`client_addr::ClientAddr`]. Stops accepting when cancelled, then lets
//! requests in flight finish for at most the drain time.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::IntoResponse;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::client_addr;
use crate::error::{ApiError, AppError};
use parking_lot::Mutex;
use parley_config::Proxies;

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
    /// Connections one client address may hold open (a trusted proxy's are not counted).
    pub max_per_address: usize,
    /// How long a stopping server waits for requests in flight.
    pub drain: Duration,
}

/// The open connections of each client address ([`client_addr::key`]): an entry per address
/// with one open, so at most the server's connections.
#[derive(Clone, Default)]
struct OpenPerAddress(Arc<Mutex<HashMap<IpAddr, usize>>>);

/// One connection of an address, counted until dropped.
struct Counted {
    open: OpenPerAddress,
    key: IpAddr,
}

impl OpenPerAddress {
    fn open(&self, key: IpAddr, max: usize) -> Option<Counted> {
        let mut open = self.0.lock();
        let n = open.entry(key).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Counted {
            open: self.clone(),
            key,
        })
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let mut open = self.open.0.lock();
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// The whole answer to a connection past its address's limit, written before it is closed.
async fn refusal() -> Vec<u8> {
    let response = ApiError(AppError::RateLimited {
        message: "too many connections from this address; close some and retry".to_owned(),
        retry_after: 1,
    })
    .into_response();
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        parts.status.as_u16(),
        parts.status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    for (name, value) in &parts.headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&body);
    out
}

pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    proxies: Proxies,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let proxies = Arc::new(proxies);
    let per_address = OpenPerAddress::default();
    let refusal = refusal().await;
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
        let peer = peer.ip();
        // A trusted proxy carries many clients: their own limits count them by request.
        let counted = if proxies.trusted.contains(peer) {
            None
        } else {
            match per_address.open(client_addr::key(peer), limits.max_per_address) {
                Some(counted) => Some(counted),
                None => {
                    metrics::counter!(parley_types::metric_names::HTTP_REFUSED, "reason" => "connections_per_address")
                        .increment(1);
                    // Nothing is read: the answer goes out as the connection closes.
                    let _ = stream.try_write(&refusal);
                    continue;
                }
            }
        };
        let _ = stream.set_nodelay(true);
        // The client's address, for the limits per address.
        let proxies = proxies.clone();
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                let client = client_addr::resolve(peer, req.headers(), &proxies);
                req.extensions_mut().insert(client);
                req
            },
        ));
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A client that goes away, or is cut off by the header timeout, ends here.
            let _ = connection.await;
            drop(counted);
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
