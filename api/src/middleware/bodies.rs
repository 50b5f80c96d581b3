//! Request bodies while they arrive. A body is read before its request takes one of the
//! process's in-flight slots (`PARLEY_MAX_IN_FLIGHT`) or its organization's turn, so a client
//! that sends slowly holds neither; what it can hold meanwhile is bounded
//! (`parley_config::BodyLimits`, docs/api.md "Limits and hostile input"):
//!
//! - requests reading a body at once, per client address and per organization (429
//!   `rate_limited` past them);
//! - bytes of bodies in memory, from their first byte to their request's answer, per client
//!   address and per organization (429) and for all requests together (503);
//! - a body's pace: it may be `grace` seconds ahead of its bytes, and each
//!   `min_bytes_per_sec` bytes that arrive buy one more second, up to `grace` ahead. A body
//!   that pauses for `grace`, or comes slower than the rate for long enough, is answered 408
//!   `request_timeout` and its connection closed.
//!
//! A body longer than `PARLEY_MAX_BODY_BYTES` (only a broadcast's long audience, a long batch
//! of receipts and an import's file may be) is handed on after its first
//! `PARLEY_MAX_BODY_BYTES` and read by its handler, inside the request's slot and turn, at the
//! same pace and still counted as a reader. One that the handler keeps in memory (all but an
//! import's file, which goes to disk under `crate::body_spool`'s budget) takes one of
//! `PARLEY_LONG_BODIES` (503 past them), one per organization and one per client address at
//! once (429).
//!
//! A request is known by its [`ClientAddr`] (`crate::serve`) and the organization its key or
//! ticket token names (`crate::middleware::auth`, which runs before: a request with no valid
//! key or token is answered before its body is read). Receipts, whose signature can only be
//! checked once their body is read, all count as one organization ([`NO_ORG`]): together they
//! hold at most one organization's share. Routes that take no body, and every `GET`, refuse
//! one unread ([`none`]). A request without a body costs nothing here.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use parley_config::BodyLimits;
use parley_types::error::AppError;
use parley_types::metric_names::{HTTP_REFUSED, org_limit_hits};
use tokio::time::{Instant, Sleep};
use uuid::Uuid;

use crate::client_addr::ClientAddr;
use crate::error::ApiError;

/// What the requests of this process hold while their bodies arrive.
#[derive(Clone)]
pub struct Bodies {
    limits: BodyLimits,
    /// `PARLEY_MAX_BODY_BYTES`: read before the request goes on; past it, a long body.
    short: usize,
    /// Hits are counted per organization (`PARLEY_METRICS_ORG_LABEL`).
    org_label: bool,
    counts: Arc<Mutex<Counts>>,
}

#[derive(Default)]
struct Counts {
    addresses: HashMap<IpAddr, Count>,
    orgs: HashMap<Uuid, Count>,
    /// Bytes in memory, all requests together.
    bytes: usize,
    /// Long bodies being read into memory, and their organizations and client addresses.
    long: usize,
    long_orgs: HashSet<Uuid>,
    long_addresses: HashSet<IpAddr>,
}

/// What one client address or organization holds; removed when it holds nothing.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
struct Count {
    readers: usize,
    bytes: usize,
}

impl Count {
    fn is_empty(&self) -> bool {
        *self == Count::default()
    }
}

/// Who sends a body: a client address (when known) and an organization (when known).
#[derive(Debug, Clone, Copy)]
struct Sender {
    address: Option<IpAddr>,
    org: Option<Uuid>,
}

/// Why a body could not go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    AddressReaders,
    AddressBytes,
    OrgReaders(Uuid),
    OrgBytes(Uuid),
    Bytes,
    OrgLong(Uuid),
    AddressLong,
    Long,
}

impl Bodies {
    pub fn new(limits: BodyLimits, short: usize, org_label: bool) -> Self {
        Bodies {
            limits,
            short,
            org_label,
            counts: Default::default(),
        }
    }

