//! The DaemonSet stand-in: one pod on every Ready node whose taints the DaemonSet's pods tolerate,
//! as the DaemonSet controller keeps them (the simulation runs no workload controllers). Drains
//! need daemons to order, and the provisioner leaves room for them on every node it launches.

use std::borrow::Borrow;

use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::{Value, json};

/// Tolerations the DaemonSet controller adds to every pod it creates, so daemons keep running
/// through node conditions (Kubernetes' `AddOrUpdateDaemonPodTolerations`). None of them is for
/// `karpenter.sh/disrupted`: a terminating node's daemons are drained like any pod, last.
const DAEMON_TOLERATIONS: [(&str, &str); 6] = [
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
];

/// A DaemonSet the scenario created: one pod on every Ready node whose taints its pods tolerate.
/// The DaemonSet object itself is in the API server too, so the provisioner leaves room for its
/// pods on every node it launches.
///
/// Pods are named `<daemonset>-<n>` like a Deployment's, bound to their node at creation (the
/// controller sets node affinity to one node; binding directly is the same outcome for a pod
/// that fits, which the provisioner made sure of), with a controller reference to the DaemonSet.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSet {
    pub name: String,
    pub namespace: String,
    /// The pod template: `{"metadata": {"labels": ...}, "spec": ...}`, with the controller's
    /// tolerations added.
    pub template: Value,
    next: usize,
}

impl DaemonSet {
    /// A DaemonSet from its manifest (`apps/v1`).
    pub fn from_manifest(document: &Value) -> Result<Self, String> {
        let name = document["metadata"]["name"]
            .as_str()
            .ok_or("a DaemonSet needs metadata.name")?
            .to_string();
        let mut template = document["spec"]["template"].clone();
        if !template["spec"]["containers"].is_array() {
            return Err(format!(
                "DaemonSet {name}: spec.template.spec.containers is required"
            ));
        }
        let mut tolerations = template["spec"]["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (key, effect) in DAEMON_TOLERATIONS {
            tolerations.push(json!({"key": key, "operator": "Exists", "effect": effect}));
        }
        template["spec"]["tolerations"] = Value::Array(tolerations);
        Ok(Self {
            namespace: document["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string(),
            name,
            template,
            next: 0,
        })
    }

    /// The manifest of a DaemonSet whose pods (labelled `app: <name>`) request `cpu` and
    /// `memory`; `critical` gives them priority class `system-node-critical`, as node agents
    /// (CNI, log shippers) have.
    pub fn manifest(name: &str, cpu: &str, memory: &str, critical: bool) -> Value {
        let mut spec = json!({
            "containers": [{"name": "agent", "image": "registry.example/agent:1",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
        });
        if critical {
            spec["priorityClassName"] = json!("system-node-critical");
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec}
            }
        })
    }

    fn owns(&self, pod: &Value) -> bool {
        pod["metadata"]["namespace"] == json!(self.namespace)
            && pod["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r["kind"] == "DaemonSet"
                            && r["controller"] == true
                            && r["name"] == json!(self.name)
                    })
                })
    }

    /// Whether the DaemonSet controller would run a pod on `node`: it is Ready, not being
    /// deleted, and its pods tolerate every NoSchedule and NoExecute taint on it.
    fn should_run_on(&self, node: &Value) -> bool {
        let ready = node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        let tolerations: Vec<&Value> = self.template["spec"]["tolerations"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        let tolerated = |taint: &Value| {
            tolerations.iter().any(|t| {
                let key = t["key"].as_str().unwrap_or_default();
                let key_ok = if key.is_empty() {
                    t["operator"] == "Exists"
                } else {
                    taint["key"] == key
                };
                let value_ok = t["operator"] == "Exists" || t["value"] == taint["value"];
                let effect = t["effect"].as_str().unwrap_or_default();
                key_ok && value_ok && (effect.is_empty() || taint["effect"] == effect)
            })
        };
        ready
            && node["metadata"]["deletionTimestamp"].is_null()
            && node["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| matches!(t["effect"].as_str(), Some("NoSchedule" | "NoExecute")))
                .all(tolerated)
    }

    fn pod(&mut self, node: &str) -> Value {
        let name = format!("{}-{}", self.name, self.next);
        self.next += 1;
        let mut spec = self.template["spec"].clone();
        spec["nodeName"] = json!(node);
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": self.template["metadata"]["labels"],
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "DaemonSet", "name": self.name,
                    "uid": format!("uid-{}", self.name), "controller": true,
                    "blockOwnerDeletion": true
                }]
            },
            "spec": spec,
            "status": {"phase": "Pending"}
        })
    }

    /// One pass of the DaemonSet controller: a pod for every node that should run one and has
    /// none of this DaemonSet's (a terminating one counts: the controller waits for it to go).
    /// Returns how many pods it created.
    pub async fn reconcile(
        &mut self,
        kube: &dyn KubeApi,
        pods: &[impl Borrow<Value>],
        nodes: &[impl Borrow<Value>],
    ) -> Result<usize, KubeError> {
        let mut created = 0;
        let wanted: Vec<&str> = nodes
            .iter()
            .map(Borrow::borrow)
            .filter(|n| self.should_run_on(n))
            .map(|n: &Value| n["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        for name in wanted {
            let has_pod = pods.iter().map(Borrow::borrow).any(|p: &Value| {
                self.owns(p)
                    && p["spec"]["nodeName"] == name
                    && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
            });
            if !has_pod {
                kube.create(&ResourceKind::POD, self.pod(name)).await?;
                created += 1;
            }
        }
        Ok(created)
    }
}
