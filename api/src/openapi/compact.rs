//! Keeps the document small without changing what it says: an error answer that many
//! operations share is written once under `components/responses`, and a schema written out in
//! full where a component says the same (utoipa inlines a generic's argument: each
//! `Envelope_<T>` held a whole copy of `T`) becomes a `$ref` to that component.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

/// Schemas shorter than this (as compact JSON) stay written out: a `$ref` saves little and
/// would turn `{"type": "string"}` into a named type.
const MIN_SHARED_SCHEMA: usize = 200;

pub fn apply(doc: &mut Value) {
    share_schemas(doc);
    share_error_responses(doc);
}

/// Replaces every copy of a component schema, below the top of the components and in the
/// operations, by a `$ref` to it.
fn share_schemas(doc: &mut Value) {
    let Some(schemas) = doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    else {
        return;
    };
    // The first name (in order) of each sizeable schema's text.
    let mut by_text: HashMap<String, String> = HashMap::new();
    for (name, schema) in schemas {
        let text = schema.to_string();
        if text.len() >= MIN_SHARED_SCHEMA {
            by_text.entry(text).or_insert_with(|| name.clone());
        }
    }
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in schemas.iter_mut() {
            for child in children(schema) {
                replace_copies(child, &by_text, Some(name));
            }
        }
    }
    if let Some(paths) = doc.get_mut("paths") {
        replace_copies(paths, &by_text, None);
    }
}

/// The values below a node.
fn children(node: &mut Value) -> Vec<&mut Value> {
    match node {
        Value::Object(map) => map.values_mut().collect(),
        Value::Array(items) => items.iter_mut().collect(),
        _ => Vec::new(),
    }
}

fn replace_copies(node: &mut Value, by_text: &HashMap<String, String>, within: Option<&String>) {
    if node.is_object() {
        let text = node.to_string();
        if text.len() >= MIN_SHARED_SCHEMA
            && let Some(name) = by_text.get(&text)
            && Some(name) != within
        {
            *node = json!({"$ref": format!("#/components/schemas/{name}")});
            return;
        }
    }
    for child in children(node) {
        replace_copies(child, by_text, within);
    }
}

/// Moves each error answer (status and description) that several operations give to
/// `components/responses`, named `Error<status>` (then `Error<status>_2`, ...), and refers to
/// it from each.
fn share_error_responses(doc: &mut Value) {
    let mut uses: BTreeMap<(String, String), usize> = BTreeMap::new();
    for_each_response(doc, |status, response| {
        if let Some(key) = error_key(status, response) {
            *uses.entry(key).or_default() += 1;
        }
    });
    let mut names: BTreeMap<(String, String), String> = BTreeMap::new();
    let mut shared = Map::new();
    let mut by_uses: Vec<_> = uses.into_iter().filter(|(_, n)| *n > 1).collect();
    by_uses.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for ((status, description), _) in by_uses {
        let mut name = format!("Error{status}");
        let mut n = 1;
        while shared.contains_key(&name) {
            n += 1;
            name = format!("Error{status}_{n}");
        }
        shared.insert(name.clone(), error_response(&description));
        names.insert((status, description), name);
    }
    for_each_response(doc, |status, response| {
        if let Some(name) = error_key(status, response).and_then(|key| names.get(&key)) {
            *response = json!({"$ref": format!("#/components/responses/{name}")});
        }
    });
    if !shared.is_empty()
        && let Some(components) = doc.get_mut("components").and_then(Value::as_object_mut)
    {
        components.insert("responses".to_owned(), Value::Object(shared));
    }
}

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ErrorEnvelope"}
        }},
    })
}

/// (status, description) of an answer written as [`error_response`] writes it.
fn error_key(status: &str, response: &Value) -> Option<(String, String)> {
    let description = response.get("description")?.as_str()?;
    (*response == error_response(description)).then(|| (status.to_owned(), description.to_owned()))
}

fn for_each_response(doc: &mut Value, mut f: impl FnMut(&str, &mut Value)) {
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for item in paths.values_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for op in item.values_mut() {
            if let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) {
                for (status, response) in responses.iter_mut() {
                    f(status, response);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_become_references_and_shared_errors_components() {
        let big = json!({"type": "object", "description": "x".repeat(MIN_SHARED_SCHEMA),
                         "properties": {"id": {"type": "string"}}});
        let error = error_response("No such record (`not_found`)");
        let mut doc = json!({
            "paths": {
                "/a": {"get": {"responses": {"200": {"content": {"application/json": {
                    "schema": big.clone()}}}, "404": error.clone()}}},
                "/b": {"get": {"responses": {"404": error.clone(),
                    "409": error_response("only here")}}},
            },
            "components": {"schemas": {
                "Thing": big.clone(),
                "Envelope_Thing": {"type": "object", "properties": {"data": big.clone()}},
                "ErrorEnvelope": {"type": "object"},
            }},
        });
        apply(&mut doc);
        let thing = json!({"$ref": "#/components/schemas/Thing"});
        assert_eq!(
            doc["components"]["schemas"]["Thing"], big,
            "the component stays"
        );
        assert_eq!(
            doc["components"]["schemas"]["Envelope_Thing"]["properties"]["data"],
            thing
        );
        assert_eq!(
            doc["paths"]["/a"]["get"]["responses"]["200"]["content"]["application/json"]["schema"],
            thing
        );
        let shared = json!({"$ref": "#/components/responses/Error404"});
        assert_eq!(doc["paths"]["/a"]["get"]["responses"]["404"], shared);
        assert_eq!(doc["paths"]["/b"]["get"]["responses"]["404"], shared);
        assert_eq!(doc["components"]["responses"]["Error404"], error);
        assert_eq!(
            doc["paths"]["/b"]["get"]["responses"]["409"],
            error_response("only here"),
            "an answer of one operation stays where it is"
        );
    }
}
