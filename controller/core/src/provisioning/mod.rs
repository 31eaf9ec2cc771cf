//! Provisioning: pending pods become NodeClaims.
//!
//! A pass reads the cluster from the watch-fed caches (NodePools, EC2NodeClasses, Nodes,
//! NodeClaims, Pods, DaemonSets, Namespaces), runs the scheduling simulation over it, creates one
//! NodeClaim per planned node and records `Nominated` / `FailedScheduling` events. Passes are
//! batched ([`batcher`]): a burst of pods is scheduled as a whole once it stops growing.
//!
//! The pass keeps no state of its own: NodeClaims already created but not yet nodes are read
//! back as in-flight capacity, so a crash between passes never duplicates capacity. Pods of nodes
//! going away are planned for too (replacement first, `crate::replacement`).

pub mod batcher;
mod eligibility;
mod nodeclaim;
pub mod nominations;
pub(crate) mod snapshot;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::Value;

pub use batcher::{BatchWindow, Batcher};
pub use eligibility::{is_provisionable, is_reschedulable};
pub use nodeclaim::nodeclaim_for;
pub use nominations::{Nominations, nomination_window};
pub use snapshot::{Objects as SnapshotObjects, Snapshot};

use crate::catalog::{Catalog, ReservationAvailability};
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::replacement;
use crate::scheduling::{self, Input, PlannedClaim, Results};
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, ResourceKind};
use crate::state::ClusterState;
use snapshot::{ClaimFacts, NodeFacts, nodes_going_away};

/// Knobs of the provisioner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub window: BatchWindow,
    pub scheduling: scheduling::Options,
}

/// Why a pass could not run (reading the cluster failed); the caller retries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
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
    ctx: Arc<Context>,
    batcher: Batcher,
    /// Pending pods already counted towards the open batch.
    seen: BTreeSet<String>,
    /// When the last pass ran.
    last_pass: Option<jiff::Timestamp>,
    /// Pending pods by `namespace/name`: when a tick first saw them, and whether a pass has
    /// decided about them yet (upstream's pod ack and scheduling-decision times).
    acked: std::sync::Mutex<BTreeMap<String, (jiff::Timestamp, bool)>>,
    /// Since when reading the cluster state has failed (`None`: it is synced).
    unsynced_since: std::sync::Mutex<Option<jiff::Timestamp>>,
    /// Simulations run, for their `scheduling_id` label.
    solves: std::sync::atomic::AtomicU64,
    /// The pools' compatible types, kept across passes (see [`scheduling::CompatibleTypesMemo`]).
    compatible: scheduling::CompatibleTypesMemo,
}

/// How often pods that stay pending are provisioned for again (upstream requeues every 10 s).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(10);

/// The pod a scheduling result names by its `namespace/name` key.
/// Each pool's instance types as its EC2NodeClass launches them (root volume, kubelet
/// settings, Windows, the capacity reservations it selects), for pools whose class changes
/// them ([`crate::catalog::nodeclass::pool_catalog`]). Each pool's is upstream's
/// `GetInstanceTypes` from `controller` (the provisioner, or disruption), timed as such.
pub(crate) fn pool_catalogs(
    snapshot: &Snapshot,
    catalog: &Catalog,
    reservations: &ReservationAvailability,
    metrics: &crate::metrics::Metrics,
    controller: &'static str,
) -> BTreeMap<String, Catalog> {
    snapshot
        .node_classes
        .iter()
        .filter_map(|(pool, class)| {
            let types = || {
                let types =
                    crate::catalog::nodeclass::pool_catalog(catalog, class, Some(reservations));
                Ok::<_, std::convert::Infallible>(types)
            };
            let method = crate::metrics::CloudMethod::GetInstanceTypes;
            let Ok(types) = metrics.cloud_call_sync(controller, method, types);
            types.map(|c| (pool.clone(), c))
        })
        .collect()
}

fn pod_reference(pod: &str) -> Option<Reference> {
    let (namespace, name) = pod.split_once('/')?;
    Some(Reference::pod(ObjectKey::namespaced(namespace, name), None))
}

/// What one create returned: the claims the new one replaces, and the stored object (or why
/// there is none).
type Created = (BTreeSet<String>, Result<Value, String>);

