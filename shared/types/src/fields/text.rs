//! Validated text fields. Each type's rule is one regular expression, the same string the
//! OpenAPI document publishes as its `pattern`, with its `maxLength` checked on the text as
//! given: what the document says is exactly what the parser accepts. A value that passes is
//! then normalized (trimmed, lowercased, compacted) for storage. No pattern admits NUL, which
//! Postgres cannot store in `text` or `jsonb`.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Deserializer};
#[cfg(feature = "openapi")]
use utoipa::openapi::schema::{ObjectBuilder, Type};
#[cfg(feature = "openapi")]
use utoipa::openapi::{RefOr, Schema};
#[cfg(feature = "openapi")]
use utoipa::{PartialSchema, ToSchema};

use super::invalid;

/// What `str::trim` removes (Unicode `White_Space`), spelled for a character class.
macro_rules! whitespace {
    () => {
        r"\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
    };
}

/// Control characters (Unicode `Cc`), spelled for a character class.
macro_rules! control {
    () => {
        r"\u0000-\u001f\u007f-\u009f"
    };
}

/// A port, 0 to 65535.
macro_rules! port {
    () => {
        r"(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4})"
    };
}

/// Any text without NUL.
pub const TEXT: &str = r"^[^\u0000]*$";
/// Text with something besides whitespace, without NUL.
pub const NOT_BLANK: &str = concat!(r"^[^\u0000]*[^\u0000", whitespace!(), r"][^\u0000]*$");
/// One part of an address: no `@`, whitespace or control character.
macro_rules! address_char {
    ($extra:literal) => {
        concat!(
            "[^@",
            $extra,
            control!(),
            r" \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
        )
    };
}
pub const EMAIL: &str = concat!(
    "^",
    address_char!(""),
    "+@",
    address_char!("."),
    r"+(\.",
    address_char!("."),
    "+)+$"
);
/// `+` and 7 to 15 digits, the first not 0, with spaces, dots, dashes and parentheses anywhere.
pub const PHONE: &str = r"^[ ().-]*\+[ ().-]*[1-9]([ ().-]*[0-9]){6,14}[ ().-]*$";
pub const SLUG: &str = r"^[a-z0-9]+(-[a-z0-9]+)*$";
pub const COLOR: &str = r"^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$";
pub const LOCALE: &str = r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{2,8})*$";
pub const CURRENCY: &str = r"^[A-Za-z]{3}$";
/// `http` or `https`, a host name (its last label starts with a letter, so it is never read as
/// an IPv4 address), an optional port, then anything without spaces or control characters.
pub const HTTP_URL: &str = concat!(
    r"^https?://([A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*(:",
    port!(),
    r")?([/?#][^ ",
    control!(),
    "]*)?$"
);
/// Where a webhook may point in production: [`HTTP_URL`] with `https` only.
pub const HTTPS_URL: &str = concat!(
    r"^https://([A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*(:",
    port!(),
    r")?([/?#][^ ",
    control!(),
    "]*)?$"
);
/// What a webhook URL may be at all: `http` or `https` to a host name, an IPv4 address or a
/// bracketed IPv6 address. Outside development only [`HTTPS_URL`] is admitted (see
/// `domain::webhooks::check_url`), and that is what the served document says.
pub const WEBHOOK_URL: &str = concat!(
    r"^https?://(([A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*|[0-9]{1,3}(\.[0-9]{1,3}){3}|\[[0-9A-Fa-f:.]+\])",
    r"(:",
    port!(),
    r")?([/?#][^ ",
    control!(),
    "]*)?$"
);
pub const ATTRIBUTE_KEY: &str = r"^[a-z][a-z0-9_]*$";
/// No control characters, and something besides whitespace.
pub const FILENAME: &str = concat!(
    "^[^",
    control!(),
    "]*[^",
    control!(),
    whitespace!(),
    "][^",
    control!(),
    "]*$"
);
pub const CONTENT_TYPE: &str = r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$";

