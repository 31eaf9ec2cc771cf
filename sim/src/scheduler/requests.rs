//! What a pod asks of a node, computed the way kube-scheduler's `NodeResourcesFit` does: the sum
//! of its containers, raised to the largest init-container phase (sidecar init containers, those
//! with `restartPolicy: Always`, keep running and so add to everything after them), replaced by
//! pod-level requests where the pod sets them, plus the RuntimeClass overhead.

use k8s_openapi::api::core::v1::{Container, Pod};
use karpenter_core::resources::{CPU, MEMORY, Resources};
use karpenter_core::seams::KubeError;

use crate::objects::resources_of;

/// The pod's effective requests (cpu in millicores, the rest in units).
pub(crate) fn pod_requests(pod: &Pod, what: &str) -> Result<Resources, KubeError> {
    let Some(spec) = &pod.spec else {
        return Ok(Resources::new());
    };
    let mut total = Resources::new();
    for container in &spec.containers {
        total = total.plus(&container_requests(container, what)?);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for container in spec.init_containers.iter().flatten() {
        let requests = container_requests(container, what)?;
        let phase = if container.restart_policy.as_deref() == Some("Always") {
            total = total.plus(&requests);
            sidecars = sidecars.plus(&requests);
            sidecars.clone()
        } else {
            requests.plus(&sidecars)
        };
        init_peak = init_peak.max(&phase);
    }
    total = total.max(&init_peak);
    if let Some(pod_level) = spec.resources.as_ref() {
        let pod_level = resources_of(pod_level.requests.as_ref(), what)?;
        for name in [CPU, MEMORY] {
            if pod_level.iter().any(|(n, _)| n == name) {
                total.set(name, pod_level.get(name));
            }
        }
    }
    let overhead = resources_of(spec.overhead.as_ref(), what)?;
    Ok(total.plus(&overhead))
}

/// A container's requests; a resource with only a limit requests its limit (the API server's
/// defaulting, applied here too in case the in-memory server does not).
fn container_requests(container: &Container, what: &str) -> Result<Resources, KubeError> {
    let Some(resources) = &container.resources else {
        return Ok(Resources::new());
    };
    let requests = resources_of(resources.requests.as_ref(), what)?;
    let limits = resources_of(resources.limits.as_ref(), what)?;
    let mut out = requests.clone();
    for (name, amount) in limits.iter() {
        if !requests.iter().any(|(n, _)| n == name) {
            out.set(name, amount);
        }
    }
    Ok(out)
}
