//! Checks on what the cluster shows: a node honours its NodePool's requirements and taints, and
//! is sized for the pods it runs.

use serde_json::Value;

/// Why `node` does not honour `pool`'s requirements, template labels and taints (`Ok` when it
/// does). A requirement on a label the node lacks fails, except `NotIn` and `DoesNotExist`.
pub fn honours_pool(node: &Value, pool: &Value) -> Result<(), String> {
    let labels = &node["metadata"]["labels"];
    let template = &pool["spec"]["template"];
    let node_name = crate::name(node);
    for requirement in template["spec"]["requirements"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = requirement["key"].as_str().unwrap_or_default();
        let value = labels[key].as_str();
        let values: Vec<&str> = requirement["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let number = |v: &str| v.parse::<i64>().ok();
        let ok = match requirement["operator"].as_str().unwrap_or_default() {
            "In" => value.is_some_and(|v| values.contains(&v)),
            "NotIn" => value.is_none_or(|v| !values.contains(&v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" => value
                .and_then(number)
                .zip(values.first().and_then(|v| number(v)))
                .is_some_and(|(v, bound)| v > bound),
            "Lt" => value
                .and_then(number)
                .zip(values.first().and_then(|v| number(v)))
                .is_some_and(|(v, bound)| v < bound),
            other => return Err(format!("unknown operator {other}")),
        };
        if !ok {
            return Err(format!(
                "node {node_name}: label {key}={value:?} breaks the requirement {requirement}"
            ));
        }
    }
    for (key, want) in template["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if &labels[key] != want {
            return Err(format!(
                "node {node_name}: template label {key}={want} missing"
            ));
        }
    }
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for taint in template["spec"]["taints"].as_array().into_iter().flatten() {
        let present = taints.iter().any(|t| {
            t["key"] == taint["key"]
                && t["value"] == taint["value"]
                && t["effect"] == taint["effect"]
        });
        if !present {
            return Err(format!("node {node_name}: taint {taint} missing"));
        }
    }
    Ok(())
}

/// Kubernetes CPU quantity (`500m`, `2`, `1.5`) in millicores.
pub fn millicores(quantity: &Value) -> i64 {
    let text = quantity
        .as_str()
        .map(String::from)
        .unwrap_or_else(|| quantity.to_string());
    if let Some(milli) = text.strip_suffix('m') {
        return milli.parse().unwrap_or(0);
    }
    text.parse::<f64>()
        .map(|c| (c * 1000.0).round() as i64)
        .unwrap_or(0)
}

/// The CPU the pods request, in millicores.
pub fn requested_millicores<'a>(pods: impl IntoIterator<Item = &'a Value>) -> i64 {
    pods.into_iter()
        .flat_map(|p| {
            p["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| millicores(&c["resources"]["requests"]["cpu"]))
        .sum()
}

/// Why `node` is oversized for `pods` (the pods bound to it): its CPU capacity may be at most
/// twice what they request plus 2 cores (the next instance size up is twice the CPU, plus room
/// for system reservations), so a right-sized choice passes and a grossly larger one fails.
pub fn right_sized(node: &Value, pods: &[Value]) -> Result<(), String> {
    let node_name = crate::name(node);
    let on_node: Vec<&Value> = pods
        .iter()
        .filter(|p| p["spec"]["nodeName"].as_str() == Some(node_name.as_str()))
        .collect();
    let requested = requested_millicores(on_node.iter().copied());
    let capacity = millicores(&node["status"]["capacity"]["cpu"]);
    if capacity > 2 * requested + 2000 {
        return Err(format!(
            "node {node_name} ({}) has {capacity}m CPU for {requested}m requested by {} pod(s)",
            node["metadata"]["labels"]["node.kubernetes.io/instance-type"],
            on_node.len()
        ));
    }
    Ok(())
}
