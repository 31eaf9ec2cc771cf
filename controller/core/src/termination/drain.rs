//! Which pods a drain waits for, in which order it evicts them, and when it stops asking nicely.
//!
//! Pure functions of the pods, the clock and the eviction backoff, so the drain decision of one
//! step is a function of what the API server holds (plus the soft backoff state).
//!
//! - A pod is *drainable* (the drain waits for it) unless it is terminal (`Succeeded`/`Failed`),
//!   a mirror/static pod (the kubelet owns it), tolerates the `karpenter.sh/disrupted` taint (it
//!   chose to stay), or is stuck terminating (over [`STUCK_TERMINATING`] past its
//!   deletionTimestamp: its kubelet is gone and it will only disappear with the node).
//! - A drainable pod is *evictable* unless it is already terminating or carries
//!   `karpenter.sh/do-not-disrupt: "true"` (waited for, never evicted).
//! - Eviction goes in upstream's tiers: non-critical non-DaemonSet, non-critical DaemonSet,
//!   critical non-DaemonSet, critical DaemonSet (critical = priorityClassName
//!   `system-cluster-critical` or `system-node-critical`). A tier is evicted only once no
//!   drainable pod of an earlier tier is left, so daemons (logging, CNI) outlive the workloads that
//!   need them.
//! - With a terminationGracePeriod deadline, each drainable pod is deleted directly (bypassing
//!   PodDisruptionBudgets and do-not-disrupt) at `deadline − its terminationGracePeriodSeconds`,
//!   in any tier, so it still gets its whole grace period before the node goes.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;

use crate::api::labels::{DISRUPTED_TAINT_KEY, DO_NOT_DISRUPT_ANNOTATION, MIRROR_POD_ANNOTATION};

/// How long past its deletionTimestamp a terminating pod is still waited for (upstream: 1 min).
pub const STUCK_TERMINATING: Duration = Duration::from_secs(60);
/// First retry delay after a failed eviction (upstream's rate limiter starts at 100 ms).
pub const EVICTION_BACKOFF_MS_MIN: u64 = 100;
/// Longest retry delay between evictions of one pod (upstream: 10 s). A PDB-blocked pod is
/// retried at this pace for as long as the node waits: without a terminationGracePeriod that is
/// unbounded by design (upstream's behaviour), and visible as the `Drained` condition, a
/// `DisruptionBlocked` event and `karpenter_pods_termination_blocked`.
pub const EVICTION_BACKOFF_MS_MAX: u64 = 10_000;
/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_POD_GRACE_SECONDS: i64 = 30;
/// Shortest grace period a drain gives a pod it deletes for the node's deadline (upstream clamps
/// to the remaining time; at least a second, so the kubelet still sends SIGTERM first).
pub const FORCED_GRACE_SECONDS_MIN: i64 = 1;

/// Eviction tiers, in the order they are drained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    NonCriticalNonDaemon,
    NonCriticalDaemon,
    CriticalNonDaemon,
    CriticalDaemon,
}

/// Soft retry state of one pod's eviction (kept in memory: losing it on a restart only means an
/// early retry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictionBackoff {
    /// Consecutive failed evictions.
    pub failures: u32,
    /// Not retried before this.
    pub retry_at: Timestamp,
    /// The last failure was a PodDisruptionBudget refusal (429).
    pub refused_by_budget: bool,
}

impl EvictionBackoff {
    /// The state after one more failure at `now`: the delay doubles from
    /// [`EVICTION_BACKOFF_MS_MIN`] up to [`EVICTION_BACKOFF_MS_MAX`].
    pub fn after_failure(previous: Option<&Self>, now: Timestamp, refused_by_budget: bool) -> Self {
        let failures = previous.map_or(0, |b| b.failures).saturating_add(1);
        let shift = failures.saturating_sub(1).min(16);
        let ms = EVICTION_BACKOFF_MS_MIN
            .saturating_mul(1u64 << shift)
            .min(EVICTION_BACKOFF_MS_MAX);
        let retry_at = now
            .saturating_add(SignedDuration::from_millis(ms as i64))
            .unwrap_or(now);
        Self {
            failures,
            retry_at,
            refused_by_budget,
        }
    }
}

/// `namespace/name` of a pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// A static pod's mirror: the kubelet runs it from a file, the API cannot evict it.
pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION))
        || crate::scheduling::pod::is_owned_by_node(pod)
}

/// Owned by an `apps/v1` DaemonSet (see [`crate::scheduling::pod::is_owned_by_daemonset`]).
pub fn is_daemonset_owned(pod: &Pod) -> bool {
    crate::scheduling::pod::is_owned_by_daemonset(pod)
}

pub fn is_critical(pod: &Pod) -> bool {
    matches!(
        pod.spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref()),
        Some("system-cluster-critical" | "system-node-critical")
    )
}

pub fn tier(pod: &Pod) -> Tier {
    match (is_critical(pod), is_daemonset_owned(pod)) {
        (false, false) => Tier::NonCriticalNonDaemon,
        (false, true) => Tier::NonCriticalDaemon,
        (true, false) => Tier::CriticalNonDaemon,
        (true, true) => Tier::CriticalDaemon,
    }
}

