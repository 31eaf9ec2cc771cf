//! Pods as the plan sees them: where each came from (a Pod document or a workload's template),
//! the checks that turn a malformed spec into an error naming the field, and the conversion into
//! the scheduler's [`PodInfo`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PersistentVolumeClaimSpec, Pod, PodSpec};

use super::decode::field_error;
use super::error::{ObjectRef, PlanError, Position};
use crate::resources::parse_quantity;
use crate::scheduling::{PodError, PodInfo, Requirements};

/// A pod the input describes (a Pod document) or implies (a replica of a workload).
#[derive(Clone, Debug)]
pub(crate) struct PodSource {
    pub pod: Pod,
    pub at: Position,
    /// The object to blame for a bad field: the Pod itself, or the workload it expands.
    pub origin: ObjectRef,
    /// Path of the pod spec inside `origin`: `spec`, or `spec.template.spec` for workloads.
    pub spec_path: &'static str,
    /// Claims the pod's controller creates with it (StatefulSet `volumeClaimTemplates`), by
    /// claim name: used when the input does not hold the claim yet.
    pub claim_templates: BTreeMap<String, PersistentVolumeClaimSpec>,
}

impl PodSource {
    /// `namespace/name`, as the plan reports it.
    pub fn key(&self) -> String {
        format!("{}/{}", namespace(&self.pod), name(&self.pod))
    }

    /// The node it is bound to (`spec.nodeName`), if any: bound pods are not pending.
    pub fn node_name(&self) -> Option<&str> {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    /// Succeeded or failed: holds no resources and is never scheduled again.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    }

    /// The controller owner reference's `(kind, name)`, if any.
    pub fn controller(&self) -> Option<(&str, &str)> {
        controller_of(&self.pod)
    }
}

pub(crate) fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

pub(crate) fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// The controller owner reference's `(kind, name)`, if any.
pub(crate) fn controller_of(pod: &Pod) -> Option<(&str, &str)> {
    pod.metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.as_str(), o.name.as_str()))
}

/// What became of a pod once its spec was read.
#[derive(Clone, Debug)]
pub(crate) enum Prepared {
    Ready(Box<PodInfo>),
    /// Well-formed, but nothing the scheduler can place (reason for the user).
    Unschedulable(String),
}

/// Converts `source` into the scheduler's view with `volume_terms`. A resource quantity that does
/// not parse is an error naming the field (the API server would have rejected the pod); a node
/// affinity the scheduler does not model makes the pod unschedulable rather than silently
/// ignoring a constraint.
pub(crate) fn prepare(
    source: &PodSource,
    volume_terms: Vec<Requirements>,
) -> Result<Prepared, PlanError> {
    if let Some(spec) = &source.pod.spec
        && let Err((field, message)) = check_quantities(spec)
    {
        return Err(field_error(
            &source.at,
            &source.origin,
            format!("{}.{field}", source.spec_path),
            message,
        ));
    }
    let mut pod = source.pod.clone();
    // The scheduler breaks ties by uid; `namespace/name` is unique where bare names are not.
    if pod.metadata.uid.as_deref().is_none_or(str::is_empty) {
        pod.metadata.uid = Some(source.key());
    }
    match PodInfo::from_pod(&pod, volume_terms) {
        Ok(info) => Ok(Prepared::Ready(Box::new(info))),
        Err(PodError::MatchFields) => Ok(Prepared::Unschedulable(
            "node affinity uses matchFields, which the scheduling simulation does not support"
                .to_string(),
        )),
        Err(PodError::Quantity(message)) => Err(field_error(
            &source.at,
            &source.origin,
            source.spec_path,
            message,
        )),
    }
}

/// The first resource quantity in `spec` that is not a Kubernetes quantity, as `(path, message)`
/// relative to the spec.
fn check_quantities(spec: &PodSpec) -> Result<(), (String, String)> {
    check_containers("containers", &spec.containers)?;
    if let Some(init) = &spec.init_containers {
        check_containers("initContainers", init)?;
    }
    for (resource, quantity) in spec.overhead.iter().flatten() {
        parse_quantity(resource, &quantity.0)
            .map_err(|e| (format!("overhead.{resource}"), e.to_string()))?;
    }
    Ok(())
}

fn check_containers(list: &str, containers: &[Container]) -> Result<(), (String, String)> {
    for (i, container) in containers.iter().enumerate() {
        let Some(resources) = &container.resources else {
            continue;
        };
        for (kind, map) in [
            ("requests", &resources.requests),
            ("limits", &resources.limits),
        ] {
            for (resource, quantity) in map.iter().flatten() {
                parse_quantity(resource, &quantity.0).map_err(|e| {
                    (
                        format!("{list}[{i}].resources.{kind}.{resource}"),
                        e.to_string(),
                    )
                })?;
            }
        }
    }
    Ok(())
}
