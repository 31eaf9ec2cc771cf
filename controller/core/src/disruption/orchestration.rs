//! The disruption controller: one entry point, [`Disruption::pass`].
//!
//! Each pass follows the commands in progress (through [`super::queue`]: finish, wait or undo),
//! then, when a pass is due, decides: a command found by emptiness or consolidation is held for
//! [`VALIDATION_DELAY`] and re-checked on the cluster as it is then (a decision made on stale
//! state is dropped); a drift command starts at once. After a command the next pass is due at
//! once; after a pass that found nothing, every managed node's blocker is published (a
//! `DisruptionBlocked` event and condition, each only when it changed) and the next pass is due
//! in [`POLL_INTERVAL`].
//!
//! Only the pending decision, the backoff of failed commands and the last published reasons live
//! in memory; losing them in a restart costs a re-decision, nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde_json::json;

use super::queue::{FAILED_COMMAND_BACKOFF, Progress, Queue, Record, set_taint, timed_out};
use super::{
    ClusterView, Command, Exclusions, Method, Objects, Options, Scheduling, decide_timed, validate,
};
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::{
    DISRUPTED_TAINT_KEY, DISRUPTION_COMMAND_ANNOTATION, DISRUPTION_REPLACEMENT_ANNOTATION,
};
use crate::api::nodepool::DisruptionReason;
use crate::api::{ConditionStatus, NodeClaim};
use crate::catalog::Catalog;
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::provisioning::Snapshot;
use crate::seams::KubeError;
use crate::seams::kube::{ObjectKey, Patch, ResourceKind};

/// How long a consolidation decision waits before it is re-checked and started (upstream: 15 s).
pub const VALIDATION_DELAY: Duration = Duration::from_secs(15);
/// How long after a pass that found nothing the next one runs (upstream: 10 s).
pub const POLL_INTERVAL: Duration = Duration::from_secs(10);
/// How long a pass that found nothing stands for the passes after it while the cluster does
/// not change (upstream's `ConsolidationState` resets after 5 minutes, so that what no watch
/// shows, such as an instance type becoming available again, is looked at again).
pub const CONSOLIDATED_STATE_TTL: Duration = Duration::from_secs(5 * 60);

/// Whether `claim` is in a disruption command (its annotation).
pub fn is_commanded(claim: &NodeClaim) -> bool {
    claim
        .annotations()
        .contains_key(DISRUPTION_COMMAND_ANNOTATION)
}