    fn refused(&self, why: Refusal) -> AppError {
        let org = |org: Uuid, limit: &'static str| {
            org_limit_hits(limit, self.org_label.then(|| org.to_string()), 1);
        };
        let count = |reason: &'static str| {
            metrics::counter!(HTTP_REFUSED, "reason" => reason).increment(1);
        };
        let rate_limited = |message: String| AppError::RateLimited {
            message,
            retry_after: 1,
        };
        match why {
            Refusal::AddressReaders => {
                count("address_body_readers");
                rate_limited(format!(
                    "at most {} requests of one address send a body at once; retry shortly",
                    self.limits.readers_per_address
                ))
            }
            Refusal::AddressBytes => {
                count("address_body_bytes");
                rate_limited(format!(
                    "at most {} bytes of one address's bodies are held at once; retry shortly",
                    self.limits.bytes_per_address
                ))
            }
            Refusal::OrgReaders(id) => {
                org(id, "body_readers");
                rate_limited(format!(
                    "at most {} requests of an organization send a body at once; retry shortly",
                    self.limits.readers_per_org
                ))
            }
            Refusal::OrgBytes(id) => {
                org(id, "body_bytes");
                rate_limited(format!(
                    "at most {} bytes of an organization's bodies are held at once; retry shortly",
                    self.limits.bytes_per_org
                ))
            }
            Refusal::OrgLong(id) => {
                org(id, "long_bodies");
                rate_limited(
                    "one long body of an organization is read at once; retry shortly".to_owned(),
                )
            }
            Refusal::AddressLong => {
                count("address_long_bodies");
                rate_limited(
                    "one long body of an address is read at once; retry shortly".to_owned(),
                )
            }
            Refusal::Bytes => {
                count("body_bytes");
                AppError::Overloaded(
                    "the service holds all the bodies it may; retry shortly".into(),
                )
            }
            Refusal::Long => {
                count("long_bodies");
                AppError::Overloaded(
                    "the service reads all the long bodies it may; retry shortly".into(),
                )
            }
        }
    }

    /// A reader for `sender`, or why not.
    fn start(&self, sender: Sender) -> Result<Reading, Refusal> {
        let mut counts = self.counts.lock();
        if let Some(a) = sender.address
            && counts.addresses.get(&a).map_or(0, |c| c.readers) >= self.limits.readers_per_address
        {
            return Err(Refusal::AddressReaders);
        }
        if let Some(o) = sender.org
            && counts.orgs.get(&o).map_or(0, |c| c.readers) >= self.limits.readers_per_org
        {
            return Err(Refusal::OrgReaders(o));
        }
        if let Some(a) = sender.address {
            counts.addresses.entry(a).or_default().readers += 1;
        }
        if let Some(o) = sender.org {
            counts.orgs.entry(o).or_default().readers += 1;
        }
        Ok(Reading {
            bodies: self.clone(),
            sender,
        })
    }

    /// Counts `n` more bytes in memory for `sender`, or says which limit they would pass.
    fn buffer(&self, sender: Sender, n: usize) -> Result<(), Refusal> {
        let mut counts = self.counts.lock();
        if counts.bytes + n > self.limits.bytes {
            return Err(Refusal::Bytes);
        }
        if let Some(a) = sender.address
            && counts.addresses.get(&a).map_or(0, |c| c.bytes) + n > self.limits.bytes_per_address
        {
            return Err(Refusal::AddressBytes);
        }
        if let Some(o) = sender.org
            && counts.orgs.get(&o).map_or(0, |c| c.bytes) + n > self.limits.bytes_per_org
        {
            return Err(Refusal::OrgBytes(o));
        }
        counts.bytes += n;
        if let Some(a) = sender.address {
            counts.addresses.entry(a).or_default().bytes += n;
        }
        if let Some(o) = sender.org {
            counts.orgs.entry(o).or_default().bytes += n;
        }
        Ok(())
    }

    /// Gives back what [`Bodies::start`] and [`Bodies::buffer`] took.
    fn give_back(&self, sender: Sender, readers: usize, bytes: usize) {
        let mut counts = self.counts.lock();
        counts.bytes -= bytes;
        fn give<K: std::hash::Hash + Eq>(
            map: &mut HashMap<K, Count>,
            key: K,
            readers: usize,
            bytes: usize,
        ) {
            if let Some(c) = map.get_mut(&key) {
                c.readers -= readers;
                c.bytes -= bytes;
                if c.is_empty() {
                    map.remove(&key);
                }
            }
        }
        if let Some(a) = sender.address {
            give(&mut counts.addresses, a, readers, bytes);
        }
        if let Some(o) = sender.org {
            give(&mut counts.orgs, o, readers, bytes);
        }
    }

    /// A place for a long body of `sender`: one per organization and per client address,
    /// `long_bodies` in all.
    fn start_long(&self, sender: Sender) -> Result<LongBody, Refusal> {
        let mut counts = self.counts.lock();
        if counts.long >= self.limits.long_bodies {
            return Err(Refusal::Long);
        }
        if let Some(o) = sender.org
            && counts.long_orgs.contains(&o)
        {
            return Err(Refusal::OrgLong(o));
        }
        if let Some(a) = sender.address
            && counts.long_addresses.contains(&a)
        {
            return Err(Refusal::AddressLong);
        }
        if let Some(o) = sender.org {
            counts.long_orgs.insert(o);
        }
        if let Some(a) = sender.address {
            counts.long_addresses.insert(a);
        }
        counts.long += 1;
        Ok(LongBody {
            bodies: self.clone(),
            sender,
        })
    }

    /// What is counted now: bytes in all, readers and bytes of `address`.
    #[cfg(test)]
    fn counted(&self, address: IpAddr) -> (usize, usize, usize) {
        let counts = self.counts.lock();
        let c = counts.addresses.get(&address).copied().unwrap_or_default();
        (counts.bytes, c.readers, c.bytes)
    }
}

