//! Mutating admission the simulated cluster runs, as an EKS control plane does.
//!
//! EKS's VPC admission webhook (`vpc-admission-webhook`, part of the control plane's Windows
//! support) gives every created pod whose `nodeSelector` picks Windows nodes
//! (`kubernetes.io/os` or the deprecated `beta.kubernetes.io/os` = `windows`) one
//! `vpc.amazonaws.com/PrivateIPv4Address` in its first container's requests and limits: a
//! Windows pod's IP is a secondary address of the node's primary interface, which EKS's VPC
//! resource controller advertises as that extended resource. So the scheduler (and Karpenter)
//! count a Windows node's addresses as they count its CPUs.

use serde_json::{Value, json};

/// The extended resource a Windows pod's IP address is counted in.
pub const PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";

/// Applies the VPC admission webhook to a pod being created.
pub fn vpc_admission(pod: &mut Value) {
    let selector = &pod["spec"]["nodeSelector"];
    let windows = ["kubernetes.io/os", "beta.kubernetes.io/os"]
        .iter()
        .any(|key| selector[key] == "windows");
    if !windows {
        return;
    }
    let Some(container) = pod["spec"]["containers"]
        .as_array_mut()
        .and_then(|c| c.first_mut())
    else {
        return;
    };
    for field in ["requests", "limits"] {
        let resources = &mut container["resources"];
        if !resources.is_object() {
            *resources = json!({});
        }
        let list = &mut resources[field];
        if !list.is_object() {
            *list = json!({});
        }
        list[PRIVATE_IPV4_ADDRESS] = json!("1");
    }
}