/// One pass's bookkeeping of the replacement-first protocol.
struct Replacements<'s> {
    snapshot: &'s Snapshot,
    /// Claims whose displaced pods could not get their planned capacity this pass: they are not
    /// marked planned, so termination keeps waiting (bounded) for the next pass.
    unplanned: BTreeSet<String>,
}

impl Replacements<'_> {
    /// The deleting claims `pods` were displaced from.
    fn replaced_by(&self, pods: &[String]) -> BTreeSet<String> {
        pods.iter()
            .filter_map(|p| self.snapshot.displaced.get(p).cloned().flatten())
            .collect()
    }
}

impl Provisioner {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            batcher: Batcher::new(ctx.options.provisioning.window),
            ctx,
            seen: BTreeSet::new(),
            last_pass: None,
            acked: Default::default(),
            unsynced_since: Default::default(),
            solves: Default::default(),
            compatible: Default::default(),
        }
    }

    /// One tick of the loop: notices new pending pods (opening or extending the batch) and, once
    /// the batch window closes, runs a pass. Returns the pass's outcome if one ran.
    pub async fn tick(&mut self) -> Result<Option<Outcome>, ProvisionError> {
        let now = self.ctx.now();
        let pending = self.pending_pods().await?;
        // New pending pods open (or extend) a batch; pods still pending after a pass (their
        // NodeClaim failed, say) are retried every `RETRY_INTERVAL`, as upstream requeues them.
        let retry = !self.batcher.is_open()
            && self
                .last_pass
                .is_some_and(|t| now.duration_since(t).unsigned_abs() >= RETRY_INTERVAL);
        if pending.keys().any(|uid| !self.seen.contains(uid)) || (!pending.is_empty() && retry) {
            self.batcher.trigger(now);
        }
        self.ack(&pending, now);
        self.seen = pending.into_keys().collect();
        if !self.batcher.is_ready(now) {
            return Ok(None);
        }
        self.batcher.reset();
        self.last_pass = Some(now);
        self.provision().await.map(Some)
    }

    /// Notes when each pending pod was first seen; forgets pods no longer pending.
    fn ack(&self, pending: &BTreeMap<String, String>, now: jiff::Timestamp) {
        let keys: BTreeSet<&String> = pending.values().collect();
        let mut acked = self.acked.lock().unwrap_or_else(|p| p.into_inner());
        acked.retain(|key, _| keys.contains(key));
        for key in keys {
            acked.entry(key.clone()).or_insert((now, false));
            self.ctx.pod_times.ack(key, now);
        }
    }

    /// Upstream's `pods_scheduling_decision_duration_seconds`: once per pod, the time from its
    /// ack to the first pass that placed it or said why not.
    fn record_decisions(&self, results: &Results) {
        let now = self.ctx.now();
        let placed = results
            .new_claims
            .iter()
            .flat_map(|c| c.pods.iter())
            .chain(results.existing_nodes.iter().flat_map(|n| n.pods.iter()));
        for pod in placed.clone() {
            self.ctx.pod_times.decided(pod, now, true);
        }
        for u in &results.unschedulable {
            self.ctx.pod_times.decided(&u.pod, now, false);
        }
        let decided = placed.chain(results.unschedulable.iter().map(|u| &u.pod));
        let mut acked = self.acked.lock().unwrap_or_else(|p| p.into_inner());
        for pod in decided {
            if let Some((seen, done)) = acked.get_mut(pod)
                && !*done
            {
                *done = true;
                self.ctx
                    .metrics
                    .pods_scheduling_decision_duration
                    .observe(now.duration_since(*seen).as_secs_f64().max(0.0));
            }
        }
    }

    /// Upstream's `cluster_state_synced` and `cluster_state_unsynced_time_seconds`.
    fn record_sync(&self, synced: bool) {
        let now = self.ctx.now();
        let metrics = &self.ctx.metrics;
        let mut since = self
            .unsynced_since
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if synced {
            *since = None;
            metrics.cluster_state_synced.set(1);
            metrics.cluster_state_unsynced_time.set(0.0);
        } else {
            let start = *since.get_or_insert(now);
            metrics.cluster_state_synced.set(0);
            metrics
                .cluster_state_unsynced_time
                .set(now.duration_since(start).as_secs_f64().max(0.0));
        }
    }

    /// The pods a pass would provision for, UID → `namespace/name`: pending pods, and pods on
    /// nodes going away (replacement capacity is planned before they are evicted).
    async fn pending_pods(&self) -> Result<BTreeMap<String, String>, KubeError> {
        // Nodes and claims before pods (as the snapshot reads them), so a pod on a node that
        // starts going away after these syncs is noticed on the next tick, never misread.
        let mut state = self.ctx.state.lock().await;
        state.nodes.sync(self.ctx.kube.as_ref()).await?;
        state.claims.sync(self.ctx.kube.as_ref()).await?;
        state.pods.sync(self.ctx.kube.as_ref()).await?;
        let going_away = Self::nodes_going_away(&state);
        let mut pending = BTreeMap::new();
        for pod in state.pods.iter() {
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or_default();
            if !node.is_empty() && !going_away.contains_key(node) {
                continue;
            }
            if is_provisionable(pod) || (!node.is_empty() && is_reschedulable(pod)) {
                let key = format!(
                    "{}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or("default"),
                    pod.metadata.name.as_deref().unwrap_or_default()
                );
                pending.insert(pod.metadata.uid.clone().unwrap_or_default(), key);
            }
        }
        Ok(pending)
    }

    /// Names of nodes going away (see [`nodes_going_away`]), from the caches.
    fn nodes_going_away(state: &ClusterState) -> BTreeMap<String, Option<String>> {
        nodes_going_away(
            state.nodes.iter().map(|n| NodeFacts::of(n)),
            state.claims.iter().map(|c| ClaimFacts::of(c)),
        )
    }

    /// How long the loop may sleep before the next tick matters.
    pub fn next_tick(&self, poll: Duration) -> Duration {
        self.batcher
            .remaining(self.ctx.now())
            .map_or(poll, |left| left.min(poll))
    }

    /// One provisioning pass, now.
    pub async fn provision(&self) -> Result<Outcome, ProvisionError> {
        // One catalog for the whole pass (a refresh mid-pass must not mix two).
        let pass_catalog = self.ctx.catalog.current();
        let snapshot = {
            let mut state = self.ctx.state.lock().await;
            let config = self.ctx.options.scheduler_config();
            let synced = state.sync_for(self.ctx.kube.as_ref(), config).await;
            self.record_sync(synced.is_ok());
            synced?;
            let metrics = &self.ctx.metrics;
            metrics
                .cluster_state_node_count
                .set(i64::try_from(state.nodes.len()).unwrap_or(i64::MAX));
            Snapshot::from_state(&state, &pass_catalog, self.ctx.clock.now(), config)
        };
        self.ctx
            .metrics
            .ignored_pods
            .set(i64::try_from(snapshot.ignored.len()).unwrap_or(i64::MAX));
        let mut outcome = Outcome::default();
        for ignored in &snapshot.ignored {
            let message = format!("Failed to schedule pod, {}", ignored.reason);
            self.pod_event(
                &ignored.pod,
                EventType::Warning,
                "FailedScheduling",
                message,
            )
            .await;
        }
        outcome.unschedulable = snapshot.ignored.len();
        if snapshot.pending.is_empty() {
            return Ok(outcome);
        }
        // Offerings that recently failed with insufficient capacity are hidden from planning.
        let catalog = self.ctx.unavailable.apply(&pass_catalog, self.ctx.now());
        let pool_catalogs = pool_catalogs(
            &snapshot,
            &catalog,
            &self.ctx.reservations,
            &self.ctx.metrics,
            "provisioner",
        );
        let results = self.solve(&snapshot, &catalog, &pool_catalogs);
        let mut replacements = Replacements {
            snapshot: &snapshot,
            unplanned: BTreeSet::new(),
        };
        // A pass's NodeClaims are created side by side (upstream parallelizes these creates);
        // `buffered` keeps the results in plan order, so what follows is deterministic.
        let parallel = self.ctx.options.limits.claim_create_parallel_max.max(1);
        let mut creates: Vec<BoxFuture<'_, Created>> = Vec::new();
        for planned in &results.new_claims {
            creates.push(Box::pin(self.create_claim(planned, &replacements)));
        }
        let created: Vec<Created> = futures::stream::iter(creates)
            .buffered(parallel)
            .collect()
            .await;
        for (planned, (replaces, created)) in results.new_claims.iter().zip(created) {
            self.record_created(planned, replaces, created, &mut replacements, &mut outcome)
                .await;
        }
        self.nominate_existing(&results, &mut replacements, &mut outcome)
            .await;
        // A pod waiting for reserved capacity taken by this pass's claims is planned again next
        // pass; upstream records nothing for it.
        for failure in results
            .unschedulable
            .iter()
            .filter(|f| !f.awaiting_reservation)
        {
            let message = format!("Failed to schedule pod, {}", failure.reason);
            self.pod_event(
                &failure.pod,
                EventType::Warning,
                "FailedScheduling",
                message,
            )
            .await;
        }
        outcome.unschedulable += results.unschedulable.len();
        self.mark_replacements_planned(&replacements).await;
        Ok(outcome)
    }

    /// The scheduling simulation of one pass, with its metrics: duration, unschedulable pods,
    /// the queue depth and unfinished work while it runs (removed when it ends), and each pod's
    /// first decision.
    fn solve(
        &self,
        snapshot: &Snapshot,
        catalog: &Arc<Catalog>,
        pool_catalogs: &BTreeMap<String, Catalog>,
    ) -> Results {
        let started = tokio::time::Instant::now();
        let id = self
            .solves
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let running = crate::metrics::SchedulingLabels {
            controller: "provisioner".to_string(),
            scheduling_id: id.to_string(),
        };
        let metrics = &self.ctx.metrics;
        let progress = |left: usize| {
            metrics
                .scheduler_queue_depth
                .get_or_create(&running)
                .set(i64::try_from(left).unwrap_or(i64::MAX));
            metrics
                .scheduler_unfinished_work
                .get_or_create(&running)
                .set(started.elapsed().as_secs_f64());
        };
        let prepared = scheduling::PreparedPools::remembered(
            &snapshot.pools,
            catalog,
            pool_catalogs,
            &self.compatible,
        );
        let results = scheduling::solve_with_progress(
            Input {
                node_pools: &snapshot.pools,
                catalog,
                pool_catalogs,
                nodes: &snapshot.nodes,
                daemonsets: &snapshot.daemonsets,
                pods: &snapshot.pending,
                namespaces: &snapshot.namespaces,
                options: self.ctx.options.provisioning.scheduling,
            },
            Some(&prepared),
            &progress,
        );
        // A finished simulation has no queue and no unfinished work (upstream deletes both).
        metrics.scheduler_queue_depth.remove(&running);
        metrics.scheduler_unfinished_work.remove(&running);
        self.record_solve(started, &results);
        self.record_decisions(&results);
        results
    }

    /// The solve's metrics: how long it took and how many pods it could not place.
    fn record_solve(&self, started: tokio::time::Instant, results: &Results) {
        let provisioner = crate::metrics::ControllerLabels {
            controller: "provisioner".to_string(),
        };
        let metrics = &self.ctx.metrics;
        metrics
            .scheduling_duration
            .get_or_create(&provisioner)
            .observe(started.elapsed().as_secs_f64());
        metrics
            .unschedulable_pods
            .get_or_create(&provisioner)
            .set(i64::try_from(results.unschedulable.len()).unwrap_or(i64::MAX));
    }

    /// Creates the NodeClaim of one planned node, linked to the claims it replaces. Returns
    /// those claims and the stored object (or why there is none).
    async fn create_claim(
        &self,
        planned: &PlannedClaim,
        replacements: &Replacements<'_>,
    ) -> Created {
        let replaces = replacements.replaced_by(&planned.pods);
        let Some(pool) = replacements
            .snapshot
            .pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(planned.node_pool.as_str()))
        else {
            return (replaces, Err("NodePool gone".into()));
        };
        let mut claim = nodeclaim_for(pool, planned);
        replacement::set_replaces(&mut claim, &replaces);
        let created = match serde_json::to_value(&claim) {
            Ok(value) => self
                .ctx
                .kube
                .create(&ResourceKind::NODE_CLAIM, value)
                .await
                .map_err(|err| err.to_string()),
            Err(err) => Err(err.to_string()),
        };
        (replaces, created)
    }

    /// Records one create's result: the claim counted as in-flight capacity and its pods
    /// nominated, or the failure (its displaced pods stay unplanned).
    async fn record_created(
        &self,
        planned: &PlannedClaim,
        replaces: BTreeSet<String>,
        created: Result<Value, String>,
        replacements: &mut Replacements<'_>,
        outcome: &mut Outcome,
    ) {
        let created = match created {
            Ok(created) => created,
            Err(err) => {
                outcome
                    .failed_creates
                    .push(format!("{}: {err}", planned.node_pool));
                replacements.unplanned.extend(replaces);
                return;
            }
        };
        self.ctx.metrics.record_created("provisioning", &created);
        // The next pass must count this claim as in-flight capacity even if the watch has not
        // delivered it yet: record our own write in the cache.
        self.ctx.state.lock().await.claims.observe(created.clone());
        let name = created["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for pod in &planned.pods {
            let message = format!("Pod should schedule on: nodeclaim/{name}");
            self.pod_event(pod, EventType::Normal, "Nominated", message)
                .await;
        }
        outcome.nominated += planned.pods.len();
        outcome.created.push(name);
    }

    /// Nominates pods placed on existing nodes and in-flight claims; an in-flight claim that took
    /// displaced pods records the claims it now replaces.
    async fn nominate_existing(
        &self,
        results: &Results,
        replacements: &mut Replacements<'_>,
        outcome: &mut Outcome,
    ) {
        let window = nomination_window(self.ctx.options.provisioning.window);
        let nominated_until = self
            .ctx
            .now()
            .checked_add(window)
            .unwrap_or(jiff::Timestamp::MAX);
        for placement in &results.existing_nodes {
            // Capacity not up yet (an in-flight claim, or a registered node whose claim is not
            // initialized) records the interrupted claims it takes pods of, so their drain waits
            // for it (`termination`'s replacement hold); a Ready node has the room now.
            let snapshot = replacements.snapshot;
            let waiting = match snapshot.in_flight.get(&placement.node) {
                Some(already) => Some((placement.node.as_str(), already)),
                None => snapshot
                    .uninitialized
                    .get(&placement.node)
                    .map(|(claim, already)| (claim.as_str(), already)),
            };
            if let Some((claim, already)) = waiting {
                let replaces = replacements.replaced_by(&placement.pods);
                if !replaces.is_subset(already) {
                    let all: BTreeSet<String> = already.union(&replaces).cloned().collect();
                    if let Err(err) =
                        replacement::record_replaces(self.ctx.kube.as_ref(), claim, &all).await
                    {
                        tracing::warn!(%claim, %err, "recording replaced claims failed");
                        replacements.unplanned.extend(replaces);
                    }
                }
            }
            // Upstream names an in-flight claim `nodeclaim/<name>` and a node `node/<name>`.
            let target = if replacements
                .snapshot
                .in_flight
                .contains_key(&placement.node)
            {
                format!("nodeclaim/{}", placement.node)
            } else {
                format!("node/{}", placement.node)
            };
            for pod in &placement.pods {
                let message = format!("Pod should schedule on: {target}");
                self.pod_event(pod, EventType::Normal, "Nominated", message)
                    .await;
            }
            // Disruption leaves the node alone while these pods are on their way.
            self.ctx
                .nominations
                .nominate(&placement.node, nominated_until);
            outcome.nominated += placement.pods.len();
        }
    }

    /// Marks every interrupted claim whose displaced pods all got capacity this pass.
    async fn mark_replacements_planned(&self, replacements: &Replacements<'_>) {
        let snapshot = replacements.snapshot;
        for claim in &snapshot.unplanned_interrupted {
            let considered = snapshot
                .displaced
                .values()
                .any(|c| c.as_deref() == Some(claim.as_str()));
            if considered
                && !replacements.unplanned.contains(claim)
                && let Err(err) = replacement::mark_planned(self.ctx.kube.as_ref(), claim).await
            {
                tracing::warn!(%claim, %err, "marking replacement capacity planned failed");
            }
        }
    }

    /// Records an event on the pod a result names (`namespace/name`); events are best effort.
    async fn pod_event(&self, pod: &str, type_: EventType, reason: &str, message: String) {
        match pod_reference(pod) {
            Some(regarding) => {
                self.ctx
                    .recorder
                    .publish(regarding, type_, reason, message)
                    .await
            }
            None => tracing::warn!(pod, reason, "not a namespace/name pod key; event dropped"),
        }
    }
}
