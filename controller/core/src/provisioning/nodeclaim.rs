//! The NodeClaim a planned node becomes: the NodePool's template narrowed by the plan.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube_core::ResourceExt;

use crate::api::labels::{
    NODEPOOL_HASH_ANNOTATION, NODEPOOL_HASH_VERSION_ANNOTATION, NODEPOOL_LABEL,
};
use crate::api::nodeclaim::ResourceRequirements;
use crate::api::{NodeClaim, NodeClaimSpec, NodePool, Operator};
use crate::scheduling::PlannedClaim;

/// Builds the NodeClaim for `planned` from `pool`'s template: labels (template labels, the
/// nodepool label, and every requirement the plan pinned to one value), annotations, an owner
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
        if r.operator == Operator::In && r.values.len() == 1 {
            labels.insert(r.key.clone(), r.values[0].clone());
        }
    }
    labels.insert(NODEPOOL_LABEL.to_string(), pool_name.clone());
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
