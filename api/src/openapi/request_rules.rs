//! What the JSON extractor enforces on every request, stated in the document: no NUL in any
//! string or key, wherever it is (the extractor refuses a body that carries one, unknown
//! fields included), and unknown fields are otherwise free. Each object a request body can
//! hold gets `propertyNames` and `additionalProperties` that say so; each free-form string
//! (and query parameter) gets the NUL-free pattern.
//!
//! Rules JSON Schema cannot state are flagged instead: an operation whose body names other
//! records by id (which must exist in the organization), or whose fields constrain each
//! other, carries [`RELATIONAL`] and says in its 422 what else it refuses.

use std::collections::BTreeSet;

use parley_types::fields::TEXT;
use serde_json::{Value, json};

/// Any JSON value; the NUL rule is in its description (and enforced by the extractor): an
/// unconstrained schema, because generators drop a recursive one (and every operation whose
/// body reaches it).
pub const FREE_JSON: &str = "FreeJson";

/// Operation extension: `true` when a body that matches the schema may still be refused with
/// 422, because of a record it names or a rule between its fields.
pub const RELATIONAL: &str = "x-parley-relational-rules";

/// Operations whose fields constrain each other beyond what the schema states.
const CROSS_FIELD_RULES: &[(&str, &str, &str)] = &[
    (
        "patch",
        "/api/v1/organization",
        "working intervals of a day must be in order without overlap, at least one day must \
         have working hours, and a holiday must not end before it starts; a frequency cap gives \
         `perDay`, `perWeek` or both",
    ),
    (
        "post",
        "/api/v1/broadcasts",
        "the audience is `contactIds` (at least one) or `segmentId`, exactly one of them; \
         `sendIn: contact_timezone` needs a `scheduledAt` not yet past in every zone and excludes \
         `sendNow` and `abTest`; a `scheduledAt` without an offset needs it; `abTest` variants \
         are templates on the broadcast's channel, named apart",
    ),
    (
        "patch",
        "/api/v1/broadcasts/{id}",
        "`contactIds` and `segmentId` are not both given; `sendIn: contact_timezone` needs a \
         `scheduledAt` not yet past in every zone and excludes `sendNow`; a `scheduledAt` without \
         an offset needs it",
    ),
    (
        "post",
        "/api/v1/broadcasts/{id}/pick-variant",
        "`variant` names a variant of the broadcast",
    ),
    (
        "post",
        "/api/v1/webhooks/{id}/recover",
        "`since` must be before `until` (or before now, when `until` is left out)",
    ),
    (
        "post",
        "/api/v1/contacts/imports",
        "the file is `data` or `fileId`, exactly one of them",
    ),
    (
        "post",
        "/api/v1/segments",
        "`filter.createdAfter` must be before `filter.createdBefore`",
    ),
    (
        "patch",
        "/api/v1/segments/{id}",
        "`filter.createdAfter` must be before `filter.createdBefore`",
    ),
    ("get", "/admin/v1/dead", DEAD_FILTER_RULE),
    ("post", "/admin/v1/dead/retry", DEAD_FILTER_RULE),
    ("post", "/admin/v1/dead/discard", DEAD_FILTER_RULE),
];

/// What a dead-work filter may not combine (`parley_domain::operator::DeadFilter::checked`).
const DEAD_FILTER_RULE: &str = "`to` must be after `from`; `broadcastId` is for the \
    recipient-send queue only, `webhookId` for the webhook-delivery queue only";

fn free_json_schema() -> Value {
    json!({
        "description": "Any JSON value. No string or key in it may hold the NUL character \
            (U+0000): a body with one is refused (422 `validation_error`, `invalid_format`).",
    })
}

fn reference(name: &str) -> String {
    format!("#/components/schemas/{name}")
}

pub fn apply(doc: &mut Value) {
    mark_relational(doc);
    let roots = request_roots(doc);
    let names = reachable_components(doc, roots.clone());
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for name in &names {
            if let Some(schema) = schemas.get_mut(name) {
                state_rules(schema);
            }
        }
        schemas.insert(FREE_JSON.to_owned(), free_json_schema());
    }
    // Inline request bodies and query parameters.
    for_each_operation(doc, |op| {
        if let Some(content) = op
            .pointer_mut("/requestBody/content")
            .and_then(Value::as_object_mut)
        {
            for media in content.values_mut() {
                if let Some(schema) = media.get_mut("schema") {
                    state_rules(schema);
                }
            }
        }
        if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
            for p in params {
                if p.get("in").and_then(Value::as_str) == Some("query")
                    && let Some(schema) = p.get_mut("schema")
                {
                    state_rules(schema);
                }
            }
        }
    });
}

/// Flags the operations of [`RELATIONAL`] and extends their 422 description.
fn mark_relational(doc: &mut Value) {
    let components = doc
        .pointer("/components/schemas")
        .cloned()
        .unwrap_or_default();
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let mut why = Vec::new();
            let body_has = |pred: &dyn Fn(&serde_json::Map<String, Value>) -> bool| {
                op.get("requestBody")
                    .is_some_and(|body| reaches(body, &components, &mut BTreeSet::new(), pred))
            };
            if body_has(&|m| m.get("format").and_then(Value::as_str) == Some("uuid")) {
                why.push("a field names a record that is not in the organization (`not_found`)");
            }
            if body_has(&|m| m.get("$ref").and_then(Value::as_str) == Some(TIME_ZONE_REF)) {
                why.push("a time zone is not a name of the tz database (`invalid_format`)");
            }
            if let Some((_, _, rule)) = CROSS_FIELD_RULES
                .iter()
                .find(|(m, p, _)| m == method && p == path)
            {
                why.push(rule);
            }
            if why.is_empty() {
                continue;
            }
            op[RELATIONAL] = json!(true);
            if let Some(d) = op.pointer_mut("/responses/422/description") {
                let text = d.as_str().unwrap_or_default().to_owned();
                *d = json!(format!("{text}; also when {}", why.join("; or ")));
            }
        }
    }
}

