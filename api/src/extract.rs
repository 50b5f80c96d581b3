//! Extractors that turn every malformed request into the contract's error: JSON bodies with
//! field paths in `details`, query strings, path ids, and the calling organization.

use crate::error::{ApiError, AppError};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use parley_domain::Actor;
use parley_types::error::FieldError;
use parley_types::fields::classify_serde_message;
use parley_types::ids::OrgId;
use parley_types::list::{PageParams, PageRequest};
use serde::de::DeserializeOwned;
use uuid::Uuid;

/// A JSON body deserialized into validated field types.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send + 'static> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return Err(AppError::UnsupportedMediaType.into());
        }
        let bytes = RawBody::from_request(req, state).await?.0;
        // Parsing a long body (a broadcast's audience) takes a while: on a blocking thread,
        // so it holds up no other request and no probe.
        if bytes.len() > PARSE_INLINE_BYTES {
            return tokio::task::spawn_blocking(move || parse_object(&bytes))
                .await
                .map_err(|e| AppError::Internal(anyhow::anyhow!("body parser stopped: {e}")))?
                .map(Json)
                .map_err(ApiError);
        }
        parse_object(&bytes).map(Json).map_err(ApiError)
    }
}

/// Bodies longer than this are parsed off the async threads.
const PARSE_INLINE_BYTES: usize = 256 * 1024;

/// A body that must be a JSON object (serde would otherwise read a struct from an array).
fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first.is_some()
        && first != Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
    {
        return Err(AppError::validation(
            "body",
            "invalid_type",
            "the body must be a JSON object",
        ));
    }
    parse_json(bytes)
}

/// The raw bytes of a JSON body (for signatures), within the body limit.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return Err(AppError::UnsupportedMediaType.into());
        }
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(|rejection| {
                ApiError(if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    AppError::PayloadTooLarge
                } else {
                    AppError::InvalidJson(rejection.body_text())
                })
            })
    }
}

/// A request's `Content-Type`, or empty.
pub fn content_type(headers: &header::HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

fn is_json(value: Option<&header::HeaderValue>) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .is_some_and(is_json_type)
}

/// `application/json` or `application/<something>+json`, with any parameters.
pub fn is_json_type(mime: &str) -> bool {
    let essence = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, AppError> {
    // Syntax first, so a truncated body is 400 even when its start already has a wrong type.
    serde_json::from_slice::<serde::de::IgnoredAny>(bytes)
        .map_err(|e| AppError::InvalidJson(e.to_string()))?;
    // Then what no column can store, wherever it is (values of free-form objects included).
    if has_escaped_nul(bytes) {
        return Err(AppError::validation(
            nul_path(bytes).unwrap_or_else(|| "body".to_owned()),
            "invalid_format",
            "must not contain the NUL character (U+0000)",
        ));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // The syntax is known good here, so every error is about a field (serde_json reports
    // some type errors, such as a number where an enum is expected, as syntax errors).
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        match inner.classify() {
            serde_json::error::Category::Syntax if !path.is_empty() && path != "." => field_error(
                &path,
                "invalid type: expected a value of the documented type",
            ),
            _ => field_error(&path, &inner.to_string()),
        }
    })?;
    de.end().map_err(|e| AppError::InvalidJson(e.to_string()))?;
    Ok(value)
}

/// Whether valid JSON text holds a NUL: it can only be the escape `\u0000` inside a string or
/// a key. Every backslash outside a string is a syntax error, so in valid JSON each one starts
/// a two-character escape; one pass over the bytes.
fn has_escaped_nul(bytes: &[u8]) -> bool {
    let mut i = 0;
    while let Some(at) = bytes
        .get(i..)
        .and_then(|rest| rest.iter().position(|b| *b == b'\\'))
    {
        let escape = i + at;
        if bytes[escape + 1..].starts_with(b"u0000") {
            return true;
        }
        i = escape + 2;
    }
    false
}

