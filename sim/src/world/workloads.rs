//! The scenario's workload: its events over time, Deployments kept at their replica count by the
//! ReplicaSet stand-in ([`crate::workloads::Deployment`]), and batch pods that run their course. A
//! deployment pod that is deleted or evicted (a drain, an interruption, a node that went away) is
//! replaced by a new pending pod, as the ReplicaSet controller would; batch pods are not replaced
//! (they complete, as a Job's do).

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::{Value, json};

use crate::scenario::{DeploymentSpec, StatefulSetSpec, WorkloadEvent};
use crate::workloads::{DaemonSet, Deployment, StatefulSet, replicaset};

/// The workload's state between steps.
pub(crate) struct Workloads {
    /// Events still to come, by time.
    events: Vec<WorkloadEvent>,
    /// Each Deployment as last set (replica count and pod template), by name.
    deployments: BTreeMap<String, Deployment>,
    /// Each StatefulSet as last set, by name.
    statefulsets: BTreeMap<String, StatefulSet>,
    /// The claims, watch-fed (StatefulSets make theirs before their pods).
    claims: Reflector<Value>,
    /// Batch pods and when they finish.
    batch_ends: BTreeMap<String, Timestamp>,
    /// The pods, watch-fed (the ReplicaSet stand-in looks every step; a step without pod changes
    /// costs nothing).
    pods: Reflector<Value>,
    /// A Deployment changed since the last reconcile.
    dirty: bool,
    /// The scenario's DaemonSets, by name (from its manifests).
    daemonsets: BTreeMap<String, DaemonSet>,
    /// The pods and nodes, watch-fed, as the DaemonSet stand-ins see them (their own pod
    /// reflector: a sync here must not hide a change from the ReplicaSet pass).
    daemon_pods: Reflector<Value>,
    nodes: Reflector<Value>,
    /// The pod and node revisions of the last DaemonSet pass that created nothing.
    daemons_quiet_at: Option<(u64, u64)>,
}

/// Merges each document of an `apply` event into its object (created when absent). The
/// documents were checked when the scenario was read; the API server validates the result.
async fn apply(api: &dyn KubeApi, text: &str) -> Result<(), KubeError> {
    let edits = crate::scenario::edits(text).map_err(KubeError::Invalid)?;
    for (kind, document) in edits {
        let name = document["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let key = ObjectKey::cluster(name);
        match api.get(&kind, &key).await? {
            Some(_) => {
                api.patch(&kind, &key, &Patch::Merge(document)).await?;
            }
            None => {
                api.create(&kind, document).await?;
            }
        }
    }
    Ok(())
}

/// A batch pod of `owner`, labelled `app: <owner>`.
fn batch_pod(name: &str, owner: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": owner}},
        "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Pending"}
    })
}

/// The Deployment a scenario event describes: `replicas` pods labelled `app: <name>` with one
/// container requesting `cpu` and `memory`, annotated as the event says.
fn deployment(spec: &DeploymentSpec) -> Deployment {
    let mut deployment = Deployment::with_requests(
        &spec.name,
        spec.replicas as usize,
        &spec.cpu,
        Some(&spec.memory),
    );
    if !spec.annotations.is_empty() {
        deployment.template["metadata"]["annotations"] = json!(spec.annotations);
    }
    if !spec.node_selector.is_empty() {
        deployment.template["spec"]["nodeSelector"] = json!(spec.node_selector);
    }
    if let Some(class) = &spec.priority_class_name {
        deployment.template["spec"]["priorityClassName"] = json!(class);
    }
    if let Some(namespace) = &spec.namespace {
        deployment.namespace = namespace.clone();
    }
    deployment
}

impl Workloads {
    pub fn new(mut events: Vec<WorkloadEvent>) -> Self {
        events.sort_by_key(|e| e.at);
        Self {
            events,
            deployments: BTreeMap::new(),
            statefulsets: BTreeMap::new(),
            claims: Reflector::new(ResourceKind::PERSISTENT_VOLUME_CLAIM),
            batch_ends: BTreeMap::new(),
            pods: Reflector::new(ResourceKind::POD),
            dirty: false,
            daemonsets: BTreeMap::new(),
            daemon_pods: Reflector::new(ResourceKind::POD),
            nodes: Reflector::new(ResourceKind::NODE),
            daemons_quiet_at: None,
        }
    }

    /// Adds a DaemonSet the scenario's manifests declare.
    pub fn add_daemonset(&mut self, daemonset: DaemonSet) {
        self.daemonsets.insert(daemonset.name.clone(), daemonset);
    }

    /// One pass of every DaemonSet's stand-in: a pod on every node that should run one and has
    /// none. Skipped while neither pods nor nodes changed since a pass that created nothing.
    pub async fn run_daemonsets(&mut self, api: &dyn KubeApi) -> Result<(), KubeError> {
        if self.daemonsets.is_empty() {
            return Ok(());
        }
        self.daemon_pods.sync(api).await?;
        self.nodes.sync(api).await?;
        let revision = (self.daemon_pods.changes(), self.nodes.changes());
        if self.daemons_quiet_at == Some(revision) {
            return Ok(());
        }
        let (pods, nodes) = (self.daemon_pods.to_vec(), self.nodes.to_vec());
        let mut created = 0;
        for daemonset in self.daemonsets.values_mut() {
            created += daemonset.reconcile(api, &pods, &nodes).await?;
        }
        self.daemons_quiet_at = (created == 0).then_some(revision);
        Ok(())
    }

