//! Launch templates, two invariants:
//!
//! - `launch-templates-collected`: a launch template of this cluster's Karpenter (tagged
//!   `eks:eks-cluster-name=sim` and carrying the `karpenter.k8s.aws/ec2nodeclass` key) that no
//!   `CreateFleet` has named for [`TEMPLATE_UNUSED_WINDOW`] is gone. Upstream's launch-template
//!   cache deletes a template a minute after its last use (checked every minute); the window
//!   leaves room for collections that failed (throttling, 5xx), a controller restart or a
//!   leader failover (a new process counts every template it finds as just used). Disuse is
//!   measured from fakecloud's own record of each template's creation and last `CreateFleet`,
//!   never from the controller's bookkeeping. Reported once per template.
//! - `foreign-templates-untouched`: a launch template tagged for another cluster (the world's
//!   neighbour cluster's, [`crate::world::neighbour_launch_template`]) is never deleted: seen
//!   once, it must still exist at every later step. Reported once per template.

use std::collections::BTreeSet;
use std::time::Duration;

use super::{Check, Invariant, StepView, Violation};

/// A template of ours unused this long must have been deleted.
pub const TEMPLATE_UNUSED_WINDOW: Duration = Duration::from_secs(10 * 60);

const CLUSTER_TAG: &str = "eks:eks-cluster-name";
const CLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

/// The `launch-templates-collected` checker: templates already reported (by id).
#[derive(Debug, Default)]
pub struct TemplatesCollected {
    reported: BTreeSet<String>,
}

impl Check for TemplatesCollected {
    fn invariant(&self) -> Invariant {
        Invariant::LaunchTemplatesCollected
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for (template, last_used) in step.cloud.launch_template_uses() {
            let ours = template.tags.get(CLUSTER_TAG).map(String::as_str)
                == Some(crate::world::CLUSTER)
                && template.tags.contains_key(CLASS_TAG);
            let unused = step.now.duration_since(last_used).unsigned_abs();
            if ours
                && unused > TEMPLATE_UNUSED_WINDOW
                && self.reported.insert(template.launch_template_id.clone())
            {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "launch template {} unused for {}s and not deleted",
                        template.launch_template_name,
                        unused.as_secs()
                    ),
                ));
            }
        }
        out
    }
}

/// The `foreign-templates-untouched` checker: other clusters' templates seen, and those reported
/// gone (by id).
#[derive(Debug, Default)]
pub struct ForeignTemplatesUntouched {
    seen: BTreeSet<(String, String)>,
    gone: BTreeSet<String>,
}

impl Check for ForeignTemplatesUntouched {
    fn invariant(&self) -> Invariant {
        Invariant::ForeignTemplatesUntouched
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let present: BTreeSet<String> = step
            .cloud
            .launch_template_uses()
            .into_iter()
            .map(|(t, _)| {
                let foreign = t
                    .tags
                    .get(CLUSTER_TAG)
                    .is_some_and(|c| c != crate::world::CLUSTER);
                if foreign {
                    self.seen
                        .insert((t.launch_template_id.clone(), t.launch_template_name.clone()));
                }
                t.launch_template_id
            })
            .collect();
        let mut out = Vec::new();
        for (id, name) in &self.seen {
            if !present.contains(id) && self.gone.insert(id.clone()) {
                out.push(Violation::at(
                    step.now,
                    format!("another cluster's launch template {name} was deleted"),
                ));
            }
        }
        out
    }
}
