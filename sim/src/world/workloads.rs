//! The scenario's workload: its events over time, and a ReplicaSet stand-in that keeps every
//! Deployment at its replica count. A deployment pod that is deleted or evicted (a drain, an
//! interruption, a node that went away) is replaced by a new pending pod with a new name, as the
//! ReplicaSet controller would; batch pods are not replaced (they complete, as a Job's do).

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::{Value, json};

use crate::scenario::{DeploymentSpec, WorkloadEvent};

/// The workload's state between steps.
pub(crate) struct Workloads {
    /// Events still to come, by time.
    events: Vec<WorkloadEvent>,
    /// Each Deployment as last set (replica count and pod shape), by name.
    deployments: BTreeMap<String, DeploymentSpec>,
    /// Batch pods and when they finish.
    batch_ends: BTreeMap<String, Timestamp>,
    /// The pods, watch-fed (the ReplicaSet stand-in looks every step; a step without pod changes
    /// costs nothing).
    pods: Reflector<Value>,
    /// A Deployment changed since the last reconcile.
    dirty: bool,
}

/// A pod of `owner` (a Deployment or a batch), labelled `app: <owner>`.
pub(crate) fn pod(
    name: &str,
    owner: &str,
    cpu: &str,
    memory: &str,
    annotations: &BTreeMap<String, String>,
) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": owner}, "annotations": annotations},
        "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
        "status": {"phase": "Pending"}
    })
}

impl Workloads {
    pub fn new(mut events: Vec<WorkloadEvent>) -> Self {
        events.sort_by_key(|e| e.at);
        Self {
            events,
            deployments: BTreeMap::new(),
            batch_ends: BTreeMap::new(),
            pods: Reflector::new(ResourceKind::POD),
            dirty: false,
        }
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
            .map(|(name, d)| (name.clone(), d.replicas))
            .collect()
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
                self.deployments.insert(d.name.clone(), d.clone());
                self.dirty = true;
                // Each event takes effect at once (two events of one step both apply, in order).
                self.reconcile(api).await?;
            }
            if let Some(b) = &event.batch {
                for i in 0..b.pods {
                    let name = format!("{}-{i}", b.name);
                    api.create(
                        &ResourceKind::POD,
                        pod(&name, &b.name, &b.cpu, &b.memory, &BTreeMap::new()),
                    )
                    .await?;
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

    /// One pass of the ReplicaSet stand-in over every Deployment: pods that are not being
    /// deleted count; missing ones are created (named `<deployment>-<n>`, the lowest `n` from
    /// the count up that is free), extras are deleted (the last by name first). Skipped when
    /// neither the pods nor a Deployment changed since the last pass.
    async fn reconcile(&mut self, api: &dyn KubeApi) -> Result<(), KubeError> {
        let changed = self.pods.sync(api).await?;
        if !changed && !self.dirty {
            return Ok(());
        }
        self.dirty = false;
        let pods = self.pods.to_vec();
        for d in self.deployments.values() {
            let mut mine: Vec<String> = pods
                .iter()
                .filter(|p| {
                    p["metadata"]["labels"]["app"] == json!(d.name)
                        && p["metadata"]["deletionTimestamp"].is_null()
                        && !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
                })
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                .collect();
            mine.sort();
            let want = d.replicas as usize;
            let mut next = mine.len();
            while mine.len() < want {
                let name = format!("{}-{next}", d.name);
                next += 1;
                match api
                    .create(
                        &ResourceKind::POD,
                        pod(&name, &d.name, &d.cpu, &d.memory, &d.annotations),
                    )
                    .await
                {
                    Ok(_) => mine.push(name),
                    // A pod of that name still exists (terminating): try the next name.
                    Err(KubeError::AlreadyExists(_)) => {}
                    Err(err) => return Err(err),
                }
            }
            while mine.len() > want {
                let name = mine.pop().unwrap_or_default();
                delete_pod(api, name).await?;
            }
        }
        // What this pass wrote is seen by the next sync; it needs no second pass.
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
                delete_pod(api, name).await?;
            }
        }
        Ok(())
    }
}

/// Deletes the workload pod `name` (all workload pods live in `default`).
async fn delete_pod(api: &dyn KubeApi, name: String) -> Result<(), KubeError> {
    api.delete(
        &ResourceKind::POD,
        &ObjectKey::namespaced("default", name),
        &DeleteOptions::default(),
    )
    .await
    .map(drop)
}
