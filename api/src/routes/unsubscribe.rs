//! The public unsubscribe routes on the API's port (docs/api.md, Unsubscribing): `GET
//! /unsubscribe/{token}` shows a small page (no script, a content security policy of its own)
//! to unsubscribe or resubscribe; `POST` with `List-Unsubscribe=One-Click` (RFC 8058: no
//! cookie, no redirect, no confirmation) unsubscribes at once (from the broadcast's topic when
//! it names one, else from every marketing message on the channel), and the page's own forms
//! post `action=unsubscribe`, `action=resubscribe` or `action=topics` with a `topic` field per
//! topic kept.
//!
//! The token is the credential: checked before the body is read ([`token_first`]), one MAC,
//! the keys read from memory (Postgres once a minute at most). A client address may make
//! [`PER_ADDRESS_PER_MINUTE`] failed calls (a token no key signed) and resubscribes a minute
//! (429 past them, per API process); valid unsubscribes and page views never count, since
//! mailbox providers send one-click `POST`s, and scanners follow links, from a few shared
//! addresses. Bodies are announced by `Content-Length` within [`MAX_BODY_BYTES`]; the handlers
//! run within [`LIMITS`].

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parley_domain::unsubscribe::UnsubscribeSource;
use parley_domain::unsubscribe::{Subscription, UnsubscribeToken};
use parley_types::error::AppError;
use parley_types::ids::TopicId;

use crate::error::{ApiError, AppResult};
use crate::middleware::guard::Limits;
use crate::state::AppState;

pub const PATH: &str = "/unsubscribe/{token}";
/// A one-click body is 26 bytes (more as a multipart field); the page's topics form posts
/// up to 86 bytes a topic, at most `MAX_TOPICS` (100) of them.
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// Failed calls and resubscribes of one client address a minute.
pub const PER_ADDRESS_PER_MINUTE: u32 = 60;
pub const LIMITS: Limits = Limits {
    request_timeout: std::time::Duration::from_secs(10),
    max_in_flight: 32,
};

const POLICY: &str =
    "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub fn router() -> Router<AppState> {
    Router::new().route(PATH, get(page).post(act))
}

/// Answers before the body is read: 429 when the client's address made too many failed (or
/// resubscribing) calls this minute, 404 unless one of the keys signed the token (a failure,
/// counted), 413 for a body not announced within [`MAX_BODY_BYTES`] by its `Content-Length`
/// (so no more than that is read); hands the token on.
pub async fn token_first(
    State(state): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (mut parts, body) = req.into_parts();
    match Signed::check(&mut parts, &state).await {
        Ok(signed) => {
            parts.extensions.insert(signed);
            next.run(axum::extract::Request::from_parts(parts, body))
                .await
        }
        Err(err) => err,
    }
}

/// A link's token, checked, and the client's address.
#[derive(Clone, Copy)]
struct Signed {
    token: UnsubscribeToken,
    peer: Option<std::net::IpAddr>,
}

impl Signed {
    async fn check(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let now = std::time::Instant::now();
        let peer = parts
            .extensions
            .get::<crate::client_addr::ClientAddr>()
            .map(|a| a.0);
        state
            .unsubscribe_calls
            .admit(peer, now)
            .map_err(|e| ApiError(e).into_response())?;
        let token = parts
            .uri
            .path()
            .strip_prefix(parley_domain::unsubscribe::PATH_PREFIX)
            .unwrap_or_default();
        let verified = if token.len() == parley_domain::unsubscribe::TOKEN_CHARS {
            state
                .unsubscribe_keys
                .verify(state.use_cases(), token)
                .await
                .map_err(|err| {
                    ApiError(parley_usecases::postgres::app_error(err)).into_response()
                })?
        } else {
            None
        };
        let Some(token) = verified else {
            if let Some(ip) = peer {
                state.unsubscribe_calls.failed(ip, now);
            }
            return Err(not_found());
        };
        if parts.method == axum::http::Method::POST && !announced_within_limit(&parts.headers) {
            return Err(ApiError(AppError::PayloadTooLarge).into_response());
        }
        Ok(Signed { token, peer })
    }
}

