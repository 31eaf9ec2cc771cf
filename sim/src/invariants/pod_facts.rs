//! What the checkers read off raw API objects (pods, nodes, NodeClaims, PodDisruptionBudgets as
//! JSON) and the time arithmetic they share.
//!
//! The invariants recompute these facts themselves rather than borrowing the controller's or the
//! stand-ins' code: a checker that shared the code under test would share its mistakes.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use karpenter_core::api::labels::{
    DISRUPTED_TAINT_KEY, DO_NOT_DISRUPT_ANNOTATION, MIRROR_POD_ANNOTATION,
};
use karpenter_core::resources::Resources;
use karpenter_core::seams::kube::SharedObject;
use serde_json::Value;

/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// A resource list (`requests`, `allocatable`, `capacity`) as amounts; entries that do not parse
/// are left out.
pub(crate) fn resource_list(list: &Value) -> Resources {
    let mut out = Resources::new();
    for (name, q) in list.as_object().into_iter().flatten() {
        let text = q
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| q.to_string());
        if let Ok(v) = karpenter_core::resources::parse_quantity(name, &text) {
            out.add_one(name, v);
        }
    }
    out
}

/// `time + by`, saturating.
pub(crate) fn plus(time: Timestamp, by: Duration) -> Timestamp {
    time.saturating_add(SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX))
        .unwrap_or(time)
}

/// `time - by`, saturating.
pub(crate) fn minus(time: Timestamp, by: Duration) -> Timestamp {
    time.saturating_sub(SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX))
        .unwrap_or(time)
}

/// A `metav1.Time` string; `None` when absent or unreadable.
pub(crate) fn time_of(value: &Value) -> Option<Timestamp> {
    value.as_str().and_then(|t| t.parse().ok())
}

pub(crate) fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The instance id at the end of a provider id (`aws:///zone/i-…`).
pub(crate) fn instance_of(provider_id: &str) -> &str {
    provider_id.rsplit('/').next().unwrap_or_default()
}

/// Succeeded or Failed: the pod is done and holds nothing.
pub(crate) fn is_terminal(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    )
}

pub(crate) fn is_mirror(pod: &Value) -> bool {
    pod["metadata"]["annotations"][MIRROR_POD_ANNOTATION].is_string()
}

pub(crate) fn is_daemon(pod: &Value) -> bool {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| o["kind"] == "DaemonSet")
}

/// Whether one of the pod's tolerations tolerates the taint `key=value:effect` (Kubernetes'
/// `ToleratesTaint`: an empty key with `Exists` matches every key; `Exists` matches any value,
/// `Equal` (the default) only the same one; an empty effect matches every effect).
pub(crate) fn tolerates(pod: &Value, key: &str, value: &str, effect: &str) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let t_key = t["key"].as_str().unwrap_or_default();
            let exists = t["operator"] == "Exists";
            let t_effect = t["effect"].as_str().unwrap_or_default();
            let key_matches = if t_key.is_empty() {
                exists
            } else {
                t_key == key
            };
            let value_matches = exists || t["value"].as_str().unwrap_or_default() == value;
            key_matches && value_matches && (t_effect.is_empty() || t_effect == effect)
        })
}

/// Whether the pod tolerates the `karpenter.sh/disrupted:NoSchedule` taint (it chose to stay).
pub(crate) fn tolerates_disrupted(pod: &Value) -> bool {
    pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| {
            let key = t["key"].as_str().unwrap_or_default();
            let exists = t["operator"] == "Exists";
            let effect = t["effect"].as_str().unwrap_or_default();
            (key.is_empty() && exists || key == DISRUPTED_TAINT_KEY)
                && (effect.is_empty() || effect == "NoSchedule")
        })
}

pub(crate) fn is_do_not_disrupt(pod: &Value) -> bool {
    pod["metadata"]["annotations"][DO_NOT_DISRUPT_ANNOTATION] == "true"
}

pub(crate) fn is_deleting(object: &Value) -> bool {
    object["metadata"]["deletionTimestamp"].is_string()
}

/// The pod's `terminationGracePeriodSeconds` (Kubernetes' default when unset, never negative).
pub(crate) fn grace_seconds(pod: &Value) -> i64 {
    pod["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_POD_GRACE_SECONDS)
        .max(0)
}

/// Whether any condition of type `type_` has status `True`.
pub(crate) fn condition_true(object: &Value, type_: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == type_ && c["status"] == "True")
}

/// Running, not being deleted, and Ready if it reports readiness.
pub(crate) fn is_healthy(pod: &Value) -> bool {
    let ready = pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .is_none_or(|c| c["status"] == "True");
    pod["status"]["phase"] == "Running" && !is_deleting(pod) && ready
}

/// What the pod takes from a node: its containers' requests plus one pod slot.
pub(crate) fn requests(pod: &Value) -> Resources {
    let mut total = Resources::new();
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        total = total.plus(&resource_list(&c["resources"]["requests"]));
    }
    total.add_one("pods", 1);
    total
}

pub(crate) fn node_of_instance<'a>(nodes: &'a [SharedObject], instance: &str) -> Option<&'a Value> {
    nodes.iter().map(|n| &**n).find(|n| {
        n["spec"]["providerID"]
            .as_str()
            .is_some_and(|p| instance_of(p) == instance)
    })
}

/// The NodeClaim of a node, by provider id.
pub(crate) fn claim_of_node<'a>(claims: &'a [SharedObject], node: &Value) -> Option<&'a Value> {
    let provider = node["spec"]["providerID"].as_str()?;
    claims
        .iter()
        .map(|c| &**c)
        .find(|c| c["status"]["providerID"].as_str() == Some(provider))
}

/// A NodeClaim's `spec.terminationGracePeriod`, if it has one.
pub(crate) fn termination_grace_period(claim: &Value) -> Option<Duration> {
    claim["spec"]["terminationGracePeriod"]
        .as_str()
        .and_then(|t| humantime::parse_duration(t).ok())
}

/// A deleting claim's terminationGracePeriod deadline (deletionTimestamp + the period).
pub(crate) fn claim_deadline(claim: &Value) -> Option<Timestamp> {
    let deleted = time_of(&claim["metadata"]["deletionTimestamp"])?;
    Some(plus(deleted, termination_grace_period(claim)?))
}

/// Whether a pod removed at `at` was inside its NodeClaim's terminationGracePeriod window (at or
/// after `deadline − the pod's grace period`), when the controller may remove it regardless of
/// budgets and `do-not-disrupt`.
pub(crate) fn in_grace_window(
    pod: &Value,
    at: Timestamp,
    nodes: &[SharedObject],
    claims: &[SharedObject],
) -> bool {
    let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
    nodes
        .iter()
        .find(|n| name_of(n) == node)
        .and_then(|n| claim_of_node(claims, n))
        .and_then(claim_deadline)
        .is_some_and(|d| {
            at >= d
                .checked_sub(SignedDuration::from_secs(grace_seconds(pod)))
                .unwrap_or(d)
        })
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    if !selector.is_object() {
        return false;
    }
    let label = |key: &str| labels[key].as_str();
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_expressions
}

/// Whether a PodDisruptionBudget covers `pod` (same namespace, selector matches its labels).
pub(crate) fn pdb_covers(pdb: &Value, pod: &Value) -> bool {
    pdb["metadata"]["namespace"] == pod["metadata"]["namespace"]
        && selects(&pdb["spec"]["selector"], &pod["metadata"]["labels"])
}
