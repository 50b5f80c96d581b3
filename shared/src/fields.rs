//! Validated field types. Request bodies are deserialized straight into these, so a value that
//! breaks a field rule never gets past the JSON extractor, and the rule is reported with the
//! field's path (`email`, `tagIds[1]`). Each type also describes itself in the OpenAPI document.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use utoipa::openapi::schema::{ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

/// Marks a serde error message as ours, carrying a rule code before the text.
const RULE_MARK: char = '\u{1}';

/// A serde error for a broken field rule: `code` becomes `details[].code`.
pub fn invalid<E: serde::de::Error>(code: &str, message: &str) -> E {
    E::custom(format!("{RULE_MARK}{code}{RULE_MARK}{message}"))
}

/// Turns a serde error message into a rule code and a client-facing message.
/// Returns the name of a missing field too, since serde reports that at the parent's path.
pub fn classify_serde_message(raw: &str) -> (&'static str, String, Option<String>) {
    let msg = match raw.rfind(" at line ") {
        Some(i) => &raw[..i],
        None => raw,
    };
    if let Some(rest) = msg.strip_prefix(RULE_MARK)
        && let Some((code, text)) = rest.split_once(RULE_MARK)
    {
        return (known_code(code), text.to_owned(), None);
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let name = rest.trim_end_matches('`').to_owned();
        return ("required", "is required".to_owned(), Some(name));
    }
    let code = if msg.starts_with("invalid type") {
        "invalid_type"
    } else if msg.starts_with("unknown variant")
        || msg.starts_with("invalid value")
        || msg.starts_with("invalid length")
    {
        "invalid_value"
    } else {
        "invalid"
    };
    (code, msg.to_owned(), None)
}

fn known_code(code: &str) -> &'static str {
    match code {
        "too_long" => "too_long",
        "blank" => "blank",
        "invalid_format" => "invalid_format",
        "out_of_range" => "out_of_range",
        _ => "invalid",
    }
}

type Rule = Result<String, (&'static str, String)>;

fn too_long(max: usize) -> (&'static str, String) {
    ("too_long", format!("must be at most {max} characters"))
}

fn bad_format(message: &str) -> (&'static str, String) {
    ("invalid_format", message.to_owned())
}

macro_rules! string_field {
    ($(#[$doc:meta])* $name:ident, max = $max:expr, rule = $rule:expr, example = $example:expr $(, pattern = $pattern:expr)? $(, format = $format:expr)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            pub const MAX_CHARS: usize = $max;

            pub fn parse(raw: impl Into<String>) -> Result<Self, (&'static str, String)> {
                let rule: fn(String) -> Rule = $rule;
                let value = rule(raw.into())?;
                if value.chars().count() > Self::MAX_CHARS {
                    return Err(too_long(Self::MAX_CHARS));
                }
                Ok($name(value))
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

        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                #[allow(unused_mut)]
                let mut schema = ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some($max))
                    .examples([$example]);
                $(schema = schema.pattern(Some($pattern));)?
                $(schema = schema.format(Some(SchemaFormat::Custom($format.to_owned())));)?
                schema.into()
            }
        }

        impl ToSchema for $name {}
    };
}

fn trimmed_non_blank(raw: String) -> Rule {
    let t = raw.trim();
    if t.is_empty() {
        return Err(("blank", "must not be blank".to_owned()));
    }
    Ok(t.to_owned())
}

fn as_given(raw: String) -> Rule {
    Ok(raw)
}

fn filename_rule(raw: String) -> Rule {
    let t = trimmed_non_blank(raw)?;
    if t.chars().any(char::is_control) || t == "." || t == ".." {
        return Err(bad_format("must be a file name without control characters"));
    }
    Ok(t)
}

fn content_type_rule(raw: String) -> Rule {
    let t = raw.trim().to_ascii_lowercase();
    let token = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&^_.+-".contains(c))
    };
    match t.split_once('/') {
        Some((kind, sub)) if token(kind) && token(sub) => Ok(t),
        _ => Err(bad_format(
            "must be a MIME type such as application/pdf, without parameters",
        )),
    }
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