fn too_long(max: usize) -> (&'static str, String) {
    ("too_long", format!("must be at most {max} characters"))
}

fn bad_format(message: &str) -> (&'static str, String) {
    ("invalid_format", message.to_owned())
}

fn trimmed(raw: String) -> String {
    raw.trim().to_owned()
}

fn as_given(raw: String) -> String {
    raw
}

fn lowercase(raw: String) -> String {
    raw.to_ascii_lowercase()
}

fn uppercase(raw: String) -> String {
    raw.to_ascii_uppercase()
}

/// E.164: the separators dropped.
fn compact_phone(raw: String) -> String {
    raw.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect()
}

macro_rules! string_field {
    ($(#[$doc:meta])* $name:ident, max = $max:expr, pattern = $pattern:expr,
     message = $message:expr, normalize = $normalize:expr, example = $example:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            pub const MAX_CHARS: usize = $max;
            pub const PATTERN: &'static str = $pattern;

            pub fn parse(raw: impl Into<String>) -> Result<Self, (&'static str, String)> {
                static RULE: LazyLock<Regex> =
                    LazyLock::new(|| Regex::new($pattern).expect("the pattern compiles"));
                let raw = raw.into();
                if raw.chars().count() > Self::MAX_CHARS {
                    return Err(too_long(Self::MAX_CHARS));
                }
                if !RULE.is_match(&raw) {
                    return Err(mismatch(&raw, $message));
                }
                let normalize: fn(String) -> String = $normalize;
                Ok($name(normalize(raw)))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_inner(self) -> String {
                self.0
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let raw = String::deserialize(d)?;
                $name::parse(raw).map_err(|(code, message)| invalid(code, &message))
            }
        }

        #[cfg(feature = "openapi")]
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some($max))
                    .pattern(Some($pattern))
                    .examples([$example])
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl ToSchema for $name {}
    };
}

/// Why a value does not match its pattern, most specific first.
fn mismatch(raw: &str, message: &str) -> (&'static str, String) {
    if raw.contains('\0') {
        bad_format("must not contain the NUL character (U+0000)")
    } else if raw.trim().is_empty() {
        ("blank", "must not be blank".to_owned())
    } else {
        bad_format(message)
    }
}

