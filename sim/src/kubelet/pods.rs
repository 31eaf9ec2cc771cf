//! Pods on their nodes: accepted and started on live (Ready) nodes, removed at the end of their
//! grace period when deleted, and garbage-collected when their node is gone. Pods on a NotReady
//! node are left as they are: nobody runs them, and a deleted one stays Terminating until the node
//! goes, as in a real cluster.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use karpenter_core::seams::KubeError;
use karpenter_core::seams::kube::{DeleteOptions, DeleteOutcome, ObjectKey, Patch, ResourceKind};
use serde_json::{Value, json};

use super::{Kubelet, TickReport, lost_race, taint_eviction};
use crate::objects::{
    NewCondition, after_ms, condition_true, conditions_with, format_time, guarded, object_key,
    parse_time,
};

/// What the kubelet does with a pod this tick.
enum Step {
    Nothing,
    /// Write `status.startTime` (and, with `pod_start_ms == 0`, Running right away).
    Accept,
    Start,
    /// Final delete of a terminating pod on a live node.
    Terminate,
    /// Delete of a pod whose node no longer exists.
    Orphan,
    /// Delete of a pod a `NoExecute` taint of its node evicts ([`super::taint_eviction`]).
    TaintEvict,
}

/// Whose kubelet a node has, as the pods pass sees it.
#[derive(Clone, Copy)]
enum Played {
    /// This stand-in plays its kubelet; `ready` is its `Ready` condition.
    Ours { ready: bool },
    /// Another kubelet runs its pods ([`super::KubeletConfig::cloud_nodes_only`]).
    Foreign,
}

/// Whether no node is named for `pod` yet: nothing for a kubelet to do, whatever the time.
fn unbound(pod: &Value) -> bool {
    pod["spec"]["nodeName"].as_str().is_none_or(str::is_empty)
}

/// The node of a settled pod: bound, not being deleted, and Running or finished (nothing left to
/// do for it while its node exists).
fn settled_on(pod: &Value) -> Option<String> {
    let node = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty())?;
    let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
    let phase = pod["status"]["phase"].as_str();
    (!deleting && matches!(phase, Some("Running" | "Succeeded" | "Failed")))
        .then(|| node.to_string())
}

impl Kubelet {
    pub(super) async fn pods(
        &self,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        // Pods first, then nodes: a pod bound after the pod list cannot be mistaken for an orphan.
        let (pods, nodes_list, revision) = {
            let mut cache = self.cache.lock().await;
            cache.pods.sync(self.kube.as_ref()).await?;
            cache.nodes.sync(self.kube.as_ref()).await?;
            let revision = (cache.pods.changes(), cache.nodes.changes());
            if *self.quiet_at() == Some(revision) {
                return Ok(());
            }
            (cache.pods.to_vec(), cache.nodes.to_vec(), revision)
        };
        let cloud_nodes_only = self.config.cloud_nodes_only;
        let nodes: BTreeMap<String, Played> = nodes_list
            .iter()
            .map(|n| {
                let name = n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let played = if cloud_nodes_only && super::nodes::instance_id(n).is_none() {
                    Played::Foreign
                } else {
                    Played::Ours {
                        ready: condition_true(n, "Ready"),
                    }
                };
                (name, played)
            })
            .collect();
        let tainted = taint_eviction::tainted_nodes(&nodes_list, now);
        let mut last_settled = std::mem::take(&mut *self.settled());
        let mut settled = BTreeMap::new();
        *self.quiet_at() = None;
        let mut quiet = true;
        for pod in pods {
            let address = Arc::as_ptr(&pod) as usize;
            let evict_at = pod["spec"]["nodeName"]
                .as_str()
                .and_then(|node| tainted.get(node))
                .and_then(|taints| taint_eviction::eviction_time(&pod, taints));
            quiet &= evict_at.is_none();
            let step = match last_settled.remove(&address) {
                _ if evict_at.is_some_and(|at| at <= now) => Step::TaintEvict,
                // Unchanged since it settled: only its node's existence matters (`step_of`'s
                // answer for a settled pod).
                Some((held, node)) => {
                    let step = if nodes.contains_key(&node) {
                        Step::Nothing
                    } else {
                        Step::Orphan
                    };
                    settled.insert(address, (held, node));
                    step
                }
                None => {
                    match settled_on(&pod) {
                        Some(node) => {
                            settled.insert(address, (Arc::clone(&pod), node));
                        }
                        None => quiet &= unbound(&pod),
                    }
                    self.step_of(&pod, &nodes, now)
                }
            };
            quiet &= matches!(step, Step::Nothing);
            match step {
                Step::Nothing => {}
                Step::Accept if self.config.pod_start_ms == 0 => {
                    self.start(&pod, now, report).await?;
                }
                Step::Accept => self.accept(&pod, now, report).await?,
                Step::Start => self.start(&pod, now, report).await?,
                Step::Terminate => {
                    if let Some(key) = self.delete_pod(&pod, Some(0), report).await? {
                        report.pods_terminated.push(key);
                    }
                }
                Step::Orphan => {
                    if let Some(key) = self.delete_pod(&pod, Some(0), report).await? {
                        report.pods_orphaned.push(key);
                    }
                }
                Step::TaintEvict => {
                    if let Some(key) = self.delete_pod(&pod, None, report).await? {
                        report.pods_taint_evicted.push(key);
                    }
                }
            }
        }
        *self.settled() = settled;
        *self.quiet_at() = quiet.then_some(revision);
        Ok(())
    }