fn email_rule(raw: String) -> Rule {
    let t = raw.trim();
    let Some((local, domain)) = t.split_once('@') else {
        return Err(bad_format(
            "must be an email address such as ada@example.com",
        ));
    };
    let valid = !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
        && !t.chars().any(|c| c.is_whitespace() || c.is_control());
    if !valid {
        return Err(bad_format(
            "must be an email address such as ada@example.com",
        ));
    }
    Ok(t.to_owned())
}

/// Phone numbers are kept in E.164: `+` and 7 to 15 digits; spaces, dots, dashes and
/// parentheses are dropped.
fn phone_rule(raw: String) -> Rule {
    let compact: String = raw
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let digits = compact.strip_prefix('+').unwrap_or("");
    let valid = (7..=15).contains(&digits.len())
        && digits.chars().all(|c| c.is_ascii_digit())
        && !digits.starts_with('0');
    if !valid {
        return Err(bad_format(
            "must be an international phone number such as +4915112345678",
        ));
    }
    Ok(compact)
}

fn slug_rule(raw: String) -> Rule {
    let valid = !raw.is_empty()
        && raw.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        });
    if !valid {
        return Err(bad_format(
            "must be lowercase letters and digits joined by single dashes",
        ));
    }
    Ok(raw)
}

fn color_rule(raw: String) -> Rule {
    let hex = raw.strip_prefix('#').unwrap_or("");
    if !(hex.len() == 3 || hex.len() == 6) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad_format("must be a hex color such as #1a73e8"));
    }
    Ok(raw.to_ascii_lowercase())
}

fn locale_rule(raw: String) -> Rule {
    let mut parts = raw.split(['-', '_']);
    let lang_ok = parts
        .next()
        .is_some_and(|l| (2..=3).contains(&l.len()) && l.chars().all(|c| c.is_ascii_alphabetic()));
    let rest_ok =
        parts.all(|p| (2..=8).contains(&p.len()) && p.chars().all(|c| c.is_ascii_alphanumeric()));
    if !lang_ok || !rest_ok {
        return Err(bad_format("must be a language tag such as en or pt-BR"));
    }
    Ok(raw)
}

fn currency_rule(raw: String) -> Rule {
    let upper = raw.trim().to_ascii_uppercase();
    if upper.len() != 3 || !upper.chars().all(|c| c.is_ascii_uppercase()) {
        return Err(bad_format(
            "must be a three-letter ISO 4217 code such as EUR",
        ));
    }
    Ok(upper)
}

fn url_rule(raw: String) -> Rule {
    match url::Url::parse(raw.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            Ok(raw.trim().to_owned())
        }
        _ => Err(bad_format("must be an http or https URL")),
    }
}

fn attribute_key_rule(raw: String) -> Rule {
    let mut chars = raw.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !valid {
        return Err(bad_format(
            "must start with a lowercase letter and hold only lowercase letters, digits and _",
        ));
    }
    Ok(raw)
}

fn timezone_rule(raw: String) -> Rule {
    match raw.parse::<chrono_tz::Tz>() {
        Ok(_) => Ok(raw),
        Err(_) => Err(bad_format(
            "must be an IANA time zone such as Europe/Berlin",
        )),
    }
}

