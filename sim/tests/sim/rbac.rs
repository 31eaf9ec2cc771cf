//! The simulation's RBAC authorizer ([`karpenter_sim::rbac`]) refuses what the chart does not
//! grant the controller, as the API server does.

use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::layered::KubeCall;
use karpenter_sim::process::replicas::LEASE_NAMESPACE;
use karpenter_sim::rbac::refusal;
use serde_json::json;

#[test]
fn the_controller_may_write_ec2nodeclass_status_and_evict_but_not_delete_a_class() {
    let key = ObjectKey::cluster("default");
    let patch = Patch::Merge(json!({}));
    let status = KubeCall::PatchStatus {
        kind: &ResourceKind::EC2_NODE_CLASS,
        key: &key,
        patch: &patch,
    };
    assert_eq!(refusal(&status), None);
    let options = DeleteOptions::default();
    let delete = KubeCall::Delete {
        kind: &ResourceKind::EC2_NODE_CLASS,
        key: &key,
        options: &options,
    };
    assert!(refusal(&delete).is_some_and(|why| why.contains("delete")));
    let pod = ObjectKey::namespaced("default", "web-0");
    let evict = KubeCall::Evict {
        pod: &pod,
        options: &options,
    };
    assert_eq!(refusal(&evict), None);
}

#[test]
fn only_the_leader_election_lease_of_its_namespace_may_be_read() {
    let ours = ObjectKey::namespaced(LEASE_NAMESPACE, "karpenter-leader-election");
    let other = ObjectKey::namespaced(LEASE_NAMESPACE, "someone-else");
    let get = |key| KubeCall::Get {
        kind: &ResourceKind::LEASE,
        key,
    };
    assert_eq!(refusal(&get(&ours)), None);
    assert!(refusal(&get(&other)).is_some());
}
