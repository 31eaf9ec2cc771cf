//! Drift detection over many claims: one claim whose write fails does not keep the pass from
//! the claims after it.

use std::sync::Arc;

use fakekube::{ApiFault, ApiOperation, Fake};
use karpenter_core::api::labels::NODEPOOL_HASH_ANNOTATION;
use karpenter_core::nodeclaim::drift::DriftDetection;
use karpenter_core::seams::kube::ResourceKind;

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects};

#[test]
fn a_conflict_on_one_claim_does_not_keep_drift_detection_from_the_claims_after_it() {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    // Neither claim carries the pool's hash yet: the pass stamps each one (a patch apiece), in
    // name order.
    for name in ["default-a", "default-b"] {
        kube.apply(&ResourceKind::NODE_CLAIM, objects::nodeclaim(name).json());
    }
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    let drift = DriftDetection::new(ctx);
    kube.script_faults(ApiOperation::Patch, [ApiFault::Conflict]);
    let pass = futures::executor::block_on(drift.pass());
    assert!(
        matches!(&pass, Err(e) if e.to_string().contains("conflict")),
        "the conflict is reported, so the loop retries soon: {pass:?}"
    );
    let stamped = |name: &str| {
        kube.object_named(&ResourceKind::NODE_CLAIM, name)
            .expect("claim")["metadata"]["annotations"][NODEPOOL_HASH_ANNOTATION]
            .is_string()
    };
    assert!(!stamped("default-a"), "the conflicting write did not land");
    assert!(
        stamped("default-b"),
        "the claim after the one that conflicted was still stamped in the same pass"
    );
    let again = futures::executor::block_on(drift.pass());
    assert!(again.is_ok(), "the retry succeeds: {again:?}");
    assert!(stamped("default-a"));
}

/// A pass stands while no NodePool, EC2NodeClass or NodeClaim changed (for up to a minute), but
/// a change is decided on at the next pass: an edited pool template drifts its claims at once.
#[test]
fn a_pool_edited_after_quiet_passes_drifts_its_claims_at_the_next_pass() {
    use karpenter_core::seams::kube::{KubeApi, ObjectKey, Patch};
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    let mut claim = objects::nodeclaim("default-a").running_as("i-0a").json();
    claim["status"]["conditions"] = serde_json::json!([{
        "type": "Launched", "status": "True", "reason": "Launched", "message": "",
        "lastTransitionTime": support::start().to_string()
    }]);
    kube.apply(&ResourceKind::NODE_CLAIM, claim);
    let drift = DriftDetection::new(Arc::new(support::context(&kube, &cloud, &clock)));
    let pass = || futures::executor::block_on(drift.pass()).expect("pass");
    // Stamps the hashes, then sees its own writes, then stands.
    for _ in 0..3 {
        pass();
        clock.advance(std::time::Duration::from_secs(1));
    }
    let drifted = || {
        let claim = kube
            .object_named(&ResourceKind::NODE_CLAIM, "default-a")
            .expect("claim");
        claim["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Drifted" && c["status"] == "True")
    };
    assert!(!drifted());
    futures::executor::block_on(kube.patch(
        &ResourceKind::NODE_POOL,
        &ObjectKey::cluster("default"),
        &Patch::Merge(
            serde_json::json!({"spec": {"template": {"spec": {"taints": [
                {"key": "team", "value": "b", "effect": "NoSchedule"}
            ]}}}}),
        ),
    ))
    .expect("edit");
    pass();
    assert!(
        drifted(),
        "the edited template drifted the claim in one pass"
    );
}