string_field!(
    /// A display name: not blank, at most 200 characters; stored trimmed.
    Name, max = 200, pattern = NOT_BLANK, message = "must not be blank",
    normalize = trimmed, example = "Ada Lovelace"
);
string_field!(
    /// A short label (a source, a category, a type): not blank, at most 100 characters;
    /// stored trimmed.
    Label, max = 100, pattern = NOT_BLANK, message = "must not be blank",
    normalize = trimmed, example = "website"
);
string_field!(
    /// Free text of at most 255 characters.
    ShortText, max = 255, pattern = TEXT, message = "must be text",
    normalize = as_given, example = "Short text"
);
string_field!(
    /// Free text of at most 5,000 characters.
    Text, max = 5_000, pattern = TEXT, message = "must be text",
    normalize = as_given, example = "A longer description."
);
string_field!(
    /// A value for a template placeholder: free text of at most 1,000 characters.
    VariableValue, max = 1_000, pattern = TEXT, message = "must be text",
    normalize = as_given, example = "A-1042"
);
string_field!(
    /// Free text of at most 100,000 characters (FAQ content, template bodies).
    LongText, max = 100_000, pattern = TEXT, message = "must be text",
    normalize = as_given, example = "Hello {{contact.name}}, your order {{1}} has shipped."
);
string_field!(
    /// An email address: one `@`, a domain of at least two dot-separated labels, no spaces
    /// or control characters.
    Email, max = 254, pattern = EMAIL,
    message = "must be an email address such as ada@example.com",
    normalize = as_given, example = "ada@example.com"
);
string_field!(
    /// A phone number: `+` and 7 to 15 digits (not starting with 0); spaces, dots, dashes and
    /// parentheses are allowed and dropped, so it is stored in E.164.
    Phone, max = 32, pattern = PHONE,
    message = "must be an international phone number such as +4915112345678",
    normalize = compact_phone, example = "+4915112345678"
);
string_field!(
    /// Lowercase letters and digits joined by single dashes.
    Slug, max = 100, pattern = SLUG,
    message = "must be lowercase letters and digits joined by single dashes",
    normalize = as_given, example = "getting-started"
);
string_field!(
    /// A hex color, `#rgb` or `#rrggbb`; stored lowercase.
    Color, max = 7, pattern = COLOR, message = "must be a hex color such as #1a73e8",
    normalize = lowercase, example = "#1a73e8"
);
string_field!(
    /// A language tag such as `en` or `pt-BR`.
    Locale, max = 35, pattern = LOCALE, message = "must be a language tag such as en or pt-BR",
    normalize = as_given, example = "en"
);
string_field!(
    /// A three-letter ISO 4217 currency code; stored uppercase.
    Currency, max = 3, pattern = CURRENCY,
    message = "must be a three-letter ISO 4217 code such as EUR",
    normalize = uppercase, example = "EUR"
);
string_field!(
    /// An `http` or `https` URL with a host name.
    HttpUrl, max = 2_048, pattern = HTTP_URL,
    message = "must be an http or https URL with a host name",
    normalize = as_given, example = "https://example.com/avatar.png"
);
string_field!(
    /// Where a webhook is sent: an `https` URL with a host name (a literal IP address is not
    /// one; names are resolved, and must resolve to public addresses, when sending).
    /// `PARLEY_WEBHOOK_ALLOW_PRIVATE=true` also admits `http` (development and tests).
    WebhookUrl, max = 2_048, pattern = WEBHOOK_URL,
    message = "must be an https URL with a host name",
    normalize = as_given, example = "https://hooks.example.com/parley"
);
string_field!(
    /// A machine key: a lowercase letter, then lowercase letters, digits and `_`.
    AttributeKey, max = 64, pattern = ATTRIBUTE_KEY,
    message = "must start with a lowercase letter and hold only lowercase letters, digits and _",
    normalize = as_given, example = "order_number"
);
string_field!(
    /// A file's name as the client gives it: no control characters, not blank; stored
    /// trimmed. The storage key uses a safe form of it ([`safe_key_segment`]).
    Filename, max = 255, pattern = FILENAME,
    message = "must be a file name without control characters",
    normalize = trimmed, example = "invoice-2026-11.pdf"
);
string_field!(
    /// A MIME type `type/subtype` without parameters; stored lowercase.
    ContentType, max = 127, pattern = CONTENT_TYPE,
    message = "must be a MIME type such as application/pdf, without parameters",
    normalize = lowercase, example = "application/pdf"
);

/// An IANA time zone name (the tz database's, as `chrono_tz` knows them). The document states
/// its form, not the ~600 names: generators turn an enumeration into identifiers, and names
/// such as `GMT0`, `GMT-0` and `GMT+0` collide there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeZone(String);

/// The form of every tz database name (letters, digits, `_`, `+`, `-`, in parts separated by
/// `/`), and their longest length with room to spare.
#[cfg(feature = "openapi")]
const TIME_ZONE_FORM: &str = "^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$";
#[cfg(feature = "openapi")]
const TIME_ZONE_MAX: usize = 64;

