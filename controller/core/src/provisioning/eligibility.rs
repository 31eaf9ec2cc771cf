//! Which pods the provisioner provisions for (upstream `IsProvisionable`).

use k8s_openapi::api::core::v1::Pod;

use crate::api::labels::MIRROR_POD_ANNOTATION as MIRROR_ANNOTATION;
use crate::scheduling::pod::{is_owned_by_daemonset, is_owned_by_node};

/// A pod kube-scheduler could not place: `PodScheduled=False` with reason `Unschedulable`, not
/// bound, not being preempted onto a node (`nominatedNodeName`), not terminal or deleting, not a
/// DaemonSet's (daemon overhead is accounted per node instead), not a mirror pod.
pub fn is_provisionable(pod: &Pod) -> bool {
    let meta = &pod.metadata;
    if meta.deletion_timestamp.is_some()
        || meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
        || is_owned_by_daemonset(pod)
    {
        return false;
    }
    if pod
        .spec
        .as_ref()
        .is_none_or(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty()))
    {
        return false;
    }
    let Some(status) = &pod.status else {
        return false;
    };
    if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return false;
    }
    if status
        .nominated_node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty())
    {
        return false;
    }
    status
        .conditions
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// A pod bound to a node that is going away which needs a new home (upstream
/// `IsReschedulable`): not terminal, not terminating (unless a StatefulSet owns it: its
/// replacement keeps the name and must fit somewhere), not a DaemonSet's (the DaemonSet runs one
/// on every node anyway), not a mirror pod.
pub fn is_reschedulable(pod: &Pod) -> bool {
    let owners = pod.metadata.owner_references.as_deref().unwrap_or_default();
    let owned_by = |kind: &str| owners.iter().any(|o| o.kind == kind);
    if matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return false;
    }
    if pod.metadata.deletion_timestamp.is_some() && !owned_by("StatefulSet") {
        return false;
    }
    let mirror = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
        || is_owned_by_node(pod);
    !mirror && !is_owned_by_daemonset(pod)
}
