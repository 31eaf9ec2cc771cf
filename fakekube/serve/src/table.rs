//! Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): what `kubectl get`
//! prints. Karpenter's kinds get their CRDs' printer columns (a small JSONPath subset: dotted
//! fields with `\.` escapes and one `[?(@.type=="X")]` filter); built-in kinds get the columns
//! kubectl users know (nodes' STATUS and ROLES, pods' READY and STATUS, Deployments' READY),
//! computed as the real server's printers do.

use jiff::Timestamp;
use serde_json::{Value, json};

use crate::kinds::{Column, Served};

/// The Table of `objects` (a list, or one object for a GET).
pub fn table(served: &Served, objects: &[Value], resource_version: &str, now: Timestamp) -> Value {
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace."
    })];
    for column in &served.columns {
        definitions.push(json!({
            "name": column.name,
            "type": if column.type_ == "date" { "string" } else { column.type_.as_str() },
            "format": "",
            "priority": column.priority,
            "description": column.description,
        }));
    }
    let rows: Vec<Value> = objects.iter().map(|o| row(served, o, now)).collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

fn row(served: &Served, object: &Value, now: Timestamp) -> Value {
    let mut cells = vec![object["metadata"]["name"].clone()];
    for column in &served.columns {
        cells.push(cell(column, object, now));
    }
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": object["metadata"],
        }
    })
}

fn cell(column: &Column, object: &Value, now: Timestamp) -> Value {
    let value = match column.json_path.as_str() {
        "status" => Value::String(node_status(object)),
        "roles" => Value::String(node_roles(object)),
        "internal-ip" => internal_ip(object),
        "ready" => Value::String(pod_ready(object)),
        "phase" => Value::String(pod_phase(object)),
        "restarts" => json!(restarts(object)),
        "deployment-ready" => Value::String(format!(
            "{}/{}",
            object["status"]["readyReplicas"].as_u64().unwrap_or(0),
            object["spec"]["replicas"].as_u64().unwrap_or(1)
        )),
        path => json_path(object, path).cloned().unwrap_or(Value::Null),
    };
    match (column.type_.as_str(), &value) {
        ("date", Value::String(at)) => match at.parse::<Timestamp>() {
            Ok(at) => Value::String(human_age(now, at)),
            Err(_) => value,
        },
        (_, Value::Null) => Value::String("<none>".into()),
        _ => value,
    }
}

/// Evaluates the JSONPath subset CRDs' printer columns use.
pub fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = object;
    for segment in split_path(path.trim_start_matches('.')) {
        let (field, filter) = match segment.split_once("[?(@.") {
            Some((field, filter)) => (field.to_string(), Some(filter.to_string())),
            None => (segment, None),
        };
        if !field.is_empty() {
            current = current.get(field.as_str())?;
        }
        if let Some(filter) = filter {
            let filter = filter.trim_end_matches(")]");
            let (key, wanted) = filter.split_once("==")?;
            let wanted = wanted.trim_matches('"');
            current = current
                .as_array()?
                .iter()
                .find(|item| item[key] == wanted)?;
        }
    }
    Some(current)
}

/// Splits at unescaped dots outside filters, unescaping `\.`.
fn split_path(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = path.chars().peekable();
    let mut depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                current.push('.');
            }
            '.' if depth == 0 => out.push(std::mem::take(&mut current)),
            _ => {
                match c {
                    '[' => depth += 1,
                    ']' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                current.push(c);
            }
        }
    }
    out.push(current);
    out.retain(|s| !s.is_empty());
    out
}

fn node_status(node: &Value) -> String {
    let ready = condition(node, "Ready");
    let mut status = match ready.as_deref() {
        Some("True") => "Ready".to_string(),
        _ => "NotReady".to_string(),
    };
    if node["spec"]["unschedulable"] == true {
        status.push_str(",SchedulingDisabled");
    }
    status
}

fn node_roles(node: &Value) -> String {
    let roles: Vec<&str> = node["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

fn internal_ip(node: &Value) -> Value {
    node["status"]["addresses"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .map(|a| a["address"].clone())
        .unwrap_or(Value::Null)
}

fn condition(object: &Value, type_: &str) -> Option<String> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str().map(String::from))
}

fn pod_ready(pod: &Value) -> String {
    let total = pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = pod["status"]["containerStatuses"]
        .as_array()
        .map(|s| s.iter().filter(|c| c["ready"] == true).count())
        .unwrap_or_else(|| {
            if condition(pod, "Ready").as_deref() == Some("True") {
                total
            } else {
                0
            }
        });
    format!("{ready}/{total}")
}

fn pod_phase(pod: &Value) -> String {
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return "Terminating".into();
    }
    pod["status"]["phase"]
        .as_str()
        .unwrap_or("Pending")
        .to_string()
}

fn restarts(pod: &Value) -> u64 {
    pod["status"]["containerStatuses"]
        .as_array()
        .map(|s| s.iter().filter_map(|c| c["restartCount"].as_u64()).sum())
        .unwrap_or(0)
}

/// The real server's short human duration (`45s`, `3m12s`, `5h10m`, `3d`).
pub fn human_age(now: Timestamp, then: Timestamp) -> String {
    let seconds = now.duration_since(then).as_secs().max(0);
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 192 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else {
        format!("{days}d")
    }
}
