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

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use serde_json::{Value, json};

use crate::api::common::parse_duration;
use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::{
    DISRUPTED_TAINT_KEY, EXCLUDE_FROM_LOAD_BALANCERS_LABEL, INTERRUPTION_ANNOTATION,
    INTERRUPTION_EVICTION_DEADLINE_ANNOTATION, NODEPOOL_LABEL, REPLACEMENT_PLANNED_ANNOTATION,
    REPLACES_ANNOTATION, TERMINATION_FINALIZER, TERMINATION_TIMESTAMP_ANNOTATION,
};
use crate::api::{Condition, ConditionStatus, NodeClaim};
use crate::metrics::{Metrics, ReasonLabels, StageLabels};
use crate::seams::ec2::InstanceState;
use crate::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ObjectKey, Patch, ResourceKind,
};
use crate::seams::{Clock, Ec2, Ec2Error, KubeApi, KubeApiExt, KubeError, Retryable};
use crate::state::SharedState;
use drain::{DrainPlan, EvictionBackoff};

/// How long after launch an instance EC2 does not show may still be one it has not made visible
/// yet (eventual consistency); after that, absence means EC2 has forgotten a terminated instance.
pub const EC2_CONSISTENCY_WINDOW: Duration = Duration::from_secs(5 * 60);

/// Operating errors of one NodeClaim's termination; retried on the next step.
#[derive(Debug, thiserror::Error)]
pub enum TerminationError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Ec2(#[from] Ec2Error),
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
    kube: Arc<dyn KubeApi>,
    ec2: Arc<dyn Ec2>,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    /// Eviction retry state by pod UID; pruned every step to pods still on terminating nodes,
    /// so it never holds more entries than there are such pods.
    backoff: BTreeMap<String, EvictionBackoff>,
    /// Watch-fed caches (shared with the other controllers by the operator).
    state: SharedState,
}