/// Whether the pod tolerates `karpenter.sh/disrupted:NoSchedule` (Kubernetes' toleration rules:
/// an empty key with `Exists` matches every taint, an empty effect every effect).
pub fn tolerates_disrupted(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|t| {
            let effect_ok = t
                .effect
                .as_deref()
                .is_none_or(|e| e.is_empty() || e == "NoSchedule");
            let key = t.key.as_deref().unwrap_or_default();
            let exists = t.operator.as_deref() == Some("Exists");
            let key_ok = (key.is_empty() && exists) || key == DISRUPTED_TAINT_KEY;
            let value_ok = exists || t.value.as_deref().unwrap_or_default().is_empty();
            effect_ok && key_ok && value_ok
        })
}

fn deletion_time(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.deletion_timestamp.as_ref().map(|t| t.0)
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

pub fn is_stuck_terminating(pod: &Pod, now: Timestamp) -> bool {
    deletion_time(pod)
        .is_some_and(|t| now > t && now.duration_since(t).unsigned_abs() > STUCK_TERMINATING)
}

/// Whether the drain waits for this pod (see the module docs).
pub fn is_drainable(pod: &Pod, now: Timestamp) -> bool {
    !is_terminal(pod)
        && !is_mirror(pod)
        && !tolerates_disrupted(pod)
        && !is_stuck_terminating(pod, now)
}

/// `karpenter.sh/do-not-disrupt` in force: `"true"`, or a duration (`"30m"`) the pod is younger
/// than (upstream's `IsDoNotDisruptActive`). Any other value protects nothing, as upstream.
pub fn is_do_not_disrupt(pod: &Pod, now: Timestamp) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DO_NOT_DISRUPT_ANNOTATION))
        .is_some_and(|value| {
            let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
            crate::disruption::candidates::do_not_disrupt_active(value, created, now)
        })
}

/// Whether a replacement node has to hold this pod: a drainable pod no DaemonSet brings back.
pub fn needs_replacement(pod: &Pod, now: Timestamp) -> bool {
    is_drainable(pod, now) && !is_daemonset_owned(pod)
}

pub fn grace_seconds(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_POD_GRACE_SECONDS)
        .max(0)
}

/// One pod the drain acts on this step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodAction {
    /// `namespace/name`.
    pub key: String,
    pub uid: String,
    /// For a forced delete: the grace period granted, seconds.
    pub grace_seconds: i64,
    /// The pod's own `terminationGracePeriodSeconds` (what a forced delete cut short), seconds.
    pub own_grace_seconds: i64,
}

/// What one drain step does and what it leaves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// Pods to delete directly because the node's deadline is near (any tier).
    pub force_delete: Vec<PodAction>,
    /// Pods to evict now (the first tier with drainable pods; backoff respected).
    pub evict: Vec<PodAction>,
    /// Evictable pods of that tier still backing off after a failed eviction.
    pub backing_off: usize,
    /// Drainable pods left (the drain is complete when this is zero).
    pub waiting: usize,
    /// Drainable pods already terminating.
    pub terminating: usize,
    /// Waiting pods protected by do-not-disrupt.
    pub do_not_disrupt: usize,
    /// Waiting pods whose last eviction a PodDisruptionBudget refused.
    pub refused_by_budget: usize,
    /// The tier being evicted, if any pod is evictable.
    pub tier: Option<Tier>,
}

/// The drain step for the pods bound to one node. `pods` in (namespace, name) order;
/// `backoff` by pod UID.
pub fn plan(
    pods: &[&Pod],
    now: Timestamp,
    deadline: Option<Timestamp>,
    backoff: &BTreeMap<String, EvictionBackoff>,
) -> DrainPlan {
    let mut out = DrainPlan::default();
    let waiting: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| is_drainable(p, now))
        .collect();
    out.waiting = waiting.len();
    for pod in &waiting {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if is_terminating(pod) {
            out.terminating += 1;
        } else if is_do_not_disrupt(pod, now) {
            out.do_not_disrupt += 1;
        } else if backoff.get(&uid).is_some_and(|b| b.refused_by_budget) {
            out.refused_by_budget += 1;
        }
        if let Some(deadline) = deadline {
            let grace = grace_seconds(pod);
            let delete_at = deadline
                .checked_sub(SignedDuration::from_secs(grace))
                .unwrap_or(deadline);
            // Already terminating in time for the deadline (or, past it, within the shortest
            // grace a forced delete gives): deleting again would shorten nothing.
            let floor = now
                .checked_add(SignedDuration::from_secs(FORCED_GRACE_SECONDS_MIN))
                .unwrap_or(now);
            let ends_in_time = deletion_time(pod).is_some_and(|t| t <= deadline.max(floor));
            if now >= delete_at && !ends_in_time {
                let left = deadline.duration_since(now).as_secs();
                out.force_delete.push(PodAction {
                    key: pod_key(pod),
                    uid,
                    grace_seconds: left.min(grace).max(FORCED_GRACE_SECONDS_MIN),
                    own_grace_seconds: grace,
                });
            }
        }
    }
    let forced: Vec<&str> = out.force_delete.iter().map(|a| a.uid.as_str()).collect();
    out.tier = waiting.iter().map(|p| tier(p)).min();
    let Some(current) = out.tier else {
        return out;
    };
    for pod in waiting.iter().filter(|p| tier(p) == current) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if is_terminating(pod) || is_do_not_disrupt(pod, now) || forced.contains(&uid.as_str()) {
            continue;
        }
        if backoff.get(&uid).is_some_and(|b| b.retry_at > now) {
            out.backing_off += 1;
            continue;
        }
        out.evict.push(PodAction {
            key: pod_key(pod),
            uid,
            grace_seconds: grace_seconds(pod),
            own_grace_seconds: grace_seconds(pod),
        });
    }
    out
}
