//! `disruption-respects-pdbs`: a graceful disruption command (Empty, Underutilized, Drifted:
//! the `karpenter.sh/disruption-command` annotation) never starts on a node holding a pod the
//! drain would evict while a PodDisruptionBudget covering that pod allows no disruption.
//! Upstream rules such a node out when it builds its candidates (`ValidatePodsDisruptable`,
//! `pdbs.CanEvictPods`); a controller that does not starts a drain the API server's Eviction
//! API then refuses for as long as the budget holds, which `pdb-respected` cannot see (every
//! eviction it sends is judged by the API server) and `termination-progress` excuses (a drain
//! held by a budget is the user's to fix; see its docs).
//!
//! Drift is eventual disruption: upstream lets it past pod-level blockers when the claim has a
//! terminationGracePeriod (which then bounds the drain), so a Drifted command on such a claim is
//! not judged (the 82 failures of the first 1,000-seed run with this invariant were all such).
//!
//! Judged when a claim first carries a graceful command: its node's pods that the drain would
//! evict (not terminal, not deleting, not mirror pods, not DaemonSet pods) against the budgets'
//! allowance (worked out from the pods, as Kubernetes' disruption controller works out
//! `disruptionsAllowed`) at the end of this step *and* of the step before. A budget that allowed a disruption at either end may have
//! allowed one when the controller read it, so only a budget pinned at both counts: the
//! controller read one of those two states or one between them, where nothing moved it.

use std::collections::BTreeSet;

use karpenter_core::seams::kube::SharedObject;
use serde_json::Value;

use super::budgets::command_reason;
use super::pdb::desired_healthy;
use super::pod_facts::{
    is_daemon, is_deleting, is_healthy, is_mirror, is_terminal, name_of, pdb_covers,
    termination_grace_period,
};
use super::{Check, Invariant, StepView, Violation};

/// The command reasons upstream checks budgets for (graceful disruption; expiration is
/// forceful and carries no command).
const GRACEFUL_REASONS: [&str; 3] = ["Empty", "Underutilized", "Drifted"];

/// The `disruption-respects-pdbs` checker.
#[derive(Debug, Default)]
pub struct DisruptionRespectsPdbs {
    /// Claims already judged (by name): each command is judged when it first shows.
    seen: BTreeSet<String>,
    /// The pods and budgets at the end of the previous step (shared, not copied): which budgets
    /// allowed no disruption then is worked out only when a fresh command needs it — budgets ×
    /// pods every step was an eighth of a swarm seed's time.
    before: Option<(Vec<SharedObject>, Vec<SharedObject>)>,
}

/// The budgets (namespace/name) among `pdbs` that allow no disruption of `pods`.
fn pinned(pdbs: &[SharedObject], pods: &[SharedObject]) -> BTreeSet<String> {
    pdbs.iter()
        .filter(|pdb| allows_none(pdb, pods))
        .map(|pdb| budget_key(pdb))
        .collect()
}

fn budget_key(pdb: &Value) -> String {
    format!(
        "{}/{}",
        pdb["metadata"]["namespace"].as_str().unwrap_or_default(),
        name_of(pdb)
    )
}

/// Whether `pdb` allows no disruption now: its healthy covered pods are no more than it
/// desires (Kubernetes' disruption controller's `disruptionsAllowed` of 0, worked out from the
/// pods as that controller does; the world keeps no budget status). A budget that protects
/// nothing (neither field) allows any.
fn allows_none(pdb: &Value, pods: &[SharedObject]) -> bool {
    let covered: Vec<&Value> = pods
        .iter()
        .map(|p| &**p)
        .filter(|p| pdb_covers(pdb, p) && !is_terminal(p))
        .collect();
    let Some(desired) = desired_healthy(pdb, covered.len() as u64) else {
        return false;
    };
    let healthy = covered.iter().filter(|p| is_healthy(p)).count() as u64;
    healthy <= desired
}

/// A pod the drain would evict.
fn evictable(pod: &Value) -> bool {
    !is_terminal(pod) && !is_deleting(pod) && !is_mirror(pod) && !is_daemon(pod)
}

impl Check for DisruptionRespectsPdbs {
    fn invariant(&self) -> Invariant {
        Invariant::DisruptionRespectsPdbs
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let before = self
            .before
            .replace((step.pods().to_vec(), step.pdbs().to_vec()));
        let mut out = Vec::new();
        let fresh: Vec<&Value> = step
            .claims()
            .iter()
            .map(|c| &**c)
            .filter(|c| command_reason(c).is_some_and(|r| GRACEFUL_REASONS.contains(&r)))
            .filter(|c| !self.seen.contains(name_of(c)))
            .collect();
        if fresh.is_empty() || step.pdbs().is_empty() {
            for claim in fresh {
                self.seen.insert(name_of(claim).to_string());
            }
            return out;
        }
        let pinned_now = pinned(step.pdbs(), step.pods());
        let pinned_before = before
            .map(|(pods, pdbs)| pinned(&pdbs, &pods))
            .unwrap_or_default();
        let pinned: Vec<&Value> = step
            .pdbs()
            .iter()
            .map(|p| &**p)
            .filter(|pdb| {
                let key = budget_key(pdb);
                pinned_now.contains(&key) && pinned_before.contains(&key)
            })
            .collect();
        for claim in &fresh {
            if command_reason(claim) == Some("Drifted") && termination_grace_period(claim).is_some()
            {
                continue;
            }
            let Some(node) = claim["status"]["nodeName"].as_str() else {
                continue;
            };
            let held = step.pods().iter().map(|p| &**p).find_map(|pod| {
                if pod["spec"]["nodeName"].as_str() != Some(node) || !evictable(pod) {
                    return None;
                }
                pinned
                    .iter()
                    .find(|pdb| pdb_covers(pdb, pod))
                    .map(|pdb| (pod, *pdb))
            });
            if let Some((pod, pdb)) = held {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "a {} command started on NodeClaim {} (node {node}) while PodDisruptionBudget {} allowed no disruption of its pod {}/{}",
                        command_reason(claim).unwrap_or_default(),
                        name_of(claim),
                        budget_key(pdb),
                        pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                        name_of(pod),
                    ),
                ));
            }
        }
        for claim in fresh {
            self.seen.insert(name_of(claim).to_string());
        }
        out
    }
}
