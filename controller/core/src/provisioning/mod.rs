//! Provisioning: pending pods become NodeClaims.
//!
//! A pass reads the cluster through the [`KubeApi`] seam (NodePools, Nodes, NodeClaims, Pods,
//! DaemonSets, Namespaces), runs the scheduling simulation over it, creates one NodeClaim per
//! planned node and records `Nominated` / `FailedScheduling` events. Passes are batched
//! ([`batcher`]): a burst of pods is scheduled as a whole once it stops growing.
//!
//! The pass keeps no state of its own: NodeClaims already created but not yet nodes are read
//! back as in-flight capacity, so a crash between passes never duplicates capacity.

pub mod batcher;
mod eligibility;
mod nodeclaim;
mod snapshot;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

pub use batcher::{BatchWindow, Batcher};
pub use eligibility::{is_provisionable, is_reschedulable};
pub use nodeclaim::nodeclaim_for;
pub use snapshot::Snapshot;

use crate::api::labels::{REPLACEMENT_PLANNED_ANNOTATION, REPLACES_ANNOTATION};
use crate::catalog::Catalog;
use crate::lifecycle::UnavailableOfferings;
use crate::scheduling::{self, Input};
use crate::seams::kube::{EventRecord, ObjectKey, Patch, ResourceKind};
use crate::seams::{Clock, KubeApi, KubeError};
use crate::state::{ClusterState, SharedState};
use snapshot::{ClaimFacts, NodeFacts, nodes_going_away};

/// Knobs of the provisioner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub window: BatchWindow,
    pub scheduling: scheduling::Options,
}

/// Why a pass could not run (reading the cluster failed); the caller retries.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    #[error("reading cluster state: {0}")]
    Read(#[from] KubeError),
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Names of the NodeClaims created.
    pub created: Vec<String>,
    /// Pods placed on existing or in-flight capacity.
    pub nominated: usize,
    /// Pods nothing can run.
    pub unschedulable: usize,
    /// NodeClaims the plan wanted but the API server refused (retried next pass).
    pub failed_creates: Vec<String>,
}

/// Turns pending pods into NodeClaims over the seams.
pub struct Provisioner {
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    options: Options,
    batcher: Batcher,
    /// Pending pods already counted towards the open batch.
    seen: BTreeSet<String>,
    /// Offerings that recently failed with insufficient capacity: hidden from planning.
    unavailable: Option<Arc<UnavailableOfferings>>,
    /// When the last pass ran.
    last_pass: Option<jiff::Timestamp>,
    /// Watch-fed caches the passes read (shared with the other controllers by the operator).
    state: SharedState,
}

/// How often pods that stay pending are provisioned for again (upstream requeues every 10 s).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(10);

