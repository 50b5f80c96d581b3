//! HMAC-SHA256 signatures over a raw body, as CONTRACT.md fixes them for webhooks and channel
//! receipts: `X-Parley-Signature: sha256=<lowercase hex>`, several comma-separated while a
//! secret is being rotated.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const HEADER: &str = "x-parley-signature";

fn mac(secret: &str) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC accepts any key length")
}

/// `sha256=<hex>` of `body` under `secret`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    let mut m = mac(secret);
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

/// Whether any `sha256=` value of `header` is `body`'s signature under `secret`, compared in
/// constant time.
pub fn verify(secret: &str, body: &[u8], header: &str) -> bool {
    header.split(',').any(|part| {
        let Some(hex_sig) = part.trim().strip_prefix("sha256=") else {
            return false;
        };
        let Ok(bytes) = hex::decode(hex_sig) else {
            return false;
        };
        let mut m = mac(secret);
        m.update(body);
        m.verify_slice(&bytes).is_ok()
    })
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
        assert!(verify(
            "whsec_test",
            b"{\"a\":1}",
            &format!("sha256=00, {sig}")
        ));
        assert!(!verify("whsec_test", b"x", "garbage"));
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
