//! `consolidation-churn`: consolidation does not undo its own work.
//!
//! - No node launched as a replacement (its NodeClaim carries `karpenter.sh/replaces`) is put in
//!   an Empty or Underutilized command within its NodePool's `consolidateAfter` +
//!   [`CHURN_SETTLE`] of its creation.
//! - No pod (by namespace and name) is removed by the controller from a node in such a command
//!   more than [`CHURN_EVICTIONS_MAX`] times within the settle period of the node it is removed
//!   from (its NodePool's `consolidateAfter` + [`CHURN_SETTLE`]). (Pods of ReplicaSets come back
//!   under new names, so this bounds pods that keep their names: StatefulSets, bare pods.)
//!
//! Why the settle period and not an hour (the window until the fifteenth session's swarm):
//! upstream bounds a node's consolidation only by `consolidateAfter` since its last pod event and
//! re-decides on every change of the cluster, so a pod may rightly move each time demand or
//! capacity changes — swarm seeds 402, 618 and 876 moved a StatefulSet pod three times in 20–30
//! minutes, each move a cheaper packing after the initial provisioning, the scenario's scale-up
//! or a fault that took nodes away, and never faster than the replacement hold. Three moves inside
//! one settle period would mean consolidation put the pod onto capacity and took it off again
//! twice before that capacity could settle, which the controller's replacement hold (deliberate
//! difference 17) exists to prevent.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use serde_json::Value;

use super::budgets::command_reason;
use super::pod_facts::minus;
use super::{Check, Invariant, StepView, Violation};

/// How long after `consolidateAfter` a replacement node must be left alone.
pub const CHURN_SETTLE: Duration = Duration::from_secs(10 * 60);
/// Most removals of one pod by consolidation within a settle period (`consolidateAfter` +
/// [`CHURN_SETTLE`]).
pub const CHURN_EVICTIONS_MAX: usize = 2;

/// The `consolidation-churn` checker.
#[derive(Debug, Default)]
pub struct ConsolidationChurn {
    /// Claims already seen in a command.
    seen: BTreeSet<String>,
    /// Pod key → when consolidation removed it, oldest first.
    removals: BTreeMap<String, VecDeque<Timestamp>>,
}

fn consolidating(claim: &Value) -> bool {
    matches!(command_reason(claim), Some("Empty" | "Underutilized"))
}

fn parse_after(text: &str) -> Option<Duration> {
    humantime::parse_duration(text).ok()
}

/// The `consolidateAfter` of `claim`'s NodePool (zero when unknown or `Never`).
fn consolidate_after(step: &StepView<'_>, claim: &Value) -> Duration {
    let pool_name = claim["metadata"]["labels"]["karpenter.sh/nodepool"].as_str();
    step.pools()
        .iter()
        .find(|p| p["metadata"]["name"].as_str() == pool_name)
        .and_then(|p| p["spec"]["disruption"]["consolidateAfter"].as_str())
        .and_then(parse_after)
        .unwrap_or_default()
}

impl ConsolidationChurn {
    fn early_replacements(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for claim in step.claims().iter().filter(|c| consolidating(c)) {
            let name = claim["metadata"]["name"].as_str().unwrap_or_default();
            if !self.seen.insert(name.to_string()) {
                continue;
            }
            if !claim["metadata"]["annotations"]["karpenter.sh/replaces"].is_string() {
                continue;
            }
            let after = consolidate_after(step, claim);
            let created: Option<Timestamp> = claim["metadata"]["creationTimestamp"]
                .as_str()
                .and_then(|t| t.parse().ok());
            let settled = created.and_then(|c| {
                c.checked_add(SignedDuration::try_from(after + CHURN_SETTLE).ok()?)
                    .ok()
            });
            if let (Some(created), Some(settled)) = (created, settled)
                && step.now < settled
            {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "replacement NodeClaim {name} (created {created}) consolidated before {settled}"
                    ),
                ));
            }
        }
        out
    }

    fn repeated_removals(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        if step.audit.pod_removals.is_empty() {
            return Vec::new();
        }
        let commanded: BTreeMap<&str, Duration> = step
            .claims()
            .iter()
            .filter(|c| consolidating(c))
            .filter_map(|c| {
                let node = c["status"]["nodeName"].as_str()?;
                Some((node, consolidate_after(step, c) + CHURN_SETTLE))
            })
            .collect();
        let mut out = Vec::new();
        for removal in &step.audit.pod_removals {
            let node = removal.pod["spec"]["nodeName"].as_str().unwrap_or_default();
            let Some(&window) = commanded.get(node) else {
                continue;
            };
            let key = format!(
                "{}/{}",
                removal.pod["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default"),
                removal.pod["metadata"]["name"].as_str().unwrap_or_default()
            );
            let times = self.removals.entry(key.clone()).or_default();
            times.push_back(removal.at);
            let start = minus(step.now, window);
            while times.front().is_some_and(|t| *t <= start) {
                times.pop_front();
            }
            if times.len() > CHURN_EVICTIONS_MAX {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "pod {key} removed by consolidation {} times within {}s (its node's consolidateAfter + {}m)",
                        times.len(),
                        window.as_secs(),
                        CHURN_SETTLE.as_secs() / 60
                    ),
                ));
            }
        }
        out
    }
}

impl Check for ConsolidationChurn {
    fn invariant(&self) -> Invariant {
        Invariant::ConsolidationChurn
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = self.early_replacements(step);
        out.extend(self.repeated_removals(step));
        out
    }
}
