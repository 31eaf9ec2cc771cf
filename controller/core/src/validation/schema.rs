//! Structural OpenAPI v3 validation of a JSON value, as the API server performs it before CEL:
//! types, required fields, enums, patterns, lengths, bounds and unknown fields.
//!
//! Messages follow the API server's wording (`Required value`, `Unsupported value`, ...).
//! Unknown fields are reported (as `kubectl apply` does with strict field validation) rather than
//! silently pruned: a misspelt field is the most common manifest bug.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;
use serde_json::{Map, Value};

use super::Violation;

/// Fields every object has that the CRD schema does not describe.
const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Checks `object` against `schema`, appending violations. Returns whether the object has the
/// *shape* the schema promises (right types, required fields present): only then can CEL rules,
/// which assume that shape, be evaluated. Pattern, enum and bound violations keep the shape.
pub(super) fn check(schema: &Value, object: &Value, out: &mut Vec<Violation>) -> bool {
    let Some(fields) = object.as_object() else {
        out.push(Violation::new(
            "",
            format!("{TYPE_PREFIX}must be of type object"),
        ));
        return false;
    };
    let mut rest = fields.clone();
    for field in ROOT_FIELDS {
        rest.remove(field);
    }
    let mut found = Vec::new();
    check_object(schema, &rest, "", &mut found);
    let shape_ok = !found
        .iter()
        .any(|v| SHAPE_PREFIXES.iter().any(|p| v.message.starts_with(p)));
    out.extend(found);
    shape_ok
}

/// Message prefixes of violations that break the object's shape.
const SHAPE_PREFIXES: [&str; 2] = [TYPE_PREFIX, REQUIRED];
const TYPE_PREFIX: &str = "Invalid type: ";
const REQUIRED: &str = "Required value";

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn walk(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        match value {
            Value::Number(n) if n.is_i64() || n.is_u64() => {}
            Value::String(s) => check_string(schema, s, path, out),
            other => out.push(Violation::new(
                path,
                format!(
                    "{TYPE_PREFIX}{}: must be an integer or a string",
                    describe(other)
                ),
            )),
        }
        return;
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
        && schema.get("type").is_none()
    {
        return;
    }
    let expected = schema.get("type").and_then(Value::as_str);
    let actual = type_name(value);
    let fits = match expected {
        None => true,
        Some("number") => matches!(actual, "number" | "integer"),
        Some(t) => t == actual,
    };
    if !fits {
        out.push(Violation::new(
            path,
            format!(
                "{TYPE_PREFIX}{}: must be of type {}",
                describe(value),
                expected.unwrap_or("object")
            ),
        ));
        return;
    }
    match value {
        Value::Object(map) => check_object(schema, map, path, out),
        Value::Array(items) => check_array(schema, items, path, out),
        Value::String(s) => check_string(schema, s, path, out),
        Value::Number(_) => check_number(schema, value, path, out),
        Value::Bool(_) | Value::Null => {}
    }
}

fn check_object(schema: &Value, map: &Map<String, Value>, path: &str, out: &mut Vec<Violation>) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    for (key, value) in map {
        if let Some(property) = properties.and_then(|p| p.get(key)) {
            walk(property, value, &join(path, key), out);
        } else if let Some(additional) = additional {
            walk(additional, value, &format!("{path}[{key}]"), out);
        } else if !preserve {
            out.push(Violation::new(join(path, key), "unknown field"));
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for field in required.iter().filter_map(Value::as_str) {
            let defaulted = properties
                .and_then(|p| p.get(field))
                .is_some_and(|p| p.get("default").is_some());
            if !map.contains_key(field) && !defaulted {
                out.push(Violation::new(join(path, field), REQUIRED));
            }
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64)
        && map.len() as u64 > max
    {
        out.push(Violation::new(
            path,
            format!("Too many: {}: must have at most {max} items", map.len()),
        ));
    }
}

fn check_array(schema: &Value, items: &[Value], path: &str, out: &mut Vec<Violation>) {
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && items.len() as u64 > max
    {
        out.push(Violation::new(
            path,
            format!("Too many: {}: must have at most {max} items", items.len()),
        ));
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (items.len() as u64) < min
    {
        out.push(Violation::new(
            path,
            format!(
                "Invalid value: {} items: must have at least {min} items",
                items.len()
            ),
        ));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            walk(item_schema, item, &format!("{path}[{i}]"), out);
        }
    }
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set") {
        for (i, item) in items.iter().enumerate() {
            if items[..i].contains(item) {
                out.push(Violation::new(
                    format!("{path}[{i}]"),
                    format!("Duplicate value: {}", describe(item)),
                ));
            }
        }
    }
}

fn check_string(schema: &Value, s: &str, path: &str, out: &mut Vec<Violation>) {
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.iter().any(|a| a.as_str() == Some(s))
    {
        let supported: Vec<String> = allowed.iter().map(describe).collect();
        out.push(Violation::new(
            path,
            format!(
                "Unsupported value: {s:?}: supported values: {}",
                supported.join(", ")
            ),
        ));
        return;
    }
    let chars = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && chars > max
    {
        out.push(Violation::new(
            path,
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && chars < min
    {
        out.push(Violation::new(
            path,
            format!("Invalid value: {s:?}: should be at least {min} chars long"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match compiled(pattern) {
            Ok(re) if !re.is_match(s) => out.push(Violation::new(
                path,
                format!("Invalid value: {s:?}: should match '{pattern}'"),
            )),
            Ok(_) => {}
            Err(err) => out.push(Violation::new(
                path,
                format!("schema pattern is invalid: {err}"),
            )),
        }
    }
}

/// `pattern` compiled once per process. The schemas hold a few dozen patterns and every NodePool
/// is validated on each readiness pass: compiling them anew took a third of a simulation's CPU
/// (perf, default scenario). The cache is bounded by the patterns of the generated CRDs.
fn compiled(pattern: &str) -> Result<Arc<Regex>, String> {
    type Compiled = HashMap<String, Result<Arc<Regex>, String>>;
    static CACHE: OnceLock<Mutex<Compiled>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).map(Arc::new).map_err(|e| e.to_string()))
        .clone()
}

fn check_number(schema: &Value, value: &Value, path: &str, out: &mut Vec<Violation>) {
    let Some(n) = value.as_f64() else { return };
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
        && n < min
    {
        out.push(Violation::new(
            path,
            format!("Invalid value: {value}: should be greater than or equal to {min}"),
        ));
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
        && n > max
    {
        out.push(Violation::new(
            path,
            format!("Invalid value: {value}: should be less than or equal to {max}"),
        ));
    }
}
