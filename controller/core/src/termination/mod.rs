//! Termination: the `karpenter.sh/termination` finalizer of NodeClaims and their Nodes.
//!
//! A NodeClaim being deleted (by a controller, `kubectl delete nodeclaim`, or because someone
//! deleted its Node: `kubectl delete node` deletes the owning NodeClaim, as upstream does) goes
//! through these stages, each reported as a status condition, an event and a metric while it
//! waits:
//!
//! 1. the Node is deleted too and tainted `karpenter.sh/disrupted:NoSchedule` (and taken out of
//!    external load balancers);
//! 2. an interrupted claim holds its eviction until its replacement capacity is initialized, at
//!    most until the deadline the interruption controller wrote (`Drained=Unknown`,
//!    `AwaitingReplacement`);
//! 3. drain in upstream's tiers ([`drain`]); `Drained=Unknown` (`Draining`, or
//!    `DisruptionBlocked` when only do-not-disrupt or PDB-refused pods are left), then `True`;
//! 4. VolumeAttachments of drainable pods' volumes are waited for (`VolumesDetached`);
//! 5. the instance is terminated until EC2 reports it terminated (`InstanceTerminating=True`);
//! 6. the Node's finalizer, then the NodeClaim's, is removed.
//!
//! Bounds: with a terminationGracePeriod the whole sequence is bounded by its deadline
//! (deletionTimestamp + TGP, written to `karpenter.sh/nodeclaim-termination-timestamp`): pods are
//! deleted directly at `deadline − their grace period`, and at the deadline the drain and volume
//! waits end (`Drained`/`VolumesDetached=False`, `TerminationGracePeriodElapsed`). Without one,
//! pods protected by do-not-disrupt or a PodDisruptionBudget, and volumes that never detach, block
//! forever (upstream's behaviour, by design: the user asked for them to be kept), visibly. The
//! instance wait is bounded by EC2 itself.
//!
//! State lives in the API server and EC2 (conditions, annotations, the instance) except the
//! eviction backoff, which is soft: after a restart evictions are retried a little early.
//!
//! Where the code is: this module holds the reconcile loop and the stage order; `deadline.rs` the
//! terminationGracePeriod deadline and the replacement hold, `evict.rs` the taint and the drain
//! (the pure tier plan and backoff are in [`drain`]), `volumes.rs` the VolumeAttachment wait,
//! `instance.rs` instance termination and the finalizers, `report.rs` conditions and events.

mod deadline;
pub mod drain;
mod evict;
mod instance;
mod report;
mod volumes;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::ResourceExt;
use serde_json::{Value, json};

use crate::api::common::parse_duration;
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::{
    DISRUPTED_TAINT_KEY, EXCLUDE_FROM_LOAD_BALANCERS_LABEL, INTERRUPTION_ANNOTATION,
    NODEPOOL_LABEL, TERMINATION_FINALIZER, TERMINATION_TIMESTAMP_ANNOTATION,
};
use crate::api::{Condition, ConditionStatus, NodeClaim, ProviderId};
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::metrics::{Metrics, ReasonLabels, StageLabels};
use crate::replacement::{self, rfc3339};
use crate::seams::ec2::InstanceState;
use crate::seams::kube::{
    DeleteOptions, DeleteOutcome, MULTIPLE_BUDGETS_MESSAGE, ObjectKey, Patch, ResourceKind,
    SharedObject,
};
use crate::seams::{Ec2Error, KubeApiExt, KubeError, Retryable};
use drain::{DrainPlan, EvictionBackoff};

/// How long after launch an instance EC2 does not show may still be one it has not made visible
/// yet (eventual consistency); after that, absence means EC2 has forgotten a terminated instance.
pub const EC2_CONSISTENCY_WINDOW: Duration = Duration::from_secs(5 * 60);

/// How long `Drained` stays `Unknown` after the node is tainted, however empty it looks (upstream's
/// `MinDrainTime`, 5 s): a pod the scheduler bound before it saw the `karpenter.sh/disrupted`
/// taint shows up in the next list and is evicted instead of being terminated with its node.
pub const MIN_DRAIN_TIME: Duration = Duration::from_secs(5);

/// Operating errors of one NodeClaim's termination; retried on the next step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TerminationError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Ec2(#[from] Ec2Error),
}

impl TerminationError {
    /// The seam that failed, as a metric label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            TerminationError::Kube(_) => "kube",
            TerminationError::Ec2(_) => "ec2",
        }
    }
}

