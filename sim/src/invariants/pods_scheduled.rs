//! `pods-scheduled`: no pod stays pending longer than [`POD_PENDING_MAX`] while capacity exists:
//! no capacity incident (an insufficient-capacity answer in the last
//! [`CAPACITY_ERROR_SHADOW`](super::cloud_history::CAPACITY_ERROR_SHADOW), a slow bootstrap
//! until it joined, a never-booting instance until its registration deadline) overlapped its
//! wait, and no NodePool with limits is too full for it. EC2 throttling and 5xx answers are not
//! missing capacity (the controller retries them).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::resources::Resources;
use serde_json::Value;

use super::pod_facts::{name_of, requests, resource_list};
use super::{Check, Invariant, StepView, Violation};

/// Longest a pod may stay pending while capacity exists (batching, launch and bootstrap take
/// about two minutes; the rest is room for API and EC2 errors and retries).
pub const POD_PENDING_MAX: Duration = Duration::from_secs(10 * 60);

/// The `pods-scheduled` checker: when each pending pod started waiting.
#[derive(Debug, Default)]
pub struct PodsScheduled {
    pending_since: BTreeMap<String, Timestamp>,
}

impl PodsScheduled {
    /// When the longest-waiting pod started waiting (as of the last step).
    pub fn oldest_pending(&self) -> Option<Timestamp> {
        self.pending_since.values().min().copied()
    }
}

impl Check for PodsScheduled {
    fn invariant(&self) -> Invariant {
        Invariant::PodsScheduled
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let now = step.now;
        let pending: BTreeSet<&String> = step.observation.pending_names.iter().collect();
        self.pending_since.retain(|name, _| pending.contains(name));
        for name in pending {
            self.pending_since.entry(name.clone()).or_insert(now);
        }
        let overdue = self
            .pending_since
            .iter()
            .filter(|(_, since)| now.duration_since(**since).unsigned_abs() > POD_PENDING_MAX)
            .filter(|(_, since)| !step.history.capacity_lost(**since, now));
        let mut out = Vec::new();
        for (name, since) in overdue {
            let Some(pod) = step.pods().iter().find(|p| name_of(p) == name) else {
                continue;
            };
            if pool_too_full(step, pod) {
                continue;
            }
            out.push(Violation::at(
                now,
                format!(
                    "pod {name} pending for {}s while capacity existed",
                    now.duration_since(*since).as_secs()
                ),
            ));
        }
        out
    }
}

/// Whether every NodePool with limits is too full to add a node for `pod` (then its wait is
/// the user's limit, not a stuck controller). Pools without limits are never full.
fn pool_too_full(step: &StepView<'_>, pod: &Value) -> bool {
    let need = requests(pod);
    let claims = step.claims();
    let pools = step.pools();
    if pools.is_empty() {
        return false;
    }
    pools.iter().all(|pool| {
        let limits = resource_list(&pool["spec"]["limits"]);
        if limits.is_empty() {
            return false;
        }
        let name = name_of(pool);
        let mut used = Resources::new();
        for claim in claims
            .iter()
            .filter(|c| c["metadata"]["labels"]["karpenter.sh/nodepool"] == name)
        {
            used = used.plus(&resource_list(&claim["status"]["capacity"]));
        }
        ["cpu", "memory"]
            .iter()
            .any(|r| limits.get(r) > 0 && used.get(r) + need.get(r) > limits.get(r))
    })
}
