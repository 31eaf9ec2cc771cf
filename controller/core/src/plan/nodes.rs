//! Existing Nodes into the scheduler's [`ExistingNode`]: labels, taints, allocatable and capacity,
//! readiness and deletion, as a kube-scheduler would see them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::decode::{Decoded, field_error};
use super::error::PlanError;
use crate::api::{Taint, TaintEffect};
use crate::resources::{PODS, Resources, parse_quantity};
use crate::scheduling::ExistingNode;

/// The kubelet's default `maxPods`, assumed when a hand-written Node leaves `pods` out: without
/// it the node would take no pod at all, which is never what the author meant.
pub const DEFAULT_MAX_PODS: i64 = 110;

/// The taint the node lifecycle controller puts on a cordoned node (`spec.unschedulable`); the
/// scheduler then keeps new pods off it through the taint alone.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The node `node` describes (without pods; the caller binds them), plus notes on assumptions.
pub(crate) fn existing_node(
    decoded: &Decoded,
    node: &Node,
) -> Result<(ExistingNode, Vec<String>), PlanError> {
    let mut notes = Vec::new();
    let name = node.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(field_error(
            &decoded.at,
            &decoded.object_ref,
            "metadata.name",
            "Required value: name is required",
        ));
    }
    let spec = node.spec.clone().unwrap_or_default();
    let taints = taints(decoded, &spec)?;
    let status = node.status.clone().unwrap_or_default();
    let (allocatable, capacity) = resources(decoded, &status, &mut notes)?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready");
    Ok((
        ExistingNode {
            name,
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints,
            capacity,
            allocatable,
            pods: Vec::new(),
            // A hand-written Node has no conditions: take it as ready.
            initialized: ready.is_none_or(|c| c.status == "True"),
            deleting: node.metadata.deletion_timestamp.is_some(),
            volume_limits: Default::default(),
        },
        notes,
    ))
}

/// The node's taints, and the unschedulable taint of a cordoned node.
fn taints(decoded: &Decoded, spec: &NodeSpec) -> Result<Vec<Taint>, PlanError> {
    let mut taints = Vec::new();
    for (i, taint) in spec.taints.iter().flatten().enumerate() {
        let effect = match taint.effect.as_str() {
            "NoSchedule" => TaintEffect::NoSchedule,
            "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
            "NoExecute" => TaintEffect::NoExecute,
            other => {
                return Err(field_error(
                    &decoded.at,
                    &decoded.object_ref,
                    format!("spec.taints[{i}].effect"),
                    format!(
                        "Unsupported value: {other:?}: supported values: \"NoSchedule\", \
                         \"PreferNoSchedule\", \"NoExecute\""
                    ),
                ));
            }
        };
        taints.push(Taint {
            key: taint.key.clone(),
            value: taint.value.clone(),
            effect,
            time_added: None,
        });
    }
    if spec.unschedulable == Some(true) && !taints.iter().any(|t| t.key == UNSCHEDULABLE_TAINT) {
        taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.to_string(),
            value: None,
            effect: TaintEffect::NoSchedule,
            time_added: None,
        });
    }
    Ok(taints)
}

/// (allocatable, capacity): each defaults to the other; pods default to capacity's, else to the
/// kubelet's default (noted).
fn resources(
    decoded: &Decoded,
    status: &NodeStatus,
    notes: &mut Vec<String>,
) -> Result<(Resources, Resources), PlanError> {
    let resources = |field: &str, list: &Option<BTreeMap<String, Quantity>>| {
        list.as_ref()
            .map(|list| {
                let mut out = Resources::new();
                for (resource, quantity) in list {
                    let amount = parse_quantity(resource, &quantity.0).map_err(|e| {
                        field_error(
                            &decoded.at,
                            &decoded.object_ref,
                            format!("{field}.{resource}"),
                            e.to_string(),
                        )
                    })?;
                    out.add_one(resource, amount);
                }
                Ok(out)
            })
            .transpose()
    };
    let allocatable = resources("status.allocatable", &status.allocatable)?;
    let capacity = resources("status.capacity", &status.capacity)?;
    // Each defaults to the other, as the kubelet reports allocatable = capacity when nothing is
    // reserved.
    let (mut allocatable, capacity) = match (allocatable, capacity) {
        (Some(a), Some(c)) => (a, c),
        (Some(a), None) => (a.clone(), a),
        (None, Some(c)) => (c.clone(), c),
        (None, None) => {
            return Err(field_error(
                &decoded.at,
                &decoded.object_ref,
                "status.allocatable",
                "Required value: a Node needs status.allocatable (or status.capacity) to take pods",
            ));
        }
    };
    let has_pods = |r: &Resources| r.iter().any(|(name, _)| name == PODS);
    if !has_pods(&allocatable) {
        if has_pods(&capacity) {
            allocatable.set(PODS, capacity.get(PODS));
        } else {
            allocatable.set(PODS, DEFAULT_MAX_PODS);
            notes.push(format!(
                "{} ({}): no pods in status.allocatable; assuming the kubelet default of \
                 {DEFAULT_MAX_PODS}",
                decoded.object_ref, decoded.at
            ));
        }
    }
    Ok((allocatable, capacity))
}
