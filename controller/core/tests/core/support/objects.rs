//! Kubernetes objects as JSON, built the way a test states them: `pending_pod("web", "1")`,
//! `default_node_class()`.

use serde_json::{Value, json};

/// The `default` EC2NodeClass: the al2023 alias, subnets and security groups fakecloud tags
/// `karpenter.sh/discovery: sim`.
pub fn default_node_class() -> Value {
    json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
        "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "sim"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "sim"}}]}
    })
}

/// A pod in `default` the scheduler could not place, requesting `cpu` and 256Mi.
pub fn pending_pod(name: &str, cpu: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    })
}

/// A pod in `default` bound to `node` and running, requesting 100m; `tweak` adds what the test
/// is about.
pub fn running_pod(name: &str, node: &str, tweak: impl FnOnce(&mut Value)) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"nodeName": node, "containers": [{"name": "app", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"phase": "Running"}
    });
    tweak(&mut pod);
    pod
}

/// Adds `toleration` (`key=value:NoSchedule`) to a pod.
pub fn tolerating(mut pod: Value, key: &str, value: &str) -> Value {
    pod["spec"]["tolerations"] =
        json!([{"key": key, "operator": "Equal", "value": value, "effect": "NoSchedule"}]);
    pod
}