/// What one step read, shared by every terminating claim of the step.
struct View {
    claims: Vec<Arc<NodeClaim>>,
    pods_by_node: BTreeMap<String, Vec<Pod>>,
    attachments: Vec<Value>,
    /// Instance states by id for the terminating claims (`Err` if the describe failed).
    instances: Result<BTreeMap<String, InstanceState>, Ec2Error>,
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

fn provider_instance_id(provider_id: &str) -> Option<String> {
    provider_id
        .rsplit('/')
        .next()
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

fn node_provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn claim_provider_id(claim: &NodeClaim) -> Option<&str> {
    claim.status.as_ref().and_then(|s| s.provider_id.as_deref())
}

fn has_finalizer(finalizers: Option<&Vec<String>>) -> bool {
    finalizers.is_some_and(|f| f.iter().any(|f| f == TERMINATION_FINALIZER))
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
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn nodepool_of(labels: Option<&BTreeMap<String, String>>) -> String {
    labels
        .and_then(|l| l.get(NODEPOOL_LABEL))
        .cloned()
        .unwrap_or_default()
}

fn is_initialized(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, cond::INITIALIZED))
}

fn rfc3339(time: Timestamp) -> String {
    Timestamp::from_second(time.as_second())
        .unwrap_or(time)
        .to_string()
}

impl Termination {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        ec2: Arc<dyn Ec2>,
        clock: Arc<dyn Clock>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            kube,
            ec2,
            clock,
            metrics,
            backoff: BTreeMap::new(),
            state: SharedState::default(),
        }
    }

    /// Reads through `state` (the operator shares one cache between its controllers).
    pub fn with_state(mut self, state: SharedState) -> Self {
        self.state = state;
        self
    }

    /// One pass over every terminating NodeClaim (in name order) and every deleting Node Karpenter
    /// finalizes. One claim's error does not stop the others.
    pub async fn reconcile_all(
        &mut self,
    ) -> Result<Vec<(String, Result<Stage, String>)>, KubeError> {
        let (mut claims, nodes) = {
            let mut state = self.state.lock().await;
            state.claims.sync(self.kube.as_ref()).await?;
            state.nodes.sync(self.kube.as_ref()).await?;
            (state.claims.to_vec(), state.nodes.to_vec())
        };
        let mut out = Vec::new();

        // `kubectl delete node`: the owning NodeClaim is deleted and drives the termination.
        // A deleting Node no NodeClaim owns is terminated on its own.
        let mut orphans: Vec<&Node> = Vec::new();
        for node in nodes.iter().filter(|n| {
            n.metadata.deletion_timestamp.is_some() && has_finalizer(n.metadata.finalizers.as_ref())
        }) {
            let Some(index) = node_provider_id(node)
                .and_then(|p| claims.iter().position(|c| claim_provider_id(c) == Some(p)))
            else {
                orphans.push(node);
                continue;
            };
            if claims[index].metadata.deletion_timestamp.is_some() {
                continue;
            }
            let name = claims[index].metadata.name.clone().unwrap_or_default();
            match self
                .kube
                .delete(
                    &ResourceKind::NODE_CLAIM,
                    &ObjectKey::cluster(name.clone()),
                    &DeleteOptions::default(),
                )
                .await
            {
                Ok(DeleteOutcome::Marked(value)) => {
                    if let Ok(marked) = serde_json::from_value::<NodeClaim>(value) {
                        claims[index] = Arc::new(marked);
                    }
                    out.push((name, Ok(Stage::DeletedNodeClaim)));
                }
                Ok(_) => out.push((name, Ok(Stage::DeletedNodeClaim))),
                Err(err) => out.push((name, Err(err.to_string()))),
            }
        }

        let terminating: Vec<usize> = claims
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.metadata.deletion_timestamp.is_some()
                    && has_finalizer(c.metadata.finalizers.as_ref())
            })
            .map(|(i, _)| i)
            .collect();
        let mut tally = Tally::default();
        if terminating.is_empty() && orphans.is_empty() {
            self.backoff.clear();
            self.publish(&tally);
            return Ok(out);
        }

        let pods: Vec<Pod> = {
            let mut state = self.state.lock().await;
            state.pods.sync(self.kube.as_ref()).await?;
            state.pods.iter().map(|p| (**p).clone()).collect()
        };
        let mut pods_by_node: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
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
            .kube
            .list(&ResourceKind::VOLUME_ATTACHMENT, &Default::default())
            .await?
            .items;
        let ids: Vec<String> = terminating
            .iter()
            .filter_map(|i| claim_provider_id(&claims[*i]))
            .chain(orphans.iter().filter_map(|n| node_provider_id(n)))
            .filter_map(provider_instance_id)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let instances = if ids.is_empty() {
            Ok(BTreeMap::new())
        } else {
            self.ec2.describe_instances(&ids, &[]).await.map(|list| {
                list.into_iter()
                    .map(|i| (i.instance_id, i.state))
                    .collect::<BTreeMap<_, _>>()
            })
        };
        let view = View {
            claims: claims.clone(),
            pods_by_node,
            attachments,
            instances,
        };

        for index in terminating {
            let claim = &claims[index];
            let name = claim.metadata.name.clone().unwrap_or_default();
            let node = claim_provider_id(claim)
                .and_then(|p| nodes.iter().find(|n| node_provider_id(n) == Some(p)));
            let result = self
                .reconcile_claim(claim, node.map(|n| &**n), &view, &mut tally)
                .await;
            if let Ok(stage) = &result
                && let Some(label) = stage.metric_label()
            {
                *tally.stages.entry(label).or_default() += 1;
            }
            out.push((name, result.map_err(|e| e.to_string())));
        }
        for node in orphans {
            let name = node.metadata.name.clone().unwrap_or_default();
            let result = self.reconcile_orphan(node, &view, &mut tally).await;
            out.push((format!("node/{name}"), result.map_err(|e| e.to_string())));
        }
        let live = std::mem::take(&mut tally.live_pods);
        self.backoff.retain(|uid, _| live.contains(uid));
        self.publish(&tally);
        Ok(out)
    }

    fn publish(&self, tally: &Tally) {
        for stage in WAITING_STAGES {
            self.metrics
                .termination_waiting
                .get_or_create(&StageLabels {
                    stage: stage.to_string(),
                })
                .set(tally.stages.get(stage).copied().unwrap_or(0));
        }
        self.metrics
            .pods_termination_blocked
            .get_or_create(&Metrics::reason("do_not_disrupt"))
            .set(tally.do_not_disrupt);
        self.metrics
            .pods_termination_blocked
            .get_or_create(&Metrics::reason("pod_disruption_budget"))
            .set(tally.refused_by_budget);
        self.metrics.eviction_queue_depth.set(tally.eviction_queue);
    }

    /// One terminating NodeClaim, through the stages in the module docs.
    async fn reconcile_claim(
        &mut self,
        claim: &NodeClaim,
        node: Option<&Node>,
        view: &View,
        tally: &mut Tally,
    ) -> Result<Stage, TerminationError> {
        let now = self.clock.now();
        let mut conds = claim.status.clone().unwrap_or_default().conditions;
        let deadline = self.deadline(claim, node).await?;
        let instance_id = claim_provider_id(claim).and_then(provider_instance_id);

        // The claim's Node goes with it; the marked Node (fresh resourceVersion) is used below.
        let mut marked = None;
        let mut gone_node = false;
        if let Some(node) = node
            && node.metadata.deletion_timestamp.is_none()
        {
            let outcome = self
                .kube
                .delete(
                    &ResourceKind::NODE,
                    &ObjectKey::cluster(node.metadata.name.clone().unwrap_or_default()),
                    &DeleteOptions::default(),
                )
                .await?;
            match outcome {
                DeleteOutcome::Marked(value) => {
                    marked = serde_json::from_value::<Node>(value).ok();
                }
                // No finalizer of ours held it: it is gone, nothing to drain.
                DeleteOutcome::Deleted | DeleteOutcome::NotFound => gone_node = true,
            }
        }
        let node = if gone_node {
            None
        } else {
            marked.as_ref().or(node)
        };
        if let Some(node) = node {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            // The kubelet stopped reporting and the instance is gone: nothing can be drained
            // (upstream skips straight to removing the finalizer).
            let gone = instance_id
                .as_deref()
                .is_some_and(|id| self.instance_gone_for_good(id, claim, view));
            if !gone || node_ready(node) {
                self.taint(node).await?;
                let pods: Vec<&Pod> = view
                    .pods_by_node
                    .get(&node_name)
                    .map(|p| p.iter().collect())
                    .unwrap_or_default();
                for pod in &pods {
                    tally
                        .live_pods
                        .insert(pod.metadata.uid.clone().unwrap_or_default());
                }
                if let Some(message) = self.replacement_hold(claim, &pods, view, now) {
                    self.set_condition(
                        claim,
                        Some(node),
                        &mut conds,
                        (
                            cond::DRAINED,
                            ConditionStatus::Unknown,
                            "AwaitingReplacement",
                            &message,
                        ),
                        Some(("Normal", "AwaitingReplacement")),
                    )
                    .await?;
                    return Ok(Stage::AwaitingReplacement);
                }
                let past_deadline = deadline.is_some_and(|d| now >= d);
                let plan = self.drain(claim, node, &pods, deadline, now, tally).await?;
                if plan.waiting > 0 && !past_deadline {
                    return self
                        .drain_waiting(claim, node, &mut conds, &plan, deadline)
                        .await;
                }
                let drained = if plan.waiting > 0 {
                    (
                        cond::DRAINED,
                        ConditionStatus::False,
                        "TerminationGracePeriodElapsed",
                        "the terminationGracePeriod elapsed before every pod left the node",
                    )
                } else {
                    (cond::DRAINED, ConditionStatus::True, "Drained", "")
                };
                let was_drained = conditions::is_true(&conds, cond::DRAINED);
                self.set_condition(claim, Some(node), &mut conds, drained, None)
                    .await?;
                if plan.waiting == 0 && !was_drained {
                    self.metrics
                        .nodes_drained
                        .get_or_create(&Metrics::nodepool(&nodepool_of(
                            claim.metadata.labels.as_ref(),
                        )))
                        .inc();
                }
                let attachments = self
                    .pending_attachments(&node_name, &pods, view, now)
                    .await?;
                if attachments > 0 && !past_deadline {
                    self.set_condition(
                        claim,
                        Some(node),
                        &mut conds,
                        (
                            cond::VOLUMES_DETACHED,
                            ConditionStatus::Unknown,
                            "AwaitingVolumeDetachment",
                            &format!(
                                "Awaiting deletion of {attachments} VolumeAttachments bound to node"
                            ),
                        ),
                        Some(("Warning", "AwaitingVolumeDetachment")),
                    )
                    .await?;
                    return Ok(Stage::AwaitingVolumeDetachment { attachments });
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
                self.set_condition(claim, Some(node), &mut conds, detached, None)
                    .await?;
            }
        }

        if let Some(id) = &instance_id
            && !self.ensure_terminated(id, claim, view).await?
        {
            self.set_condition(
                claim,
                node,
                &mut conds,
                (
                    cond::INSTANCE_TERMINATING,
                    ConditionStatus::True,
                    "InstanceTerminating",
                    &format!("waiting for EC2 to report instance {id} terminated"),
                ),
                Some(("Normal", "InstanceTerminating")),
            )
            .await?;
            return Ok(Stage::InstanceTerminating);
        }

        // A claim without a provider id never launched: nothing to terminate. (An instance a
        // crashed launch left behind carries the claim's name as a tag; garbage collection
        // terminates it once the claim is gone.)
        let nodepool = nodepool_of(claim.metadata.labels.as_ref());
        let started = claim
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0)
            .unwrap_or(now);
        if let Some(node) = node {
            self.remove_node_finalizer(node, &nodepool, started, now)
                .await?;
        }
        if self
            .drop_finalizer(&ResourceKind::NODE_CLAIM, &claim.metadata)
            .await?
        {
            self.metrics
                .nodeclaims_terminated
                .get_or_create(&Metrics::nodepool(&nodepool))
                .inc();
        }
        Ok(Stage::Terminated)
    }

    /// A deleting Node Karpenter finalizes but no NodeClaim owns (someone removed the claim's
    /// finalizer): drained and its instance terminated like a claim's, without conditions or a
    /// terminationGracePeriod (that lives on the claim).
    async fn reconcile_orphan(
        &mut self,
        node: &Node,
        view: &View,
        tally: &mut Tally,
    ) -> Result<Stage, TerminationError> {
        let now = self.clock.now();
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let instance_id = node_provider_id(node).and_then(provider_instance_id);
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
            let pods: Vec<&Pod> = view
                .pods_by_node
                .get(&node_name)
                .map(|p| p.iter().collect())
                .unwrap_or_default();
            for pod in &pods {
                tally
                    .live_pods
                    .insert(pod.metadata.uid.clone().unwrap_or_default());
            }
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
                    self.ec2
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
            .map(|t| t.0)
            .unwrap_or(now);
        let nodepool = nodepool_of(node.metadata.labels.as_ref());
        self.remove_node_finalizer(node, &nodepool, started, now)
            .await?;
        Ok(Stage::Terminated)
    }
}
