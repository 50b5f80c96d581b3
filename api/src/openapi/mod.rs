//! The OpenAPI 3.1 document, generated from the handlers' annotations. The errors every
//! operation can answer with, and the scope it needs, are added here from the same rules the
//! middleware applies, so the document cannot drift from them.

use axum::http::Method;
use utoipa::openapi::path::{HttpMethod, Operation};
use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr};
use utoipa::{OpenApi as _, ToSchema};

mod compact;
mod deployment;
mod docs_page;
mod request_rules;

pub use deployment::Deployment;
pub use docs_page::router as docs_page;

use crate::envelope::ErrorEnvelope;
use crate::scopes::{SIGNED_PREFIX, TICKET_SLA_ROUTE, required_scope};
use parley_types::error::FieldError;

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Parley API",
        version = "1",
        description = "Customer engagement and support back end. Every response is the envelope \
            `{success, data, message, error, meta}`; authenticate with `Authorization: Bearer <API key>`. \
            Lists take `page`/`pageSize` (at most 100) or `cursor`, and `sort=createdAt|-createdAt`."
    ),
    components(schemas(ErrorEnvelope, FieldError))
)]
struct ApiDoc;

pub fn base() -> OpenApi {
    ApiDoc::openapi()
}

/// The document as served: the handlers' annotations merged into [`base`], completed by
/// [`finish`], then the rules every request shares and this deployment's own settings, then
/// made compact ([`compact`]). JSON,
/// because those use parts of JSON Schema utoipa's model does not hold (`propertyNames`,
/// `allOf` beside `properties`).
pub fn document(routes: OpenApi, deployment: &Deployment) -> serde_json::Value {
    let doc = finish(base().merge_from(routes));
    let mut json = serde_json::to_value(&doc).expect("the document serializes");
    request_rules::apply(&mut json);
    deployment::apply(&mut json, deployment);
    compact::apply(&mut json);
    json
}

const BEARER: &str = "bearer";
const SIGNATURE: &str = "channelSignature";
const TICKET_TOKEN: &str = "ticketAccessToken";
const OPERATOR: &str = "operatorToken";

fn error(description: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            Content::new(Some(Ref::from_schema_name(ErrorEnvelope::name()))),
        )
        .into()
}

fn method_of(m: &HttpMethod) -> Method {
    match m {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Put => Method::PUT,
        HttpMethod::Delete => Method::DELETE,
        HttpMethod::Options => Method::OPTIONS,
        HttpMethod::Head => Method::HEAD,
        HttpMethod::Patch => Method::PATCH,
        HttpMethod::Trace => Method::TRACE,
    }
}

fn add(op: &mut Operation, status: &str, description: &str) {
    op.responses
        .responses
        .entry(status.to_owned())
        .or_insert_with(|| error(description));
}

/// Adds the security schemes, and to each operation a unique id, its security (signature, or
/// key and scope) and the errors it can answer.
pub fn finish(mut api: OpenApi) -> OpenApi {
    add_security_schemes(api.components.get_or_insert_with(Default::default));
    for (path, item) in api.paths.paths.iter_mut() {
        for (method, op) in item.operations_mut() {
            qualify_operation_id(op);
            if path.starts_with(SIGNED_PREFIX) {
                secure_by_signature(op);
            } else if path.starts_with(crate::routes::admin::PREFIX) {
                secure_by_operator(op);
            } else {
                secure_by_key(op, path, &method);
                if method == HttpMethod::Post {
                    take_idempotency_key(op);
                    if crate::middleware::idempotency::SECRET_ROUTES.contains(&path.as_str()) {
                        op.responses.responses.insert(
                            "409".to_owned(),
                            error(
                                "A request with this `Idempotency-Key` is still running after \
                                 10 s (`idempotency_key_in_use`), or never answered or failed \
                                 with a 5xx, so may have done what it does \
                                 (`idempotency_outcome_unknown`), or succeeded already and \
                                 its answer showed a secret, which is not kept \
                                 (`idempotency_replay_secret`, `error.details.id` naming what \
                                 it made), or the state does not allow it",
                            ),
                        );
                    }
                }
            }
            add_shared_errors(op, path);
        }
    }
    api
}

