//! `liveness`: every pod is running once the workload settles. Judged at the end of a run (each
//! pod still pending counts once), and by the swarm's liveness phase, which waits after the
//! faults stop for [`unsettled`] to come back empty and records a violation if it does not in
//! time.

use std::collections::BTreeSet;
use std::time::Duration;

use fakecloud::FakeCloud;
use fakekube::ApiServer;
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::ResourceKind;

use super::pod_facts::{condition_true, instance_of, is_deleting, is_terminal, name_of};
use super::{Check, Invariant, Observation, Violation};

/// The `liveness` checker (judged at the end of a run only).
#[derive(Debug, Default)]
pub struct Liveness;

impl Check for Liveness {
    fn invariant(&self) -> Invariant {
        Invariant::Liveness
    }

    fn finish(&mut self, observation: &Observation) -> Option<Violation> {
        if observation.pods_pending == 0 {
            return None;
        }
        Some(Violation::counted(
            observation.pods_pending as u64,
            format!(
                "{} pods still pending at the end: {:?}",
                observation.pods_pending,
                &observation.pending_names[..observation.pending_names.len().min(5)]
            ),
        ))
    }
}

/// The swarm's liveness phase ran out: what is still `left` (from [`unsettled`]) `waited` after
/// the faults stopped.
pub fn not_settled(waited: Duration, left: &[String]) -> String {
    format!(
        "not settled {}s after the faults stopped: {} left, e.g. {:?}",
        waited.as_secs(),
        left.len(),
        &left[..left.len().min(5)]
    )
}

/// What keeps the cluster from being settled (empty when settled): pods not running, NodeClaims
/// not initialized or being deleted, nodes not Ready or being deleted, live instances no NodeClaim
/// owns (other than another owner's, and other than one someone stripped of every Karpenter tag:
/// the `tags-lost` fault's limit, which no controller can find once its claim is gone — every
/// launch tags its instance in `CreateFleet`, so only a stripped one carries none). The swarm's
/// liveness phase waits for this to be empty.
pub fn unsettled(api: &ApiServer, cloud: &FakeCloud) -> Vec<String> {
    let mut out = Vec::new();
    for pod in api.objects(&ResourceKind::POD) {
        if is_deleting(&pod) {
            out.push(format!("pod {} terminating", name_of(&pod)));
        } else if !is_terminal(&pod) && pod["status"]["phase"] != "Running" {
            out.push(format!("pod {} pending", name_of(&pod)));
        }
    }
    let claims = api.objects(&ResourceKind::NODE_CLAIM);
    for claim in &claims {
        if is_deleting(claim) {
            // Its instance's state, when EC2 knows it: what a stuck termination waits on.
            let state = claim["status"]["providerID"]
                .as_str()
                .and_then(|p| cloud.instance_state(instance_of(p)))
                .map(|s| format!(" (instance {s:?})"))
                .unwrap_or_default();
            out.push(format!("NodeClaim {} terminating{state}", name_of(claim)));
        } else if !condition_true(claim, "Initialized") {
            out.push(format!("NodeClaim {} not initialized", name_of(claim)));
        }
    }
    for node in api.objects(&ResourceKind::NODE) {
        if is_deleting(&node) {
            out.push(format!("node {} terminating", name_of(&node)));
        } else if !condition_true(&node, "Ready") {
            out.push(format!("node {} not Ready", name_of(&node)));
        }
    }
    let owned: BTreeSet<&str> = claims
        .iter()
        .filter_map(|c| c["status"]["providerID"].as_str().map(instance_of))
        .collect();
    for instance in cloud.instances() {
        let live = !matches!(
            instance.state,
            InstanceState::ShuttingDown | InstanceState::Terminated
        );
        // The managed node group's instances have no NodeClaim by design.
        let foreign = super::is_foreign(&instance);
        let stripped = !instance
            .tags
            .keys()
            .any(|k| k.starts_with("karpenter.sh/") || k.starts_with("karpenter.k8s.aws/"));
        if live && !foreign && !stripped && !owned.contains(instance.instance_id.as_str()) {
            out.push(format!(
                "instance {} has no NodeClaim",
                instance.instance_id
            ));
        }
    }
    out
}