/// A request reading its body; its reader is given back when dropped.
struct Reading {
    bodies: Bodies,
    sender: Sender,
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.bodies.give_back(self.sender, 1, 0);
    }
}

/// Bytes of a request's body in memory, given back when its answer is made.
struct Buffered {
    bodies: Bodies,
    sender: Sender,
    bytes: usize,
}

impl Buffered {
    fn add(&mut self, n: usize) -> Result<(), Refusal> {
        self.bodies.buffer(self.sender, n)?;
        self.bytes += n;
        Ok(())
    }
}

impl Drop for Buffered {
    fn drop(&mut self) {
        self.bodies.give_back(self.sender, 0, self.bytes);
    }
}

/// A long body read into memory.
struct LongBody {
    bodies: Bodies,
    sender: Sender,
}

impl Drop for LongBody {
    fn drop(&mut self) {
        let mut counts = self.bodies.counts.lock();
        counts.long -= 1;
        if let Some(o) = self.sender.org {
            counts.long_orgs.remove(&o);
        }
        if let Some(a) = self.sender.address {
            counts.long_addresses.remove(&a);
        }
    }
}

/// How far ahead of its bytes a body may be.
#[derive(Debug, Clone, Copy)]
struct Pace {
    deadline: Instant,
    grace: Duration,
    bytes_per_sec: u64,
}

impl Pace {
    fn new(now: Instant, limits: &BodyLimits) -> Self {
        Pace {
            deadline: now + limits.grace,
            grace: limits.grace,
            bytes_per_sec: limits.min_bytes_per_sec.max(1),
        }
    }

    /// `n` bytes arrived at `now`: a second more per `bytes_per_sec`, up to `grace` ahead.
    fn arrived(&mut self, n: usize, now: Instant) {
        let bought = Duration::from_secs_f64(n as f64 / self.bytes_per_sec as f64);
        self.deadline = (self.deadline + bought).min(now + self.grace);
    }