/// Where the first NUL of a body is, as a field path (`metadata.note`, `tags[2]`), at most
/// [`MAX_PATH_CHARS`] long. Only run once a NUL is known to be there; linear: the path is
/// kept as borrowed segments and written out only for the value that holds the NUL.
fn nul_path(bytes: &[u8]) -> Option<String> {
    enum Seg<'a> {
        Key(&'a str),
        Index(usize),
    }
    fn write(segments: &[Seg<'_>], last: Option<&str>) -> String {
        let mut out = String::new();
        for seg in segments {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        if let Some(k) = last {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&k.replace('\0', "\u{fffd}"));
        }
        out.chars().take(MAX_PATH_CHARS).collect()
    }
    fn walk<'a>(v: &'a serde_json::Value, path: &mut Vec<Seg<'a>>) -> Option<String> {
        match v {
            serde_json::Value::String(s) => s.contains('\0').then(|| write(path, None)),
            serde_json::Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                path.push(Seg::Index(i));
                let found = walk(item, path);
                path.pop();
                found
            }),
            serde_json::Value::Object(map) => map.iter().find_map(|(k, item)| {
                if k.contains('\0') {
                    return Some(write(path, Some(k)));
                }
                path.push(Seg::Key(k));
                let found = walk(item, path);
                path.pop();
                found
            }),
            _ => None,
        }
    }
    let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    walk(&value, &mut Vec::new()).filter(|p| !p.is_empty())
}

/// The longest field path an error names.
const MAX_PATH_CHARS: usize = 200;

/// A 422 for a serde error at `path` (`.` is the root).
fn field_error(path: &str, raw: &str) -> AppError {
    let (code, message, missing) = classify_serde_message(raw);
    let field = match (path, missing) {
        (".", Some(name)) => name,
        (_, Some(name)) => format!("{path}.{name}"),
        (".", None) => "body".to_owned(),
        (_, None) => path.to_owned(),
    };
    AppError::Validation(vec![FieldError::new(field, code, message)])
}

/// Query parameters deserialized into `T`; a bad value is a 422 naming the parameter.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parse_query(parts.uri.query().unwrap_or(""))
            .map(Query)
            .map_err(ApiError)
    }
}

pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, AppError> {
    // No column can store NUL; refused in any parameter, before a filter could meet it.
    if let Some((name, _)) =
        form_urlencoded(query).find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        return Err(AppError::validation(
            name.replace('\0', "\u{fffd}"),
            "invalid_format",
            "must not contain the NUL character (U+0000)",
        ));
    }
    let de = serde_urlencoded::Deserializer::new(form_urlencoded(query));
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        field_error(&path, &err.into_inner().to_string())
    })
}

fn form_urlencoded(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// `page`, `pageSize`, `cursor` and `sort`, validated.
pub struct Paging(pub PageRequest);

impl<S: Send + Sync> FromRequestParts<S> for Paging {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(params) = Query::<PageParams>::from_request_parts(parts, state).await?;
        PageRequest::try_from(params).map(Paging).map_err(ApiError)
    }
}

/// Path parameters; an id that does not parse names no record, so it is a 404.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Path(v))
            .map_err(|_| ApiError(AppError::NotFound))
    }
}

/// The calling organization and key, set by the authentication middleware.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub org_id: OrgId,
    pub key_id: Uuid,
    pub key_name: String,
    pub scopes: Vec<String>,
}

impl Tenant {
    pub fn actor(&self) -> Actor {
        Actor::api_key(self.key_id, &self.key_name)
    }

    /// The caller, as the use cases know it.
    pub fn caller(&self) -> parley_usecases::Caller {
        parley_usecases::Caller {
            org_id: self.org_id,
            key_id: self.key_id,
            key_name: self.key_name.clone(),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Tenant>()
            .cloned()
            .ok_or(ApiError(AppError::Unauthorized))
    }
}

/// The operator calling `/admin/v1`, by name (set by `middleware::operator_auth`).
#[derive(Debug, Clone)]
pub struct Operator(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Operator>()
            .cloned()
            .ok_or(ApiError(AppError::Unauthorized))
    }
}

