//! The parts of the document that depend on how this deployment is configured, so the served
//! document states the rules the running service applies: which webhook URLs it accepts, and
//! the uploads it takes (size, content types, and which `fileType` goes with which type).

use parley_config::Config;
use parley_domain::files::UploadSettings;
use parley_types::fields::{CONTENT_TYPE, HTTPS_URL, WEBHOOK_URL};
use serde_json::{Value, json};

/// What the document needs to know of the configuration.
#[derive(Debug, Clone)]
pub struct Deployment {
    pub allow_private_webhooks: bool,
    pub uploads: UploadSettings,
}

impl Deployment {
    pub fn of(config: &Config) -> Self {
        Deployment {
            allow_private_webhooks: config.webhooks.allow_private,
            uploads: config.uploads.clone(),
        }
    }

    /// The defaults, for `parley-api openapi` run without configuration.
    pub fn defaults() -> Self {
        let config = Config::from_lookup(|k| match k {
            "DATABASE_URL" => Some("postgres://localhost/parley".to_owned()),
            "REDIS_URL" => Some("redis://localhost".to_owned()),
            _ => None,
        })
        .expect("the defaults are a valid configuration");
        Deployment::of(&config)
    }
}

pub fn apply(doc: &mut Value, d: &Deployment) {
    let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if let Some(url) = schemas.get_mut("WebhookUrl") {
        url["pattern"] = json!(if d.allow_private_webhooks {
            WEBHOOK_URL
        } else {
            HTTPS_URL
        });
    }
    if let Some(presign) = schemas.get_mut("PresignUpload") {
        presign["properties"]["fileSize"]["maximum"] = json!(d.uploads.max_bytes);
        presign["allOf"] = json!([{"anyOf": file_type_branches(&d.uploads)}]);
    }
}

/// One branch per `fileType`: `document` and `other` take any allowed type, `image`, `video`
/// and `audio` the allowed types of their family. A family with no allowed type has no branch.
fn file_type_branches(uploads: &UploadSettings) -> Vec<Value> {
    let branch = |file_types: &[&str], family: Option<&str>| {
        let allowed: Vec<&String> = uploads
            .content_types
            .iter()
            .filter(|t| family.is_none_or(|f| t.split('/').next() == Some(f)))
            .collect();
        (!allowed.is_empty()).then(|| {
            json!({
                "properties": {
                    "fileType": {"enum": file_types},
                    "contentType": {"pattern": allowed_pattern(&allowed)},
                }
            })
        })
    };
    [
        branch(&["document", "other"], None),
        branch(&["image"], Some("image")),
        branch(&["video"], Some("video")),
        branch(&["audio"], Some("audio")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A pattern for the allowed content types, without case (the API lowercases them): exact
/// types letter for letter, `type/*` as the family and any subtype token.
fn allowed_pattern(allowed: &[&String]) -> String {
    let token = CONTENT_TYPE
        .trim_start_matches('^')
        .split('/')
        .next()
        .unwrap_or("[A-Za-z0-9]+");
    let alternatives: Vec<String> = allowed
        .iter()
        .map(|t| match t.strip_suffix("/*") {
            Some(family) => format!("{}/{token}", caseless(family)),
            None => caseless(t),
        })
        .collect();
    format!("^({})$", alternatives.join("|"))
}

/// `text` as a pattern matching it in any case.
fn caseless(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_lowercase(), c.to_ascii_uppercase())
            } else if c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '!' | '#' | '&') {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_types_become_a_pattern_without_case() {
        let types = [
            "image/png".to_owned(),
            "video/*".to_owned(),
            "image/svg+xml".to_owned(),
        ];
        let refs: Vec<&String> = types.iter().collect();
        let re = regex::Regex::new(&allowed_pattern(&refs)).unwrap();
        for ok in [
            "image/png",
            "Image/PNG",
            "video/mp4",
            "VIDEO/x-matroska",
            "image/svg+xml",
        ] {
            assert!(re.is_match(ok), "{ok}");
        }
        for bad in [
            "image/jpeg",
            "video/",
            "audio/mpeg",
            "image/svgxxml",
            "image/png2",
        ] {
            assert!(!re.is_match(bad), "{bad}");
        }
    }

    #[test]
    fn each_file_type_gets_its_family() {
        let mut d = Deployment::defaults();
        d.uploads.content_types = vec!["image/png".into(), "application/pdf".into()];
        let branches = file_type_branches(&d.uploads);
        assert_eq!(
            branches.len(),
            2,
            "no video or audio type is allowed: no branch"
        );
        assert_eq!(
            branches[1]["properties"]["fileType"]["enum"],
            json!(["image"])
        );
    }
}