    fn too_slow(&self) -> AppError {
        AppError::BodyTooSlow(format!(
            "the body stopped for {} s, or came slower than {} bytes a second",
            self.grace.as_secs(),
            self.bytes_per_sec
        ))
    }
}

/// What requests that carry no tenant's credential (receipts, whose signature is checked only
/// once their body is read) count as: one organization, whose share all of them share.
pub const NO_ORG: Uuid = Uuid::nil();

/// The organization a request's body counts for: its key's or ticket's; none for an operator's
/// (counted by address only); [`NO_ORG`] for a request without a tenant's credential.
fn sender_org(req: &Request) -> Option<Uuid> {
    match crate::middleware::auth::org_of(req) {
        Some(org) => Some(org),
        None if req.extensions().get::<crate::extract::Operator>().is_some() => None,
        None => Some(NO_ORG),
    }
}

/// Answers 413 to a request with a body on a route that takes none (the document, `/docs`,
/// the operator page: they need no credential, so a body there would be read for anyone),
/// without reading it.
pub async fn none(req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    ApiError(AppError::PayloadTooLarge).into_response()
}

/// Reads the body of every request that has one, within the bounds above, before the layers
/// inside (the in-flight slot, the turn, the handler).
pub async fn read(State(bodies): State<Bodies>, req: Request, next: Next) -> Response {
    if req.body().is_end_stream() {
        return next.run(req).await;
    }
    // No read of the API takes a body (a ticket's token reads its SLA with a `GET`).
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        return ApiError(AppError::PayloadTooLarge).into_response();
    }
    let sender = Sender {
        address: req.extensions().get::<ClientAddr>().map(|a| a.key()),
        org: sender_org(&req),
    };
    // An import's file past the short limit goes to disk (`crate::body_spool`), not memory.
    let kept_in_memory = req
        .extensions()
        .get::<MatchedPath>()
        .is_none_or(|p| p.as_str() != crate::routes::imports::PATH);
    let reading = match bodies.start(sender) {
        Ok(reading) => reading,
        Err(why) => return ApiError(bodies.refused(why)).into_response(),
    };
    let mut buffered = Buffered {
        bodies: bodies.clone(),
        sender,
        bytes: 0,
    };
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    let mut pace = Pace::new(Instant::now(), &bodies.limits);
    let mut read = Vec::new();
    let body = loop {
        let chunk = match tokio::time::timeout_at(pace.deadline, stream.next()).await {
            Err(_) => {
                metrics::counter!(HTTP_REFUSED, "reason" => "slow_body").increment(1);
                return ApiError(pace.too_slow()).into_response();
            }
            Ok(chunk) => chunk,
        };
        match chunk {
            None => break Body::from(read),
            Some(Ok(chunk)) => {
                pace.arrived(chunk.len(), Instant::now());
                if let Err(why) = buffered.add(chunk.len()) {
                    return ApiError(bodies.refused(why)).into_response();
                }
                read.extend_from_slice(&chunk);
                if read.len() > bodies.short {
                    let long = if kept_in_memory {
                        match bodies.start_long(sender) {
                            Ok(long) => Some(long),
                            Err(why) => return ApiError(bodies.refused(why)).into_response(),
                        }
                    } else {
                        None
                    };
                    let too_slow = Arc::new(AtomicBool::new(false));
                    let rest = Paced {
                        inner: stream,
                        pace,
                        sleep: Box::pin(tokio::time::sleep_until(pace.deadline)),
                        too_slow: too_slow.clone(),
                        read: false,
                        _reading: reading,
                    };
                    let first = futures::stream::once(std::future::ready(Ok(Bytes::from(read))));
                    let req = Request::from_parts(parts, Body::from_stream(first.chain(rest)));
                    let response = next.run(req).await;
                    // Its place and its first bytes are counted to the answer: the body is in
                    // memory until then.
                    drop((buffered, long));
                    // The handler met the rest of the body too slow: the answer says so.
                    if too_slow.load(Ordering::Relaxed) {
                        metrics::counter!(HTTP_REFUSED, "reason" => "slow_body").increment(1);
                        return ApiError(pace.too_slow()).into_response();
                    }
                    return response;
                }
            }
            // Handed on for the handler's extractor to answer as it would have.
            Some(Err(err)) => {
                let first = futures::stream::iter([Ok(Bytes::from(read)), Err(err)]);
                break Body::from_stream(first);
            }
        }
    };
    drop(reading);
    let response = next.run(Request::from_parts(parts, body)).await;
    drop(buffered);
    response
}

