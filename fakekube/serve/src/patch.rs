//! Patch formats fakekube's seam does not take directly, turned into ones it does:
//!
//! - **Strategic merge** (built-in kinds, what `kubectl apply` sends for them): applied here to
//!   the live object — lists with a merge key (`containers` by `name`, `ports` by
//!   `containerPort`, ...) merge element by element, `$setElementOrder/`, `$retainKeys` and
//!   `$deleteFromPrimitiveList/` directives are dropped, `$patch: delete` removes an element —
//!   and sent as the merge patch from the live object to the result.
//! - **Update** (`PUT`): the merge patch from the live object to the body.
//!
//! Either way the merge patch carries the live `resourceVersion` (or the body's, for an update),
//! so fakekube's optimistic concurrency guards the write.

use serde_json::{Map, Value};

/// The merge key of a list field in built-in kinds' strategic merge patches.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "volumeMounts"
        | "conditions" => Some(match field {
            "conditions" => "type",
            _ => "name",
        }),
        "ports" => Some("containerPort"),
        "volumeDevices" => Some("devicePath"),
        _ => None,
    }
}

/// `live` with the strategic merge patch `patch` applied.
pub fn strategic_apply(live: &Value, patch: &Value) -> Value {
    match (live, patch) {
        (Value::Object(live), Value::Object(patch)) => {
            let mut out = live.clone();
            for (key, value) in patch {
                if key.starts_with('$') {
                    continue;
                }
                if value.is_null() {
                    out.remove(key);
                    continue;
                }
                let merged = match (live.get(key), merge_key(key), value) {
                    (Some(Value::Array(current)), Some(merge), Value::Array(items)) => {
                        Value::Array(merge_list(current, items, merge))
                    }
                    (Some(current), _, _) => strategic_apply(current, value),
                    (None, _, _) => strip_directives(value),
                };
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (_, patch) => strip_directives(patch),
    }
}

fn merge_list(current: &[Value], items: &[Value], key: &str) -> Vec<Value> {
    let mut out: Vec<Value> = current.to_vec();
    for item in items {
        let id = &item[key];
        let position = out.iter().position(|c| &c[key] == id && !id.is_null());
        let delete = item["$patch"] == "delete";
        match (position, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (Some(i), false) => out[i] = strategic_apply(&out[i], item),
            (None, false) => out.push(strip_directives(item)),
            (None, true) => {}
        }
    }
    out
}

fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// The RFC 7386 merge patch that turns `from` into `to` (`None`: they are equal).
pub fn merge_diff(from: &Value, to: &Value) -> Option<Value> {
    match (from, to) {
        (Value::Object(from), Value::Object(to)) => {
            let mut patch = Map::new();
            for (key, old) in from {
                match to.get(key) {
                    None => {
                        patch.insert(key.clone(), Value::Null);
                    }
                    Some(new) => {
                        if let Some(d) = merge_diff(old, new) {
                            patch.insert(key.clone(), d);
                        }
                    }
                }
            }
            for (key, new) in to {
                if !from.contains_key(key) {
                    patch.insert(key.clone(), new.clone());
                }
            }
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (from, to) if from == to => None,
        (_, to) => Some(to.clone()),
    }
}

/// Keeps only what a write may change: drops `apiVersion`, `kind`, the name and namespace and
/// the server-owned metadata (fakekube rejects patches of them), and `status` (or everything
/// but `status` when `status_only`).
pub fn writable(object: &Value, status_only: bool) -> Value {
    let mut out = object.clone();
    let Some(map) = out.as_object_mut() else {
        return out;
    };
    if status_only {
        map.retain(|k, _| k == "status" || k == "metadata");
        if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.retain(|k, _| k == "resourceVersion");
        }
        return out;
    }
    map.remove("apiVersion");
    map.remove("kind");
    map.remove("status");
    if let Some(metadata) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "name",
            "namespace",
            "uid",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ] {
            metadata.remove(key);
        }
    }
    out
}
