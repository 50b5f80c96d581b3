//! The webhook HTTP client's guard: it connects only to public addresses, checked on what a
//! name resolves to at connect time (so DNS rebinding cannot reach a private address), and on
//! literal addresses before a request is made.

use std::net::{IpAddr, SocketAddr};

use crate::net::is_public;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A resolver that keeps only public addresses, and fails when there are none.
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(format!("{host} resolves to no public address; refused").into());
            }
            let addrs: Addrs = Box::new(public.into_iter());
            Ok(addrs)
        })
    }
}

/// Why a URL with a literal address may not be called, if it may not.
pub fn refuse_literal(url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let ip: IpAddr = match parsed.host()? {
        url::Host::Ipv4(ip) => ip.into(),
        url::Host::Ipv6(ip) => ip.into(),
        url::Host::Domain(_) => return None,
    };
    (!is_public(ip)).then(|| format!("{ip} is not a public address; refused"))
}
