//! `claim-storm`: retry storms do not mint NodeClaims endlessly. Over every sliding window of
//! [`CLAIM_STORM_WINDOW`], the NodeClaims the controller deleted without an instance ever
//! launched for them *that offered EC2 nothing new* number at most
//! [`CLAIM_STORM_FAILED_LAUNCHES_FLOOR`] plus the number of distinct pods pending at some step
//! of the window. A claim offered something new when one of its `CreateFleet` requests (found by
//! the request's `karpenter.sh/nodeclaim` tag) named an offering — instance type, zone, capacity
//! type — that no `CreateFleet` of any process had been answered insufficient capacity for in the
//! [`UNAVAILABLE_TTL`] before; a claim that sent no `CreateFleet` (every offering known
//! unavailable, a claim deleted before its launch) offered nothing new.
//!
//! Why that bound: after a capacity error the failed offerings are cached unavailable for three
//! minutes, so a new claim for the same pods either tries offerings not yet tried (upstream's
//! walk: a claim's `CreateFleet` names at most the 60 cheapest types, so a pod group whose zone
//! lost all capacity takes `ceil(offerings / 60)` claims per capacity type for each TTL — swarm
//! seed 325: 34 claims in 10 minutes for 23 pods whose volumes pinned them to a zone a
//! `capacity-wave` had emptied, each trying fresh offerings, as upstream's would) or is a retry
//! of what just failed; a controller that turns retries into new claims makes one such claim per
//! reconcile, hundreds per window. Only the latter is the storm this bounds
//! (`unavailable-offerings-honoured` checks each process's cache offering by offering).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use karpenter_core::catalog::CapacityType;

use super::pod_facts::minus;
use super::unavailable::UNAVAILABLE_TTL;
use super::{Check, Invariant, StepView, Violation};

/// Sliding window of `claim-storm`.
pub const CLAIM_STORM_WINDOW: Duration = Duration::from_secs(10 * 60);
/// Failed launches `claim-storm` allows in a window besides one per pending pod.
pub const CLAIM_STORM_FAILED_LAUNCHES_FLOOR: usize = 10;

/// The `claim-storm` checker: the window's pending pods and failed launches.
#[derive(Debug, Default)]
pub struct ClaimStorm {
    /// Pod name → last step it was pending.
    pending_seen: BTreeMap<String, Timestamp>,
    /// When each claim deleted without a launch and without offering anything new was deleted,
    /// oldest first.
    failed_launches: VecDeque<Timestamp>,
    /// Offering (instance type, zone, capacity type) → when a `CreateFleet` was last answered
    /// insufficient capacity for it.
    insufficient_at: BTreeMap<(String, String, CapacityType), Timestamp>,
    /// Claims (not yet ended) whose `CreateFleet` offered something new.
    tried_fresh: BTreeSet<String>,
}

impl Check for ClaimStorm {
    fn invariant(&self) -> Invariant {
        Invariant::ClaimStorm
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let now = step.now;
        let start = minus(now, CLAIM_STORM_WINDOW);
        for name in step.observation.pending_names.iter() {
            self.pending_seen.insert(name.clone(), now);
        }
        self.pending_seen.retain(|_, t| *t > start);
        for call in &step.audit.fleets {
            let fresh = call.offerings.iter().any(|(kind, zone)| {
                self.insufficient_at
                    .get(&(kind.clone(), zone.clone(), call.capacity_type))
                    .is_none_or(|&t| call.at.duration_since(t).unsigned_abs() >= UNAVAILABLE_TTL)
            });
            if fresh && let Some(claim) = &call.claim {
                self.tried_fresh.insert(claim.clone());
            }
            for (kind, zone) in &call.insufficient {
                self.insufficient_at
                    .insert((kind.clone(), zone.clone(), call.capacity_type), call.at);
            }
        }
        for ended in &step.audit.claims_ended {
            let fresh = self.tried_fresh.remove(&ended.name);
            if !ended.launched && !fresh {
                self.failed_launches.push_back(ended.at);
            }
        }
        while self.failed_launches.front().is_some_and(|t| *t <= start) {
            self.failed_launches.pop_front();
        }
        let allowed = CLAIM_STORM_FAILED_LAUNCHES_FLOOR + self.pending_seen.len();
        if self.failed_launches.len() <= allowed {
            return Vec::new();
        }
        vec![Violation::at(
            now,
            format!(
                "{} NodeClaims deleted without launching or offering anything new in the last {}s, with {} pods pending (at most {allowed})",
                self.failed_launches.len(),
                CLAIM_STORM_WINDOW.as_secs(),
                self.pending_seen.len()
            ),
        )]
    }
}
