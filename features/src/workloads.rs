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