/// The time zone component: a string of the documented form, which must also be a name of
/// the tz database.
const TIME_ZONE_REF: &str = "#/components/schemas/TimeZone";

/// Whether a schema holds a node `pred` accepts anywhere, following `$ref`s.
fn reaches(
    node: &Value,
    components: &Value,
    seen: &mut BTreeSet<String>,
    pred: &dyn Fn(&serde_json::Map<String, Value>) -> bool,
) -> bool {
    match node {
        Value::Object(map) => {
            if pred(map) {
                return true;
            }
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/components/schemas/"))
            {
                return seen.insert(name.to_owned())
                    && components
                        .get(name)
                        .is_some_and(|s| reaches(s, components, seen, pred));
            }
            map.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "example" | "examples"))
                .any(|(_, v)| reaches(v, components, seen, pred))
        }
        Value::Array(items) => items.iter().any(|v| reaches(v, components, seen, pred)),
        _ => false,
    }
}

fn for_each_operation(doc: &mut Value, mut f: impl FnMut(&mut Value)) {
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for item in paths.values_mut() {
            if let Some(item) = item.as_object_mut() {
                for op in item.values_mut() {
                    if op.is_object() {
                        f(op);
                    }
                }
            }
        }
    }
}

/// The schemas of request bodies.
fn request_roots(doc: &Value) -> Vec<Value> {
    let mut roots = Vec::new();
    for item in doc
        .get("paths")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values())
    {
        for op in item.as_object().into_iter().flat_map(|o| o.values()) {
            if let Some(content) = op
                .pointer("/requestBody/content")
                .and_then(Value::as_object)
            {
                roots.extend(content.values().filter_map(|m| m.get("schema").cloned()));
            }
        }
    }
    roots
}

/// Names of the components a request body can reach through `$ref`s.
fn reachable_components(doc: &Value, roots: Vec<Value>) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = roots;
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(name) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                    && seen.insert(name.to_owned())
                    && let Some(target) = doc.pointer(&format!("/components/schemas/{name}"))
                {
                    stack.push(target.clone());
                }
                stack.extend(map.into_iter().map(|(_, v)| v));
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    seen
}

/// Adds the NUL rule to every string and object of a schema, in place.
fn state_rules(node: &mut Value) {
    let Some(map) = node.as_object_mut() else {
        return;
    };
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let is_string = types.contains(&"string");
    let is_object = types.contains(&"object") || map.contains_key("properties");
    let constrained = ["pattern", "enum", "const", "format"]
        .iter()
        .any(|k| map.contains_key(*k));
    if is_string && !constrained {
        map.insert("pattern".to_owned(), json!(TEXT));
    }
    if is_object {
        map.entry("propertyNames")
            .or_insert(json!({"pattern": TEXT}));
        if !map.contains_key("additionalProperties") {
            map.insert(
                "additionalProperties".to_owned(),
                json!({"$ref": reference(FREE_JSON)}),
            );
        }
    }
    for (key, child) in map.iter_mut() {
        // `$ref`d components are handled by name; examples are data, not schemas.
        if matches!(
            key.as_str(),
            "example" | "examples" | "enum" | "const" | "default"
        ) {
            continue;
        }
        match child {
            Value::Object(_) => state_rules(child),
            Value::Array(items) => items.iter_mut().for_each(state_rules),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_objects_of_requests_get_the_nul_rule() {
        let mut doc = json!({
            "paths": {"/x": {"post": {
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/In"}}}},
                "parameters": [{"in": "query", "name": "q", "schema": {"type": "string"}}]
            }}},
            "components": {"schemas": {
                "In": {"type": "object", "properties": {
                    "a": {"type": "string"},
                    "b": {"type": "string", "format": "uuid"},
                    "c": {"$ref": "#/components/schemas/Nested"},
                    "m": {"type": ["object", "null"]}
                }},
                "Nested": {"type": "object", "additionalProperties": false, "properties": {"d": {"type": ["string", "null"]}}},
                "Out": {"type": "object", "properties": {"e": {"type": "string"}}}
            }}
        });
        apply(&mut doc);
        let s = &doc["components"]["schemas"];
        assert_eq!(s["In"]["properties"]["a"]["pattern"], TEXT);
        assert!(s["In"]["properties"]["b"].get("pattern").is_none());
        assert_eq!(
            s["In"]["additionalProperties"]["$ref"],
            reference(FREE_JSON)
        );
        assert_eq!(s["In"]["properties"]["m"]["propertyNames"]["pattern"], TEXT);
        assert_eq!(s["Nested"]["additionalProperties"], false, "kept");
        assert_eq!(s["Nested"]["properties"]["d"]["pattern"], TEXT);
        assert!(
            s["Out"]["properties"]["e"].get("pattern").is_none(),
            "responses untouched"
        );
        assert_eq!(
            doc["paths"]["/x"]["post"]["parameters"][0]["schema"]["pattern"],
            TEXT
        );
        assert!(s.get(FREE_JSON).is_some());
    }
}
