//! The ReplicaSet stand-in: a Deployment as the pods its ReplicaSet keeps running. The simulation
//! runs no workload controllers, and its scenarios need one: a pod whose node goes away (a drain,
//! an interruption, an instance that died) must come back as a new pending pod for the autoscaler
//! to place, as it would in a cluster.
//!
//! Pods are named `<deployment>-<n>` with `n` counting up (never reused, so a pod's name is its
//! history), carry the template's labels and annotations plus `pod-template-hash`, and a
//! controller reference to the ReplicaSet `<deployment>-<hash>`, as the real controllers write
//! them. Extras go unscheduled first, then newest first (Kubernetes' deletion ranking, shortened).

use std::borrow::Borrow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hasher;

use fnv::FnvHasher;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use serde_json::{Value, json};

/// A Deployment the scenario created, with the state its ReplicaSet stand-in needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    pub name: String,
    pub namespace: String,
    pub replicas: usize,
    /// The pod template: `{"metadata": {"labels": ..., "annotations": ...}, "spec": ...}`.
    pub template: Value,
    /// The next pod's number.
    next: usize,
    /// ReplicaSets of earlier templates (a changed template starts a new one; their pods still
    /// count until they go, as during a rollout).
    earlier: BTreeSet<String>,
    /// The ReplicaSet objects written to the API server and the `spec.replicas` each says, so
    /// a pass writes only what changed.
    published: BTreeMap<String, usize>,
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
            earlier: BTreeSet::new(),
            published: BTreeMap::new(),
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
            earlier: BTreeSet::new(),
            published: BTreeMap::new(),
        }
    }

    /// A new pod template from now on (its pods get a new ReplicaSet; the old one's still count).
    pub fn set_template(&mut self, template: Value) {
        if template != self.template {
            self.earlier.insert(self.replica_set());
            self.template = template;
        }
    }

    /// Merges `fields` into the pod spec (RFC 7386 merge: maps merge, anything else replaces,
    /// `null` removes), e.g. a `nodeSelector`, `affinity`, `tolerations` or
    /// `topologySpreadConstraints` a scenario adds to a Deployment.
    pub fn merge_pod_spec(&mut self, fields: &Value) {
        json_patch::merge(&mut self.template["spec"], fields);
    }

    /// The value of `pod-template-hash` (stable for a template, like the real one).
    pub fn template_hash(&self) -> String {
        // FNV-1a over the template's JSON: deterministic across runs and platforms.
        let mut hasher = FnvHasher::default();
        hasher.write(self.template.to_string().as_bytes());
        format!("{:010x}", hasher.finish() & 0xff_ffff_ffff)
    }

    fn replica_set(&self) -> String {
        format!("{}-{}", self.name, self.template_hash())
    }

    /// Whether `pod` is one of this Deployment's.
    pub fn owns(&self, pod: &Value) -> bool {
        self.owner().owns(pod)
    }

    /// What tells this Deployment's pods from others, worked out once: the ReplicaSet name
    /// hashes the whole template, too dear to repeat for each of 20,000 pods on every pass.
    pub fn owner(&self) -> Owner {
        Owner {
            namespace: self.namespace.clone(),
            current: self.replica_set(),
            earlier: self.earlier.clone(),
        }
    }

    fn pod(&mut self) -> Value {
        let name = format!("{}-{}", self.name, self.next);
        self.next += 1;
        let mut labels = self.template["metadata"]["labels"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        labels["pod-template-hash"] = json!(self.template_hash());
        let mut metadata = json!({
            "name": name,
            "namespace": self.namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": self.replica_set(),
                "uid": format!("uid-{}", self.replica_set()), "controller": true,
                "blockOwnerDeletion": true
            }]
        });
        if let Some(annotations) = self.template["metadata"]["annotations"].as_object()
            && !annotations.is_empty()
        {
            metadata["annotations"] = json!(annotations);
        }
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": self.template["spec"],
            "status": {"phase": "Pending"}
        })
    }

    /// Writes the ReplicaSet objects as the Deployment controller keeps them: the current one
    /// with the Deployment's `replicas`, earlier ones scaled to 0. The API server's
    /// PodDisruptionBudget arithmetic reads them (Kubernetes takes a budget's expected pods from
    /// the controllers' scale), so they must exist as in a cluster.
    async fn publish(&mut self, kube: &dyn KubeApi) -> Result<(), KubeError> {
        let current = self.replica_set();
        let mut wanted: Vec<(String, usize)> = self
            .earlier
            .iter()
            .filter(|name| **name != current)
            .map(|name| (name.clone(), 0))
            .collect();
        wanted.push((current, self.replicas));
        for (name, replicas) in wanted {
            match self.published.get(&name) {
                Some(written) if *written == replicas => continue,
                Some(_) => {
                    let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
                    let key = ObjectKey::namespaced(self.namespace.clone(), name.clone());
                    kube.patch(&ResourceKind::REPLICA_SET, &key, &patch).await?;
                }
                None => {
                    let object = self.replica_set_object(&name, replicas);
                    match kube.create(&ResourceKind::REPLICA_SET, object).await {
                        Ok(_) => {}
                        // Written by an earlier pass whose answer was lost: set its replicas.
                        Err(KubeError::AlreadyExists(_)) => {
                            let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
                            let key = ObjectKey::namespaced(self.namespace.clone(), name.clone());
                            kube.patch(&ResourceKind::REPLICA_SET, &key, &patch).await?;
                        }
                        Err(err) => return Err(err),
                    }
                }
            }
            self.published.insert(name, replicas);
        }
        Ok(())
    }

    /// The ReplicaSet `name` with `replicas`, selecting the pods its controller reference names
    /// (for an earlier template only its name is kept; the selector is what its pods carry).
    fn replica_set_object(&self, name: &str, replicas: usize) -> Value {
        let hash = name.rsplit('-').next().unwrap_or_default();
        let mut labels = self.template["metadata"]["labels"].clone();
        if !labels.is_object() {
            labels = json!({});
        }
        labels["pod-template-hash"] = json!(hash);
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "uid": format!("uid-{name}"),
                "labels": labels,
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": self.template["spec"]},
            }
        })
    }

    /// One pass of the ReplicaSet controller: creates pods up to `replicas` (for missing ones and
    /// ones that finished or went with their node) and deletes extras, unscheduled ones first,
    /// then the newest. Returns how many pods it created and deleted.
    pub async fn reconcile(
        &mut self,
        kube: &dyn KubeApi,
        pods: &[impl Borrow<Value>],
    ) -> Result<(usize, usize), KubeError> {
        self.publish(kube).await?;
        let owner = self.owner();
        let mut live: Vec<&Value> = pods
            .iter()
            .map(Borrow::borrow)
            .filter(|p| owner.owns(p))
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

/// A Deployment's pods told apart: their namespace and the ReplicaSets (current and earlier
/// templates') that control them.
#[derive(Clone, Debug)]
pub struct Owner {
    namespace: String,
    current: String,
    earlier: BTreeSet<String>,
}

impl Owner {
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The names of the ReplicaSets whose pods are the Deployment's (the current one first).
    pub fn replica_sets(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.current.as_str()).chain(self.earlier.iter().map(String::as_str))
    }

    /// Whether `pod` is in the Deployment's namespace and controlled by one of its ReplicaSets.
    pub fn owns(&self, pod: &Value) -> bool {
        pod["metadata"]["namespace"].as_str() == Some(self.namespace.as_str())
            && pod["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|refs| {
                    refs.iter().any(|r| {
                        let name = r["name"].as_str().unwrap_or_default();
                        r["kind"] == "ReplicaSet"
                            && r["controller"] == true
                            && (name == self.current || self.earlier.contains(name))
                    })
                })
    }
}

/// The ReplicaSet that controls `pod` (its controller owner reference), if one does.
pub fn controlling_replica_set(pod: &Value) -> Option<&str> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["kind"] == "ReplicaSet" && r["controller"] == true)?["name"]
        .as_str()
}

/// The `n` of a pod named `<deployment>-<n>`.
fn ordinal(pod: &Value) -> u64 {
    pod["metadata"]["name"]
        .as_str()
        .and_then(|n| n.rsplit('-').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