/// Whether a `POST`'s `Content-Length` says at most [`MAX_BODY_BYTES`] (hyper reads no more
/// than it says), or it has no body at all; a chunked body, whose length nothing announces,
/// is refused.
fn announced_within_limit(headers: &axum::http::HeaderMap) -> bool {
    match headers.get(header::CONTENT_LENGTH) {
        Some(length) => length
            .to_str()
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .is_some_and(|n| n <= MAX_BODY_BYTES),
        None => !headers.contains_key(header::TRANSFER_ENCODING),
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match parts.extensions.remove::<Signed>() {
            Some(signed) => Ok(signed),
            None => Signed::check(parts, state).await,
        }
    }
}

/// The page: whom the link names now, and a button to change it.
async fn page(State(state): State<AppState>, signed: Signed) -> AppResult<Response> {
    let now = parley_usecases::unsubscribe::subscription(state.use_cases(), &signed.token).await?;
    Ok(answer(now, None))
}

/// A one-click unsubscribe, or the page's form.
async fn act(
    State(state): State<AppState>,
    signed: Signed,
    body: Result<Bytes, BytesRejection>,
) -> AppResult<Response> {
    let body = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AppError::PayloadTooLarge
        } else {
            AppError::validation("body", "invalid_format", rejection.body_text())
        }
    })?;
    let ctx = state.use_cases();
    let t = signed.token;
    let choice = Choice::of(&body);
    let one_click = choice == Some(Choice::OneClick);
    let (now, done) = match choice {
        Some(Choice::OneClick) => (
            parley_usecases::unsubscribe::one_click(ctx, &t).await?,
            "You are unsubscribed.",
        ),
        Some(Choice::Unsubscribe) => (
            parley_usecases::unsubscribe::unsubscribe(ctx, &t, UnsubscribeSource::Page).await?,
            "You are unsubscribed.",
        ),
        Some(Choice::Resubscribe) => {
            // Counted like a failure: a link cycled between resubscribe and unsubscribe would
            // otherwise write entries and events as fast as the API answers.
            counted(&state, &signed);
            (
                parley_usecases::unsubscribe::resubscribe(ctx, &t).await?,
                "You are subscribed again.",
            )
        }
        Some(Choice::Topics { shown, kept }) => {
            // It may subscribe again: counted as a resubscribe is.
            counted(&state, &signed);
            (
                parley_usecases::unsubscribe::set_topics(ctx, &t, &shown, &kept).await?,
                "Your topics are saved.",
            )
        }
        None => {
            return Err(AppError::validation(
                "body",
                "invalid_value",
                "post List-Unsubscribe=One-Click, action=unsubscribe, action=resubscribe or action=topics",
            )
            .into());
        }
    };
    // One-click from a topic's broadcast left that topic: say which.
    let left = now.as_ref().and_then(|s| {
        let topic = s.topic?;
        s.topics
            .iter()
            .find(|p| p.topic_id == topic && !p.subscribed)
    });
    let done = match (one_click, left) {
        (true, Some(topic)) => format!("You left {}.", escape(&topic.name)),
        _ => done.to_owned(),
    };
    Ok(answer(now, Some(&done)))
}

/// Counts a call that may subscribe again against the client's address.
fn counted(state: &AppState, signed: &Signed) {
    if let Some(ip) = signed.peer {
        state
            .unsubscribe_calls
            .failed(ip, std::time::Instant::now());
    }
}

/// What a `POST` asks for.
#[derive(Debug, PartialEq, Eq)]
enum Choice {
    OneClick,
    Unsubscribe,
    Resubscribe,
    /// The topics form: the topics it showed, and of them those kept (checked); the others
    /// are left.
    Topics {
        shown: Vec<TopicId>,
        kept: Vec<TopicId>,
    },
}

