//! HMAC-SHA256 signatures over a raw body, as docs/api.md fixes them for webhooks and channel
//! receipts: `X-Parley-Signature: sha256=<lowercase hex>`, several comma-separated while a
//! secret is being rotated.
//!
//! Checking one costs the same whatever the caller sends: the header is parsed first, and
//! refused unless it is at most [`MAX_CANDIDATES`] well-formed values; the MAC of the body is
//! then computed once and compared with each candidate in constant time.
//!
//! Webhooks also carry the [Standard Webhooks](https://www.standardwebhooks.com/) signature
//! ([`sign_standard`]), so receivers can verify them with that standard's libraries.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub const HEADER: &str = "x-parley-signature";

/// Signatures one header may carry: the current secret's and the previous one's during a
/// rotation, with room to spare.
pub const MAX_CANDIDATES: usize = 4;
const PREFIX: &str = "sha256=";
const HEX_LEN: usize = 64;
/// The longest well-formed header: every candidate with a separator and some spaces.
const MAX_HEADER_LEN: usize = MAX_CANDIDATES * (PREFIX.len() + HEX_LEN + 4);

fn mac(secret: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts any key length")
}

fn digest(secret: &str, body: &[u8]) -> [u8; 32] {
    let mut m = mac(secret);
    m.update(body);
    m.finalize().into_bytes().into()
}

/// `sha256=<hex>` of `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    format!("{PREFIX}{}", hex::encode(digest(secret, body)))
}

/// Standard Webhooks' `webhook-signature` value for one secret: `v1,` and the base64 of
/// HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed with the secret's bytes: the base64 after
/// `whsec_` decoded, as the standard's libraries read a `whsec_` secret (a secret not of that
/// form, which Parley never issues, is used as it is).
pub fn sign_standard(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    let key = secret
        .strip_prefix("whsec_")
        .and_then(|b64| STANDARD.decode(b64).ok())
        .unwrap_or_else(|| secret.as_bytes().to_vec());
    let mut m =
        <Hmac<Sha256> as KeyInit>::new_from_slice(&key).expect("HMAC accepts any key length");
    m.update(id.as_bytes());
    m.update(b".");
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    format!("v1,{}", STANDARD.encode(m.finalize().into_bytes()))
}

/// The signatures a header offers, parsed before any work on the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidates(Vec<[u8; 32]>);

impl Candidates {
    /// `None` unless the header is 1 to [`MAX_CANDIDATES`] comma-separated
    /// `sha256=<64 hex digits>` values (lowercase as sent; either case read).
    pub fn parse(header: &str) -> Option<Self> {
        if header.len() > MAX_HEADER_LEN {
            return None;
        }
        let mut out = Vec::new();
        for part in header.split(',') {
            if out.len() == MAX_CANDIDATES {
                return None;
            }
            let hex_sig = part.trim().strip_prefix(PREFIX)?;
            if hex_sig.len() != HEX_LEN || !hex_sig.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let mut bytes = [0u8; 32];
            hex::decode_to_slice(hex_sig, &mut bytes).ok()?;
            out.push(bytes);
        }
        Some(Candidates(out))
    }

    /// Whether one of the candidates is `body`'s signature under `secret`: one MAC, and
    /// constant-time comparisons.
    pub fn verify(&self, secret: &str, body: &[u8]) -> bool {
        let expected = digest(secret, body);
        self.0
            .iter()
            .fold(subtle::Choice::from(0), |found, c| {
                found | c.ct_eq(&expected)
            })
            .into()
    }
}

/// Whether `header` carries `body`'s signature under `secret`.
pub fn verify(secret: &str, body: &[u8], header: &str) -> bool {
    Candidates::parse(header).is_some_and(|c| c.verify(secret, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_and_a_changed_body_does_not() {
        let sig = sign("whsec_test", b"{\"a\":1}");
        assert!(sig.starts_with("sha256=") && sig.len() == 7 + 64);
        assert!(verify("whsec_test", b"{\"a\":1}", &sig));
        assert!(!verify("whsec_test", b"{\"a\":2}", &sig));
        assert!(!verify("other", b"{\"a\":1}", &sig));
        let zero = format!("sha256={}", "0".repeat(64));
        assert!(verify(
            "whsec_test",
            b"{\"a\":1}",
            &format!("{zero}, {sig}")
        ));
        assert!(!verify("whsec_test", b"x", "garbage"));
    }

    #[test]
    fn only_a_few_well_formed_candidates_are_read() {
        let sig = sign("s", b"body");
        let zero = format!("sha256={}", "0".repeat(64));
        let four = [zero.as_str(); 3].join(",") + "," + &sig;
        assert!(Candidates::parse(&four).is_some_and(|c| c.verify("s", b"body")));
        let five = format!("{zero},{four}");
        assert_eq!(Candidates::parse(&five), None, "a fifth candidate");
        let upper = format!("sha256={}", sig[7..].to_uppercase());
        assert!(Candidates::parse(&upper).is_some_and(|c| c.verify("s", b"body")));
        for bad in [
            "",
            "sha256=",
            "sha256=00",
            &format!("{sig},"),
            &"sha256=,".repeat(2000),
            &format!("md5={}", "0".repeat(64)),
        ] {
            assert_eq!(Candidates::parse(bad), None, "{bad:.40}");
        }
    }

    #[test]
    fn known_vector() {
        // RFC 4231 test case 2.
        let sig = sign("Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
