//! Extractors that turn every malformed request into the contract's error: JSON bodies with
//! field paths in `details`, query strings, path ids, and the calling organization.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use parley_shared::domain::Actor;
use parley_shared::error::{AppError, FieldError};
use parley_shared::fields::classify_serde_message;
use parley_shared::list::{PageParams, PageRequest};
use serde::de::DeserializeOwned;
use uuid::Uuid;

/// A JSON body deserialized into validated field types.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return Err(AppError::UnsupportedMediaType);
        }
        let bytes = RawBody::from_request(req, state).await?.0;
        // Every body is an object; serde would otherwise read a struct from an array.
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first.is_some()
            && first != Some(&b'{')
            && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_ok()
        {
            return Err(AppError::validation(
                "body",
                "invalid_type",
                "the body must be a JSON object",
            ));
        }
        parse_json(&bytes).map(Json)
    }
}

/// The raw bytes of a JSON body (for signatures), within the body limit.
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return Err(AppError::UnsupportedMediaType);
        }
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    AppError::PayloadTooLarge
                } else {
                    AppError::InvalidJson(rejection.body_text())
                }
            })
    }
}

fn is_json(value: Option<&header::HeaderValue>) -> bool {
    let Some(mime) = value.and_then(|v| v.to_str().ok()) else {
        return false;
    };
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
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        parse_query(parts.uri.query().unwrap_or("")).map(Query)
    }
}

fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, AppError> {
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
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let Query(params) = Query::<PageParams>::from_request_parts(parts, state).await?;
        PageRequest::try_from(params).map(Paging)
    }
}

/// Path parameters; an id that does not parse names no record, so it is a 404.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Path(v))
            .map_err(|_| AppError::NotFound)
    }
}

/// The calling organization and key, set by the authentication middleware.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub org_id: Uuid,
    pub key_id: Uuid,
    pub key_name: String,
    pub scopes: Vec<String>,
}

impl Tenant {
    pub fn actor(&self) -> Actor {
        Actor::api_key(self.key_id, &self.key_name)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        parts
            .extensions
            .get::<Tenant>()
            .cloned()
            .ok_or(AppError::Unauthorized)
    }
}

/// A ticket's access token, sent instead of an API key to endpoint 15.
#[derive(Debug, Clone)]
pub struct TicketToken(pub String);

/// Who reads a ticket's SLA: a key of its organization, or the ticket's access token.
pub enum TicketReader {
    Key(Tenant),
    Token(TicketToken),
}

impl<S: Send + Sync> FromRequestParts<S> for TicketReader {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        if let Some(t) = parts.extensions.get::<Tenant>() {
            return Ok(TicketReader::Key(t.clone()));
        }
        parts
            .extensions
            .get::<TicketToken>()
            .cloned()
            .map(TicketReader::Token)
            .ok_or(AppError::Unauthorized)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Body {
        name: parley_shared::fields::Name,
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