fn add_security_schemes(components: &mut utoipa::openapi::Components) {
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("prl_<32 base62 characters>")
                .description(Some(
                    "An API key; see `/api/v1/api-keys` and `parley-api key create`.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        OPERATOR,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "The operator API's credential: `PARLEY_ADMIN_TOKEN`, or an operator key \
                     made by `parley-api admin key create`. Never a tenant's API key.",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        SIGNATURE,
        SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Header(
            utoipa::openapi::security::ApiKeyValue::with_description(
                "X-Parley-Signature",
                "`sha256=<lowercase hex HMAC-SHA256 of the raw body>` under the channel's secret",
            ),
        )),
    );
    components.add_security_scheme(
        TICKET_TOKEN,
        SecurityScheme::ApiKey(utoipa::openapi::security::ApiKey::Header(
            utoipa::openapi::security::ApiKeyValue::with_description(
                "X-Ticket-Access-Token",
                "A ticket's `accessToken`: reads that ticket's SLA, nothing else",
            ),
        )),
    );
}

/// Handler names repeat across resources; prefixed with the tag they are unique.
fn qualify_operation_id(op: &mut Operation) {
    let tag = op
        .tags
        .as_ref()
        .and_then(|t| t.first())
        .cloned()
        .unwrap_or_default();
    if let Some(id) = op.operation_id.as_mut() {
        *id = format!("{tag}.{id}");
    }
}

/// The receipt routes: a channel's signature instead of a key.
fn secure_by_signature(op: &mut Operation) {
    op.security = Some(vec![SecurityRequirement::new(
        SIGNATURE,
        Vec::<String>::new(),
    )]);
    add(
        op,
        "401",
        "Missing or wrong signature, or no secret configured (`unauthorized`)",
    );
    add(op, "404", "No such channel (`not_found`)");
}

/// The operator API (`/admin/v1`): the operator's credential.
fn secure_by_operator(op: &mut Operation) {
    op.security = Some(vec![SecurityRequirement::new(
        OPERATOR,
        Vec::<String>::new(),
    )]);
    add(
        op,
        "401",
        "No or unknown operator credential; a tenant's API key is not one (`unauthorized`)",
    );
    add(
        op,
        "429",
        "The client's address made too many failed authentications this minute \
         (`rate_limited`, with `Retry-After`)",
    );
}

/// Every other route: an API key with the scope the route requires.
fn secure_by_key(op: &mut Operation, path: &str, method: &HttpMethod) {
    let scope = required_scope(&method_of(method), path);
    let mut security = vec![SecurityRequirement::new(BEARER, [scope.clone()])];
    if path == TICKET_SLA_ROUTE {
        security.push(SecurityRequirement::new(TICKET_TOKEN, Vec::<String>::new()));
    }
    op.security = Some(security);
    add(op, "401", "No, unknown or revoked API key (`unauthorized`)");
    add(
        op,
        "403",
        &format!("The key lacks the scope `{scope}` (`forbidden`)"),
    );
    add(
        op,
        "429",
        "The key's daily limit is reached, the organization has as many requests running and \
         waiting as it may at once, or the client's address made too many failed \
         authentications this minute (`rate_limited`, with `Retry-After`)",
    );
}

/// `Idempotency-Key`, which every `POST` taking an API key honours (the `idempotency`
/// middleware), and its two errors.
fn take_idempotency_key(op: &mut Operation) {
    use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let schema = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(crate::middleware::idempotency::MAX_KEY_LEN))
        .pattern(Some("^[!-~]+$"));
    let parameter = ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(utoipa::openapi::Required::False)
        .description(Some(
            "Makes a retry safe: the same request with the same key within 24 hours gets the \
             first answer again (status and body, with `Idempotent-Replayed: true`) without \
             running again, also while the first is still running; where the first failed \
             with a 5xx or never answered, 409 `idempotency_outcome_unknown`; where its answer \
             showed a secret once (a new API key, a signing secret, an upload URL), 409 \
             `idempotency_replay_secret` naming what it made instead. 1 to 255 visible ASCII \
             characters, per organization.",
        ))
        .schema(Some(schema))
        .build();
    op.parameters
        .get_or_insert_with(Vec::new)
        .push(utoipa::openapi::RefOr::T(parameter));
    add(
        op,
        "409",
        "A request with this `Idempotency-Key` is still running after 10 s \
         (`idempotency_key_in_use`), or never answered or failed with a 5xx, so may have done \
         what it does (`idempotency_outcome_unknown`), or the state does not allow it",
    );
    add(
        op,
        "422",
        "A field breaks its rules (`validation_error`), or the `Idempotency-Key` was used with \
         another request (`idempotency_key_reused`)",
    );
    add(op, "413", "The body is too large (`payload_too_large`)");
}

