//! A TCP proxy on 127.0.0.1 in front of Redis that can make its subscriber connections go
//! silent without closing them: what a node gone behind a DNS switch, or a dropped route,
//! looks like to a client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Link {
    /// The client sent a SUBSCRIBE on it.
    subscriber: AtomicBool,
    /// Nothing more crosses it, either way; both sockets stay open.
    silent: AtomicBool,
}

pub struct TcpProxy {
    /// The Redis URL it was started with, its address replaced by the proxy's.
    pub url: String,
    links: Arc<Mutex<Vec<Arc<Link>>>>,
    stop: CancellationToken,
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TcpProxy {
    /// Forwards every connection to the server of `redis_url` (one server's URL).
    pub async fn start(redis_url: &str) -> TcpProxy {
        let mut url = reqwest::Url::parse(redis_url).expect("a Redis URL");
        let upstream = format!(
            "{}:{}",
            url.host_str().expect("a host"),
            url.port().unwrap_or(6379)
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        url.set_ip_host([127, 0, 0, 1].into()).expect("an IP host");
        url.set_port(Some(listener.local_addr().expect("addr").port()))
            .expect("a port");
        let url = url.to_string();
        let links: Arc<Mutex<Vec<Arc<Link>>>> = Arc::default();
        let stop = CancellationToken::new();
        let (all, s) = (links.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let client = tokio::select! {
                    _ = s.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        Err(_) => continue,
                    },
                };
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let link = Arc::new(Link::default());
                all.lock().push(link.clone());
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(pump(
                    client_read,
                    server_write,
                    link.clone(),
                    true,
                    s.clone(),
                ));
                tokio::spawn(pump(server_read, client_write, link, false, s.clone()));
            }
        });
        TcpProxy { url, links, stop }
    }

    /// Subscriber connections not silenced.
    pub fn live_subscribers(&self) -> usize {
        let links = self.links.lock();
        links
            .iter()
            .filter(|l| l.subscriber.load(Ordering::Acquire) && !l.silent.load(Ordering::Acquire))
            .count()
    }

    /// Makes every subscriber connection open now go silent; returns how many there were.
    pub fn silence_subscribers(&self) -> usize {
        let links = self.links.lock();
        links
            .iter()
            .filter(|l| l.subscriber.load(Ordering::Acquire))
            .inspect(|l| l.silent.store(true, Ordering::Release))
            .count()
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    link: Arc<Link>,
    from_client: bool,
    stop: CancellationToken,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            _ = stop.cancelled() => return,
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
        };
        if from_client
            && buf[..n]
                .to_ascii_uppercase()
                .windows(9)
                .any(|w| w == b"SUBSCRIBE")
        {
            link.subscriber.store(true, Ordering::Release);
        }
        if link.silent.load(Ordering::Acquire) {
            // Holds both halves open, forwarding nothing, until the proxy stops.
            stop.cancelled().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