impl TimeZone {
    pub fn parse(raw: impl Into<String>) -> Result<Self, (&'static str, String)> {
        let raw = raw.into();
        match raw.parse::<chrono_tz::Tz>() {
            Ok(_) => Ok(TimeZone(raw)),
            Err(_) => Err(bad_format(
                "must be an IANA time zone such as Europe/Berlin",
            )),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl serde::Serialize for TimeZone {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl From<TimeZone> for String {
    fn from(v: TimeZone) -> String {
        v.0
    }
}

impl<'de> Deserialize<'de> for TimeZone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        TimeZone::parse(raw).map_err(|(code, message)| invalid(code, &message))
    }
}

#[cfg(feature = "openapi")]
impl PartialSchema for TimeZone {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "An IANA time zone name of the tz database, such as `Europe/Berlin`, \
                 `America/New_York` or `UTC`; a name the database does not hold is refused \
                 (422 `invalid_format`).",
            ))
            .max_length(Some(TIME_ZONE_MAX))
            .pattern(Some(TIME_ZONE_FORM))
            .examples(["Europe/Berlin"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl ToSchema for TimeZone {}

/// Text from a third party (a webhook receiver's answer, a provider's error), made fit to
/// store: NUL, which Postgres refuses, becomes U+FFFD, and the text is cut to `max_chars`.
pub fn storable(raw: &str, max_chars: usize) -> String {
    raw.chars()
        .take(max_chars)
        .map(|c| {
            if c == '\0' {
                char::REPLACEMENT_CHARACTER
            } else {
                c
            }
        })
        .collect()
}

/// A storage key segment made from a file name: ASCII letters, digits, `.`, `_` and `-`;
/// runs of anything else become one `_`; no leading dots; at most 100 characters, the
/// extension kept.
pub fn safe_key_segment(filename: &str) -> String {
    let mut out = String::new();
    for c in filename.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let out = out.trim_start_matches('.');
    let out = if out.len() > 100 {
        match out.rfind('.').filter(|dot| out.len() - dot <= 16) {
            Some(dot) => format!("{}{}", &out[..100 - (out.len() - dot)], &out[dot..]),
            None => out[..100].to_owned(),
        }
    } else {
        out.to_owned()
    };
    if out.trim_matches(['_', '.']).is_empty() {
        "file".to_owned()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_key_segments() {
        for (name, want) in [
            ("invoice 2026.pdf", "invoice_2026.pdf"),
            ("../../etc/passwd", "_.._etc_passwd"),
            (".env", "env"),
            ("Übersicht – März.xlsx", "_bersicht_M_rz.xlsx"),
            ("???", "file"),
            ("..", "file"),
        ] {
            assert_eq!(safe_key_segment(name), want, "{name}");
        }
        let long = format!("{}.jpeg", "a".repeat(300));
        let seg = safe_key_segment(&long);
        assert_eq!(seg.len(), 100);
        assert!(seg.ends_with("a.jpeg"));
    }

    #[test]
    fn third_party_text_is_made_storable() {
        assert_eq!(storable("ok\0k", 10), "ok\u{fffd}k");
        assert_eq!(storable("é".repeat(5).as_str(), 3), "ééé");
    }

    #[test]
    fn nul_is_refused_by_every_text_field() {
        assert_eq!(Name::parse("a\0b").unwrap_err().0, "invalid_format");
        assert_eq!(ShortText::parse("\0").unwrap_err().0, "invalid_format");
        assert_eq!(Filename::parse("a\0.pdf").unwrap_err().0, "invalid_format");
        assert!(ShortText::parse("").is_ok());
    }

    #[test]
    fn filenames_and_content_types() {
        assert_eq!(
            Filename::parse(" report.pdf ").unwrap().as_str(),
            "report.pdf"
        );
        for bad in ["", "  ", "a\nb", "a\u{85}b"] {
            assert!(Filename::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            ContentType::parse("Image/PNG").unwrap().as_str(),
            "image/png"
        );
        for bad in [
            "png",
            "image/",
            "/png",
            "text/plain; charset=utf-8",
            "image/p ng",
            " image/png",
        ] {
            assert!(ContentType::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn emails() {
        for ok in ["ada@example.com", "a.b+c@mail.example.org"] {
            assert!(Email::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@example",
            "a b@example.com",
            "a@b@c.com",
            "ada@example..com",
            " ada@example.com",
            "ada@example.com\n",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn phones_become_e164() {
        assert_eq!(
            Phone::parse("+49 151 1234-5678").unwrap().as_str(),
            "+4915112345678"
        );
        assert_eq!(
            Phone::parse("(+1) 555.010.9999").unwrap().as_str(),
            "+15550109999"
        );
        for bad in [
            "015112345678",
            "+12",
            "+49 151 abc",
            "+0151123456",
            "+1234567890123456",
        ] {
            assert!(Phone::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_trimmed_and_bounded_as_given() {
        assert_eq!(Name::parse("  Ada ").unwrap().as_str(), "Ada");
        assert_eq!(Name::parse("   ").unwrap_err().0, "blank");
        assert_eq!(Name::parse("\u{3000}\t").unwrap_err().0, "blank");
        assert_eq!(Name::parse("x".repeat(201)).unwrap_err().0, "too_long");
        assert_eq!(
            Name::parse(format!(" {}", "x".repeat(200))).unwrap_err().0,
            "too_long",
            "the length counts what was sent"
        );
        assert!(
            Name::parse("é".repeat(200)).is_ok(),
            "length counts characters, not bytes"
        );
        assert!(Name::parse("\u{1c}").is_ok(), "not whitespace to str::trim");
    }

    #[test]
    fn urls_need_a_host_name() {
        for ok in [
            "https://example.com/avatar.png",
            "http://localhost:8080/a?b=c#d",
            "https://example.com:65535",
            "https://cdn-1.example.co.uk",
        ] {
            assert!(HttpUrl::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "ftp://example.com",
            "https://",
            "https://1.2.3.4/x",
            "https://example.com/a b",
            " https://example.com",
            "https://example.com:65536",
        ] {
            assert!(HttpUrl::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slugs_colors_locales_currencies_zones() {
        assert!(Slug::parse("getting-started-2").is_ok());
        assert!(Slug::parse("Getting Started").is_err());
        assert!(Slug::parse("a--b").is_err());
        assert!(Slug::parse("a\n").is_err(), "no trailing newline");
        assert_eq!(Color::parse("#ABCDEF").unwrap().as_str(), "#abcdef");
        assert!(Color::parse("red").is_err());
        assert!(Locale::parse("pt-BR").is_ok());
        assert!(Locale::parse("english!").is_err());
        assert_eq!(Currency::parse("eur").unwrap().as_str(), "EUR");
        assert!(Currency::parse(" eur").is_err());
        assert!(TimeZone::parse("Europe/Berlin").is_ok());
        assert!(TimeZone::parse("Mars/Olympus").is_err());
    }

    #[cfg(feature = "openapi")]
    #[test]
    fn every_time_zone_has_the_documented_form() {
        let form = regex::Regex::new(TIME_ZONE_FORM).unwrap();
        for tz in chrono_tz::TZ_VARIANTS {
            let name = tz.name();
            assert!(form.is_match(name), "{name}");
            assert!(name.len() <= TIME_ZONE_MAX, "{name}");
        }
    }

    #[test]
    fn every_pattern_compiles_in_the_dialect_clients_read() {
        // The Rust engine accepts them (each type compiles its own on first use); these also
        // keep to the ECMA-262 subset JSON Schema names: classes, \uXXXX escapes, anchors.
        for p in [
            TEXT,
            NOT_BLANK,
            EMAIL,
            PHONE,
            SLUG,
            COLOR,
            LOCALE,
            CURRENCY,
            HTTP_URL,
            HTTPS_URL,
            WEBHOOK_URL,
            ATTRIBUTE_KEY,
            FILENAME,
            CONTENT_TYPE,
        ] {
            assert!(Regex::new(p).is_ok(), "{p}");
            assert!(p.starts_with('^') && p.ends_with('$'), "{p}");
            assert!(
                !p.contains(r"\s") && !p.contains(r"\d") && !p.contains(r"\w"),
                "{p}"
            );
        }
    }
}
