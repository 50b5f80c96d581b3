//! Reading the served OpenAPI document, so tests cover every operation it lists: a route added
//! later is covered without touching the tests.

use serde_json::{Value, json};

pub fn document() -> Value {
    serde_json::to_value(parley_api::openapi::default_document()).expect("document serializes")
}

#[derive(Debug, Clone)]
pub struct Operation {
    pub method: reqwest::Method,
    pub path: String,
    pub scope: String,
    /// The request body schema (resolved), if the operation takes a body.
    pub body: Option<Value>,
    pub query_params: Vec<String>,
}

pub fn operations(doc: &Value) -> Vec<Operation> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let method: reqwest::Method = method.to_uppercase().parse().expect("method");
            let scope = op["security"][0]["bearer"][0]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let body = op["requestBody"]["content"]["application/json"]["schema"]
                .as_object()
                .map(|s| resolve(doc, &Value::Object(s.clone())));
            let query_params = op["parameters"]
                .as_array()
                .map(|ps| {
                    ps.iter()
                        .filter(|p| p["in"] == "query")
                        .filter_map(|p| p["name"].as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            out.push(Operation {
                method,
                path: path.clone(),
                scope,
                body,
                query_params,
            });
        }
    }
    out
}

/// The operations that take an API key (all but the channel receipts, which are signed).
pub fn keyed_operations(doc: &Value) -> Vec<Operation> {
    operations(doc)
        .into_iter()
        .filter(|op| !op.scope.is_empty())
        .collect()
}

/// Follows `$ref`s, and takes the non-null side of `oneOf: [X, null]`.
pub fn resolve(doc: &Value, schema: &Value) -> Value {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/components/schemas/");
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    if let Some(options) = schema["oneOf"].as_array()
        && let Some(non_null) = options.iter().find(|o| o["type"] != "null")
    {
        return resolve(doc, non_null);
    }
    schema.clone()
}

/// The JSON type of a schema, ignoring `null`.
pub fn type_of(schema: &Value) -> Option<String> {
    match &schema["type"] {
        Value::String(t) => Some(t.clone()),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .map(str::to_owned),
        _ if schema["enum"].is_array() => Some("string".to_owned()),
        _ => None,
    }
}

/// A value of the wrong JSON type for `schema`.
pub fn wrong_type(schema: &Value) -> Value {
    match type_of(schema).as_deref() {
        Some("string") => json!(12345),
        Some("integer" | "number") => json!("not a number"),
        Some("boolean") => json!("yes"),
        Some("array") => json!("not an array"),
        _ => json!(42),
    }
}

/// A valid request body: the schema's example.
pub fn example(schema: &Value) -> Value {
    schema["example"].clone()
}