/// Why a pass could not run (reading the cluster failed); retried on the next pass.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DisruptionError {
    #[error("reading cluster state: {0}")]
    Read(#[from] KubeError),
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassOutcome {
    /// Commands in progress and what happened to them.
    pub progress: Vec<Progress>,
    /// A command started this pass (method and node names) with its replacement claims.
    pub started: Option<(Method, Vec<String>, Vec<String>)>,
    /// A command decided this pass, waiting for its re-check.
    pub decided: Option<(Method, Vec<String>)>,
    /// A decision dropped on re-check or on start, with why.
    pub rejected: Option<String>,
    /// Nodes whose published blocker changed.
    pub explained: usize,
}

#[derive(Default)]
struct Memory {
    pending: Option<(Command, Timestamp)>,
    failed: BTreeMap<String, (Timestamp, String)>,
    next_pass: Option<Timestamp>,
    explained: BTreeMap<String, String>,
    consolidated: Option<Consolidated>,
}

/// The cluster a pass found nothing to do in (upstream's `lastConsolidationState`): while the
/// caches, the catalog and the time-based gates stay as they were, and for at most
/// [`CONSOLIDATED_STATE_TTL`], the next passes would find nothing again and are skipped. Any
/// change to a cache counts and the revision is the one read before deciding (deliberate
/// difference 25 in the README: upstream counts fewer changes and records its state after).
struct Consolidated {
    revision: Vec<u64>,
    /// The catalog decided on (its address: a refresh replaces it).
    catalog: usize,
    at: Timestamp,
    /// The first moment a time-based gate changes ([`super::candidates::next_gate_change`]) or
    /// a failed command's backoff ends.
    until: Option<Timestamp>,
    /// The provisioner's nominations decided with: a node nominated or released since is a
    /// change like any other.
    nominated: BTreeSet<String>,
}

/// What the watch-fed caches say before a pass builds its view.
struct Glance {
    /// A command in progress or a node carrying the disrupted taint.
    work: bool,
    revision: Vec<u64>,
}

/// The disruption controller.
pub struct Disruption {
    ctx: Arc<Context>,
    options: Options,
    memory: Mutex<Memory>,
    /// The pools' compatible types, kept across passes (see
    /// [`crate::scheduling::CompatibleTypesMemo`]).
    compatible: crate::scheduling::CompatibleTypesMemo,
}

/// The cluster read for a decision or a re-check.
struct Read {
    view: ClusterView,
    /// The catalog this pass decides on (read once: a refresh mid-pass must not mix two).
    catalog: Arc<Catalog>,
    /// The claims and nodes the view was built from.
    seen: Seen,
}

/// The NodeClaims and Nodes by name, as the caches hold them: all that following the commands
/// in progress reads. A pass that only follows them builds no [`ClusterView`] (perf: two in three
/// of a swarm seed's views were built for passes that decided nothing).
struct Seen {
    claims: BTreeMap<String, Arc<NodeClaim>>,
    nodes: BTreeMap<String, Arc<Node>>,
}

impl Seen {
    fn of(state: &crate::state::ClusterState) -> Self {
        Self {
            claims: state
                .claims
                .iter()
                .map(|c| (c.name_any(), c.clone()))
                .collect(),
            nodes: state
                .nodes
                .iter()
                .map(|n| (n.name_any(), n.clone()))
                .collect(),
        }
    }
}

fn add(now: Timestamp, d: Duration) -> Timestamp {
    SignedDuration::try_from(d)
        .ok()
        .and_then(|d| now.checked_add(d).ok())
        .unwrap_or(now)
}

impl Disruption {
    pub fn new(ctx: Arc<Context>) -> Self {
        let options = ctx.options.disruption;
        Self {
            ctx,
            options,
            memory: Mutex::new(Memory::default()),
            compatible: Default::default(),
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One pass (see the module docs).
    pub async fn pass(&self) -> Result<PassOutcome, DisruptionError> {
        let now = self.ctx.now();
        let mut outcome = PassOutcome::default();
        let due = self.decision_due(now);
        let glance = self.glance().await?;
        if !due && !glance.work {
            // Nothing to follow, sweep or decide: the cluster view is not built (perf: building
            // it every step while only one step in ten decides was a seventh of a simulation).
            return Ok(outcome);
        }
        if !glance.work
            && self.still_consolidated(&glance.revision, &self.ctx.nominations.active(now), now)
        {
            // Nothing changed since a pass found nothing (upstream's `IsConsolidated`).
            self.memory().next_pass = Some(add(now, POLL_INTERVAL));
            return Ok(outcome);
        }
        outcome.progress = self.progress(&self.seen().await?, now).await;
        if !outcome.progress.is_empty() {
            // Commands changed the cluster: decide on what it is now, next pass.
            let changed = outcome
                .progress
                .iter()
                .any(|p| !matches!(p, Progress::Waiting { .. }));
            if changed {
                return Ok(outcome);
            }
        }
        if self.memory().next_pass.is_some_and(|t| now < t) {
            return Ok(outcome);
        }
        let exclusions = self.exclusions(now);
        let nominated = exclusions.nominated.clone().unwrap_or_default();
        let pending = self.memory().pending.clone();
        match pending {
            Some((command, decided)) if now >= add(decided, VALIDATION_DELAY) => {
                let read = self.read(now).await?;
                self.record_budgets(&read.view);
                self.memory().pending = None;
                match validate(
                    &read.view,
                    &read.catalog,
                    &self.options,
                    exclusions,
                    &command,
                ) {
                    Ok(fresh) => self.start(&read, fresh, now, &mut outcome).await,
                    Err(reason) => {
                        tracing::info!(%reason, "disruption command rejected on re-check");
                        let labels = command.metric_labels();
                        self.ctx
                            .metrics
                            .disruption_failed_validations
                            .get_or_create(&crate::metrics::ConsolidationTypeLabels {
                                consolidation_type: labels.consolidation_type,
                            })
                            .inc();
                        outcome.rejected = Some(reason);
                    }
                }
            }
            Some(_) => {}
            None => {
                let read = self.read(now).await?;
                self.record_budgets(&read.view);
                let started = tokio::time::Instant::now();
                let seconds = || started.elapsed().as_secs_f64();
                let decision = decide_timed(
                    &read.view,
                    &read.catalog,
                    &self.options,
                    exclusions,
                    &seconds,
                );
                self.record_evaluations(&decision.evaluations);
                match decision.command {
                    Some(command) if command.method == Method::Drifted => {
                        self.start(&read, command, now, &mut outcome).await;
                    }
                    Some(command) => {
                        outcome.decided = Some((
                            command.method,
                            command.node_names().iter().map(|s| s.to_string()).collect(),
                        ));
                        self.memory().pending = Some((command, now));
                    }
                    None => {
                        outcome.explained = self.explain(&read, &decision.blocked, now).await;
                        self.found_nothing(&read, glance.revision, nominated, now);
                    }
                }
            }
        }
        Ok(outcome)
    }

    /// Whether a decision or a re-check is due at `now` (see [`Disruption::pass`]).
    fn decision_due(&self, now: Timestamp) -> bool {
        let memory = self.memory();
        match &memory.pending {
            Some((_, decided)) => now >= add(*decided, VALIDATION_DELAY),
            None => memory.next_pass.is_none_or(|t| now >= t),
        }
    }

    /// After a pass that found nothing: the next one in [`POLL_INTERVAL`], and the cluster it
    /// found nothing in remembered (see [`Consolidated`]).
    fn found_nothing(
        &self,
        read: &Read,
        revision: Vec<u64>,
        nominated: BTreeSet<String>,
        now: Timestamp,
    ) {
        let mut memory = self.memory();
        memory.next_pass = Some(add(now, POLL_INTERVAL));
        let backoff = memory.failed.values().map(|(until, _)| *until);
        let until = super::candidates::next_gate_change(&read.view, now)
            .into_iter()
            .chain(backoff)
            .filter(|t| *t > now)
            .min();
        memory.consolidated = Some(Consolidated {
            revision,
            catalog: Arc::as_ptr(&read.catalog) as usize,
            at: now,
            until,
            nominated,
        });
    }

    /// Whether the last pass that found nothing still stands for `revision` at `now` (see
    /// [`Consolidated`]); one that no longer does is forgotten.
    fn still_consolidated(
        &self,
        revision: &[u64],
        nominated: &BTreeSet<String>,
        now: Timestamp,
    ) -> bool {
        let catalog = Arc::as_ptr(&self.ctx.catalog.current()) as usize;
        let mut memory = self.memory();
        let stands = memory.pending.is_none()
            && memory.consolidated.as_ref().is_some_and(|c| {
                c.revision == revision
                    && &c.nominated == nominated
                    && c.catalog == catalog
                    && now < add(c.at, CONSOLIDATED_STATE_TTL)
                    && c.until.is_none_or(|until| now < until)
            });
        if !stands {
            memory.consolidated = None;
        }
        stands
    }

    /// The caches' revision, and whether they hold work for a pass that decides nothing: a
    /// command in progress (a claim carrying its annotation) or a node with the disrupted taint
    /// to sweep. Read without building the cluster view.
    async fn glance(&self) -> Result<Glance, KubeError> {
        let mut state = self.ctx.state.lock().await;
        let config = self.ctx.options.scheduler_config();
        state.sync_for(self.ctx.kube.as_ref(), config).await?;
        let commanded = state.claims.iter().any(|c| is_commanded(c));
        let tainted = state.nodes.iter().any(|node| {
            node.metadata.deletion_timestamp.is_none()
                && node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_deref())
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.key == DISRUPTED_TAINT_KEY)
        });
        Ok(Glance {
            work: commanded || tainted,
            revision: state.disruption_revision(),
        })
    }

    /// Upstream's `nodepools_allowed_disruptions` gauge: what each pool's budgets allow per
    /// reason now.
    fn record_budgets(&self, view: &ClusterView) {
        let budgets = super::budgets::Budgets::new(view);
        for pool in &view.pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            for (reason, label) in [
                (DisruptionReason::Empty, "Empty"),
                (DisruptionReason::Drifted, "Drifted"),
                (DisruptionReason::Underutilized, "Underutilized"),
            ] {
                let allowed = i64::try_from(budgets.limit(&name, reason)).unwrap_or(i64::MAX);
                self.ctx
                    .metrics
                    .nodepools_allowed_disruptions
                    .get_or_create(&crate::metrics::NodePoolReasonLabels {
                        nodepool: name.clone(),
                        reason: label.to_string(),
                    })
                    .set(allowed);
            }
        }
    }

    /// Upstream's evaluation metrics: each method's duration and eligible nodes.
    fn record_evaluations(&self, evaluations: &[super::Evaluation]) {
        let metrics = &self.ctx.metrics;
        for e in evaluations {
            metrics
                .disruption_evaluation_duration
                .get_or_create(&crate::metrics::EvaluationLabels {
                    reason: e.reason.to_string(),
                    consolidation_type: e.consolidation_type.to_string(),
                })
                .observe(e.seconds);
            metrics
                .disruption_eligible_nodes
                .get_or_create(&crate::metrics::ReasonLabels {
                    reason: e.reason.to_string(),
                })
                .set(i64::try_from(e.eligible).unwrap_or(i64::MAX));
        }
    }

    /// Nodes not to try now: those of recently failed commands.
    fn exclusions(&self, now: Timestamp) -> Exclusions {
        let mut memory = self.memory();
        memory.failed.retain(|_, (until, _)| *until > now);
        Exclusions {
            failed: memory
                .failed
                .iter()
                .map(|(n, (_, why))| (n.clone(), why.clone()))
                .collect(),
            nominated: Some(self.ctx.nominations.active(now)),
        }
    }

    async fn read(&self, now: Timestamp) -> Result<Read, KubeError> {
        let mut state = self.ctx.state.lock().await;
        let config = self.ctx.options.scheduler_config();
        state.sync_for(self.ctx.kube.as_ref(), config).await?;
        let catalog = self.ctx.catalog.current();
        let snapshot = Snapshot::from_state(&state, &catalog, now, config);
        let pool_catalogs = crate::provisioning::pool_catalogs(
            &snapshot,
            &catalog,
            &self.ctx.reservations,
            &self.ctx.metrics,
            "disruption",
        );
        let nodes: Vec<&Node> = state.nodes.iter().map(|n| &**n).collect();
        let claims: Vec<&NodeClaim> = state.claims.iter().map(|c| &**c).collect();
        let pods: Vec<_> = state.pods.iter().map(|p| &**p).collect();
        let pdbs: Vec<_> = state.pdbs.iter().map(|p| &**p).collect();
        let mut view = ClusterView::build(
            now,
            Scheduling {
                pools: snapshot.pools,
                nodes: snapshot.nodes,
                daemonsets: snapshot.daemonsets,
                pending: snapshot.pending,
                namespaces: snapshot.namespaces,
            },
            Objects {
                nodes: &nodes,
                claims: &claims,
                pods: &pods,
                pdbs: &pdbs,
            },
        );
        view.pool_catalogs = pool_catalogs;
        view.prepared = Some(crate::scheduling::PreparedPools::remembered(
            &view.pools,
            &catalog,
            &view.pool_catalogs,
            &self.compatible,
        ));
        // Only nodes with a NodeClaim can be disrupted here (a command deletes claims).
        view.facts.retain(|_, f| f.claim.is_some());
        Ok(Read {
            catalog,
            view,
            seen: Seen::of(&state),
        })
    }

    /// The claims and nodes now (see [`Seen`]).
    async fn seen(&self) -> Result<Seen, KubeError> {
        let mut state = self.ctx.state.lock().await;
        let config = self.ctx.options.scheduler_config();
        state.sync_for(self.ctx.kube.as_ref(), config).await?;
        Ok(Seen::of(&state))
    }

    async fn start(
        &self,
        read: &Read,
        command: Command,
        now: Timestamp,
        outcome: &mut PassOutcome,
    ) {
        let queue = Queue { ctx: &self.ctx };
        let names: Vec<String> = command.node_names().iter().map(|s| s.to_string()).collect();
        match queue
            .start(
                &command,
                &read.seen.claims,
                &read.seen.nodes,
                &read.view.pools,
                now,
            )
            .await
        {
            Ok(created) => {
                self.ctx
                    .metrics
                    .disruption_decisions
                    .get_or_create(&command.metric_labels())
                    .inc();
                outcome.started = Some((command.method, names, created));
                self.memory().next_pass = None;
            }
            Err(reason) => {
                let mut memory = self.memory();
                for n in &names {
                    memory.failed.insert(
                        n.clone(),
                        (add(now, FAILED_COMMAND_BACKOFF), reason.clone()),
                    );
                }
                outcome.rejected = Some(reason);
            }
        }
    }

    /// Follows every command in progress, and removes disrupted taints nothing accounts for.
    async fn progress(&self, read: &Seen, now: Timestamp) -> Vec<Progress> {
        let mut commands: BTreeMap<String, (Record, Vec<&NodeClaim>)> = BTreeMap::new();
        for claim in read.claims.values() {
            if let Some(record) = Record::of(claim) {
                commands
                    .entry(record.id.clone())
                    .or_insert_with(|| (record, Vec::new()))
                    .1
                    .push(claim);
            }
        }
        let mut out = Vec::new();
        for (id, (record, members)) in commands.into_iter() {
            out.extend(self.follow(read, id, &record, &members, now).await);
        }
        self.sweep_stale_taints(read).await;
        out
    }

    async fn follow(
        &self,
        read: &Seen,
        id: String,
        record: &Record,
        members: &[&NodeClaim],
        now: Timestamp,
    ) -> Option<Progress> {
        let queue = Queue { ctx: &self.ctx };
        let live: Vec<&NodeClaim> = members
            .iter()
            .copied()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .collect();
        if live.is_empty() {
            // Every claim is terminating: termination carries it from here.
            return None;
        }
        if live.len() < members.len() || record.replacements == 0 {
            // Terminating already (or a delete): finish it.
            queue.terminate(&live).await;
            let claims = live.iter().map(|c| c.name_any()).collect();
            return Some(Progress::Terminated { id, claims });
        }
        let replacements = command_replacements(read, &record.id);
        let alive = replacements
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .count();
        let abandon = if alive < record.replacements {
            Some("a replacement is gone or was never created".to_string())
        } else if timed_out(record, now) && !replacements.iter().all(|c| initialized(c)) {
            Some(format!(
                "replacements did not initialize within {}s",
                super::queue::COMMAND_TIMEOUT.as_secs()
            ))
        } else {
            None
        };
        if let Some(reason) = abandon {
            self.ctx
                .metrics
                .disruption_queue_failures
                .get_or_create(&crate::metrics::DecisionLabels {
                    decision: if record.replacements == 0 {
                        "delete"
                    } else {
                        "replace"
                    }
                    .to_string(),
                    reason: record.method.to_lowercase(),
                    consolidation_type: Method::parse(&record.method)
                        .map(|m| m.consolidation_type(members.len()))
                        .unwrap_or_default()
                        .to_string(),
                })
                .inc();
            queue.undo(&live, &read.nodes, &reason).await;
            self.delete_uninitialized(&replacements).await;
            let mut memory = self.memory();
            for claim in &live {
                if let Some(node) = claim.status.as_ref().and_then(|s| s.node_name.clone()) {
                    memory
                        .failed
                        .insert(node, (add(now, FAILED_COMMAND_BACKOFF), reason.clone()));
                }
            }
            return Some(Progress::Abandoned { id, reason });
        }
        if replacements.iter().filter(|c| initialized(c)).count() >= record.replacements {
            queue.terminate(&live).await;
            let claims = live.iter().map(|c| c.name_any()).collect();
            return Some(Progress::Terminated { id, claims });
        }
        Some(Progress::Waiting { id })
    }

    async fn delete_uninitialized(&self, replacements: &[&Arc<NodeClaim>]) {
        for claim in replacements.iter().filter(|c| !initialized(c)) {
            let _ = self
                .ctx
                .kube
                .delete(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(claim.name_any()),
                    &Default::default(),
                )
                .await;
        }
    }

    /// Removes `karpenter.sh/disrupted` from nodes that are not going away: no command names their
    /// claim and neither node nor claim is being deleted (a crash between untainting steps).
    async fn sweep_stale_taints(&self, read: &Seen) {
        for node in read.nodes.values() {
            let tainted = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_deref())
                .unwrap_or_default()
                .iter()
                .any(|t| t.key == DISRUPTED_TAINT_KEY);
            if !tainted || node.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = node.name_any();
            let claim = read.claims.values().find(|c| {
                c.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
            });
            let Some(claim) = claim else { continue };
            if claim.metadata.deletion_timestamp.is_some() || is_commanded(claim) {
                continue;
            }
            if let Err(err) = set_taint(&self.ctx, node, false).await {
                tracing::warn!(node = %name, %err, "removing a stale disrupted taint failed");
            }
        }
    }

    /// Publishes each blocked node's reason when it changed: a `DisruptionBlocked` event on the
    /// node and the claim's `DisruptionBlocked` condition. Returns how many changed.
    async fn explain(
        &self,
        read: &Read,
        blocked: &BTreeMap<String, String>,
        now: Timestamp,
    ) -> usize {
        let changed: Vec<(String, String)> = {
            let mut memory = self.memory();
            memory
                .explained
                .retain(|node, _| blocked.contains_key(node));
            blocked
                .iter()
                .filter(|(node, reason)| memory.explained.get(*node) != Some(reason))
                .map(|(n, r)| (n.clone(), r.clone()))
                .collect()
        };
        for (node, reason) in &changed {
            let Some(facts) = read.view.facts.get(node) else {
                continue;
            };
            self.ctx
                .recorder
                .publish(
                    Reference::node_named(node.clone()),
                    EventType::Normal,
                    "DisruptionBlocked",
                    format!("Cannot disrupt Node: {reason}"),
                )
                .await;
            if let Some(claim) = facts.claim.as_ref().and_then(|c| read.seen.claims.get(c)) {
                let mut list = claim.status.clone().unwrap_or_default().conditions;
                let text = format!("{node} {reason}");
                if conditions::set(
                    &mut list,
                    cond::DISRUPTION_BLOCKED,
                    ConditionStatus::True,
                    "Blocked",
                    &text,
                    None,
                    now,
                ) && let Err(err) = self
                    .ctx
                    .kube
                    .patch_status(
                        &ResourceKind::NODE_CLAIM,
                        &ObjectKey::cluster(claim.name_any()),
                        &Patch::Merge(json!({
                            "metadata": {"resourceVersion": claim.metadata.resource_version},
                            "status": {"conditions": list},
                        })),
                    )
                    .await
                {
                    tracing::debug!(%err, "recording why a node is not disrupted failed");
                    continue;
                }
            }
            self.memory().explained.insert(node.clone(), reason.clone());
        }
        changed.len()
    }
}

/// The replacements command `id` launched: the claims carrying its id, and no other claim that
/// names one of its candidates in `karpenter.sh/replaces` (the provisioner's claims for the pods
/// of a disrupted node do too: counted, one could stand in for a replacement that failed and
/// let the candidates go, and abandoning the command deleted it while uninitialized). A command
/// an earlier version started (no id on its replacements) finds none and is abandoned: its
/// candidates are untainted and tried again, its replacement stays as an ordinary claim.
fn command_replacements<'r>(read: &'r Seen, id: &str) -> Vec<&'r Arc<NodeClaim>> {
    read.claims
        .values()
        .filter(|c| {
            c.annotations()
                .get(DISRUPTION_REPLACEMENT_ANNOTATION)
                .is_some_and(|v| v == id)
        })
        .collect()
}

fn initialized(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, cond::INITIALIZED))
}
