//! `nodepool-limits`: no NodePool's NodeClaims together exceed its `spec.limits` on cpu or
//! memory. A pool's NodeClaims are those labelled `karpenter.sh/nodepool: <pool>`; each counts
//! its `status.capacity` (a claim without a status counts nothing). Checked after every step on
//! the observer's cached API objects, and re-counted every step for as long as the excess lasts.
//!
//! Counted as upstream counts a pool's usage against its limits (`state.Cluster`'s
//! `nodePoolResources`: a node `MarkedForDeletion` counts nothing): a claim being deleted, or one
//! whose node carries `karpenter.sh/disrupted:NoSchedule` (a disruption command's candidate),
//! does not count. So a claim that timed out and still terminates may overlap its replacement,
//! as it may upstream; what the invariant forbids is more live capacity than the limit.

use std::collections::BTreeSet;

use karpenter_core::api::NodeClaim;
use karpenter_core::resources::Resources;

use super::draining::has_disrupted_taint;
use super::{Check, Invariant, StepView, Violation};

/// Upstream's `MarkedForDeletion`: the claim is being deleted, or its node is a disruption
/// command's candidate.
fn marked_for_deletion(claim: &NodeClaim, disrupted: &BTreeSet<&str>) -> bool {
    claim.metadata.deletion_timestamp.is_some()
        || claim
            .status
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| disrupted.contains(n))
}

/// The `nodepool-limits` checker; remembers its findings until the API objects change.
#[derive(Debug, Default)]
pub struct Limits {
    /// Findings as of a cache generation.
    found: Option<(u64, Vec<String>)>,
}

impl Check for Limits {
    fn invariant(&self) -> Invariant {
        Invariant::NodepoolLimits
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let generation = step.observed.generation();
        if self.found.as_ref().is_none_or(|(g, _)| *g != generation) {
            self.found = Some((generation, excesses(step)));
        }
        let found = self.found.iter().flat_map(|(_, found)| found);
        found.map(|m| Violation::at(step.now, m.clone())).collect()
    }
}

/// One message per pool and resource over its limit.
fn excesses(step: &StepView<'_>) -> Vec<String> {
    let mut out = Vec::new();
    // Nodes a disruption command took (by name): their claims count nothing.
    let disrupted: BTreeSet<&str> = step
        .observed
        .nodes()
        .filter(|n| has_disrupted_taint(n))
        .filter_map(|n| n["metadata"]["name"].as_str())
        .collect();
    for pool in step.observed.pools() {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let Some(limits) = &pool.spec.limits else {
            continue;
        };
        let limits = Resources::from_list(limits).unwrap_or_default();
        let mut total = Resources::new();
        for claim in step.observed.claims().filter(|c| {
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("karpenter.sh/nodepool"))
                == Some(&name)
                && !marked_for_deletion(c, &disrupted)
        }) {
            if let Some(status) = &claim.status {
                total = total.plus(&Resources::from_list(&status.capacity).unwrap_or_default());
            }
        }
        for resource in ["cpu", "memory"] {
            if limits.get(resource) > 0 && total.get(resource) > limits.get(resource) {
                out.push(format!(
                    "NodePool {name}: {resource} {} > limit {}",
                    total.get(resource),
                    limits.get(resource)
                ));
            }
        }
    }
    out
}