string_field!(
    /// A display name: trimmed, not blank, at most 200 characters.
    Name, max = 200, rule = trimmed_non_blank, example = "Ada Lovelace"
);
string_field!(
    /// A short label (a source, a category, a type): trimmed, not blank, at most 100 characters.
    Label, max = 100, rule = trimmed_non_blank, example = "website"
);
string_field!(
    /// Free text of at most 255 characters.
    ShortText, max = 255, rule = as_given, example = "Short text"
);
string_field!(
    /// Free text of at most 5,000 characters.
    Text, max = 5_000, rule = as_given, example = "A longer description."
);
string_field!(
    /// Free text of at most 100,000 characters (FAQ content, template bodies).
    LongText, max = 100_000, rule = as_given, example = "Hello {{contact.name}}, your order {{1}} has shipped."
);
string_field!(
    /// An email address.
    Email, max = 254, rule = email_rule, example = "ada@example.com", format = "email"
);
string_field!(
    /// A phone number in E.164 form (`+` and 7 to 15 digits); separators are dropped.
    Phone, max = 16, rule = phone_rule, example = "+4915112345678"
);
string_field!(
    /// Lowercase letters and digits joined by single dashes.
    Slug, max = 100, rule = slug_rule, example = "getting-started", pattern = "^[a-z0-9]+(-[a-z0-9]+)*$"
);
string_field!(
    /// A hex color, `#rgb` or `#rrggbb`.
    Color, max = 7, rule = color_rule, example = "#1a73e8", pattern = "^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"
);
string_field!(
    /// A language tag such as `en` or `pt-BR`.
    Locale, max = 35, rule = locale_rule, example = "en"
);
string_field!(
    /// A three-letter ISO 4217 currency code.
    Currency, max = 3, rule = currency_rule, example = "EUR", pattern = "^[A-Za-z]{3}$"
);
string_field!(
    /// An http or https URL.
    HttpUrl, max = 2_048, rule = url_rule, example = "https://example.com/avatar.png", format = "uri"
);
string_field!(
    /// A machine key: a lowercase letter, then lowercase letters, digits and `_`.
    AttributeKey, max = 64, rule = attribute_key_rule, example = "order_number", pattern = "^[a-z][a-z0-9_]*$"
);
string_field!(
    /// A file's name as the client gives it: trimmed, not blank, no control characters, not
    /// `.` or `..`. The storage key uses a safe form of it ([`safe_key_segment`]).
    Filename, max = 255, rule = filename_rule, example = "invoice-2026-11.pdf"
);
string_field!(
    /// A MIME type `type/subtype`, lowercased, without parameters.
    ContentType, max = 127, rule = content_type_rule, example = "application/pdf", pattern = "^[a-z0-9!#$&^_.+-]+/[a-z0-9!#$&^_.+-]+$"
);
string_field!(
    /// An IANA time zone name.
    TimeZone, max = 64, rule = timezone_rule, example = "Europe/Berlin"
);

/// A position in a hand-ordered list, 0 to 1,000,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DisplayOrder(i32);

impl DisplayOrder {
    pub const MAX: i32 = 1_000_000;

    pub fn get(self) -> i32 {
        self.0
    }
}

impl<'de> Deserialize<'de> for DisplayOrder {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        bounded_i32(d, 0, Self::MAX).map(DisplayOrder)
    }
}

impl PartialSchema for DisplayOrder {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(0))
            .maximum(Some(Self::MAX))
            .examples([1])
            .into()
    }
}

impl ToSchema for DisplayOrder {}

/// An amount of money: from 0, rounded to cents.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Money(f64);

impl Money {
    pub const MAX: f64 = 1e14;

    pub fn get(self) -> f64 {
        self.0
    }
}

impl<'de> Deserialize<'de> for Money {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = f64::deserialize(d)?;
        if !v.is_finite() || !(0.0..Self::MAX).contains(&v) {
            return Err(invalid(
                "out_of_range",
                "must be a number from 0 to 99999999999999.99",
            ));
        }
        Ok(Money((v * 100.0).round() / 100.0))
    }
}

impl PartialSchema for Money {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::Number)
            .minimum(Some(0))
            .exclusive_maximum(Some(Self::MAX))
            .examples([12500.5])
            .into()
    }
}

impl ToSchema for Money {}

/// For update bodies: a field that may be absent (left alone) but not `null`.
pub fn non_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// For update bodies: absent (`None`, left alone), `null` (`Some(None)`, cleared) or a value.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A whole number within bounds, for `displayOrder` and the like.
pub fn bounded_i32<'de, D: Deserializer<'de>>(d: D, min: i32, max: i32) -> Result<i32, D::Error> {
    let v = i64::deserialize(d)?;
    if v < i64::from(min) || v > i64::from(max) {
        return Err(D::Error::custom(format!(
            "{RULE_MARK}out_of_range{RULE_MARK}must be between {min} and {max}"
        )));
    }
    Ok(v as i32)
}

/// The longest SLA target or warning: a year.
pub const MAX_SLA_SECONDS: i32 = 366 * 24 * 3600;

/// An SLA target in seconds: 1 to a year.
pub fn target_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    bounded_i32(d, 1, MAX_SLA_SECONDS)
}