/// The rest of a long body, at the pace of its start once its handler reads it (the wait for
/// the organization's turn and a slot is not the client's); a reader counted until it ends or is
/// dropped.
struct Paced<S> {
    inner: S,
    pace: Pace,
    sleep: Pin<Box<Sleep>>,
    too_slow: Arc<AtomicBool>,
    /// Whether the handler has read: its first read gives the body its grace again.
    read: bool,
    _reading: Reading,
}

impl<S> Stream for Paced<S>
where
    S: Stream<Item = Result<Bytes, axum::Error>> + Unpin,
{
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if !this.read {
            this.read = true;
            let now = Instant::now();
            this.pace.deadline = this.pace.deadline.max(now + this.pace.grace);
            this.sleep.as_mut().reset(this.pace.deadline);
        }
        match this.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.pace.arrived(chunk.len(), Instant::now());
                this.sleep.as_mut().reset(this.pace.deadline);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(other) => Poll::Ready(other),
            // Cut off once: the stream ends after its error.
            Poll::Pending if this.too_slow.load(Ordering::Relaxed) => Poll::Ready(None),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.too_slow.store(true, Ordering::Relaxed);
                    Poll::Ready(Some(Err(axum::Error::new(this.pace.too_slow()))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> BodyLimits {
        BodyLimits {
            readers_per_address: 2,
            readers_per_org: 3,
            bytes_per_address: 100,
            bytes_per_org: 150,
            bytes: 200,
            long_bodies: 2,
            min_bytes_per_sec: 100,
            grace: Duration::from_secs(5),
        }
    }

    fn sender(a: u8, org: Option<u128>) -> Sender {
        Sender {
            address: Some(IpAddr::from([10, 0, 0, a])),
            org: org.map(Uuid::from_u128),
        }
    }

    #[test]
    fn readers_are_bounded_per_address_and_per_organization() {
        let bodies = Bodies::new(limits(), 50, false);
        let a = bodies.start(sender(1, Some(1))).unwrap();
        let _b = bodies.start(sender(1, Some(1))).unwrap();
        assert_eq!(
            bodies.start(sender(1, Some(2))).err(),
            Some(Refusal::AddressReaders)
        );
        let _c = bodies.start(sender(2, Some(1))).unwrap();
        assert_eq!(
            bodies.start(sender(3, Some(1))).err(),
            Some(Refusal::OrgReaders(Uuid::from_u128(1)))
        );
        // Another organization from another address goes on.
        let _d = bodies.start(sender(3, Some(2))).unwrap();
        drop(a);
        let _e = bodies.start(sender(1, None)).unwrap();
    }

    #[test]
    fn bytes_are_bounded_per_address_per_organization_and_in_all_and_given_back() {
        let bodies = Bodies::new(limits(), 50, false);
        let mut one = Buffered {
            bodies: bodies.clone(),
            sender: sender(1, Some(1)),
            bytes: 0,
        };
        one.add(90).unwrap();
        assert_eq!(one.add(11), Err(Refusal::AddressBytes));
        let mut two = Buffered {
            bodies: bodies.clone(),
            sender: sender(2, Some(1)),
            bytes: 0,
        };
        assert_eq!(two.add(61), Err(Refusal::OrgBytes(Uuid::from_u128(1))));
        two.add(60).unwrap();
        let mut three = Buffered {
            bodies: bodies.clone(),
            sender: sender(3, Some(2)),
            bytes: 0,
        };
        assert_eq!(three.add(51), Err(Refusal::Bytes));
        three.add(50).unwrap();
        assert_eq!(bodies.counted(IpAddr::from([10, 0, 0, 1])), (200, 0, 90));
        drop((one, two, three));
        assert_eq!(bodies.counted(IpAddr::from([10, 0, 0, 1])), (0, 0, 0));
        let counts = bodies.counts.lock();
        assert!(
            counts.addresses.is_empty() && counts.orgs.is_empty(),
            "nothing kept"
        );
    }

    #[test]
    fn long_bodies_are_bounded_in_all_and_one_per_organization_and_address() {
        let bodies = Bodies::new(limits(), 50, false);
        let one = bodies.start_long(sender(1, Some(1))).unwrap();
        assert!(matches!(
            bodies.start_long(sender(2, Some(1))),
            Err(Refusal::OrgLong(_))
        ));
        assert!(matches!(
            bodies.start_long(sender(1, None)),
            Err(Refusal::AddressLong)
        ));
        let _two = bodies.start_long(sender(2, None)).unwrap();
        assert!(matches!(
            bodies.start_long(sender(3, None)),
            Err(Refusal::Long)
        ));
        drop(one);
        let _three = bodies.start_long(sender(1, Some(1))).unwrap();
        let counts = bodies.counts.lock();
        assert_eq!(
            (
                counts.long,
                counts.long_orgs.len(),
                counts.long_addresses.len()
            ),
            (2, 1, 2)
        );
    }

    #[test]
    fn a_body_is_ahead_of_its_bytes_by_the_grace_at_most() {
        let t0 = Instant::now();
        let mut pace = Pace::new(t0, &limits());
        assert_eq!(pace.deadline, t0 + Duration::from_secs(5));
        // Fast bytes buy no more than the grace ahead of now.
        pace.arrived(1_000_000, t0 + Duration::from_secs(1));
        assert_eq!(pace.deadline, t0 + Duration::from_secs(6));
        // At half the rate the deadline comes closer: 50 bytes a second buy half a second.
        let mut slow = Pace::new(t0, &limits());
        for s in 1..=9 {
            slow.arrived(50, t0 + Duration::from_secs(s));
        }
        assert_eq!(slow.deadline, t0 + Duration::from_millis(9_500));
        assert!(
            slow.deadline < t0 + Duration::from_secs(10),
            "it falls behind"
        );
    }

    #[tokio::test]
    async fn the_rest_of_a_long_body_that_stops_is_cut_off() {
        let limits = BodyLimits {
            grace: Duration::from_millis(100),
            ..limits()
        };
        let bodies = Bodies::new(limits, 50, false);
        let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, axum::Error>>();
        let reading = bodies.start(sender(1, None)).unwrap();
        let too_slow = Arc::new(AtomicBool::new(false));
        let mut pace = Pace::new(Instant::now(), &limits);
        // Its deadline passed while the request waited for its turn: the first read gives the
        // grace again.
        pace.deadline = Instant::now();
        let mut rest = Paced {
            inner: rx,
            pace,
            sleep: Box::pin(tokio::time::sleep_until(pace.deadline)),
            too_slow: too_slow.clone(),
            read: false,
            _reading: reading,
        };
        let sender = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            sender
                .unbounded_send(Ok(Bytes::from_static(b"abc")))
                .unwrap();
        });
        assert!(rest.next().await.unwrap().is_ok(), "read within the grace");
        // Nothing more: after the grace the stream ends with an error, and says why.
        let cut = tokio::time::timeout(Duration::from_secs(10), rest.next())
            .await
            .expect("cut off after the grace");
        assert!(cut.unwrap().is_err());
        assert!(too_slow.load(Ordering::Relaxed));
        assert!(rest.next().await.is_none(), "then it ends");
        drop(rest);
        assert_eq!(bodies.counted(IpAddr::from([10, 0, 0, 1])), (0, 0, 0));
    }
}
