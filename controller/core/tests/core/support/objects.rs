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

/// A NodeClaim of NodePool `default` and EC2NodeClass `default`, created at the start of the test
/// clock and requesting one CPU, built up by the methods below:
/// `nodeclaim("default-a").of_types(&["m5.large"]).capacity_types(&["on-demand"]).json()`.
pub fn nodeclaim(name: &str) -> NodeClaimBuilder {
    NodeClaimBuilder(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}],
            "resources": {"requests": {"cpu": "1"}},
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
        }
    }))
}

/// See [`nodeclaim`].
pub struct NodeClaimBuilder(Value);

impl NodeClaimBuilder {
    pub fn requirement(mut self, key: &str, values: &[&str]) -> Self {
        let requirement = json!({"key": key, "operator": "In", "values": values});
        self.0["spec"]["requirements"]
            .as_array_mut()
            .expect("requirements are a list")
            .push(requirement);
        self
    }

    /// Launchable as any of these instance types.
    pub fn of_types(self, types: &[&str]) -> Self {
        self.requirement("node.kubernetes.io/instance-type", types)
    }

    /// Launchable with any of these capacity types.
    pub fn capacity_types(self, capacity_types: &[&str]) -> Self {
        self.requirement("karpenter.sh/capacity-type", capacity_types)
    }

    /// With a `NoSchedule` startup taint `key` (an agent that must start first).
    pub fn startup_taint(mut self, key: &str) -> Self {
        self.0["spec"]["startupTaints"] = json!([{"key": key, "effect": "NoSchedule"}]);
        self
    }

    /// With a terminationGracePeriod.
    pub fn termination_grace_period(mut self, period: &str) -> Self {
        self.0["spec"]["terminationGracePeriod"] = json!(period);
        self
    }

    /// Carrying the termination finalizer (the lifecycle controller adds it on first sight).
    pub fn finalized(mut self) -> Self {
        self.0["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
        self
    }

    /// Launched as `instance` in us-west-2a (`status.providerID` only).
    pub fn running_as(mut self, instance: &str) -> Self {
        self.0["status"] = json!({"providerID": format!("aws:///us-west-2a/{instance}")});
        self
    }

    pub fn json(self) -> Value {
        self.0
    }
}

/// A Ready Node for the instance `provider_id` with room for two CPUs: what the kubelet
/// registers when an instance boots.
pub fn ready_node(name: &str, provider_id: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "spec": {"providerID": provider_id},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                   "allocatable": {"cpu": "2", "memory": "7Gi", "pods": "29"}}
    })
}
