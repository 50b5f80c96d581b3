//! The address of the client a request came from: the connection's peer, or, when the peer is a
//! proxy named in `PARLEY_TRUSTED_PROXIES`, the address that proxy says it forwarded for
//! (`X-Forwarded-For`, or RFC 7239 `Forwarded`, as `PARLEY_TRUSTED_PROXY_HEADER` says).
//!
//! The header is read from its end: each proxy appends the address it received from, so the
//! last address that is not itself a trusted proxy is the client, and the reading stops there.
//! Addresses before it were written by the client and are never believed, nor read (a client
//! that sends garbage there is still counted by the address its proxy saw). When what the
//! proxies appended does not parse, or holds more than [`MAX_HOPS`] addresses, the peer is the
//! client; when it is all trusted proxies, the first of them.
//!
//! Every limit per address (failed authentications, connections, bodies) counts by
//! [`ClientAddr::key`]: an IPv4 address, or the /64 of an IPv6 one, the block one host is
//! usually given.

use std::net::IpAddr;

use axum::http::HeaderMap;
use parley_config::{ForwardedHeader, Proxies};

/// A request's client address (an extension every request served by `crate::serve` carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

impl ClientAddr {
    /// What limits per address count by.
    pub fn key(self) -> IpAddr {
        key(self.0)
    }
}

/// An address as limits count it: itself, or its /64 for IPv6.
pub fn key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::from(octets)
        }
        v4 => v4,
    }
}

/// Forwarded addresses read from the end of the header at most.
pub const MAX_HOPS: usize = 32;

/// The client of a request that came from `peer` with `headers`.
pub fn resolve(peer: IpAddr, headers: &HeaderMap, proxies: &Proxies) -> ClientAddr {
    if proxies.trusted.is_empty() || !proxies.trusted.contains(peer) {
        return ClientAddr(peer.to_canonical());
    }
    let (name, parse): (&str, fn(&str) -> Option<IpAddr>) = match proxies.header {
        ForwardedHeader::XForwardedFor => ("x-forwarded-for", parse_plain),
        ForwardedHeader::Forwarded => ("forwarded", parse_forwarded_element),
    };
    ClientAddr(
        forwarded_for(headers, name, parse, proxies)
            .unwrap_or(peer)
            .to_canonical(),
    )
}

/// The client the trusted proxies' header `name` names, read from its end (see above); `None`
/// for the peer.
fn forwarded_for(
    headers: &HeaderMap,
    name: &str,
    parse: fn(&str) -> Option<IpAddr>,
    proxies: &Proxies,
) -> Option<IpAddr> {
    let mut first_trusted = None;
    let mut read = 0;
    let lines: Vec<_> = headers.get_all(name).iter().collect();
    for line in lines.iter().rev() {
        // Item by item: bytes a client put in its own part of a line (not text, say) do not
        // hide the items the proxies appended after them.
        for item in line.as_bytes().rsplit(|b| *b == b',') {
            read += 1;
            if read > MAX_HOPS {
                return None;
            }
            let ip = parse(std::str::from_utf8(item).ok()?.trim())?;
            if !proxies.trusted.contains(ip) {
                return Some(ip);
            }
            first_trusted = Some(ip);
        }
    }
    first_trusted
}

