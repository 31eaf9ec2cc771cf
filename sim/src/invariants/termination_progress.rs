//! `termination-progress`: a deleting NodeClaim is gone within its terminationGracePeriod (or
//! [`TERMINATION_WITHOUT_TGP_MAX`] without one) plus [`TERMINATION_SLACK`], counted from its
//! `deletionTimestamp`; a claim without a terminationGracePeriod whose node holds a
//! do-not-disrupt or PodDisruptionBudget-covered pod may wait for it forever (upstream's design).
//! Once the last such pod has left, the rest of the termination (the instance's shutdown, the
//! node's removal) gets [`TERMINATION_SLACK`] from the last step that found the node so held —
//! including a step before the bound itself (swarm seed 583: PDB-held pods left 44 s before the
//! 900 s bound and the claim was gone 70 s later, 909 s after its deletion, which the checker had
//! counted as a violation because it looked for held pods only once past the bound).
//!
//! A claim is also held while its node has a pod that was deleted and has not yet finished,
//! until it is stuck terminating ([`STUCK_TERMINATING`] past its `deletionTimestamp`): upstream's
//! drain waits for such a pod that long, tier after tier. On a node whose kubelet is gone (an
//! instance EC2 stopped for maintenance) no pod ever finishes, so a drain whose PDB-held pods
//! were freed late waits that minute once per priority tier (seed 325 with
//! `scheduled-maintenance`: three tiers from 00:30:01 to 00:34:38, the claim gone 00:35:08, 5 min
//! 8 s after the budget went). A controller that waited for stuck pods for good is still caught.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::drain_order::STUCK_TERMINATING;
use super::pod_facts::{
    instance_of, is_deleting, is_do_not_disrupt, is_terminal, name_of, node_of_instance,
    pdb_covers, plus, termination_grace_period, time_of,
};
use super::{Check, Invariant, StepView, Violation};

/// Bound on a termination without a terminationGracePeriod (drain, volume detach, EC2's
/// shutting-down) when no pod blocks it by design.
pub const TERMINATION_WITHOUT_TGP_MAX: Duration = Duration::from_secs(10 * 60);
/// Slack on top of a termination's bound: the instance's shutdown (30 s), the node's removal
/// after it (40 s), steps and retries.
pub const TERMINATION_SLACK: Duration = Duration::from_secs(5 * 60);

/// The `termination-progress` checker: the last step at which each deleting claim past its
/// bound was held by design.
#[derive(Debug, Default)]
pub struct TerminationProgress {
    held: BTreeMap<String, Timestamp>,
}

impl Check for TerminationProgress {
    fn invariant(&self) -> Invariant {
        Invariant::TerminationProgress
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        if step.observation.deleting_claims == 0 {
            self.held.clear();
            return Vec::new();
        }
        let now = step.now;
        let mut out = Vec::new();
        for claim in step.claims().iter().filter(|c| is_deleting(c)) {
            let Some(deleted) = time_of(&claim["metadata"]["deletionTimestamp"]) else {
                continue;
            };
            let tgp = termination_grace_period(claim);
            let allowance = tgp.unwrap_or(TERMINATION_WITHOUT_TGP_MAX);
            let bound = allowance + TERMINATION_SLACK;
            // A held step earlier than `deleted + allowance` grants no time past the bound, so
            // the pods are looked at only from then on; from then on every step counts, not
            // only those past the bound (seed 583: held until 15 s before the bound, the
            // instance's shutdown then ran 9 s past it).
            if now <= plus(deleted, allowance) {
                continue;
            }
            if tgp.is_none() && blocked_by_design(step, claim) {
                self.held.insert(name_of(claim).to_string(), now);
                continue;
            }
            if now <= plus(deleted, bound) {
                continue;
            }
            let held = self.held.get(name_of(claim));
            if held.is_some_and(|&at| now <= plus(at, TERMINATION_SLACK)) {
                continue;
            }
            out.push(Violation::at(
                now,
                format!(
                    "NodeClaim {} still terminating {}s after its deletion (bound {}s)",
                    name_of(claim),
                    now.duration_since(deleted).as_secs(),
                    bound.as_secs()
                ),
            ));
        }
        let deleting: Vec<&str> = step
            .claims()
            .iter()
            .filter(|c| is_deleting(c))
            .map(|o| name_of(o))
            .collect();
        self.held
            .retain(|name, _| deleting.contains(&name.as_str()));
        out
    }
}

/// Whether a claim's node holds a pod eviction may never move (do-not-disrupt, or covered by a
/// PodDisruptionBudget), or a deleted pod the drain still waits for (not yet stuck terminating).
fn blocked_by_design(step: &StepView<'_>, claim: &Value) -> bool {
    let Some(provider) = claim["status"]["providerID"].as_str() else {
        return false;
    };
    let Some(node) = node_of_instance(step.nodes(), instance_of(provider)).map(name_of) else {
        return false;
    };
    let pdbs = step.pdbs();
    step.pods()
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node && !is_terminal(p))
        .any(|p| {
            let shutting_down = time_of(&p["metadata"]["deletionTimestamp"])
                .is_some_and(|deleted| step.now <= plus(deleted, STUCK_TERMINATING));
            shutting_down || is_do_not_disrupt(p) || pdbs.iter().any(|b| pdb_covers(b, p))
        })
}
