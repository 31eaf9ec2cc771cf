//! `drain-order`: the controller drains a node in upstream's eviction tiers. Upstream's
//! terminator groups the pods it waits for into non-critical non-DaemonSet, non-critical
//! DaemonSet, critical non-DaemonSet and critical DaemonSet pods (critical: `priorityClassName`
//! `system-cluster-critical` or `system-node-critical`), in that order, and starts a group only
//! once no pod of an earlier group is waiting: daemons (log shippers, the CNI) and cluster
//! services (DNS) outlive the workloads that need them.
//!
//! A violation is a pod the controller evicts or deletes (as the audited seam saw the call
//! succeed) while a pod of an earlier tier was still bound to the same node and waited for, as
//! upstream's `IsWaitingEviction` counts it: not finished, not a mirror pod (annotation or a
//! `Node` owner), not tolerating `karpenter.sh/disrupted:NoSchedule`, and not stuck terminating
//! (over a minute past its deletionTimestamp). Terminating pods of an earlier tier still hold the
//! later tiers back, and so do `do-not-disrupt` and PDB-blocked ones, as upstream.
//!
//! Allowed, as upstream allows them:
//! - a delete inside the removed pod's terminationGracePeriod window (at or after its claim's
//!   `deadline − the pod's grace period`), which upstream makes for every tier at once;
//! - an earlier-tier pod the kubelet started less than [`CACHE_SLACK`] before the removal (or
//!   not at all): the controller drains from a watch-fed cache, which may not show a pod bound
//!   that recently, as upstream's informer may not.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::pod_facts::{
    in_grace_window, is_daemon, is_mirror, is_terminal, minus, name_of, time_of,
    tolerates_disrupted,
};
use super::{Check, Invariant, StepView, Violation};

/// How long past its deletionTimestamp a terminating pod is still waited for (upstream's
/// `IsStuckTerminating`: one minute).
pub const STUCK_TERMINATING: Duration = Duration::from_secs(60);

/// How long a pod must have been started on its node before the controller is held to having
/// seen it there (its watch may lag, more so under `api-watch-drop`).
pub const CACHE_SLACK: Duration = Duration::from_secs(60);

/// A pod's eviction tier, in drain order (upstream's pod groups).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    NonCriticalNonDaemon,
    NonCriticalDaemon,
    CriticalNonDaemon,
    CriticalDaemon,
}

/// Whether the pod runs at one of the two built-in critical priority classes.
pub fn is_critical(pod: &Value) -> bool {
    matches!(
        pod["spec"]["priorityClassName"].as_str(),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

pub fn tier(pod: &Value) -> Tier {
    match (is_critical(pod), is_daemon(pod)) {
        (false, false) => Tier::NonCriticalNonDaemon,
        (false, true) => Tier::NonCriticalDaemon,
        (true, false) => Tier::CriticalNonDaemon,
        (true, true) => Tier::CriticalDaemon,
    }
}

fn owned_by_node(pod: &Value) -> bool {
    pod["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|o| o["kind"] == "Node")
}

/// Whether a drain at `at` still waits for `pod` (upstream's `IsWaitingEviction`).
pub fn waited_for(pod: &Value, at: Timestamp) -> bool {
    let stuck = time_of(&pod["metadata"]["deletionTimestamp"])
        .is_some_and(|deleted| minus(at, STUCK_TERMINATING) > deleted);
    !is_terminal(pod)
        && !is_mirror(pod)
        && !owned_by_node(pod)
        && !tolerates_disrupted(pod)
        && !stuck
}

/// Whether the controller can be held to having seen `pod` on its node at `at`.
fn seen_long_enough(pod: &Value, at: Timestamp) -> bool {
    time_of(&pod["status"]["startTime"]).is_some_and(|started| started <= minus(at, CACHE_SLACK))
}

/// The `drain-order` checker (no memory between steps: each removal carries its neighbours).
#[derive(Debug, Default)]
pub struct DrainOrder;

impl Check for DrainOrder {
    fn invariant(&self) -> Invariant {
        Invariant::DrainOrder
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let removals = &step.audit.pod_removals;
        if removals.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for removal in removals {
            let own = tier(&removal.pod);
            let blocker = removal.neighbours.iter().find(|q| {
                tier(q) < own && waited_for(q, removal.at) && seen_long_enough(q, removal.at)
            });
            let Some(blocker) = blocker else {
                continue;
            };
            if !removal.evicted
                && in_grace_window(&removal.pod, removal.at, step.nodes(), step.claims())
            {
                continue;
            }
            out.push(Violation::at(
                removal.at,
                format!(
                    "pod {}/{} ({:?}) {} by the controller from node {} while pod {}/{} ({:?}{}) of an earlier tier was still waited for there",
                    removal.pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                    name_of(&removal.pod),
                    own,
                    if removal.evicted { "evicted" } else { "deleted" },
                    removal.pod["spec"]["nodeName"].as_str().unwrap_or_default(),
                    blocker["metadata"]["namespace"].as_str().unwrap_or_default(),
                    name_of(blocker),
                    tier(blocker),
                    if blocker["metadata"]["deletionTimestamp"].is_string() {
                        ", terminating"
                    } else {
                        ""
                    },
                ),
            ));
        }
        out
    }
}