/// The ticket whose access token a request sent instead of an API key (to read its SLA),
/// checked by `middleware::auth`.
#[derive(Debug, Clone)]
pub struct TicketAccess {
    pub ticket: Box<parley_domain::tickets::Ticket>,
}

/// Who reads a ticket's SLA: a key of its organization, or the ticket's access token.
pub enum TicketReader {
    Key(Tenant),
    Token(TicketAccess),
}

impl<S: Send + Sync> FromRequestParts<S> for TicketReader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        if let Some(t) = parts.extensions.get::<Tenant>() {
            return Ok(TicketReader::Key(t.clone()));
        }
        parts
            .extensions
            .get::<TicketAccess>()
            .cloned()
            .map(TicketReader::Token)
            .ok_or(ApiError(AppError::Unauthorized))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Body {
        name: parley_types::fields::Name,
        tag_ids: Option<Vec<Uuid>>,
    }

    fn details(err: AppError) -> (String, String) {
        match err {
            AppError::Validation(v) => (v[0].field.clone(), v[0].code.clone()),
            other => panic!("not a validation error: {other:?}"),
        }
    }

    #[test]
    fn syntax_errors_are_invalid_json() {
        for bad in ["", "{", "{\"name\": }", "[1,", "{} trailing"] {
            assert!(
                matches!(
                    parse_json::<Body>(bad.as_bytes()),
                    Err(AppError::InvalidJson(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn field_errors_name_the_field() {
        let err = parse_json::<Body>(br#"{"tagIds": []}"#).unwrap_err();
        assert_eq!(details(err), ("name".into(), "required".into()));
        let err = parse_json::<Body>(br#"{"name": 5}"#).unwrap_err();
        assert_eq!(details(err), ("name".into(), "invalid_type".into()));
        let err = parse_json::<Body>(br#"{"name": "a", "tagIds": ["x"]}"#).unwrap_err();
        assert_eq!(details(err).0, "tagIds[0]");
    }

    #[test]
    fn nul_anywhere_in_a_body_is_refused_with_its_path() {
        let err = parse_json::<Body>(br#"{"name": "a\u0000b"}"#).unwrap_err();
        assert_eq!(details(err), ("name".into(), "invalid_format".into()));
        let err = parse_json::<serde_json::Value>(br#"{"m": {"k": ["x", "\u0000"]}}"#).unwrap_err();
        assert_eq!(details(err).0, "m.k[1]");
        let err = parse_json::<serde_json::Value>(br#"{"\u0000": 1}"#).unwrap_err();
        assert_eq!(details(err).0, "\u{fffd}");
        // An escaped backslash followed by the text u0000 is no NUL.
        assert!(parse_json::<Body>(br#"{"name": "a\\u0000"}"#).is_ok());
        assert!(!has_escaped_nul(br#"{"a": "\\\\u0000"}"#));
        assert!(has_escaped_nul(br#"{"a": "\\\u0000"}"#));
    }

    #[test]
    fn nul_in_a_query_parameter_is_refused() {
        let err = parse_query::<PageParams>("cursor=a%00b").unwrap_err();
        assert_eq!(details(err), ("cursor".into(), "invalid_format".into()));
    }

    #[test]
    fn query_errors_name_the_parameter() {
        let err = parse_query::<PageParams>("pageSize=abc").unwrap_err();
        assert_eq!(details(err).0, "pageSize");
    }

    #[test]
    fn json_content_types() {
        let ok = |s: &'static str| is_json(Some(&header::HeaderValue::from_static(s)));
        assert!(ok("application/json"));
        assert!(ok("application/json; charset=utf-8"));
        assert!(ok("application/merge-patch+json"));
        assert!(!ok("text/plain"));
        assert!(!is_json(None));
    }
}
