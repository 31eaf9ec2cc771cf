//! `pods-fit-nodes`: no node's bound pods request more than its `status.allocatable`. A pod
//! counts on the node in its `spec.nodeName` with its containers' requests plus one pod slot,
//! whatever its phase, unless it is being deleted. Checked after every step on the observer's
//! cached API objects, and re-counted every step for as long as the overcommit lasts.

use std::collections::BTreeMap;

use karpenter_core::resources::Resources;

use super::pod_facts::{name_of, resource_list};
use super::{Check, Invariant, StepView, Violation};

/// The `pods-fit-nodes` checker; remembers its findings until the API objects change.
#[derive(Debug, Default)]
pub struct Fit {
    /// Findings as of a cache generation.
    found: Option<(u64, Vec<String>)>,
}

impl Check for Fit {
    fn invariant(&self) -> Invariant {
        Invariant::PodsFitNodes
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let generation = step.observed.generation();
        if self.found.as_ref().is_none_or(|(g, _)| *g != generation) {
            self.found = Some((generation, overcommits(step)));
        }
        let found = self.found.iter().flat_map(|(_, found)| found);
        found.map(|m| Violation::at(step.now, m.clone())).collect()
    }
}

/// One message per overcommitted node (its first resource over).
fn overcommits(step: &StepView<'_>) -> Vec<String> {
    let mut used: BTreeMap<String, Resources> = BTreeMap::new();
    for pod in step.observed.pods() {
        if pod["metadata"]["deletionTimestamp"].is_string() {
            continue;
        }
        if let Some(node) = pod["spec"]["nodeName"].as_str() {
            let slot = used.entry(node.to_string()).or_default();
            *slot = slot.plus(&step.observed.requests(pod));
        }
    }
    let mut out = Vec::new();
    for node in step.observed.nodes() {
        let name = name_of(node);
        let allocatable = resource_list(&node["status"]["allocatable"]);
        if let Some(requests) = used.get(name)
            && let Some((resource, want, have)) = requests.first_excess(&allocatable)
        {
            out.push(format!(
                "node {name}: {resource} requested {want} > allocatable {have}"
            ));
        }
    }
    out
}