/// Where a terminating NodeClaim (or orphan Node) is after one reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Its Node was deleted: the NodeClaim was deleted (it terminates from the next step on).
    DeletedNodeClaim,
    /// Interrupted: eviction waits for replacement capacity (bounded by the interruption deadline).
    AwaitingReplacement,
    /// Pods are still being evicted or deleted.
    Draining {
        waiting: usize,
    },
    /// Only pods eviction cannot move are left (do-not-disrupt, PodDisruptionBudget).
    DrainBlocked {
        waiting: usize,
    },
    AwaitingVolumeDetachment {
        attachments: usize,
    },
    /// TerminateInstances was called; waiting for EC2 to report the instance terminated.
    InstanceTerminating,
    /// Finalizers removed: the objects are gone.
    Terminated,
}

impl Stage {
    /// The `stage` label of `karpenter_nodeclaims_termination_waiting`, for waiting stages.
    fn metric_label(&self) -> Option<&'static str> {
        match self {
            Stage::AwaitingReplacement => Some("awaiting_replacement"),
            Stage::Draining { .. } => Some("draining"),
            Stage::DrainBlocked { .. } => Some("drain_blocked"),
            Stage::AwaitingVolumeDetachment { .. } => Some("awaiting_volume_detachment"),
            Stage::InstanceTerminating => Some("instance_terminating"),
            Stage::DeletedNodeClaim | Stage::Terminated => None,
        }
    }
}

const WAITING_STAGES: [&str; 5] = [
    "awaiting_replacement",
    "draining",
    "drain_blocked",
    "awaiting_volume_detachment",
    "instance_terminating",
];

/// The termination controller over the seams.
pub struct Termination {
    ctx: Arc<Context>,
    /// Eviction retry state by pod UID; pruned every step to pods still on terminating nodes,
    /// so it never holds more entries than there are such pods. Locked only between awaits.
    backoff: std::sync::Mutex<BTreeMap<String, EvictionBackoff>>,
    /// The resourceVersion this controller last wrote, by `kind/name`: read-modify-writes (the
    /// condition list, finalizers, taints) are conditional on it, so a concurrent edit by someone
    /// else is a 409 and a retry on a fresh read, never overwritten (upstream's optimistic lock).
    /// Set from the objects read at the start of each claim's pass, then from each write's answer;
    /// a conflict forgets the entry. Holds at most the objects of claims terminating now.
    versions: std::sync::Mutex<BTreeMap<String, String>>,
}

/// What one step read, shared by every terminating claim of the step.
struct View {
    claims: Vec<Arc<NodeClaim>>,
    /// Shared with the cluster state, not copied (perf: copying every pod of the cluster on each
    /// step with a terminating claim was 4 % of a swarm seed's CPU).
    pods_by_node: BTreeMap<String, Vec<Arc<Pod>>>,
    attachments: Vec<SharedObject>,
    /// Instance states by id for the terminating claims (`Err` if the describe failed).
    instances: Result<BTreeMap<String, InstanceState>, Ec2Error>,
}

impl View {
    fn pods_on(&self, node: &str) -> Vec<&Pod> {
        self.pods_by_node
            .get(node)
            .map(|p| p.iter().map(|p| &**p).collect())
            .unwrap_or_default()
    }
}

/// Totals of the step's waits, for the gauges.
#[derive(Default)]
struct Tally {
    stages: BTreeMap<&'static str, i64>,
    do_not_disrupt: i64,
    refused_by_budget: i64,
    eviction_queue: i64,
    live_pods: BTreeSet<String>,
}

impl Tally {
    /// Adds another claim's tally to this one.
    fn merge(&mut self, other: Tally) {
        for (stage, count) in other.stages {
            *self.stages.entry(stage).or_default() += count;
        }
        self.do_not_disrupt += other.do_not_disrupt;
        self.refused_by_budget += other.refused_by_budget;
        self.eviction_queue += other.eviction_queue;
        self.live_pods.extend(other.live_pods);
    }

    /// The pods on a node being drained: their eviction backoff is kept.
    fn live(&mut self, pods: &[&Pod]) {
        for pod in pods {
            self.live_pods.insert(pod.uid().unwrap_or_default());
        }
    }
}

/// One reconcile's results, by NodeClaim (or `node/NAME` for a Node without one).
pub type Reconciled = Vec<(String, Result<Stage, TerminationError>)>;

fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn claim_provider_id(claim: &NodeClaim) -> Option<&str> {
    claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn has_finalizer(finalizers: &[String]) -> bool {
    finalizers.iter().any(|f| f == TERMINATION_FINALIZER)
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn annotation<'a>(claim: &'a NodeClaim, key: &str) -> Option<&'a str> {
    claim.annotations().get(key).map(String::as_str)
}

fn nodepool_of(labels: &BTreeMap<String, String>) -> String {
    labels.get(NODEPOOL_LABEL).cloned().unwrap_or_default()
}

fn is_initialized(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, cond::INITIALIZED))
}

impl Termination {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            backoff: std::sync::Mutex::new(BTreeMap::new()),
            versions: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// One pass over every terminating NodeClaim (in name order) and every deleting Node Karpenter
    /// finalizes. One claim's error does not stop the others.
    pub async fn reconcile_all(&self) -> Result<Reconciled, KubeError> {
        let (mut claims, nodes) = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            state.nodes.sync(self.ctx.kube.as_ref()).await?;
            (state.claims.to_vec(), state.nodes.to_vec())
        };
        let mut out = Vec::new();
        let orphans = self
            .follow_deleted_nodes(&mut claims, &nodes, &mut out)
            .await;
        let terminating: Vec<usize> = claims
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.metadata.deletion_timestamp.is_some() && has_finalizer(c.finalizers())
            })
            .map(|(i, _)| i)
            .collect();
        let mut tally = Tally::default();
        if terminating.is_empty() && orphans.is_empty() {
            self.backoff().clear();
            self.publish(&tally);
            return Ok(out);
        }
        let view = self.read(&claims, &terminating, &orphans).await?;
        // Claims terminate side by side (bounded, upstream's parallel termination reconciles);
        // each keeps its own tally, merged in claim order, so the outcome is deterministic.
        let mut reconciles: Vec<BoxFuture<'_, (Result<Stage, TerminationError>, Tally)>> =
            Vec::new();
        for &index in &terminating {
            let claim = &claims[index];
            let node = claim_provider_id(claim)
                .and_then(|p| nodes.iter().find(|n| node_provider_id(n) == Some(p)));
            let view = &view;
            reconciles.push(Box::pin(async move {
                let mut own = Tally::default();
                let result = self
                    .reconcile_claim(claim, node.map(|n| &**n), view, &mut own)
                    .await;
                (result, own)
            }));
        }
        let parallel = self.ctx.options.limits.termination_reconciles_max.max(1);
        let results: Vec<_> = futures::stream::iter(reconciles)
            .buffered(parallel)
            .collect()
            .await;
        for (index, (result, own)) in terminating.into_iter().zip(results) {
            tally.merge(own);
            if let Ok(stage) = &result
                && let Some(label) = stage.metric_label()
            {
                *tally.stages.entry(label).or_default() += 1;
            }
            out.push((claims[index].name_any(), result));
        }
        for node in orphans {
            let result = self.reconcile_orphan(node, &view, &mut tally).await;
            out.push((format!("node/{}", node.name_any()), result));
        }
        let live = std::mem::take(&mut tally.live_pods);
        self.backoff().retain(|uid, _| live.contains(uid));
        self.publish(&tally);
        Ok(out)
    }

    /// `kubectl delete node`: the owning NodeClaim is deleted and drives the termination (its
    /// entry in `claims` becomes the deleting one). Returns the deleting Nodes no NodeClaim owns:
    /// they are terminated on their own.
    async fn follow_deleted_nodes<'n>(
        &self,
        claims: &mut [Arc<NodeClaim>],
        nodes: &'n [Arc<Node>],
        out: &mut Reconciled,
    ) -> Vec<&'n Node> {
        let mut orphans = Vec::new();
        let deleting = nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() && has_finalizer(n.finalizers()));
        for node in deleting {
            let Some(index) = node_provider_id(node)
                .and_then(|p| claims.iter().position(|c| claim_provider_id(c) == Some(p)))
            else {
                orphans.push(&**node);
                continue;
            };
            if claims[index].metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = claims[index].name_any();
            let deleted = self
                .ctx
                .kube
                .delete(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(name.clone()),
                    &DeleteOptions::default(),
                )
                .await;
            match deleted {
                Ok(DeleteOutcome::Marked(value)) => {
                    if let Ok(marked) = serde_json::from_value::<NodeClaim>(value) {
                        claims[index] = Arc::new(marked);
                    }
                    out.push((name, Ok(Stage::DeletedNodeClaim)));
                }
                Ok(_) => out.push((name, Ok(Stage::DeletedNodeClaim))),
                Err(err) => out.push((name, Err(err.into()))),
            }
        }
        orphans
    }

    /// What every terminating claim of this step needs: pods by node, VolumeAttachments, and the
    /// states of their instances (one DescribeInstances).
    async fn read(
        &self,
        claims: &[Arc<NodeClaim>],
        terminating: &[usize],
        orphans: &[&Node],
    ) -> Result<View, KubeError> {
        let pods: Vec<Arc<Pod>> = {
            let mut state = self.ctx.state.lock().await;
            state.pods.sync(self.ctx.kube.as_ref()).await?;
            state.pods.iter().cloned().collect()
        };
        let mut pods_by_node: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
        for pod in pods {
            if let Some(node) = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .filter(|n| !n.is_empty())
            {
                pods_by_node.entry(node).or_default().push(pod);
            }
        }
        let attachments = self
            .ctx
            .kube
            .list(&ResourceKind::VOLUME_ATTACHMENT, &Default::default())
            .await?
            .items;
        let ids: Vec<String> = terminating
            .iter()
            .filter_map(|i| claim_provider_id(&claims[*i]))
            .chain(orphans.iter().filter_map(|n| node_provider_id(n)))
            .filter_map(ProviderId::instance_id_of)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let instances = if ids.is_empty() {
            Ok(BTreeMap::new())
        } else {
            // Upstream's `Get` (one per node there; one call for every terminating instance
            // here).
            let call = self.ctx.ec2.describe_instances(&ids, &[]);
            let metrics = &self.ctx.metrics;
            metrics
                .cloud_call(
                    instance::TERMINATION_CONTROLLER,
                    crate::metrics::CloudMethod::Get,
                    call,
                )
                .await
                .map(|list| {
                    list.into_iter()
                        .map(|i| (i.instance_id, i.state))
                        .collect::<BTreeMap<_, _>>()
                })
        };
        Ok(View {
            claims: claims.to_vec(),
            pods_by_node,
            attachments,
            instances,
        })
    }

    /// The eviction backoff (never held across an await).
    fn backoff(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, EvictionBackoff>> {
        self.backoff
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish(&self, tally: &Tally) {
        let metrics = &self.ctx.metrics;
        for stage in WAITING_STAGES {
            metrics
                .termination_waiting
                .get_or_create(&StageLabels {
                    stage: stage.to_string(),
                })
                .set(tally.stages.get(stage).copied().unwrap_or(0));
        }
        metrics
            .pods_termination_blocked
            .get_or_create(&Metrics::reason("do_not_disrupt"))
            .set(tally.do_not_disrupt);
        metrics
            .pods_termination_blocked
            .get_or_create(&Metrics::reason("pod_disruption_budget"))
            .set(tally.refused_by_budget);
        metrics.eviction_queue_depth.set(tally.eviction_queue);
    }

    /// One terminating NodeClaim, through the stages in the module docs: the node deleted with
    /// it, then (while the node is there) the replacement hold, the drain and the volume wait,
    /// then the instance, then the finalizers.
    async fn reconcile_claim(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
        view: &View,
        tally: &mut Tally,
    ) -> Result<Stage, TerminationError> {
        let now = self.ctx.now();
        self.read_version(&ResourceKind::NODE_CLAIM, &claim.metadata);
        if let Some(node) = node {
            self.read_version(&ResourceKind::NODE, &node.metadata);
        }
        let mut conds = claim.status.clone().unwrap_or_default().conditions;
        let deadline = self.deadline(claim, node).await?;
        let instance_id = claim_provider_id(claim).and_then(ProviderId::instance_id_of);
        let marked = self.delete_node(node).await?;
        let node = match &marked {
            NodeDeletion::Gone => None,
            NodeDeletion::Marked(marked) => Some(&**marked),
            NodeDeletion::Unchanged => node,
        };
        if let Some(node) = node {
            // The kubelet stopped reporting and the instance is gone: nothing can be drained
            // (upstream skips straight to removing the finalizer).
            let gone = instance_id
                .as_deref()
                .is_some_and(|id| self.instance_gone_for_good(id, claim, view));
            if !gone || node_ready(node) {
                let drained = self
                    .drain_node(claim, node, &mut conds, deadline, view, tally)
                    .await?;
                if let Some(waiting) = drained {
                    return Ok(waiting);
                }
            }
        }
        if let Some(id) = &instance_id
            && !self.ensure_terminated(id, claim, view).await?
        {
            let message = format!("waiting for EC2 to report instance {id} terminated");
            let condition = (
                cond::INSTANCE_TERMINATING,
                ConditionStatus::True,
                "InstanceTerminating",
                &*message,
            );
            let event = Some((EventType::Normal, "InstanceTerminating"));
            self.set_condition(claim, node, &mut conds, condition, event)
                .await?;
            return Ok(Stage::InstanceTerminating);
        }
        // A claim without a provider id never launched: nothing to terminate. (An instance a
        // crashed launch left behind carries the claim's name as a tag; garbage collection
        // terminates it once the claim is gone.)
        self.finalize(claim, node, now).await?;
        Ok(Stage::Terminated)
    }

    /// The claim's Node goes with it: deleted (once) so it is marked, or found already gone.
    async fn delete_node(&self, node: Option<&Node>) -> Result<NodeDeletion, KubeError> {
        let Some(node) = node.filter(|n| n.metadata.deletion_timestamp.is_none()) else {
            return Ok(NodeDeletion::Unchanged);
        };
        let outcome = self
            .ctx
            .kube
            .delete(
                &ResourceKind::NODE,
                &ObjectKey::cluster(node.name_any()),
                &DeleteOptions::default(),
            )
            .await?;
        Ok(match outcome {
            // The marked Node (fresh resourceVersion) is what the drain patches.
            DeleteOutcome::Marked(value) => match serde_json::from_value::<Node>(value) {
                Ok(marked) => {
                    self.read_version(&ResourceKind::NODE, &marked.metadata);
                    NodeDeletion::Marked(Box::new(marked))
                }
                Err(_) => NodeDeletion::Unchanged,
            },
            // No finalizer of ours held it: it is gone, nothing to drain.
            DeleteOutcome::Deleted | DeleteOutcome::NotFound => NodeDeletion::Gone,
        })
    }

    /// The resourceVersion a read-modify-write of `meta` is conditional on: the one this
    /// controller last wrote, else the one read.
    pub(super) fn version(&self, kind: &ResourceKind, meta: &ObjectMeta) -> Option<String> {
        let key = format!(
            "{}/{}",
            kind.plural,
            meta.name.as_deref().unwrap_or_default()
        );
        self.versions()
            .get(&key)
            .cloned()
            .or_else(|| meta.resource_version.clone())
    }

    /// Starts from what was just read.
    fn read_version(&self, kind: &ResourceKind, meta: &ObjectMeta) {
        let key = format!(
            "{}/{}",
            kind.plural,
            meta.name.as_deref().unwrap_or_default()
        );
        match &meta.resource_version {
            Some(version) => self.versions().insert(key, version.clone()),
            None => self.versions().remove(&key),
        };
    }

    /// Records the outcome of a write to `kind/name`: the new resourceVersion, or on a conflict
    /// forgets it (the next pass starts from a fresh read). Returns the result unchanged.
    pub(super) fn wrote(
        &self,
        kind: &ResourceKind,
        name: &str,
        result: Result<SharedObject, KubeError>,
    ) -> Result<SharedObject, KubeError> {
        let key = format!("{}/{name}", kind.plural);
        match &result {
            Ok(object) => {
                if let Some(version) = object["metadata"]["resourceVersion"].as_str() {
                    self.versions().insert(key, version.to_string());
                }
            }
            Err(_) => {
                self.versions().remove(&key);
            }
        }
        result
    }

    fn versions(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.versions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stages 2-4 on the claim's node: taint, replacement hold, drain, volume wait. `Some(stage)`
    /// while one of them waits; `None` once the node is drained and its volumes detached (or the
    /// deadline passed).
    async fn drain_node(
        &self,
        claim: &NodeClaim,
        node: &Node,
        conds: &mut Vec<Condition>,
        deadline: Option<Timestamp>,
        view: &View,
        tally: &mut Tally,
    ) -> Result<Option<Stage>, TerminationError> {
        let now = self.ctx.now();
        self.taint(node).await?;
        let pods = view.pods_on(&node.name_any());
        tally.live(&pods);
        if let Some(hold) = self.replacement_hold(claim, &pods, view, deadline, now) {
            if hold.replan {
                let name = claim.name_any();
                let unmarked = replacement::unmark_planned(self.ctx.kube.as_ref(), &name).await;
                self.wrote(&ResourceKind::NODE_CLAIM, &name, unmarked)?;
            }
            let condition = (
                cond::DRAINED,
                ConditionStatus::Unknown,
                "AwaitingReplacement",
                &*hold.message,
            );
            let event = Some((EventType::Normal, "AwaitingReplacement"));
            self.set_condition(claim, Some(node), conds, condition, event)
                .await?;
            return Ok(Some(Stage::AwaitingReplacement));
        }
        let past_deadline = deadline.is_some_and(|d| now >= d);
        let plan = self.drain(claim, node, &pods, deadline, now, tally).await?;
        if plan.waiting > 0 && !past_deadline {
            let waiting = self
                .drain_waiting(claim, node, conds, &plan, deadline)
                .await?;
            return Ok(Some(waiting));
        }
        if !past_deadline && self.within_min_drain_time(claim, node, conds, now).await? {
            return Ok(Some(Stage::Draining { waiting: 0 }));
        }
        self.record_drained(claim, node, conds, plan.waiting)
            .await?;
        let attachments = self
            .pending_attachments(&node.name_any(), &pods, view, now)
            .await?;
        if attachments > 0 && !past_deadline {
            let message =
                format!("Awaiting deletion of {attachments} VolumeAttachments bound to node");
            let condition = (
                cond::VOLUMES_DETACHED,
                ConditionStatus::Unknown,
                "AwaitingVolumeDetachment",
                &*message,
            );
            let event = Some((EventType::Normal, "AwaitingVolumeDetachment"));
            self.set_condition(claim, Some(node), conds, condition, event)
                .await?;
            return Ok(Some(Stage::AwaitingVolumeDetachment { attachments }));
        }
        let detached = if attachments > 0 {
            (
                cond::VOLUMES_DETACHED,
                ConditionStatus::False,
                "TerminationGracePeriodElapsed",
                "the terminationGracePeriod elapsed before every volume detached",
            )
        } else {
            (
                cond::VOLUMES_DETACHED,
                ConditionStatus::True,
                "VolumesDetached",
                "",
            )
        };
        self.set_condition(claim, Some(node), conds, detached, None)
            .await?;
        Ok(None)
    }

    /// True while the node has been draining for less than [`MIN_DRAIN_TIME`], counted from the
    /// moment `Drained` became `Unknown` (set here when an empty node is first seen, right after
    /// the taint): pods bound by a scheduler that had not seen the taint yet are still evicted.
    async fn within_min_drain_time(
        &self,
        claim: &NodeClaim,
        node: &Node,
        conds: &mut Vec<Condition>,
        now: Timestamp,
    ) -> Result<bool, KubeError> {
        match conditions::get(conds, cond::DRAINED) {
            Some(c) if c.status == ConditionStatus::True => Ok(false),
            Some(c) if c.status == ConditionStatus::Unknown => {
                let since = c.last_transition_time.0;
                Ok(since > now || now.duration_since(since).unsigned_abs() < MIN_DRAIN_TIME)
            }
            _ => {
                let condition = (
                    cond::DRAINED,
                    ConditionStatus::Unknown,
                    "Draining",
                    "0 pods are waiting to be evicted",
                );
                self.set_condition(claim, Some(node), conds, condition, None)
                    .await?;
                Ok(true)
            }
        }
    }

    /// `Drained=True` (counted in `karpenter_nodes_drained_total` the first time), or `False`
    /// when the deadline passed with `waiting` pods left.
    async fn record_drained(
        &self,
        claim: &NodeClaim,
        node: &Node,
        conds: &mut Vec<Condition>,
        waiting: usize,
    ) -> Result<(), KubeError> {
        let drained = if waiting > 0 {
            (
                cond::DRAINED,
                ConditionStatus::False,
                "TerminationGracePeriodElapsed",
                "the terminationGracePeriod elapsed before every pod left the node",
            )
        } else {
            (cond::DRAINED, ConditionStatus::True, "Drained", "")
        };
        let was_drained = conditions::is_true(conds, cond::DRAINED);
        self.set_condition(claim, Some(node), conds, drained, None)
            .await?;
        if waiting == 0 && !was_drained {
            self.ctx
                .metrics
                .nodes_drained
                .get_or_create(&Metrics::nodepool(&nodepool_of(claim.labels())))
                .inc();
        }
        Ok(())
    }

    /// Stage 6: the Node's finalizer, then the NodeClaim's, is removed.
    async fn finalize(
        &self,
        claim: &NodeClaim,
        node: Option<&Node>,
        now: Timestamp,
    ) -> Result<(), KubeError> {
        let nodepool = nodepool_of(claim.labels());
        let started = claim
            .metadata
            .deletion_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        if let Some(node) = node {
            self.remove_node_finalizer(node, &nodepool, started, now)
                .await?;
        }
        if self
            .drop_finalizer(&ResourceKind::NODE_CLAIM, &claim.metadata)
            .await?
        {
            let metrics = &self.ctx.metrics;
            let capacity_type = claim
                .labels()
                .get(crate::api::labels::CAPACITY_TYPE_LABEL)
                .cloned()
                .unwrap_or_default();
            metrics
                .nodeclaims_terminated
                .get_or_create(&crate::metrics::NodePoolCapacityLabels {
                    nodepool: nodepool.clone(),
                    capacity_type,
                })
                .inc();
            metrics
                .nodeclaims_termination_duration
                .get_or_create(&Metrics::nodepool(&nodepool))
                .observe(now.duration_since(started).as_secs_f64().max(0.0));
            // Upstream's instance termination time: from `InstanceTerminating` to the finalizer.
            if let Some(terminating) = claim
                .status
                .as_ref()
                .and_then(|s| {
                    crate::api::conditions::get(&s.conditions, cond::INSTANCE_TERMINATING)
                })
                .filter(|c| c.status == ConditionStatus::True)
            {
                metrics
                    .nodeclaims_instance_termination_duration
                    .get_or_create(&Metrics::nodepool(&nodepool))
                    .observe(
                        now.duration_since(terminating.last_transition_time.0)
                            .as_secs_f64()
                            .max(0.0),
                    );
            }
            // Its reservation slot is free again (until the next sync says otherwise).
            if let Some(id) = claim
                .labels()
                .get(crate::api::labels::CAPACITY_RESERVATION_ID_LABEL)
                .filter(|_| claim_provider_id(claim).is_some())
            {
                self.ctx.reservations.mark_terminated(id);
            }
        }
        Ok(())
    }

    /// A deleting Node Karpenter finalizes but no NodeClaim owns (someone removed the claim's
    /// finalizer): drained and its instance terminated like a claim's, without conditions or a
    /// terminationGracePeriod (that lives on the claim).
    async fn reconcile_orphan(
        &self,
        node: &Node,
        view: &View,
        tally: &mut Tally,
    ) -> Result<Stage, TerminationError> {
        let now = self.ctx.now();
        let instance_id = node_provider_id(node).and_then(ProviderId::instance_id_of);
        let state = instance_id.as_deref().and_then(|id| {
            view.instances
                .as_ref()
                .ok()
                .and_then(|m| m.get(id).copied())
        });
        let gone = matches!(
            state,
            None | Some(InstanceState::Terminated | InstanceState::ShuttingDown)
        );
        if !gone || node_ready(node) {
            self.taint(node).await?;
            let pods = view.pods_on(&node.name_any());
            tally.live(&pods);
            let plan = self.drain_pods(node, &pods, None, now, "", tally).await?;
            if plan.waiting > 0 {
                return Ok(Stage::Draining {
                    waiting: plan.waiting,
                });
            }
        }
        if let Some(id) = &instance_id {
            match state {
                Some(InstanceState::Terminated) | None => {}
                Some(InstanceState::ShuttingDown) => return Ok(Stage::InstanceTerminating),
                Some(_) => {
                    self.ctx
                        .ec2
                        .terminate_instances(std::slice::from_ref(id))
                        .await?;
                    return Ok(Stage::InstanceTerminating);
                }
            }
        }
        let started = node
            .metadata
            .deletion_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let nodepool = nodepool_of(node.labels());
        self.remove_node_finalizer(node, &nodepool, started, now)
            .await?;
        Ok(Stage::Terminated)
    }
}

/// What deleting a claim's Node did.
enum NodeDeletion {
    /// Nothing to do (no node, or already deleting), or the answer could not be read: the node
    /// as read is used.
    Unchanged,
    /// Marked for deletion (Karpenter's finalizer holds it): the marked copy is used.
    Marked(Box<Node>),
    /// Deleted outright: nothing to drain.
    Gone,
}
