//! Deployments as the pods a ReplicaSet would keep running. The sim has no workload controllers,
//! and scenarios need one: a pod whose node goes away must come back as a new pending pod for
//! the autoscaler to place, as it would in a cluster.
//!
//! Pods are named `<deployment>-<n>` with `n` counting up (never reused), carry the template's
//! labels plus `pod-template-hash` and a controller reference to the ReplicaSet
//! `<deployment>-<hash>`, as the real controllers write them.

use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::{Value, json};

/// A Deployment the scenario created, with the state its ReplicaSet stand-in needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    pub name: String,
    pub namespace: String,
    pub replicas: usize,
    /// The pod template: `{"metadata": {"labels": ...}, "spec": ...}`.
    pub template: Value,
    /// The next pod's number.
    next: usize,
}

impl Deployment {
    /// A Deployment from its manifest (`apps/v1`), as `kubectl apply` would create it.
    pub fn from_manifest(document: &Value) -> Result<Self, String> {
        let name = document["metadata"]["name"]
            .as_str()
            .ok_or("a Deployment needs metadata.name")?
            .to_string();
        let template = &document["spec"]["template"];
        if !template["spec"]["containers"].is_array() {
            return Err(format!(
                "Deployment {name}: spec.template.spec.containers is required"
            ));
        }
        let replicas = match &document["spec"]["replicas"] {
            Value::Null => 1,
            v => v
                .as_u64()
                .ok_or_else(|| format!("Deployment {name}: spec.replicas must be a count"))?
                as usize,
        };
        Ok(Self {
            namespace: document["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string(),
            name,
            replicas,
            template: template.clone(),
            next: 0,
        })
    }

    /// A Deployment of `replicas` pods labelled `app: <name>`, each with one container requesting
    /// `cpu` (and `memory` when given): the shape most scenarios need, said in one line.
    pub fn with_requests(name: &str, replicas: usize, cpu: &str, memory: Option<&str>) -> Self {
        let mut requests = json!({"cpu": cpu});
        if let Some(memory) = memory {
            requests["memory"] = json!(memory);
        }
        Self {
            name: name.to_string(),
            namespace: "default".to_string(),
            replicas,
            template: json!({
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1", "resources": {"requests": requests}}]}
            }),
            next: 0,
        }
    }

    /// Merges `fields` into the pod spec (RFC 7386 merge: maps merge, anything else replaces,
    /// `null` removes), e.g. a `nodeSelector`, `affinity`, `tolerations` or
    /// `topologySpreadConstraints` a scenario adds to a Deployment.
    pub fn merge_pod_spec(&mut self, fields: &Value) {
        merge(&mut self.template["spec"], fields);
    }

    /// The value of `pod-template-hash` (stable for a template, like the real one).
    pub fn template_hash(&self) -> String {
        // FNV-1a over the template's JSON: deterministic across runs and platforms.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.template.to_string().bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        format!("{:010x}", hash & 0xff_ffff_ffff)
    }

    fn replica_set(&self) -> String {
        format!("{}-{}", self.name, self.template_hash())
    }

    /// Whether `pod` is one of this Deployment's.
    pub fn owns(&self, pod: &Value) -> bool {
        pod["metadata"]["namespace"] == json!(self.namespace)
            && pod["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        r["kind"] == "ReplicaSet"
                            && r["controller"] == true
                            && r["name"] == json!(self.replica_set())
                    })
                })
    }

    fn pod(&mut self) -> Value {
        let name = format!("{}-{}", self.name, self.next);
        self.next += 1;
        let mut labels = self.template["metadata"]["labels"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        labels["pod-template-hash"] = json!(self.template_hash());
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": labels,
                "ownerReferences": [{
                    "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": self.replica_set(),
                    "uid": format!("uid-{}", self.replica_set()), "controller": true,
                    "blockOwnerDeletion": true
                }]
            },
            "spec": self.template["spec"],
            "status": {"phase": "Pending"}
        })
    }

    /// One pass of the ReplicaSet controller: creates pods up to `replicas` (for missing ones and
    /// ones that finished or went with their node) and deletes extras, unscheduled ones first,
    /// then the newest. Returns how many pods it created and deleted.
    pub async fn reconcile(
        &mut self,
        kube: &dyn KubeApi,
        pods: &[Value],
    ) -> Result<(usize, usize), KubeError> {
        let mut live: Vec<&Value> = pods
            .iter()
            .filter(|p| self.owns(p))
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .collect();
        let (mut created, mut deleted) = (0, 0);
        while live.len() + created < self.replicas {
            kube.create(&ResourceKind::POD, self.pod()).await?;
            created += 1;
        }
        if live.len() > self.replicas {
            // Keep scheduled pods, and older ones among equals.
            live.sort_by_key(|p| {
                (
                    p["spec"]["nodeName"].is_string(),
                    std::cmp::Reverse(ordinal(p)),
                )
            });
            for pod in &live[..live.len() - self.replicas] {
                let name = pod["metadata"]["name"].as_str().unwrap_or_default();
                kube.delete(
                    &ResourceKind::POD,
                    &ObjectKey::namespaced(self.namespace.clone(), name),
                    &DeleteOptions::default(),
                )
                .await?;
                deleted += 1;
            }
        }
        Ok((created, deleted))
    }
}

/// The `n` of a pod named `<deployment>-<n>`.
fn ordinal(pod: &Value) -> u64 {
    pod["metadata"]["name"]
        .as_str()
        .and_then(|n| n.rsplit('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// RFC 7386 JSON merge.
fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let Value::Object(object) = target else {
        return;
    };
    for (key, value) in fields {
        if value.is_null() {
            object.remove(key);
        } else {
            merge(object.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

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

/// A DaemonSet the scenario created: one pod on every Ready node whose taints its pods tolerate,
/// as the DaemonSet controller keeps them (the sim has none). The DaemonSet object itself is in
/// the API server too, so the provisioner leaves room for its pods on every node it launches.
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
        pods: &[Value],
        nodes: &[Value],
    ) -> Result<usize, KubeError> {
        let mut created = 0;
        let wanted: Vec<&str> = nodes
            .iter()
            .filter(|n| self.should_run_on(n))
            .map(|n| n["metadata"]["name"].as_str().unwrap_or_default())
            .collect();
        for name in wanted {
            let has_pod = pods.iter().any(|p| {
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
