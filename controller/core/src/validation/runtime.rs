//! Rules upstream enforces in Go (`RuntimeValidate`, readiness checks) because neither the OpenAPI
//! schema nor CEL expresses them: label-key syntax inside maps, duplicate taints, values of
//! well-known labels, and cron syntax of budget schedules.
//!
//! Runs only on structurally valid objects (the schema walk ran first), so shapes can be assumed;
//! it still never indexes blindly.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Kind, Violation};
use crate::api::labels::{CAPACITY_TYPE_LABEL, CAPACITY_TYPES, normalize_label};
use crate::api::nodepool::parse_schedule;

pub(super) fn check(kind: Kind, object: &Value, out: &mut Vec<Violation>) {
    match kind {
        Kind::NodePool => {
            let template = &object["spec"]["template"];
            check_label_keys(
                &template["metadata"]["labels"],
                "spec.template.metadata.labels",
                out,
            );
            check_claim_spec(&template["spec"], "spec.template.spec", out);
            check_budgets(&object["spec"]["disruption"]["budgets"], out);
        }
        Kind::NodeClaim => check_claim_spec(&object["spec"], "spec", out),
        Kind::EC2NodeClass => {}
    }
}

fn check_claim_spec(spec: &Value, path: &str, out: &mut Vec<Violation>) {
    check_duplicate_taints(spec, path, out);
    if let Some(requirements) = spec["requirements"].as_array() {
        for (i, requirement) in requirements.iter().enumerate() {
            check_known_values(requirement, &format!("{path}.requirements[{i}]"), out);
        }
    }
}

/// Kubernetes `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of at most
/// 63 characters. The schema cannot check map keys, so label maps are checked here.
pub(crate) fn qualified_name_error(key: &str) -> Option<String> {
    static NAME: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").expect("valid regex")
    });
    static PREFIX: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .expect("valid regex")
    });
    let (name_re, prefix_re) = (&*NAME, &*PREFIX);
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty() || prefix.len() > 253 || !prefix_re.is_match(prefix))
    {
        return Some(format!(
            "invalid key {key:?}: prefix part must be a lowercase DNS subdomain of at most 253 characters"
        ));
    }
    if name.is_empty() || name.len() > 63 || !name_re.is_match(name) {
        return Some(format!(
            "invalid key {key:?}: name part must be at most 63 characters of alphanumerics, '-', '_' \
             or '.', starting and ending with an alphanumeric"
        ));
    }
    None
}

fn check_label_keys(labels: &Value, path: &str, out: &mut Vec<Violation>) {
    if let Some(labels) = labels.as_object() {
        for key in labels.keys() {
            if let Some(error) = qualified_name_error(key) {
                out.push(Violation::new(format!("{path}[{key}]"), error));
            }
        }
    }
}

/// Upstream rejects a repeated (key, effect) pair across `taints` and `startupTaints`.
fn check_duplicate_taints(spec: &Value, path: &str, out: &mut Vec<Violation>) {
    let mut seen = BTreeSet::new();
    for field in ["taints", "startupTaints"] {
        let Some(taints) = spec[field].as_array() else {
            continue;
        };
        for (i, taint) in taints.iter().enumerate() {
            let key = taint["key"].as_str().unwrap_or_default();
            let effect = taint["effect"].as_str().unwrap_or_default();
            if !seen.insert((key.to_string(), effect.to_string())) {
                out.push(Violation::new(
                    format!("{path}.{field}[{i}]"),
                    format!("duplicate taint Key/Effect pair {key}={effect}"),
                ));
            }
        }
    }
}

/// A requirement on a label with a closed value set (`karpenter.sh/capacity-type`) must name at
/// least one valid value, and enough of them for its `minValues`.
fn check_known_values(requirement: &Value, path: &str, out: &mut Vec<Violation>) {
    let key = normalize_label(requirement["key"].as_str().unwrap_or_default());
    if key != CAPACITY_TYPE_LABEL || requirement["operator"].as_str() != Some("In") {
        return;
    }
    let values: Vec<&str> = requirement["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if values.is_empty() {
        return; // reported by the 'In needs a value' rule
    }
    let valid = values.iter().filter(|v| CAPACITY_TYPES.contains(v)).count();
    if valid == 0 {
        out.push(Violation::new(
            format!("{path}.values"),
            format!(
                "no valid values found in {values:?} for {key}, expected one of: {}",
                CAPACITY_TYPES.join(", ")
            ),
        ));
    } else if let Some(min) = requirement["minValues"].as_u64()
        && (valid as u64) < min
    {
        out.push(Violation::new(
            format!("{path}.minValues"),
            format!(
                "not enough valid values found in {values:?} for {key}, expected at least {min}"
            ),
        ));
    }
}

/// Budget schedules must parse as cron. Upstream's schema accepts any five tokens and a broken
/// schedule silently blocks all disruption at run time; we reject it up front.
fn check_budgets(budgets: &Value, out: &mut Vec<Violation>) {
    let Some(budgets) = budgets.as_array() else {
        return;
    };
    for (i, budget) in budgets.iter().enumerate() {
        if let Some(schedule) = budget["schedule"].as_str()
            && let Err(error) = parse_schedule(schedule)
        {
            out.push(Violation::new(
                format!("spec.disruption.budgets[{i}].schedule"),
                error,
            ));
        }
    }
}