    fn quiet_at(&self) -> std::sync::MutexGuard<'_, Option<(u64, u64)>> {
        self.quiet_at.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn settled(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, (Arc<Value>, String)>> {
        self.settled.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn step_of(&self, pod: &Value, nodes: &BTreeMap<String, Played>, now: Timestamp) -> Step {
        let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) else {
            return Step::Nothing;
        };
        let metadata = &pod["metadata"];
        let deleting = !metadata["deletionTimestamp"].is_null();
        let has_finalizers = metadata["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        // Already deleted with no grace left, waiting for its finalizers: deleting again would
        // only write the same thing.
        let finalizing = deleting && has_finalizers && metadata["deletionGracePeriodSeconds"] == 0;
        match nodes.get(node) {
            None if finalizing => Step::Nothing,
            None => Step::Orphan,
            Some(Played::Foreign | Played::Ours { ready: false }) => Step::Nothing,
            Some(Played::Ours { ready: true }) if deleting => {
                // The API server sets deletionTimestamp to the request time plus the grace
                // period: the containers have had all of it once it passes.
                let deadline = parse_time(Some(&metadata["deletionTimestamp"]));
                if finalizing || deadline.is_some_and(|d| now < d) {
                    Step::Nothing
                } else {
                    Step::Terminate
                }
            }
            Some(Played::Ours { ready: true }) => {
                let status = &pod["status"];
                match status["phase"].as_str() {
                    Some("Running" | "Succeeded" | "Failed") => Step::Nothing,
                    _ => match parse_time(Some(&status["startTime"])) {
                        None => Step::Accept,
                        Some(start) if now >= after_ms(start, self.config.pod_start_ms) => {
                            Step::Start
                        }
                        Some(_) => Step::Nothing,
                    },
                }
            }
        }
    }

    /// The kubelet has seen the pod: `status.startTime`, still Pending.
    async fn accept(
        &self,
        pod: &Value,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        let patch = guarded(
            pod,
            json!({ "status": { "phase": "Pending", "startTime": format_time(now) } }),
        );
        if self.write_status(pod, patch, report).await? {
            report.pods_accepted.push(object_key(pod));
        }
        Ok(())
    }

    /// Containers running and ready: phase Running, the readiness conditions `True`, one running
    /// container status per container.
    async fn start(
        &self,
        pod: &Value,
        now: Timestamp,
        report: &mut TickReport,
    ) -> Result<(), KubeError> {
        let started = |type_| NewCondition {
            type_,
            status: "True",
            reason: None,
            message: None,
        };
        let conditions = conditions_with(
            pod,
            &[
                started("PodReadyToStartContainers"),
                started("Initialized"),
                started("ContainersReady"),
                started("Ready"),
            ],
            now,
        );
        let start_time = pod["status"]["startTime"]
            .as_str()
            .map_or_else(|| format_time(now), str::to_string);
        let containers: Vec<Value> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({
                    "name": c["name"],
                    "image": c["image"].as_str().unwrap_or_default(),
                    "imageID": "",
                    "ready": true,
                    "started": true,
                    "restartCount": 0,
                    "state": { "running": { "startedAt": format_time(now) } },
                })
            })
            .collect();
        let patch = guarded(
            pod,
            json!({ "status": {
                "phase": "Running",
                "startTime": start_time,
                "conditions": conditions,
                "containerStatuses": containers,
            } }),
        );
        if self.write_status(pod, patch, report).await? {
            report.pods_started.push(object_key(pod));
        }
        Ok(())
    }

    /// A status patch; false when it lost a race (retried next tick).
    async fn write_status(
        &self,
        pod: &Value,
        patch: Value,
        report: &mut TickReport,
    ) -> Result<bool, KubeError> {
        match self
            .kube
            .patch_status(&ResourceKind::POD, &object_key(pod), &Patch::Merge(patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if lost_race(&e) => {
                report.conflicts += 1;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A delete of this very pod (UID precondition: a pod re-created under the name since is
    /// not touched) with `grace_period_seconds` (`Some(0)`: the kubelet's final delete; `None`:
    /// the pod's own, as the taint eviction controller deletes). Returns its key when it is gone
    /// or marked.
    async fn delete_pod(
        &self,
        pod: &Value,
        grace_period_seconds: Option<i64>,
        report: &mut TickReport,
    ) -> Result<Option<ObjectKey>, KubeError> {
        let key = object_key(pod);
        let options = DeleteOptions {
            grace_period_seconds,
            precondition_uid: pod["metadata"]["uid"].as_str().map(str::to_string),
        };
        match self.kube.delete(&ResourceKind::POD, &key, &options).await {
            Ok(DeleteOutcome::Deleted | DeleteOutcome::Marked(_)) => Ok(Some(key)),
            Ok(DeleteOutcome::NotFound) => Ok(None),
            Err(e) if lost_race(&e) => {
                report.conflicts += 1;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}