/// An SLA warning threshold in seconds: 0 (no warning) to a year.
pub fn warning_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    bounded_i32(d, 0, MAX_SLA_SECONDS)
}

/// Derives a slug from a name: lowercase ASCII letters and digits, other runs become one dash.
pub fn slugify(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        let c = fold_accent(c);
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut slug = out.trim_end_matches('-').to_owned();
    slug.truncate(80);
    let slug = slug.trim_end_matches('-').to_owned();
    if slug.is_empty() {
        "item".to_owned()
    } else {
        slug
    }
}

/// `base`, or `base-2`, `base-3`, ... whichever is the first not in `taken`.
pub fn next_free_slug(base: &str, taken: &[String]) -> String {
    if !taken.iter().any(|s| s == base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|s| !taken.contains(s))
        .unwrap_or_else(|| base.to_owned())
}

/// Refuses a list longer than `max` items.
pub fn check_len(field: &str, len: usize, max: usize) -> Result<(), crate::error::AppError> {
    if len > max {
        return Err(crate::error::AppError::validation(
            field,
            "too_many",
            format!("at most {max} items"),
        ));
    }
    Ok(())
}

fn fold_accent(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' => 'a',
        'ç' => 'c',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' => 'i',
        'ñ' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        'ý' | 'ÿ' => 'y',
        other => other,
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
    fn filenames_and_content_types() {
        assert!(Filename::parse(" report.pdf ").is_ok());
        for bad in ["", "  ", "..", "a\nb"] {
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
        ] {
            assert!(ContentType::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn emails() {
        for ok in ["ada@example.com", " a.b+c@mail.example.org "] {
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
        ] {
            assert!(Email::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn phones_become_e164() {
        assert_eq!(
            Phone::parse("+49 151 1234-5678").unwrap().as_str(),
            "+4915112345678"
        );
        for bad in ["015112345678", "+12", "+49 151 abc", "+0151123456"] {
            assert!(Phone::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(Name::parse("  Ada ").unwrap().as_str(), "Ada");
        assert_eq!(Name::parse("   ").unwrap_err().0, "blank");
        assert_eq!(Name::parse("x".repeat(201)).unwrap_err().0, "too_long");
        assert!(
            Name::parse("é".repeat(200)).is_ok(),
            "length counts characters, not bytes"
        );
    }

    #[test]
    fn slugs_colors_locales_currencies() {
        assert!(Slug::parse("getting-started-2").is_ok());
        assert!(Slug::parse("Getting Started").is_err());
        assert!(Slug::parse("a--b").is_err());
        assert_eq!(Color::parse("#ABCDEF").unwrap().as_str(), "#abcdef");
        assert!(Color::parse("red").is_err());
        assert!(Locale::parse("pt-BR").is_ok());
        assert!(Locale::parse("english!").is_err());
        assert_eq!(Currency::parse("eur").unwrap().as_str(), "EUR");
        assert!(TimeZone::parse("Europe/Berlin").is_ok());
        assert!(TimeZone::parse("Mars/Olympus").is_err());
    }

    #[test]
    fn the_first_free_slug_is_chosen() {
        assert_eq!(next_free_slug("faq", &[]), "faq");
        let taken = vec!["faq".to_owned(), "faq-2".to_owned(), "faq-4".to_owned()];
        assert_eq!(next_free_slug("faq", &taken), "faq-3");
    }

    #[test]
    fn slugify_names() {
        assert_eq!(slugify("Getting Started!"), "getting-started");
        assert_eq!(slugify("  Über   uns  "), "uber-uns");
        assert_eq!(slugify("!!!"), "item");
    }

    #[test]
    fn serde_messages_are_classified() {
        let err = serde_json::from_str::<Email>("\"nope\"").unwrap_err();
        let (code, message, _) = classify_serde_message(&err.to_string());
        assert_eq!(code, "invalid_format");
        assert!(message.starts_with("must be an email"));
        let (code, _, missing) = classify_serde_message("missing field `name` at line 1 column 2");
        assert_eq!((code, missing.as_deref()), ("required", Some("name")));
        let (code, _, _) = classify_serde_message("invalid type: integer `1`, expected a string");
        assert_eq!(code, "invalid_type");
    }
}
