//! Small helpers the kube-scheduler and kubelet stand-ins share to read and write Kubernetes
//! objects through the `KubeApi` seam: decoding, timestamps at Kubernetes' precision, conditions,
//! quantities and taints.
//!
//! Kept in one crate-private module rather than duplicated so that the scheduler and the kubelet
//! agree on how a condition or a timestamp is written; neither depends on the controller's
//! scheduling code. (The invariants keep their own readers, `invariants::pod_facts`: they check
//! the stand-ins too.)

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use karpenter_core::resources::{Resources, parse_quantity};
use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::ObjectKey;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Decodes an object the API server returned; `what` names it in the error so a malformed object
/// in a long simulation can be found.
pub(crate) fn decode<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, KubeError> {
    serde_json::from_value(value).map_err(|e| KubeError::Decode(format!("{what}: {e}")))
}

/// [`decode`] from a borrowed object (a shared cache entry), without copying it first.
pub(crate) fn decode_ref<T: DeserializeOwned>(value: &Value, what: &str) -> Result<T, KubeError> {
    T::deserialize(value).map_err(|e| KubeError::Decode(format!("{what}: {e}")))
}

/// RFC 3339 at whole seconds, the way `metav1.Time` is written. Delays measured from timestamps
/// the stand-ins write are therefore exact to one second, as they are in a real cluster.
pub(crate) fn format_time(time: Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", time).unwrap_or_else(|_| time.to_string())
}

/// Parses a `metav1.Time` string; `None` when absent or unreadable.
pub(crate) fn parse_time(value: Option<&Value>) -> Option<Timestamp> {
    value?.as_str()?.parse().ok()
}

/// `time + ms`, saturating at the end of time.
pub(crate) fn after_ms(time: Timestamp, ms: u64) -> Timestamp {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    time.saturating_add(jiff::SignedDuration::from_millis(ms))
        .unwrap_or(Timestamp::MAX)
}

/// The key of an object as the seam addresses it.
pub(crate) fn object_key(object: &Value) -> ObjectKey {
    let metadata = &object["metadata"];
    ObjectKey {
        namespace: metadata["namespace"].as_str().map(str::to_string),
        name: metadata["name"].as_str().unwrap_or_default().to_string(),
    }
}

/// `patch` carrying the object's `metadata.resourceVersion` (when it has one), so that a
/// concurrent change makes the write fail with `Conflict`: merge patches replace lists whole, so a
/// blind write of `conditions` or `taints` could undo someone else's.
pub(crate) fn guarded(object: &Value, mut patch: Value) -> Value {
    let version = &object["metadata"]["resourceVersion"];
    if !version.is_null() {
        patch["metadata"]["resourceVersion"] = version.clone();
    }
    patch
}

/// The condition of type `type_` in `status.conditions`, if any.
pub(crate) fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether the condition `type_` is present with status `True`.
pub(crate) fn condition_true(object: &Value, type_: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == "True")
}

/// A condition as written by the stand-ins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NewCondition<'a> {
    pub type_: &'a str,
    pub status: &'a str,
    pub reason: Option<&'a str>,
    pub message: Option<&'a str>,
}

/// Whether `existing` already says what `new` says (type, status, reason, message).
pub(crate) fn condition_matches(existing: Option<&Value>, new: &NewCondition<'_>) -> bool {
    let Some(existing) = existing else {
        return false;
    };
    let text = |key: &str| existing[key].as_str().filter(|s| !s.is_empty());
    existing["status"] == new.status
        && text("reason") == new.reason.filter(|s| !s.is_empty())
        && text("message") == new.message.filter(|s| !s.is_empty())
}

/// The object's `status.conditions` with `updates` applied: a condition whose status changes gets
/// `lastTransitionTime = now`, one whose status stays keeps its transition time; conditions of
/// other types are kept in place. Returned whole because a merge patch replaces lists whole.
pub(crate) fn conditions_with(
    object: &Value,
    updates: &[NewCondition<'_>],
    now: Timestamp,
) -> Vec<Value> {
    let mut conditions: Vec<Value> = object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for update in updates {
        let mut written = json!({
            "type": update.type_,
            "status": update.status,
            "lastTransitionTime": format_time(now),
        });
        if let Some(reason) = update.reason {
            written["reason"] = json!(reason);
        }
        if let Some(message) = update.message {
            written["message"] = json!(message);
        }
        match conditions.iter_mut().find(|c| c["type"] == update.type_) {
            Some(slot) => {
                if slot["status"] == update.status && !slot["lastTransitionTime"].is_null() {
                    written["lastTransitionTime"] = slot["lastTransitionTime"].clone();
                }
                if !slot["lastProbeTime"].is_null() {
                    written["lastProbeTime"] = slot["lastProbeTime"].clone();
                }
                if !slot["lastHeartbeatTime"].is_null() {
                    written["lastHeartbeatTime"] = json!(format_time(now));
                }
                *slot = written;
            }
            None => conditions.push(written),
        }
    }
    conditions
}

/// Parses a resource list (`status.allocatable`, `resources.requests`) into amounts.
pub(crate) fn resources_of(
    list: Option<&BTreeMap<String, Quantity>>,
    what: &str,
) -> Result<Resources, KubeError> {
    let mut out = Resources::new();
    for (name, quantity) in list.into_iter().flatten() {
        let amount = parse_quantity(name, &quantity.0)
            .map_err(|e| KubeError::Decode(format!("{what}: {name}: {e}")))?;
        out.add_one(name, amount);
    }
    Ok(out)
}

/// A taint as JSON for `spec.taints` (an empty value is left out, as the API server does).
pub(crate) fn taint_json(key: &str, value: &str, effect: &str) -> Value {
    let mut taint = json!({ "key": key, "effect": effect });
    if !value.is_empty() {
        taint["value"] = json!(value);
    }
    taint
}
