//! Mutating admission the simulated cluster runs, as an EKS control plane does.
//!
//! EKS's VPC admission webhook (`vpc-admission-webhook`, part of the control plane's Windows
//! support) gives every created pod whose `nodeSelector` picks Windows nodes
//! (`kubernetes.io/os` or the deprecated `beta.kubernetes.io/os` = `windows`) one
//! `vpc.amazonaws.com/PrivateIPv4Address` in its first container's requests and limits: a
//! Windows pod's IP is a secondary address of the node's primary interface, which EKS's VPC
//! resource controller advertises as that extended resource. So the scheduler (and Karpenter)
//! count a Windows node's addresses as they count its CPUs.
//!
//! The `Priority` admission plugin (on in every API server) resolves a created pod's
//! `priorityClassName` to `spec.priority`; [`priority_admission`] does so for the two built-in
//! PriorityClasses every cluster has, which is what a drain's eviction tiers and node agents
//! rely on.

use serde_json::{Value, json};

/// The built-in PriorityClasses every API server creates at start, with their values
/// (`scheduling.k8s.io`: `system-cluster-critical` 2,000,000,000; `system-node-critical`
/// 2,000,001,000).
pub const BUILTIN_PRIORITY_CLASSES: [(&str, i64); 2] = [
    ("system-cluster-critical", 2_000_000_000),
    ("system-node-critical", 2_000_001_000),
];

/// The `Priority` admission plugin for a pod being created, for the built-in classes: sets
/// `spec.priority` from a built-in `priorityClassName`, and refuses a pod whose own
/// `spec.priority` disagrees with its class, as the API server does. Other class names pass
/// unchanged (fakekube keeps no PriorityClass objects).
pub fn priority_admission(pod: &mut Value) -> Result<(), String> {
    let Some(class) = pod["spec"]["priorityClassName"].as_str() else {
        return Ok(());
    };
    let Some((_, value)) = BUILTIN_PRIORITY_CLASSES.iter().find(|(n, _)| *n == class) else {
        return Ok(());
    };
    match pod["spec"]["priority"].as_i64() {
        Some(given) if given != *value => Err(format!(
            "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
        )),
        _ => {
            pod["spec"]["priority"] = json!(value);
            Ok(())
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_of_a_built_in_critical_class_gets_its_priority_value() {
        let mut pod = json!({"spec": {"priorityClassName": "system-node-critical"}});
        assert_eq!(priority_admission(&mut pod), Ok(()));
        assert_eq!(pod["spec"]["priority"], 2_000_001_000);
        let mut pod = json!({"spec": {"priorityClassName": "system-cluster-critical"}});
        assert_eq!(priority_admission(&mut pod), Ok(()));
        assert_eq!(pod["spec"]["priority"], 2_000_000_000);
    }

    #[test]
    fn a_pod_whose_own_priority_disagrees_with_its_class_is_refused() {
        let mut pod =
            json!({"spec": {"priorityClassName": "system-cluster-critical", "priority": 7}});
        assert!(priority_admission(&mut pod).is_err());
    }

    #[test]
    fn a_pod_without_a_class_is_left_alone() {
        let mut pod = json!({"spec": {"containers": []}});
        assert_eq!(priority_admission(&mut pod), Ok(()));
        assert!(pod["spec"]["priority"].is_null());
    }
}
