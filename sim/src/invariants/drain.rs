//! `drained-before-terminate`: an instance that was live at the previous step and is shutting
//! down or terminated now, and was not reclaimed by EC2 after a spot warning ([`SPOT_NOTICE`]
//! elapsed) nor terminated by the harness itself ([`Drain::note_external_termination`]), had no
//! pod on its node that the rule counts (neither finished, a mirror pod, nor tolerating
//! `karpenter.sh/disrupted`) still waiting:
//!
//! - before its NodeClaim's terminationGracePeriod deadline (or with none), every counted pod was
//!   deleted with its grace period over (`deletionTimestamp ≤ now`: the API server sets it to the
//!   delete's time plus the grace period);
//! - past the deadline, every counted pod was at least deleted (carries a `deletionTimestamp`,
//!   its grace period running or over). At the deadline the terminator terminates whatever is
//!   left, but upstream (`terminator.DeleteExpiringPods`) deletes each pod still there at
//!   `deadline − its terminationGracePeriodSeconds`, past PodDisruptionBudgets and
//!   `do-not-disrupt`, so it gets its graceful shutdown before the node goes; a pod with none
//!   was never told to stop. (Until this clause the rule stopped judging at the deadline, and a
//!   terminator that never made those deletes survived the swarm: cargo-mutants' cm026 in
//!   `sim/mutations/README.md`.)
//!
//! Two of the controller's paths never reach the pass that makes those deletes; neither needs an
//! excuse here, because neither terminates an instance this rule judges:
//!
//! - the replacement hold of an interrupted claim returns before the drain, and before the
//!   instance is terminated too (the pass ends `AwaitingReplacement`); the only terminations
//!   while it holds are EC2's reclaim of a warned spot instance, excused above;
//! - a node that is not Ready whose instance EC2 already reports shutting down, terminated or
//!   forgotten skips the drain, but that instance left the live set at an earlier step (judged
//!   then, if the controller terminated it; excused, if EC2 or the harness did), so it is not in
//!   [`Drain::terminated`] again.

use std::collections::BTreeSet;

use serde_json::Value;

use super::pod_facts::{
    claim_deadline, claim_of_node, is_mirror, is_terminal, name_of, node_of_instance, plus,
    time_of, tolerates_disrupted,
};
use super::rehome::SPOT_NOTICE;
use super::{Check, Invariant, StepView, Violation};

/// The `drained-before-terminate` checker.
#[derive(Debug, Default)]
pub struct Drain {
    /// Instances live (not shutting down or terminated) at the previous step.
    live: BTreeSet<String>,
    /// Instances the harness terminated itself ("outside Karpenter"): not the controller's doing.
    external: BTreeSet<String>,
    /// Terminations judged past their NodeClaim's terminationGracePeriod deadline.
    past_deadline: u64,
    /// Counted pods those terminations left on their nodes deleted but not gone (what the
    /// deadline clause lets through): how much the clause had to judge, for the swarm summary.
    past_deadline_deleted: u64,
}

impl Drain {
    /// Records that the harness (not the controller) terminated `instance_id`, as a user or EC2
    /// would outside Karpenter: the controller is not held to draining it.
    pub fn note_external_termination(&mut self, instance_id: &str) {
        self.external.insert(instance_id.to_string());
    }

    /// Terminations judged past their terminationGracePeriod deadline, and the counted pods they
    /// left deleted but not gone (the swarm prints both, so a run shows the clause was exercised).
    pub fn past_deadline_counts(&self) -> (u64, u64) {
        (self.past_deadline, self.past_deadline_deleted)
    }

    /// Instances live at the previous step and gone now that someone asked to terminate.
    fn terminated(&self, step: &StepView<'_>) -> Vec<String> {
        self.live
            .iter()
            .filter(|id| !step.observation.instances.contains_key(*id))
            .filter(|id| !self.external.contains(*id))
            .filter(|id| {
                // EC2 reclaiming a warned spot instance is not a termination anyone asked for.
                step.history
                    .warned_at(id)
                    .is_none_or(|t| step.now < plus(t, SPOT_NOTICE))
            })
            .cloned()
            .collect()
    }
}

impl Check for Drain {
    fn invariant(&self) -> Invariant {
        Invariant::DrainedBeforeTerminate
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let now = step.now;
        let mut out = Vec::new();
        for id in self.terminated(step) {
            let Some(node) = node_of_instance(step.nodes(), &id) else {
                continue;
            };
            let deadline = claim_of_node(step.claims(), node)
                .and_then(claim_deadline)
                .filter(|d| *d <= now);
            let node_name = name_of(node);
            let counted: Vec<&Value> = step
                .pods()
                .iter()
                .map(|p| &**p)
                .filter(|p| p["spec"]["nodeName"] == node_name)
                .filter(|p| !is_terminal(p) && !is_mirror(p) && !tolerates_disrupted(p))
                .collect();
            if deadline.is_some() {
                self.past_deadline += 1;
                self.past_deadline_deleted += counted
                    .iter()
                    .filter(|p| p["metadata"]["deletionTimestamp"].is_string())
                    .count() as u64;
            }
            let left: Vec<&str> = counted
                .iter()
                .filter(|p| {
                    // Past the deadline a deletion in progress is enough; before it, the grace
                    // period must be over.
                    match time_of(&p["metadata"]["deletionTimestamp"]) {
                        None => true,
                        Some(t) => deadline.is_none() && t > now,
                    }
                })
                .map(|o| name_of(o))
                .collect();
            if left.is_empty() {
                continue;
            }
            let shown = &left[..left.len().min(5)];
            let message = match deadline {
                Some(d) => format!(
                    "instance {id} terminated past its NodeClaim's terminationGracePeriod deadline {d} while node {node_name} still had {} pods nobody had deleted (each is due a delete at the deadline minus its own grace period): {shown:?}",
                    left.len()
                ),
                None => format!(
                    "instance {id} terminated while node {node_name} still had {} pods neither evicted nor past their grace period: {shown:?}",
                    left.len()
                ),
            };
            out.push(Violation::at(now, message));
        }
        self.live = step.observation.instances.keys().cloned().collect();
        out
    }
}