impl Choice {
    /// RFC 8058's `List-Unsubscribe=One-Click`, sent as `application/x-www-form-urlencoded`
    /// or as a `multipart/form-data` field; or the page's `action`. The body is at most
    /// [`MAX_BODY_BYTES`]: one pass over it.
    fn of(body: &[u8]) -> Option<Choice> {
        let text = String::from_utf8_lossy(body);
        let one_click = text.contains("List-Unsubscribe=One-Click")
            || (text.contains("name=\"List-Unsubscribe\"") && text.contains("One-Click"));
        if one_click {
            return Some(Choice::OneClick);
        }
        let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(body).ok()?;
        fields
            .iter()
            .find_map(|(name, value)| match (name.as_str(), value.as_str()) {
                ("action", "unsubscribe") => Some(Choice::Unsubscribe),
                ("action", "resubscribe") => Some(Choice::Resubscribe),
                ("action", "topics") => {
                    let ids = |field: &str| -> Vec<TopicId> {
                        fields
                            .iter()
                            .filter(|(name, _)| name == field)
                            .filter_map(|(_, id)| id.parse().ok())
                            .collect()
                    };
                    Some(Choice::Topics {
                        shown: ids("shown"),
                        kept: ids("topic"),
                    })
                }
                _ => None,
            })
    }
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-store"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        body,
    )
        .into_response()
}

fn not_found() -> Response {
    html(
        StatusCode::NOT_FOUND,
        document(
            "Link not valid",
            "<p>This unsubscribe link is not valid.</p>",
        ),
    )
}

fn answer(now: Option<Subscription>, done: Option<&str>) -> Response {
    match now {
        Some(s) => html(StatusCode::OK, page_html(&s, done)),
        None => not_found(),
    }
}

/// `&`, `<`, `>`, `"` and `'` as entities: an organization's name is the tenant's text.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn document(title: &str, main: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\"><title>{title}</title></head>\
         <body><main>{main}</main></body></html>\n"
    )
}

/// The page: whether the link's address gets the organization's marketing messages on its
/// channel, and one button to change that (a form posting back to the same address).
fn page_html(s: &Subscription, done: Option<&str>) -> String {
    let org = escape(&s.organization_name);
    let mut main = format!("<h1>{org}</h1>");
    if let Some(done) = done {
        main.push_str(&format!("<p><strong>{done}</strong></p>"));
    }
    if s.contact_deleted {
        main.push_str("<p>This address is no longer on the list: nothing is sent to it.</p>");
        return document("Your subscription", &main);
    }
    // Words for people, not the API's channel names.
    let channel = match s.channel {
        parley_domain::Channel::Email => "email",
        parley_domain::Channel::MessagingA => "text message",
        parley_domain::Channel::SocialA | parley_domain::Channel::SocialB => "social message",
    };
    let (now, action, label) = match (s.unsubscribed, s.held_otherwise) {
        (true, _) => (
            format!("You unsubscribed from {org}'s marketing messages by {channel}."),
            "resubscribe",
            "Get them again",
        ),
        (false, true) => (
            format!("You do not get {org}'s marketing messages by {channel}."),
            "unsubscribe",
            "Unsubscribe",
        ),
        (false, false) => (
            format!("You get {org}'s marketing messages by {channel}."),
            "unsubscribe",
            "Unsubscribe",
        ),
    };
    main.push_str(&format!(
        "<p>{now} Messages you asked for (receipts, codes) come either way.</p>\
         <form method=\"post\"><input type=\"hidden\" name=\"action\" value=\"{action}\">\
         <button type=\"submit\">{label}</button></form>"
    ));
    if !s.topics.is_empty() {
        main.push_str(&topics_form(s));
    }
    document("Your subscription", &main)
}

/// The topics form: a box per topic, checked while the contact gets it.
fn topics_form(s: &Subscription) -> String {
    let mut form = String::from(
        "<h2>Topics</h2><form method=\"post\">\
         <input type=\"hidden\" name=\"action\" value=\"topics\">",
    );
    for t in &s.topics {
        let checked = if t.subscribed { " checked" } else { "" };
        let this = if s.topic == Some(t.topic_id) {
            " (this message)"
        } else {
            ""
        };
        form.push_str(&format!(
            "<p><input type=\"hidden\" name=\"shown\" value=\"{id}\">\
             <label><input type=\"checkbox\" name=\"topic\" value=\"{id}\"{checked}> \
             {name}{this}</label></p>",
            id = t.topic_id,
            name = escape(&t.name),
        ));
    }
    form.push_str("<button type=\"submit\">Save topics</button></form>");
    form
}