impl Provisioner {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        options: Options,
    ) -> Self {
        Self {
            kube,
            clock,
            catalog,
            options,
            batcher: Batcher::new(options.window),
            seen: BTreeSet::new(),
            unavailable: None,
            last_pass: None,
            state: SharedState::default(),
        }
    }

    /// Reads through `state` (the operator shares one cache between its controllers).
    pub fn with_state(mut self, state: SharedState) -> Self {
        self.state = state;
        self
    }

    /// Plans around offerings in `cache` (shared with the launch path, which fills it on
    /// insufficient-capacity errors), so the next pass falls back to other types, zones or
    /// capacity types.
    pub fn with_unavailable_offerings(mut self, cache: Arc<UnavailableOfferings>) -> Self {
        self.unavailable = Some(cache);
        self
    }

    /// One tick of the loop: notices new pending pods (opening or extending the batch) and, once
    /// the batch window closes, runs a pass. Returns the pass's outcome if one ran.
    pub async fn tick(&mut self) -> Result<Option<Outcome>, ProvisionError> {
        let now = self.clock.now();
        let mut pending = BTreeSet::new();
        {
            // Nodes and claims before pods (as the snapshot reads them), so a pod on a node that
            // starts going away after these syncs is noticed on the next tick, never misread.
            let mut state = self.state.lock().await;
            state.nodes.sync(self.kube.as_ref()).await?;
            state.claims.sync(self.kube.as_ref()).await?;
            state.pods.sync(self.kube.as_ref()).await?;
            let going_away = Self::nodes_going_away(&state);
            for pod in state.pods.iter() {
                let node = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .unwrap_or_default();
                if !node.is_empty() && !going_away.contains_key(node) {
                    continue;
                }
                // Pods on nodes going away count as pending too: replacement capacity is planned
                // before they are evicted.
                if is_provisionable(pod) || (!node.is_empty() && is_reschedulable(pod)) {
                    pending.insert(pod.metadata.uid.clone().unwrap_or_default());
                }
            }
        }
        // New pending pods open (or extend) a batch; pods still pending after a pass (their
        // NodeClaim failed, say) are retried every `RETRY_INTERVAL`, as upstream requeues them.
        let retry = !self.batcher.is_open()
            && self
                .last_pass
                .is_some_and(|t| now.duration_since(t).unsigned_abs() >= RETRY_INTERVAL);
        if pending.iter().any(|uid| !self.seen.contains(uid)) || (!pending.is_empty() && retry) {
            self.batcher.trigger(now);
        }
        self.seen = pending;
        if !self.batcher.is_ready(now) {
            return Ok(None);
        }
        self.batcher.reset();
        self.last_pass = Some(now);
        self.provision().await.map(Some)
    }

    /// Names of nodes going away (see [`nodes_going_away`]), from the caches.
    fn nodes_going_away(state: &ClusterState) -> BTreeMap<String, Option<String>> {
        nodes_going_away(
            state.nodes.iter().map(|n| NodeFacts {
                name: n.metadata.name.as_deref().unwrap_or_default(),
                provider_id: n
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .filter(|p| !p.is_empty()),
                going: n.metadata.deletion_timestamp.is_some()
                    || n.spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .is_some_and(|taints| {
                            taints
                                .iter()
                                .any(|t| t.key == crate::api::labels::DISRUPTED_TAINT_KEY)
                        }),
            }),
            state.claims.iter().map(|c| ClaimFacts {
                name: c.metadata.name.as_deref().unwrap_or_default(),
                provider_id: c
                    .status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .filter(|p| !p.is_empty()),
                deleting: c.metadata.deletion_timestamp.is_some(),
            }),
        )
    }

    /// How long the loop may sleep before the next tick matters.
    pub fn next_tick(&self, poll: Duration) -> Duration {
        self.batcher
            .remaining(self.clock.now())
            .map_or(poll, |left| left.min(poll))
    }

    /// One provisioning pass, now.
    pub async fn provision(&self) -> Result<Outcome, ProvisionError> {
        let snapshot = {
            let mut state = self.state.lock().await;
            state.sync(self.kube.as_ref()).await?;
            Snapshot::from_state(&state, &self.catalog)
        };
        let mut outcome = Outcome::default();
        if snapshot.pending.is_empty() {
            return Ok(outcome);
        }
        let catalog = match &self.unavailable {
            Some(cache) => cache.apply(&self.catalog, self.clock.now()),
            None => (*self.catalog).clone(),
        };
        let results = scheduling::solve(Input {
            node_pools: &snapshot.pools,
            catalog: &catalog,
            nodes: &snapshot.nodes,
            daemonsets: &snapshot.daemonsets,
            pods: &snapshot.pending,
            namespaces: &snapshot.namespaces,
            options: self.options.scheduling,
        });
        // Claims whose displaced pods could not get their planned capacity this pass: they are
        // not marked planned, so termination keeps waiting (bounded) for the next pass.
        let mut unplanned: BTreeSet<String> = BTreeSet::new();
        let replaced_by = |pods: &[String]| -> BTreeSet<String> {
            pods.iter()
                .filter_map(|p| snapshot.displaced.get(p).cloned().flatten())
                .collect()
        };
        for planned in &results.new_claims {
            let Some(pool) = snapshot
                .pools
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(planned.node_pool.as_str()))
            else {
                unplanned.extend(replaced_by(&planned.pods));
                continue;
            };
            let mut claim = nodeclaim_for(pool, planned);
            let replaces = replaced_by(&planned.pods);
            if !replaces.is_empty() {
                claim
                    .metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(
                        REPLACES_ANNOTATION.to_string(),
                        replaces.iter().cloned().collect::<Vec<_>>().join(","),
                    );
            }
            let value = match serde_json::to_value(&claim) {
                Ok(value) => value,
                Err(err) => {
                    outcome
                        .failed_creates
                        .push(format!("{}: {err}", planned.node_pool));
                    unplanned.extend(replaces);
                    continue;
                }
            };
            match self.kube.create(&ResourceKind::NODE_CLAIM, value).await {
                Ok(created) => {
                    // The next pass must count this claim as in-flight capacity even if the
                    // watch has not delivered it yet: record our own write in the cache.
                    self.state.lock().await.claims.observe(created.clone());
                    let name = created["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    for pod in &planned.pods {
                        self.event(
                            pod,
                            "Normal",
                            "Nominated",
                            format!("Pod should schedule on: nodeclaim/{name}"),
                        )
                        .await;
                    }
                    outcome.nominated += planned.pods.len();
                    outcome.created.push(name);
                }
                Err(err) => {
                    outcome
                        .failed_creates
                        .push(format!("{}: {err}", planned.node_pool));
                    unplanned.extend(replaces);
                }
            }
        }
        for placement in &results.existing_nodes {
            // Displaced pods placed on a claim still in flight: that claim is their replacement.
            if let Some(already) = snapshot.in_flight.get(&placement.node) {
                let replaces = replaced_by(&placement.pods);
                if !replaces.is_subset(already) {
                    let all: Vec<String> = already.union(&replaces).cloned().collect();
                    if let Err(err) = self
                        .annotate(&placement.node, REPLACES_ANNOTATION, &all.join(","))
                        .await
                    {
                        tracing::warn!(claim = %placement.node, %err, "recording replaced claims failed");
                        unplanned.extend(replaces);
                    }
                }
            }
            for pod in &placement.pods {
                self.event(
                    pod,
                    "Normal",
                    "Nominated",
                    format!("Pod should schedule on: node/{}", placement.node),
                )
                .await;
            }
            outcome.nominated += placement.pods.len();
        }
        for failure in &results.unschedulable {
            self.event(
                &failure.pod,
                "Warning",
                "FailedScheduling",
                format!("Failed to schedule pod, {}", failure.reason),
            )
            .await;
        }
        outcome.unschedulable = results.unschedulable.len();
        for claim in &snapshot.unplanned_interrupted {
            let considered = snapshot
                .displaced
                .values()
                .any(|c| c.as_deref() == Some(claim.as_str()));
            if considered
                && !unplanned.contains(claim)
                && let Err(err) = self
                    .annotate(claim, REPLACEMENT_PLANNED_ANNOTATION, "true")
                    .await
            {
                tracing::warn!(%claim, %err, "marking replacement capacity planned failed");
            }
        }
        Ok(outcome)
    }

    /// Sets one annotation on a NodeClaim (metadata only: the spec is immutable).
    async fn annotate(&self, claim: &str, key: &str, value: &str) -> Result<(), KubeError> {
        self.kube
            .patch(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster(claim),
                &Patch::Merge(serde_json::json!({"metadata": {"annotations": {key: value}}})),
            )
            .await
            .map(|_| ())
    }

    /// Records an event on a pod (`namespace/name`); events are best effort.
    async fn event(&self, pod: &str, type_: &'static str, reason: &str, message: String) {
        let (namespace, name) = pod.split_once('/').unwrap_or(("default", pod));
        let record = EventRecord {
            involved: ResourceKind::POD,
            key: ObjectKey::namespaced(namespace, name),
            uid: None,
            type_,
            reason: reason.to_string(),
            message,
        };
        if let Err(err) = self.kube.record_event(&record).await {
            tracing::debug!(%err, pod, reason, "event not recorded");
        }
    }
}
