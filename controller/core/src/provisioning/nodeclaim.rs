//! The NodeClaim a planned node becomes: the NodePool's template narrowed by the plan.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube_core::ResourceExt;

use crate::api::Requirement as ApiRequirement;
use crate::api::labels::{
    EC2NODECLASS_LABEL, NODEPOOL_HASH_ANNOTATION, NODEPOOL_HASH_VERSION_ANNOTATION, NODEPOOL_LABEL,
    is_well_known, restricted_label_reason,
};
use crate::api::nodeclaim::ResourceRequirements;
use crate::api::{NodeClaim, NodeClaimSpec, NodePool, Operator};
use crate::scheduling::PlannedClaim;
use crate::scheduling::requirements::Requirement;

/// Builds the NodeClaim for `planned` from `pool`'s template: labels (template labels, the
/// nodepool and ec2nodeclass labels, see [`label_value`] for requirements), annotations, an owner
/// reference to the pool, and the spec with the plan's requirements and requests. Named by the
/// API server from `<pool>-` (`generateName`), as upstream does.
pub fn nodeclaim_for(pool: &NodePool, planned: &PlannedClaim) -> NodeClaim {
    let template = &pool.spec.template;
    let pool_name = pool.name_any();
    let requirements = planned.nodeclaim_requirements();
    let mut labels: BTreeMap<String, String> = template
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    for r in &requirements {
        if let Some(value) = label_value(r) {
            labels.insert(r.key.clone(), value);
        }
    }
    labels.insert(NODEPOOL_LABEL.to_string(), pool_name.clone());
    let class = &template.spec.node_class_ref;
    if class.kind == "EC2NodeClass" {
        labels.insert(EC2NODECLASS_LABEL.to_string(), class.name.clone());
    }
    let mut annotations = template
        .metadata
        .as_ref()
        .map(|m| m.annotations.clone())
        .unwrap_or_default();
    // The pool's static hash as of creation: drift compares it with the pool's current one.
    annotations.insert(
        NODEPOOL_HASH_ANNOTATION.to_string(),
        crate::api::hash::nodepool_hash(pool),
    );
    annotations.insert(
        NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
        crate::api::hash::NODEPOOL_HASH_VERSION.to_string(),
    );
    let owner = OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: pool_name.clone(),
        uid: pool.uid().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    };
    let spec = NodeClaimSpec {
        taints: template.spec.taints.clone(),
        startup_taints: template.spec.startup_taints.clone(),
        requirements,
        resources: Some(ResourceRequirements {
            requests: planned.requests.to_list(),
        }),
        node_class_ref: template.spec.node_class_ref.clone(),
        expire_after: template.spec.expire_after.clone(),
        termination_grace_period: template.spec.termination_grace_period.clone(),
    };
    NodeClaim {
        metadata: ObjectMeta {
            generate_name: Some(format!("{pool_name}-")),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        spec,
        status: None,
    }
}

/// The label a NodeClaim (and so its Node) carries for requirement `r`, if any.
///
/// - A custom key (neither well known nor restricted) always gets one, as upstream's
///   `Requirements.Labels()` gives it: a pod that requires `team Exists` or `team In [a, b]` can
///   only be matched to the new node through that label. Without it kube-scheduler never binds
///   the pod and every provisioning retry buys another claim.
/// - A well-known key gets one when the plan pinned it to one value. Upstream leaves those to
///   the cloud provider at launch; writing them at creation lets in-flight claims be matched by
///   zone or capacity type before they launch, and the launch sets the same values.
/// - Restricted keys (`kubernetes.io/hostname`, Karpenter's own domains) never.
fn label_value(r: &ApiRequirement) -> Option<String> {
    if is_well_known(&r.key) {
        return (r.operator == Operator::In && r.values.len() == 1).then(|| r.values[0].clone());
    }
    if restricted_label_reason(&r.key).is_some() {
        return None;
    }
    Requirement::new(r.operator, &r.values).any()
}