/// The errors an operation answers whatever it does: 500 and 503 always, 404 on a path with
/// an id, and the body's and query's errors where it has them.
fn add_shared_errors(op: &mut Operation, path: &str) {
    add(
        op,
        "500",
        "Unexpected error (`internal_error`); quote the request id",
    );
    add(
        op,
        "503",
        "Postgres or Redis is unavailable (`service_unavailable`)",
    );
    if path.contains('{') {
        add(
            op,
            "404",
            "No such record in the organization (`not_found`)",
        );
    }
    let has_query = op.parameters.as_ref().is_some_and(|ps| {
        ps.iter().any(|p| {
            matches!(p, RefOr::T(p) if p.parameter_in == utoipa::openapi::path::ParameterIn::Query)
        })
    });
    if op.request_body.is_some() {
        add(op, "400", "The body is not valid JSON (`invalid_json`)");
        add(op, "413", "The body is too large (`payload_too_large`)");
        let only_json = op.request_body.as_ref().is_some_and(|b| match b {
            RefOr::T(b) => b.content.keys().all(|t| t == "application/json"),
            RefOr::Ref(_) => true,
        });
        add(
            op,
            "415",
            if only_json {
                "The body is not `application/json` (`unsupported_media_type`)"
            } else {
                "The body is not of a type the operation takes (`unsupported_media_type`)"
            },
        );
    }
    if op.request_body.is_some() || has_query {
        add(
            op,
            "422",
            "A field breaks its rules (`validation_error`, `details` lists them)",
        );
    }
}

trait OperationsMut {
    fn operations_mut(&mut self) -> Vec<(HttpMethod, &mut Operation)>;
}

impl OperationsMut for utoipa::openapi::PathItem {
    fn operations_mut(&mut self) -> Vec<(HttpMethod, &mut Operation)> {
        let mut out = Vec::new();
        macro_rules! take {
            ($($field:ident => $m:ident),+) => {
                $(if let Some(op) = self.$field.as_mut() { out.push((HttpMethod::$m, op)); })+
            };
        }
        take!(get => Get, post => Post, put => Put, patch => Patch, delete => Delete, head => Head,
              options => Options, trace => Trace);
        out
    }
}

/// The OpenAPI document as a deployment with the default settings serves it, for tools and
/// tests.
pub fn default_document() -> serde_json::Value {
    let (_, openapi) = crate::routes::api(0).split_for_parts();
    let (_, signed) = crate::routes::signed().split_for_parts();
    document(openapi.merge_from(signed), &Deployment::defaults())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_unique_and_every_operation_has_a_real_scope() {
        let (_, routes) = crate::routes::api(0).split_for_parts();
        let (_, signed) = crate::routes::signed().split_for_parts();
        let doc = finish(base().merge_from(routes).merge_from(signed));
        let mut ids = std::collections::HashSet::new();
        for (path, item) in doc.paths.paths {
            let mut item = item;
            for (method, op) in item.operations_mut() {
                let id = op.operation_id.clone().unwrap_or_default();
                assert!(ids.insert(id.clone()), "duplicate operationId {id}");
                if path.starts_with(SIGNED_PREFIX) {
                    continue;
                }
                let scope = required_scope(&method_of(&method), &path);
                assert_ne!(scope, "*", "{path} has no scope rule");
            }
        }
    }

    #[test]
    fn the_served_document_is_valid_json_schema_where_it_states_rules() {
        let doc = super::default_document();
        // Every pattern compiles (the Rust engine reads the same dialect subset as clients).
        fn walk(v: &serde_json::Value) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(serde_json::Value::String(p)) = m.get("pattern") {
                        assert!(regex::Regex::new(p).is_ok(), "{p}");
                    }
                    m.values().for_each(walk);
                }
                serde_json::Value::Array(a) => a.iter().for_each(walk),
                _ => {}
            }
        }
        walk(&doc);
        assert!(doc.pointer("/components/schemas/FreeJson").is_some());
    }

    #[test]
    fn the_document_holds_no_construct_generators_drop_and_stays_small() {
        let doc = super::default_document();
        let schemas = &doc["components"]["schemas"];
        // Free JSON is unconstrained (a recursive schema made openapi-python-client drop every
        // operation whose body reaches it); time zones are no enumeration (names collide as
        // identifiers). ops/clients/check generates the clients themselves.
        assert!(
            !schemas["FreeJson"].to_string().contains("$ref"),
            "FreeJson refers to itself"
        );
        assert!(schemas["TimeZone"].get("enum").is_none());
        assert_eq!(schemas["TimeZone"]["type"], "string");
        // Shared answers and schemas are written once.
        assert!(doc.pointer("/components/responses/Error500").is_some());
        let bytes = doc.to_string().len();
        assert!(bytes < 400_000, "the document is {bytes} bytes");
    }
}
