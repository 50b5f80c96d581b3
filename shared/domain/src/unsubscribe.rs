//! Unsubscribe links (docs/api.md, Unsubscribing): a per-recipient token that names the
//! organization, the contact, the broadcast and the channel, signed with HMAC-SHA256 under one
//! of the deployment's unsubscribe keys, so that checking one needs no lookup and a forged or
//! altered one costs one MAC. A key id travels in the token: every key that ever signed keeps
//! verifying after a newer one takes over, so links keep working across a rotation.
//!
//! ```text
//! token = base64url(version 1 | key id | organization | contact | broadcast | channel | tag)
//!         1 + 1 + 16 + 16 + 16 + 1 bytes signed, tag the first 16 bytes of the HMAC: 90 characters
//! ```

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use uuid::Uuid;

use crate::Channel;
use crate::topics::TopicPreference;
use parley_types::ids::{BroadcastId, ContactId, OrgId, TopicId};
use parley_types::time::Timestamp;

const VERSION: u8 = 1;
const SIGNED_BYTES: usize = 1 + 1 + 16 + 16 + 16 + 1;
const TAG_BYTES: usize = 16;
/// Characters of every token: a path segment of another length is not one.
pub const TOKEN_CHARS: usize = ((SIGNED_BYTES + TAG_BYTES) * 8).div_ceil(6);
/// The bytes of a key's secret.
pub const SECRET_BYTES: usize = 32;
/// The path under which the public routes take a token.
pub const PATH_PREFIX: &str = "/unsubscribe/";
/// The longest `PARLEY_PUBLIC_URL`.
pub const MAX_PUBLIC_URL_CHARS: usize = 200;
/// The longest URL `{{unsubscribe_url}}` renders to.
pub const MAX_URL_CHARS: usize = MAX_PUBLIC_URL_CHARS + PATH_PREFIX.len() + TOKEN_CHARS;
/// How long a new key waits before it signs, so that every API process (which reloads its keys
/// each minute) knows it before a link signed with it can be clicked.
pub const KEY_WARM_UP_SECS: i64 = 120;

/// One of the deployment's unsubscribe keys. Its secret is never printed.
#[derive(Clone)]
pub struct UnsubscribeKey {
    pub id: u8,
    pub secret: [u8; SECRET_BYTES],
    pub created_at: Timestamp,
    /// Added [`KEY_WARM_UP_SECS`] ago or more, by the database's clock: it may sign.
    pub warm: bool,
}

impl std::fmt::Debug for UnsubscribeKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnsubscribeKey")
            .field("id", &self.id)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// A new key's secret: 32 bytes from `rand`'s thread generator (a CSPRNG seeded by the
/// operating system).
pub fn new_secret() -> [u8; SECRET_BYTES] {
    use rand::RngExt;
    rand::rng().random()
}

impl UnsubscribeKey {
    /// The key that signs: the newest that has warmed up, else the oldest (so a deployment's
    /// first key signs at once).
    pub fn signing(keys: &[UnsubscribeKey]) -> Option<&UnsubscribeKey> {
        keys.iter()
            .filter(|k| k.warm)
            .max_by_key(|k| (k.created_at, k.id))
            .or_else(|| keys.iter().min_by_key(|k| (k.created_at, k.id)))
    }

    fn tag(&self, signed: &[u8]) -> [u8; TAG_BYTES] {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.secret)
            .expect("HMAC accepts any key length");
        m.update(signed);
        let full = m.finalize().into_bytes();
        let mut tag = [0u8; TAG_BYTES];
        tag.copy_from_slice(&full[..TAG_BYTES]);
        tag
    }
}

/// What an unsubscribe link names: whom, for which organization's messages on which channel,
/// and the broadcast it came in (its `unsubscribeRate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsubscribeToken {
    pub organization_id: OrgId,
    pub contact_id: ContactId,
    pub broadcast_id: BroadcastId,
    pub channel: Channel,
}

impl UnsubscribeToken {
    fn signed_bytes(&self, key_id: u8) -> [u8; SIGNED_BYTES] {
        let mut out = [0u8; SIGNED_BYTES];
        out[0] = VERSION;
        out[1] = key_id;
        out[2..18].copy_from_slice(self.organization_id.uuid().as_bytes());
        out[18..34].copy_from_slice(self.contact_id.uuid().as_bytes());
        out[34..50].copy_from_slice(self.broadcast_id.uuid().as_bytes());
        out[50] = Channel::ALL
            .iter()
            .position(|c| *c == self.channel)
            .expect("a channel is one of ALL") as u8;
        out
    }

    /// The token, signed with `key`.
    pub fn sign(&self, key: &UnsubscribeKey) -> String {
        let signed = self.signed_bytes(key.id);
        let mut bytes = [0u8; SIGNED_BYTES + TAG_BYTES];
        bytes[..SIGNED_BYTES].copy_from_slice(&signed);
        bytes[SIGNED_BYTES..].copy_from_slice(&key.tag(&signed));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The link to the public page: `public_url` (no trailing `/`), then the token.
    pub fn url(&self, public_url: &str, key: &UnsubscribeKey) -> String {
        format!("{public_url}{PATH_PREFIX}{}", self.sign(key))
    }

    /// What `token` names, when one of `keys` signed it; `None` for anything else (of another
    /// length, not base64url, of an unknown version or key, or altered). Costs one MAC at
    /// most, compared in constant time.
    pub fn verify(token: &str, keys: &[UnsubscribeKey]) -> Option<UnsubscribeToken> {
        if token.len() != TOKEN_CHARS {
            return None;
        }
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        let (signed, tag) = bytes.split_at_checked(SIGNED_BYTES)?;
        if signed[0] != VERSION || tag.len() != TAG_BYTES {
            return None;
        }
        let key = keys.iter().find(|k| k.id == signed[1])?;
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&key.secret)
            .expect("HMAC accepts any key length");
        m.update(signed);
        m.verify_truncated_left(tag).ok()?;
        let uuid = |range: std::ops::Range<usize>| {
            Uuid::from_slice(&signed[range]).expect("16 bytes make a UUID")
        };
        Some(UnsubscribeToken {
            organization_id: OrgId::from(uuid(2..18)),
            contact_id: ContactId::from(uuid(18..34)),
            broadcast_id: BroadcastId::from(uuid(34..50)),
            channel: *Channel::ALL.get(usize::from(signed[50]))?,
        })
    }
}

