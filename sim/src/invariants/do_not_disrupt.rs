//! `do-not-disrupt-respected`: a pod annotated `karpenter.sh/do-not-disrupt: "true"` is only
//! evicted or deleted by the controller inside its NodeClaim's terminationGracePeriod window (at
//! or after `deadline − the pod's grace period`); without a terminationGracePeriod, never. The
//! removals are the controller's own, as the audited seam saw them succeed.

use super::pod_facts::{in_grace_window, is_do_not_disrupt, name_of};
use super::{Check, Invariant, StepView, Violation};

/// The `do-not-disrupt-respected` checker (no memory between steps).
#[derive(Debug, Default)]
pub struct DoNotDisrupt;

impl Check for DoNotDisrupt {
    fn invariant(&self) -> Invariant {
        Invariant::DoNotDisruptRespected
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let removals = &step.audit.pod_removals;
        if removals.is_empty() {
            return Vec::new();
        }
        let (nodes, claims) = (step.nodes(), step.claims());
        removals
            .iter()
            .filter(|r| is_do_not_disrupt(&r.pod) && !in_grace_window(&r.pod, r.at, nodes, claims))
            .map(|r| {
                Violation::at(
                    r.at,
                    format!(
                        "pod {}/{} (karpenter.sh/do-not-disrupt) {} by the controller outside its NodeClaim's terminationGracePeriod window",
                        r.pod["metadata"]["namespace"].as_str().unwrap_or_default(),
                        name_of(&r.pod),
                        if r.evicted { "evicted" } else { "deleted" }
                    ),
                )
            })
            .collect()
    }
}
