//! Calls to third parties (the channels' providers, webhook receivers).
//!
//! Which addresses a webhook may reach: public ones only, unless
//! `PARLEY_WEBHOOK_ALLOW_PRIVATE=true` (local development and tests). Checked on literal
//! addresses before a request is made ([`refuse_literal`]), and at connect time on what a
//! name resolves to ([`PublicOnly`], the webhook client's resolver), so DNS rebinding cannot
//! slip a private address in. An answer is read without trusting its size ([`read_prefix`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

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

/// The first `limit` bytes of an answer, as text (invalid UTF-8 replaced), without reading
/// the rest. Callers still pass it through `fields::storable` before storing it.
pub async fn read_prefix(mut response: reqwest::Response, limit: usize) -> String {
    let mut kept = Vec::new();
    while kept.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                kept.extend_from_slice(&chunk[..chunk.len().min(limit - kept.len())])
            }
            _ => break,
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                   // this network
        || a == 10                             // private
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT
        || a == 127                            // loopback
        || (a == 169 && b == 254)              // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)      // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)      // documentation
        || (a == 192 && b == 168)              // private
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100)   // documentation
        || (a == 203 && b == 0 && c == 113)    // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00                 // unique local (fc00::/7)
        || (s[0] & 0xffc0) == 0xfe80                 // link-local
        || (s[0] & 0xff00) == 0xff00                 // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8)        // documentation
        || (s[0] == 0x0064 && s[1] == 0xff9b)        // NAT64 (embeds an IPv4 address)
        || (s[0] == 0 && s[1] == 0 && s[2] == 0 && s[3] == 0 && s[4] == 0 && s[5] == 0)) // IPv4-compatible
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