parley_types::text_enum!(
    /// How a person unsubscribed: a mail client's one-click `POST` (RFC 8058), or the page's
    /// button.
    UnsubscribeSource { OneClick = "one_click", Page = "page" }
);

/// What a link's page shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub organization_name: String,
    pub channel: Channel,
    /// Whether the contact unsubscribed on the link's channel through a link (and so may
    /// resubscribe there).
    pub unsubscribed: bool,
    /// Whether something else keeps marketing from it there: another entry of the ledger (a
    /// bounce, a complaint, an entry of the API or an import, one for every channel),
    /// `doNotContact`, or on `messaging_a` `messagingAOptedOut`.
    pub held_otherwise: bool,
    /// The contact was deleted: nothing is sent to it, and there is nothing to change.
    pub contact_deleted: bool,
    /// The topic of the link's broadcast, if it names one (and still exists): what a
    /// one-click `POST` unsubscribes from.
    pub topic: Option<TopicId>,
    /// Every topic of the organization, with the contact's preference.
    pub topics: Vec<TopicPreference>,
}

/// The `List-Unsubscribe` header of an email (RFC 2369): the link, then a `mailto:` when the
/// deployment has one.
pub fn list_unsubscribe(url: &str, mailto: Option<&str>) -> String {
    match mailto {
        Some(address) => format!("<{url}>, <mailto:{address}?subject=unsubscribe>"),
        None => format!("<{url}>"),
    }
}

/// `List-Unsubscribe-Post` (RFC 8058): the link takes a one-click `POST`.
pub const LIST_UNSUBSCRIBE_POST: &str = "List-Unsubscribe=One-Click";

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u8, fill: u8, age_secs: i64) -> UnsubscribeKey {
        UnsubscribeKey {
            id,
            secret: [fill; SECRET_BYTES],
            created_at: Timestamp(chrono::Utc::now() - chrono::Duration::seconds(age_secs)),
            warm: age_secs >= KEY_WARM_UP_SECS,
        }
    }

    fn token() -> UnsubscribeToken {
        UnsubscribeToken {
            organization_id: OrgId::from(Uuid::now_v7()),
            contact_id: ContactId::from(Uuid::now_v7()),
            broadcast_id: BroadcastId::from(Uuid::now_v7()),
            channel: Channel::SocialB,
        }
    }

    #[test]
    fn a_token_names_what_was_signed_and_outlives_a_rotation() {
        let (old, new) = (key(1, 7, 86_400 * 90), key(2, 9, 3_600));
        let t = token();
        let signed = t.sign(&old);
        assert_eq!(signed.len(), TOKEN_CHARS);
        assert!(
            signed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(
            UnsubscribeToken::verify(&signed, &[new.clone(), old.clone()]),
            Some(t)
        );
        assert_eq!(
            UnsubscribeToken::verify(&signed, &[new]),
            None,
            "its key retired"
        );
    }

    #[test]
    fn an_altered_or_foreign_token_names_nothing() {
        let k = key(1, 7, 3_600);
        let signed = token().sign(&k);
        for i in 0..signed.len() {
            let mut altered = signed.clone().into_bytes();
            altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(altered).unwrap();
            assert_eq!(
                UnsubscribeToken::verify(&altered, std::slice::from_ref(&k)),
                None,
                "at {i}"
            );
        }
        assert_eq!(UnsubscribeToken::verify(&signed, &[key(1, 8, 3_600)]), None);
        assert_eq!(
            UnsubscribeToken::verify(&signed[1..], std::slice::from_ref(&k)),
            None
        );
        assert_eq!(
            UnsubscribeToken::verify(&format!("{signed}A"), std::slice::from_ref(&k)),
            None
        );
        assert_eq!(
            UnsubscribeToken::verify(&"!".repeat(TOKEN_CHARS), &[k]),
            None
        );
    }

    #[test]
    fn a_new_key_signs_once_it_has_warmed_up() {
        let old = key(1, 7, 86_400);
        let fresh = key(2, 9, 10);
        let keys = [old.clone(), fresh.clone()];
        assert_eq!(UnsubscribeKey::signing(&keys).unwrap().id, 1);
        let warm = UnsubscribeKey {
            warm: true,
            ..fresh.clone()
        };
        assert_eq!(UnsubscribeKey::signing(&[old, warm]).unwrap().id, 2);
        assert_eq!(
            UnsubscribeKey::signing(&[fresh]).unwrap().id,
            2,
            "the first key at once"
        );
        assert!(UnsubscribeKey::signing(&[]).is_none());
    }

    #[test]
    fn the_longest_url_is_bounded() {
        let url = token().url(&"h".repeat(MAX_PUBLIC_URL_CHARS), &key(1, 7, 0));
        assert_eq!(url.chars().count(), MAX_URL_CHARS);
    }
}
