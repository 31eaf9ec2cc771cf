//! Kubernetes' taint eviction controller (the node lifecycle controller's `NoExecute` taint
//! manager), for the nodes the stand-in plays: a pod bound to a node with a `NoExecute` taint it
//! does not tolerate is deleted (a plain delete with the pod's own grace period: no
//! PodDisruptionBudget, no `karpenter.sh/do-not-disrupt`, as in a real cluster); one that
//! tolerates it with `tolerationSeconds` is deleted that long after the taint's `timeAdded`
//! (the smallest over its taints); one that tolerates it without is left.
//!
//! Every pod Kubernetes admits carries `node.kubernetes.io/not-ready` and
//! `node.kubernetes.io/unreachable` `NoExecute` tolerations of 300 s unless it declares its own
//! (the `DefaultTolerationSeconds` admission plugin); the in-memory API server does not add
//! them, so a pod without its own is judged as if it had them here (a deliberate shortcut: the
//! objects the controller reads stay as they were written). So when an instance stops (the
//! kubelet stand-in taints its node `not-ready:NoExecute`), its pods are deleted 300 s later;
//! they then stay `Terminating` (no kubelet confirms them) until the node is gone and PodGC
//! removes them, and a drain stops waiting for them once they are stuck terminating.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Taint, Toleration};
use serde_json::Value;

use crate::objects::parse_time;
use crate::scheduler::matching::tolerates;

/// `DefaultTolerationSeconds`' `--default-not-ready-toleration-seconds` and
/// `--default-unreachable-toleration-seconds` (both 300 by default).
pub const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The taints `DefaultTolerationSeconds` adds a toleration for.
const DEFAULT_TOLERATED: [&str; 2] = [super::NOT_READY_TAINT, "node.kubernetes.io/unreachable"];

/// A node's `NoExecute` taints with when each was added (none for most nodes). A taint without
/// `timeAdded` counts from `now`: only a pod that does not tolerate it at all is deleted for it.
pub(super) fn no_execute_taints(node: &Value, now: Timestamp) -> Vec<(Taint, Timestamp)> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["effect"] == "NoExecute")
        .filter_map(|t| {
            let taint: Taint = serde_json::from_value(t.clone()).ok()?;
            let added = parse_time(Some(&t["timeAdded"])).unwrap_or(now);
            Some((taint, added))
        })
        .collect()
}

/// The nodes with `NoExecute` taints (a NotReady node's, mostly), by name: their pods' fate
/// depends on the time, so a pods pass over them is never quiet.
pub(super) fn tainted_nodes(
    nodes: &[std::sync::Arc<Value>],
    now: Timestamp,
) -> BTreeMap<&str, Vec<(Taint, Timestamp)>> {
    nodes
        .iter()
        .filter_map(|n| {
            let taints = no_execute_taints(n, now);
            let name = n["metadata"]["name"].as_str().unwrap_or_default();
            (!taints.is_empty()).then_some((name, taints))
        })
        .collect()
}

/// When the taint manager deletes `pod` from a node with `taints` (`None`: never). Only for a
/// pod neither finished nor already being deleted.
pub(super) fn eviction_time(pod: &Value, taints: &[(Taint, Timestamp)]) -> Option<Timestamp> {
    if taints.is_empty()
        || !pod["metadata"]["deletionTimestamp"].is_null()
        || matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
    {
        return None;
    }
    let tolerations: Vec<Toleration> = pod["spec"]["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| serde_json::from_value(t.clone()).ok())
        .collect();
    taints
        .iter()
        .filter_map(|(taint, added)| {
            let matching: Vec<&Toleration> =
                tolerations.iter().filter(|t| tolerates(t, taint)).collect();
            let seconds = if matching.is_empty() {
                if !DEFAULT_TOLERATED.contains(&taint.key.as_str()) {
                    return Some(*added);
                }
                Some(DEFAULT_TOLERATION_SECONDS)
            } else {
                // Kubernetes' `getMinTolerationTime`: the smallest `tolerationSeconds` among the
                // matching tolerations; forever when none sets one.
                matching.iter().filter_map(|t| t.toleration_seconds).min()
            };
            let seconds = seconds?.max(0);
            added.checked_add(SignedDuration::from_secs(seconds)).ok()
        })
        .min()
}
