//! API keys and scopes (docs/api.md, Authentication and scopes).
//! A key is `prl_` + 32 random base62 characters; only its SHA-256 and a short prefix are stored.

use rand::RngExt;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};

pub const KEY_PREFIX: &str = "prl_";
const KEY_RANDOM_CHARS: usize = 32;
/// How much of a key is kept in clear, to tell keys apart in listings.
const DISPLAY_PREFIX_CHARS: usize = 12;

/// Resources that have `<resource>:read` and `<resource>:write` scopes.
pub const RESOURCES: &[&str] = &[
    "faq",
    "broadcasts",
    "contacts",
    "leads",
    "templates",
    "teams",
    "users",
    "categories",
    "message-attributes",
    "conversations",
    "tickets",
    "statistics",
    "files",
    "sla-policies",
    "organization",
    "suppressions",
    "privacy",
];

pub const WEBHOOKS_MANAGE: &str = "webhooks:manage";
pub const API_KEYS_MANAGE: &str = "api-keys:manage";
pub const ALL: &str = "*";

/// A freshly generated key: the secret is shown once, the rest is stored.
pub struct NewKey {
    pub secret: String,
    pub prefix: String,
    pub hash: Vec<u8>,
}

/// `len` random base62 characters.
pub fn random_token(len: usize) -> String {
    rand::rng()
        .sample_iter(Alphanumeric)
        .take(len)
        .map(char::from)
        .collect()
}

pub fn generate_key() -> NewKey {
    let secret = format!("{KEY_PREFIX}{}", random_token(KEY_RANDOM_CHARS));
    NewKey {
        prefix: secret[..DISPLAY_PREFIX_CHARS].to_owned(),
        hash: hash_key(&secret),
        secret,
    }
}

/// Whether two secrets are equal, compared through their digests so the time taken says
/// nothing about the secret.
pub fn same_secret(a: &str, b: &str) -> bool {
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

pub fn hash_key(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// Whether `secret` has the shape of a key; anything else is refused without a database read.
pub fn looks_like_key(secret: &str) -> bool {
    secret.strip_prefix(KEY_PREFIX).is_some_and(|r| {
        r.len() == KEY_RANDOM_CHARS && r.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

/// An operator key (`parley-api admin key create`): `prlop_` + 40 random base62 characters.
pub const OPERATOR_KEY_PREFIX: &str = "prlop_";
const OPERATOR_KEY_RANDOM_CHARS: usize = 40;

/// A new operator key's secret (shown once; its SHA-256 is stored).
pub fn generate_operator_key() -> String {
    format!(
        "{OPERATOR_KEY_PREFIX}{}",
        random_token(OPERATOR_KEY_RANDOM_CHARS)
    )
}

/// Whether `secret` has the shape of an operator key: anything else is refused without a
/// database read.
pub fn looks_like_operator_key(secret: &str) -> bool {
    secret.strip_prefix(OPERATOR_KEY_PREFIX).is_some_and(|r| {
        r.len() == OPERATOR_KEY_RANDOM_CHARS && r.chars().all(|c| c.is_ascii_alphanumeric())
    })
}

pub fn is_valid_scope(scope: &str) -> bool {
    if matches!(scope, ALL | WEBHOOKS_MANAGE | API_KEYS_MANAGE) {
        return true;
    }
    scope
        .split_once(':')
        .is_some_and(|(res, access)| RESOURCES.contains(&res) && matches!(access, "read" | "write"))
}

/// Every scope there is, for documentation and tests.
pub fn all_scopes() -> Vec<String> {
    let mut out = vec![
        ALL.to_owned(),
        WEBHOOKS_MANAGE.to_owned(),
        API_KEYS_MANAGE.to_owned(),
    ];
    for r in RESOURCES {
        out.push(format!("{r}:read"));
        out.push(format!("{r}:write"));
    }
    out
}

/// Whether a key holding `held` may do what `needed` guards. `*` grants everything; otherwise
/// scopes match exactly (`contacts:write` does not include `contacts:read`).
pub fn allows(held: &[String], needed: &str) -> bool {
    held.iter().any(|s| s == ALL || s == needed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_operator_key_has_its_own_shape() {
        let key = super::generate_operator_key();
        assert!(super::looks_like_operator_key(&key));
        assert!(!super::looks_like_key(&key));
        assert!(!super::looks_like_operator_key(&key[..key.len() - 1]));
        assert!(!super::looks_like_operator_key(
            &super::generate_key().secret
        ));
    }

    use super::*;

    #[test]
    fn generated_keys_have_the_contract_shape() {
        let k = generate_key();
        assert!(looks_like_key(&k.secret), "{}", k.secret);
        assert!(k.secret.starts_with(&k.prefix));
        assert_eq!(k.hash, hash_key(&k.secret));
        assert_ne!(generate_key().secret, k.secret);
    }

    #[test]
    fn scopes() {
        assert!(is_valid_scope("contacts:read"));
        assert!(is_valid_scope("message-attributes:write"));
        assert!(is_valid_scope("webhooks:manage"));
        assert!(!is_valid_scope("contacts:delete"));
        assert!(!is_valid_scope("planets:read"));
        assert!(allows(&["*".into()], "contacts:write"));
        assert!(allows(&["contacts:write".into()], "contacts:write"));
        assert!(!allows(&["contacts:write".into()], "contacts:read"));
        assert!(all_scopes().iter().all(|s| is_valid_scope(s)));
    }
}