/// An `X-Forwarded-For` item: an address, IPv6 possibly in brackets, possibly with a port.
fn parse_plain(item: &str) -> Option<IpAddr> {
    if let Ok(ip) = item.parse() {
        return Some(ip);
    }
    if let Ok(sock) = item.parse::<std::net::SocketAddr>() {
        return Some(sock.ip());
    }
    item.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// A `Forwarded` element's `for=` (`for=192.0.2.60;proto=http`, `for="[2001:db8::1]:4711"`).
/// An element without `for`, or whose `for` is `unknown` or an obfuscated name, is no address.
fn parse_forwarded_element(element: &str) -> Option<IpAddr> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("for") {
            return None;
        }
        parse_plain(value.trim().trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use parley_config::TrustedProxies;

    fn proxies(nets: &[&str], header: ForwardedHeader) -> Proxies {
        Proxies {
            trusted: TrustedProxies(nets.iter().map(|n| n.parse().unwrap()).collect()),
            header,
        }
    }

    fn headers(name: &'static str, lines: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for line in lines {
            h.append(name, HeaderValue::from_static(line));
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client_whatever_it_sends() {
        let none = Proxies::default();
        let h = headers("x-forwarded-for", &["203.0.113.9"]);
        assert_eq!(resolve(ip("10.0.0.1"), &h, &none).0, ip("10.0.0.1"));
        // A peer that is not a trusted proxy is not believed either.
        let some = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        assert_eq!(resolve(ip("192.0.2.1"), &h, &some).0, ip("192.0.2.1"));
    }

    #[test]
    fn the_last_untrusted_address_is_the_client() {
        let p = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        // The client wrote 1.1.1.1 itself; the ingress appended what it saw, then an inner
        // proxy appended the ingress.
        let h = headers("x-forwarded-for", &["1.1.1.1, 203.0.113.9, 10.0.0.5"]);
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("203.0.113.9"));
        // Several lines are one list, in order.
        let h = headers("x-forwarded-for", &["1.1.1.1", "203.0.113.9"]);
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("203.0.113.9"));
        // Only trusted addresses: the first.
        let h = headers("x-forwarded-for", &["10.1.1.1, 10.0.0.5"]);
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("10.1.1.1"));
        // Ports and brackets.
        let h = headers("x-forwarded-for", &["[2001:db8::7]:4711"]);
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("2001:db8::7"));
        let h = headers("x-forwarded-for", &["203.0.113.9:1234"]);
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("203.0.113.9"));
    }

    #[test]
    fn a_missing_malformed_or_long_header_leaves_the_peer() {
        let p = proxies(&["10.0.0.0/8"], ForwardedHeader::XForwardedFor);
        let peer = ip("10.0.0.6");
        assert_eq!(resolve(peer, &HeaderMap::new(), &p).0, peer);
        let h = headers("x-forwarded-for", &["203.0.113.9, not-an-address"]);
        assert_eq!(resolve(peer, &h, &p).0, peer);
        // What the client wrote before its proxy's address is not read, garbage or not.
        let h = headers("x-forwarded-for", &["x, y, 203.0.113.9, 10.0.0.5"]);
        assert_eq!(resolve(peer, &h, &p).0, ip("203.0.113.9"));
        // Bytes that are not text in the client's part of the line hide nothing after them.
        let mut h = HeaderMap::new();
        h.append(
            "x-forwarded-for",
            HeaderValue::from_bytes(b"\xff\xfe, 203.0.113.9, 10.0.0.5").unwrap(),
        );
        assert_eq!(resolve(peer, &h, &p).0, ip("203.0.113.9"));
        // More proxies than are read: the client is not found among them.
        let long: &'static str = Box::leak(vec!["10.0.0.1"; MAX_HOPS + 1].join(",").into());
        let h = headers("x-forwarded-for", &[long]);
        assert_eq!(resolve(peer, &h, &p).0, peer);
        // The other header is not read.
        let h = headers("forwarded", &["for=203.0.113.9"]);
        assert_eq!(resolve(peer, &h, &p).0, peer);
    }

    #[test]
    fn forwarded_elements_name_the_client_by_for() {
        let p = proxies(&["10.0.0.0/8"], ForwardedHeader::Forwarded);
        let h = headers(
            "forwarded",
            &[
                r#"for=1.1.1.1, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.5;by=10.0.0.6"#,
            ],
        );
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("2001:db8:cafe::17"));
        let h = headers("forwarded", &["for=unknown"]);
        assert_eq!(resolve(ip("10.0.0.6"), &h, &p).0, ip("10.0.0.6"));
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        assert_eq!(
            ClientAddr(ip("2001:db8::1")).key(),
            ClientAddr(ip("2001:db8::ffff:2")).key()
        );
        assert_ne!(
            ClientAddr(ip("2001:db8::1")).key(),
            ClientAddr(ip("2001:db8:0:1::1")).key()
        );
        // An IPv4 client on a dual-stack socket is its IPv4 address.
        assert_eq!(
            resolve(
                ip("::ffff:10.0.0.9"),
                &HeaderMap::new(),
                &Proxies::default()
            )
            .0,
            ip("10.0.0.9")
        );
    }
}
