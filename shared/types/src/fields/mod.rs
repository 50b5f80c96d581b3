//! Validated field types. Request bodies are deserialized straight into these, so a value that
//! breaks a field rule never gets past the JSON extractor, and the rule is reported with the
//! field's path (`email`, `tagIds[1]`). Each type also describes itself in the OpenAPI document,
//! with exactly the rule it applies: text in [`text`], numbers in [`numbers`].

mod numbers;
mod text;

pub use numbers::*;
pub use text::*;

use serde::{Deserialize, Deserializer};

/// Marks a serde error message as ours, carrying a rule code before the text.
pub(crate) const RULE_MARK: char = '\u{1}';

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

/// `base`, or `base-2`, `base-3`, ... whichever is the first not in `taken`. Linear in
/// `taken`, however many of them follow the pattern.
pub fn next_free_slug(base: &str, taken: &[String]) -> String {
    let taken: std::collections::HashSet<&str> = taken.iter().map(String::as_str).collect();
    if !taken.contains(base) {
        return base.to_owned();
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|s| !taken.contains(s.as_str()))
        .unwrap_or_else(|| base.to_owned())
}

#[cfg(feature = "openapi")]
/// The document's schema of a list of 1 to `max_items` strings, each one of `choices` (the
/// parser checks each item against the same choices).
pub fn choice_list<I: IntoIterator<Item = V>, V: Into<serde_json::Value>>(
    choices: I,
    max_items: usize,
) -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .items(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(choices)),
        )
        .min_items(Some(1))
        .max_items(Some(max_items))
        .build()
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

/// A deserializer that reads a struct from a JSON object only: serde's derived structs also
/// read a JSON array, by position, which the document does not allow (`[null, null]` would be
/// a `FrequencyCaps`). It streams (nothing is read into a tree first), so the paths of errors
/// stay whole. Used by [`objects_only!`](crate::objects_only).
pub struct ObjectOnly<D>(pub D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for ObjectOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(v)
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// `Deserialize` (and with `serialize:`, `Serialize`) for structs declared with
/// `#[serde(remote = "Self")]`: read from a JSON object only ([`ObjectOnly`]).
#[macro_export]
macro_rules! objects_only {
    (serialize: $($t:ty),+ $(,)?) => {
        $(
            $crate::objects_only!($t);
            impl serde::Serialize for $t {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    <$t>::serialize(self, s)
                }
            }
        )+
    };
    ($($t:ty),+ $(,)?) => {
        $(
            impl<'de> serde::Deserialize<'de> for $t {
                fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    <$t>::deserialize($crate::fields::ObjectOnly(d))
                }
            }
        )+
    };
}

/// An array of at most `N` elements, refused as soon as it holds one more (before the rest is
/// read): for arrays whose bound is small and whose elements are costly.
pub fn at_most<'de, D, T, const N: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Bounded<T, const N: usize>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>, const N: usize> serde::de::Visitor<'de> for Bounded<T, N> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "an array of at most {N} elements")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element()? {
                if out.len() == N {
                    return Err(invalid(
                        "out_of_range",
                        &format!("must hold at most {N} items"),
                    ));
                }
                out.push(item);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Bounded::<T, N>(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

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
