//! `pdb-respected`: every pod the controller removes is either evicted through the Eviction API
//! (the API server evaluates its PodDisruptionBudgets at that moment) or deleted inside its
//! NodeClaim's terminationGracePeriod window (at or after `deadline − the pod's grace period`);
//! a plain delete outside that window of a pod a budget covers is a violation when the budget
//! allowed no disruption just before it (healthy − 1 < desiredHealthy for a healthy pod).
//!
//! Each budget is judged over the step's removals it covers, in order: the pods it expects are
//! those it covers now (not finished) plus the removed ones already gone; the healthy count
//! starts from the healthy covered pods plus the removed ones that were healthy, and drops by
//! one with every healthy pod removed.

use std::collections::BTreeSet;

use karpenter_core::seams::kube::SharedObject;
use serde_json::Value;

use super::pod_facts::{in_grace_window, is_healthy, is_terminal, name_of, pdb_covers};
use super::{Check, Invariant, StepView, Violation};
use crate::audit::PodRemoval;

/// The `pdb-respected` checker (no memory between steps).
#[derive(Debug, Default)]
pub struct Pdb;

impl Check for Pdb {
    fn invariant(&self) -> Invariant {
        Invariant::PdbRespected
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let removals = &step.audit.pod_removals;
        if removals.is_empty() {
            return Vec::new();
        }
        let (nodes, claims) = (step.nodes(), step.claims());
        let in_window: Vec<bool> = removals
            .iter()
            .map(|r| in_grace_window(&r.pod, r.at, nodes, claims))
            .collect();
        if removals
            .iter()
            .zip(&in_window)
            .all(|(r, open)| r.evicted || *open)
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        for pdb in step.pdbs() {
            let mine: Vec<(&PodRemoval, bool)> = removals
                .iter()
                .zip(in_window.iter().copied())
                .filter(|(r, _)| pdb_covers(pdb, &r.pod))
                .collect();
            if !mine.is_empty() {
                judge(pdb, &mine, step.pods(), &mut out);
            }
        }
        out
    }
}

/// Judges one budget over the removals it covers (with whether each was in its grace window).
fn judge(
    pdb: &Value,
    mine: &[(&PodRemoval, bool)],
    pods: &[SharedObject],
    out: &mut Vec<Violation>,
) {
    let covered: Vec<&Value> = pods
        .iter()
        .map(|p| &**p)
        .filter(|p| pdb_covers(pdb, p))
        .collect();
    let present: BTreeSet<&str> = covered.iter().map(|p| name_of(p)).collect();
    let gone = mine
        .iter()
        .filter(|(r, _)| !present.contains(name_of(&r.pod)))
        .count() as u64;
    let expected = covered.iter().filter(|p| !is_terminal(p)).count() as u64 + gone;
    let Some(desired) = desired_healthy(pdb, expected) else {
        return;
    };
    let mut healthy = covered.iter().filter(|p| is_healthy(p)).count() as u64
        + mine.iter().filter(|(r, _)| is_healthy(&r.pod)).count() as u64;
    for (r, in_window) in mine {
        let was_healthy = is_healthy(&r.pod);
        let allowed = if was_healthy {
            healthy > desired
        } else {
            healthy >= desired
        };
        if !r.evicted && !in_window && !allowed {
            out.push(Violation::at(
                r.at,
                format!(
                    "pod {}/{} deleted by the controller without eviction while PodDisruptionBudget {} allowed no disruption ({healthy} healthy, {desired} desired)",
                    r.pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                    name_of(&r.pod),
                    name_of(pdb)
                ),
            ));
        }
        if was_healthy {
            healthy = healthy.saturating_sub(1);
        }
    }
}

/// `value` of an int-or-percent field over `total`, rounded up.
fn scaled(value: &Value, total: u64) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let percent: u64 = value.as_str()?.strip_suffix('%')?.parse().ok()?;
    Some((total * percent).div_ceil(100))
}

/// The healthy pods a budget wants, given how many pods it expects; `None` if it protects nothing.
pub(crate) fn desired_healthy(pdb: &Value, expected: u64) -> Option<u64> {
    let spec = &pdb["spec"];
    if !spec["minAvailable"].is_null() {
        return scaled(&spec["minAvailable"], expected);
    }
    if !spec["maxUnavailable"].is_null() {
        return scaled(&spec["maxUnavailable"], expected).map(|n| expected.saturating_sub(n));
    }
    None
}
