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
