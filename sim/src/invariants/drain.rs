//! `drained-before-terminate`: an instance that was live at the previous step and is shutting
//! down or terminated now, and was not reclaimed by EC2 after a spot warning ([`SPOT_NOTICE`]
//! elapsed) nor terminated by the harness itself ([`Drain::note_external_termination`]), had no
//! pod on its node that is neither finished, a mirror pod, tolerating `karpenter.sh/disrupted`,
//! nor deleted with its grace period over (`deletionTimestamp ≤ now`: the API server sets it to
//! the delete's time plus the grace period) — unless its NodeClaim's terminationGracePeriod
//! deadline had passed.

use std::collections::BTreeSet;

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
}

impl Drain {
    /// Records that the harness (not the controller) terminated `instance_id`, as a user or EC2
    /// would outside Karpenter: the controller is not held to draining it.
    pub fn note_external_termination(&mut self, instance_id: &str) {
        self.external.insert(instance_id.to_string());
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
            let deadline = claim_of_node(step.claims(), node).and_then(claim_deadline);
            if deadline.is_some_and(|d| d <= now) {
                continue;
            }
            let node_name = name_of(node);
            let left: Vec<&str> = step
                .pods()
                .iter()
                .filter(|p| p["spec"]["nodeName"] == node_name)
                .filter(|p| !is_terminal(p) && !is_mirror(p) && !tolerates_disrupted(p))
                .filter(|p| time_of(&p["metadata"]["deletionTimestamp"]).is_none_or(|t| t > now))
                .map(|o| name_of(o))
                .collect();
            if !left.is_empty() {
                out.push(Violation::at(
                    now,
                    format!(
                        "instance {id} terminated while node {node_name} still had {} pods neither evicted nor past their grace period: {:?}",
                        left.len(),
                        &left[..left.len().min(5)]
                    ),
                ));
            }
        }
        self.live = step.observation.instances.keys().cloned().collect();
        out
    }
}