#[cfg(test)]
mod tests {
    use super::*;
    use parley_domain::Channel;

    #[test]
    fn a_post_says_one_click_in_either_form_encoding_or_picks_an_action() {
        assert_eq!(
            Choice::of(b"List-Unsubscribe=One-Click"),
            Some(Choice::OneClick)
        );
        let multipart = b"--b\r\nContent-Disposition: form-data; name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--b--\r\n";
        assert_eq!(Choice::of(multipart), Some(Choice::OneClick));
        assert_eq!(Choice::of(b"action=resubscribe"), Some(Choice::Resubscribe));
        assert_eq!(Choice::of(b"action=unsubscribe"), Some(Choice::Unsubscribe));
        let (one, two) = (TopicId::generate(), TopicId::generate());
        assert_eq!(
            Choice::of(
                format!("action=topics&shown={one}&shown={two}&topic={one}&topic=nonsense")
                    .as_bytes()
            ),
            Some(Choice::Topics {
                shown: vec![one, two],
                kept: vec![one]
            }),
            "the topics shown and kept; what is not an id is dropped"
        );
        assert_eq!(
            Choice::of(b"action=topics"),
            Some(Choice::Topics {
                shown: vec![],
                kept: vec![]
            })
        );
        for nothing in [
            &b""[..],
            b"action=delete",
            b"List-Unsubscribe=Two-Clicks",
            b"\xff\xfe",
        ] {
            assert_eq!(Choice::of(nothing), None);
        }
    }

    #[test]
    fn the_page_escapes_the_organizations_name_and_offers_the_other_choice() {
        let s = Subscription {
            organization_name: "<script>alert('x')</script> & Co".into(),
            channel: Channel::Email,
            unsubscribed: false,
            held_otherwise: false,
            contact_deleted: false,
            topic: None,
            topics: Vec::new(),
        };
        let html = page_html(&s, None);
        assert!(!html.contains("<script>"), "{html}");
        assert!(html.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; Co"));
        assert!(html.contains("value=\"unsubscribe\""));
        let html = page_html(
            &Subscription {
                unsubscribed: true,
                ..s.clone()
            },
            Some("Done."),
        );
        assert!(html.contains("value=\"resubscribe\"") && html.contains("Done."));
        let held = page_html(
            &Subscription {
                held_otherwise: true,
                ..s.clone()
            },
            None,
        );
        assert!(held.contains("You do not get") && held.contains("value=\"unsubscribe\""));
        let gone = page_html(
            &Subscription {
                contact_deleted: true,
                ..s
            },
            None,
        );
        assert!(!gone.contains("<form"));
    }

    #[test]
    fn the_topics_form_checks_the_topics_kept_and_escapes_their_names() {
        use parley_domain::topics::{TopicPreference, TopicSource};
        let (kept, left) = (TopicId::generate(), TopicId::generate());
        let s = Subscription {
            organization_name: "Acme".into(),
            channel: Channel::Email,
            unsubscribed: false,
            held_otherwise: false,
            contact_deleted: false,
            topic: Some(left),
            topics: vec![
                TopicPreference {
                    topic_id: kept,
                    name: "<b>News</b>".into(),
                    subscribed: true,
                    source: None,
                    unsubscribed_at: None,
                },
                TopicPreference {
                    topic_id: left,
                    name: "Offers".into(),
                    subscribed: false,
                    source: Some(TopicSource::Unsubscribe),
                    unsubscribed_at: None,
                },
            ],
        };
        let html = page_html(&s, None);
        assert!(
            html.contains(&format!("value=\"{kept}\" checked>")),
            "{html}"
        );
        assert!(html.contains(&format!("value=\"{left}\">")), "{html}");
        assert!(html.contains("&lt;b&gt;News&lt;/b&gt;") && !html.contains("<b>News"));
        assert!(html.contains("Offers (this message)"));
    }
}