    /// Names of every Deployment the scenario ever sets, sorted.
    pub fn deployment_names(all: &[WorkloadEvent]) -> Vec<String> {
        let mut names: Vec<String> = all
            .iter()
            .filter_map(|e| e.deployment.as_ref().map(|d| d.name.clone()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Replica counts as last set, by Deployment.
    pub fn replicas(&self) -> BTreeMap<String, u32> {
        self.deployments
            .iter()
            .map(|(name, d)| (name.clone(), d.replicas as u32))
            .collect()
    }

    /// Adds a Deployment the world itself runs (the system pods), kept like the scenario's.
    pub fn add_deployment(&mut self, deployment: Deployment) {
        self.deployments.insert(deployment.name.clone(), deployment);
        self.dirty = true;
    }

    /// Sets a Deployment as an event describes it (a new one, or a new replica count or template).
    fn set(&mut self, spec: &DeploymentSpec) {
        let wanted = deployment(spec);
        match self.deployments.get_mut(&spec.name) {
            Some(current) => {
                current.replicas = wanted.replicas;
                current.set_template(wanted.template);
            }
            None => {
                self.deployments.insert(spec.name.clone(), wanted);
            }
        }
        self.dirty = true;
    }

    /// Sets a StatefulSet as an event describes it.
    fn set_statefulset(&mut self, spec: &StatefulSetSpec) {
        self.statefulsets.insert(
            spec.name.clone(),
            StatefulSet {
                name: spec.name.clone(),
                namespace: "default".to_string(),
                replicas: spec.replicas as usize,
                cpu: spec.cpu.clone(),
                memory: spec.memory.clone(),
                storage: spec.storage.clone(),
                storage_class: spec.storage_class.clone(),
                spread_by_zone: spec.spread_by_zone,
                min_domains: spec.min_domains,
                node_selector: spec.node_selector.clone(),
            },
        );
        self.dirty = true;
    }

    /// Applies the events due by `elapsed`, keeps the Deployments at their replica counts, and
    /// completes batch pods that ran their course.
    pub async fn step(
        &mut self,
        api: &dyn KubeApi,
        elapsed: std::time::Duration,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        while self.events.first().is_some_and(|e| e.at <= elapsed) {
            let event = self.events.remove(0);
            if let Some(d) = &event.deployment {
                self.set(d);
                // Each event takes effect at once (two events of one step both apply, in order).
                self.reconcile(api).await?;
            }
            if let Some(set) = &event.statefulset {
                self.set_statefulset(set);
                self.reconcile(api).await?;
            }
            if let Some(text) = &event.apply {
                apply(api, text).await?;
            }
            if let Some(b) = &event.batch {
                for i in 0..b.pods {
                    let name = format!("{}-{i}", b.name);
                    let pod = batch_pod(&name, &b.name, &b.cpu, &b.memory);
                    api.create(&ResourceKind::POD, pod).await?;
                    let ends = now
                        .saturating_add(
                            jiff::SignedDuration::try_from(b.run_for).unwrap_or_default(),
                        )
                        .unwrap_or(now);
                    self.batch_ends.insert(name, ends);
                }
            }
        }
        self.reconcile(api).await?;
        self.complete_batches(api, now).await
    }

    /// One pass of the ReplicaSet stand-in over every Deployment, skipped when neither the pods
    /// nor a Deployment changed since the last pass. (What a pass writes is seen by the next
    /// sync; it needs no second pass.)
    async fn reconcile(&mut self, api: &dyn KubeApi) -> Result<(), KubeError> {
        let mut changed = self.pods.sync(api).await?;
        if !self.statefulsets.is_empty() {
            changed |= self.claims.sync(api).await?;
        }
        if !changed && !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        let pods = self.pods.to_vec();
        // Each Deployment gets the pods its ReplicaSets control, in the cache's order, sorted
        // out in one pass (each Deployment reading all 20,000 pods of a fleet was a fifth of
        // its launch).
        let mut of_set: BTreeMap<(String, String), usize> = BTreeMap::new();
        for (i, deployment) in self.deployments.values().enumerate() {
            let owner = deployment.owner();
            for set in owner.replica_sets() {
                of_set.insert((owner.namespace().to_string(), set.to_string()), i);
            }
        }
        let mut mine: Vec<Vec<&Value>> = vec![Vec::new(); self.deployments.len()];
        for pod in &pods {
            let Some(set) = replicaset::controlling_replica_set(pod) else {
                continue;
            };
            let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
            if let Some(&i) = of_set.get(&(namespace.to_string(), set.to_string())) {
                mine[i].push(&**pod);
            }
        }
        for (deployment, pods) in self.deployments.values_mut().zip(&mine) {
            deployment.reconcile(api, pods).await?;
        }
        if !self.statefulsets.is_empty() {
            let claims: Vec<String> = self
                .claims
                .to_vec()
                .iter()
                .filter(|c| c["metadata"]["namespace"] == "default")
                .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            for set in self.statefulsets.values() {
                set.reconcile(api, &pods, &claims).await?;
            }
        }
        Ok(())
    }

    /// Batch pods that ran their course complete (they are deleted, as a Job's pods would be
    /// cleaned up).
    async fn complete_batches(
        &mut self,
        api: &dyn KubeApi,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        if !self.batch_ends.values().any(|end| *end <= now) {
            return Ok(());
        }
        let pods = api
            .list(&ResourceKind::POD, &Default::default())
            .await?
            .items;
        for pod in pods {
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let running = pod["status"]["phase"] == json!("Running");
            if running && self.batch_ends.get(&name).is_some_and(|end| *end <= now) {
                self.batch_ends.remove(&name);
                api.delete(
                    &ResourceKind::POD,
                    &ObjectKey::namespaced("default", name),
                    &DeleteOptions::default(),
                )
                .await?;
            }
        }
        Ok(())
    }
}
