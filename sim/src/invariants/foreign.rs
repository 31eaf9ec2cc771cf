//! `foreign-instances-untouched`: Karpenter never terminates, stops, tags or adopts an instance
//! it did not launch ([`super::is_foreign`]: a managed node group's, tagged
//! `eks:nodegroup-name`, or one another cluster's Karpenter launched, tagged for that cluster,
//! [`crate::world::neighbour_instance`]). Each such instance's
//! tags are remembered when first seen; after every step it must still be pending or running,
//! carry exactly those tags, and no NodeClaim may name it in `status.providerID`.

use std::collections::BTreeMap;

use karpenter_core::seams::ec2::InstanceState;

use super::{Check, Invariant, StepView, Violation};

/// The `foreign-instances-untouched` checker: the tags each foreign instance was first seen with.
#[derive(Debug, Default)]
pub struct ForeignUntouched {
    seen: BTreeMap<String, BTreeMap<String, String>>,
    /// Instances already reported as gone (reported once).
    gone: std::collections::BTreeSet<String>,
}

impl Check for ForeignUntouched {
    fn invariant(&self) -> Invariant {
        Invariant::ForeignInstancesUntouched
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for instance in &step.observation.foreign {
            let id = &instance.instance_id;
            let first = self
                .seen
                .entry(id.clone())
                .or_insert_with(|| instance.tags.clone());
            if *first != instance.tags {
                out.push(Violation::at(
                    step.now,
                    format!("foreign instance {id} was re-tagged: {:?}", instance.tags),
                ));
                *first = instance.tags.clone();
            }
            let stopped = !matches!(
                instance.state,
                InstanceState::Pending | InstanceState::Running
            );
            if stopped && self.gone.insert(id.clone()) {
                out.push(Violation::at(
                    step.now,
                    format!("foreign instance {id} is {:?}", instance.state),
                ));
            }
            if step.observation.known_instances.contains(id) {
                out.push(Violation::at(
                    step.now,
                    format!("foreign instance {id} was adopted by a NodeClaim"),
                ));
            }
        }
        out
    }
}
