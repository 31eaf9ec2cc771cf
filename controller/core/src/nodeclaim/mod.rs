//! NodeClaims: their lifecycle (launch → registration → initialization, and liveness) and the
//! garbage collection of instances and claims that lost each other. Deleting claims belong to the
//! termination controller (`crate::termination`).
//!
//! The lifecycle reconcile is the ordered list of phases in `PHASES` (upstream's lifecycle
//! sub-reconcilers): each phase either lets the claim go on to the next (`Flow::Continue`) or
//! ends this reconcile with what it did (`Flow::Done`). Before them, a new claim gets the
//! termination finalizer. Nothing is remembered between reconciles except through the API server
//! and EC2 (and the unavailable-offerings cache, which is only an optimisation), so a restarted
//! controller picks up exactly where it was.
//!
//! Where the code is: this module holds the phase list and the writes they share; `launch.rs`
//! the launch phase (adopt or launch, then CreateFleet and its capacity errors),
//! `registration.rs`, `initialization.rs` and `liveness.rs` one phase each, and
//! `garbagecollection.rs` the [`GarbageCollector`]. Resolving the EC2NodeClass (subnets, security
//! groups, AMI) is `crate::nodeclass`'s.

pub mod consistency;
pub mod drift;
pub mod fleet;
mod garbagecollection;
mod initialization;
pub mod launch;
mod liveness;
mod registration;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube_core::ResourceExt;
use serde::Deserialize;
use serde_json::{Value, json};

pub use garbagecollection::{
    EKS_CLUSTER_NAME_TAG, GC_INTERVAL, GarbageCollector, is_ours, ours_filters,
};
pub use launch::{LaunchError, Launched, template_data};

use crate::api::conditions::{self, nodeclaim as cond};
use crate::api::labels::TERMINATION_FINALIZER;
use crate::api::{ConditionStatus, NodeClaim};
use crate::context::Context;
use crate::events::{EventType, Reference};
use crate::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use crate::seams::{Ec2Error, KubeError};

/// Launch attempts per reconcile when EC2 answers with a retryable error (throttling, a 5xx): a
/// claim replacing a spot-interrupted node has two minutes, and waiting for the next reconcile
/// after every throttled call can cost most of them. (Found by the simulation swarm once the
/// `interruption-rehomed` invariant stopped excusing every EC2 error in a notice: 7 of 1000 seeds
/// missed the notice with 5-8 throttled launch attempts in a row, 10 s apart.) Backoff between
/// calls is the transport's (the AWS SDK's standard retry mode); each attempt re-checks for an
/// instance already tagged for the claim, so a launch whose answer was lost is adopted.
pub const LAUNCH_ATTEMPTS_MAX: u32 = 3;

/// How long a claim may stay unlaunched before it is deleted: upstream's `launchTimeout`
/// (`nodeclaim/lifecycle/liveness.go`, 5 minutes since v1.7.0). Long enough for a launch that
/// EC2 throttles or briefly refuses to succeed on a later attempt; short enough that pods held
/// by a claim that can never launch (a rejected launch template, an instance profile IAM has not
/// made visible) get capacity elsewhere within minutes, not after the 15-minute registration
/// timeout.
pub const LAUNCH_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// Knobs of the NodeClaim controllers.
#[derive(Clone, Debug)]
pub struct Options {
    pub cluster_name: String,
    /// What a node needs to join this cluster (endpoint, CA, service CIDR): discovered at
    /// startup, supplied by the simulation from its world. Without it nothing is launched (the
    /// claim's `Launched` condition says why): a node that cannot join is worse than none.
    pub cluster: Option<crate::nodeclass::cluster::ClusterInfo>,
    /// Kubernetes minor version AMI aliases resolve for (`1.33`).
    pub kubernetes_version: String,
    /// A claim whose node has not registered by then is deleted (upstream: 15 minutes).
    pub registration_timeout: Duration,
    /// A claim not launched this long after its creation is deleted, so its pods fall through
    /// to other offerings and NodePools (upstream's `launchTimeout`: 5 minutes since v1.7).
    pub launch_timeout: Duration,
    /// A cluster-tagged instance without a NodeClaim older than this is terminated (upstream 30 s).
    pub gc_grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            cluster_name: "cluster".into(),
            cluster: None,
            kubernetes_version: "1.33".into(),
            registration_timeout: Duration::from_secs(15 * 60),
            launch_timeout: LAUNCH_TIMEOUT,
            gc_grace: Duration::from_secs(30),
        }
    }
}

/// Operating errors of a reconcile; the claim is retried on the next pass.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Ec2(#[from] Ec2Error),
}

impl LifecycleError {
    /// The seam that failed, as a metric label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LifecycleError::Kube(_) => "kube",
            LifecycleError::Ec2(_) => "ec2",
        }
    }
}

/// What one reconcile did to a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Launched,
    /// The launch failed in a way the claim's `Launched` condition now reports.
    LaunchFailed(LaunchError),
    /// Deleted because launching found no capacity (its offerings are now cached unavailable).
    DeletedInsufficientCapacity,
    Registered,
    Initialized,
    /// Waiting for the node to register or initialize.
    Waiting,
    /// Deleted because its node never registered.
    DeletedRegistrationTimeout,
    /// Deleted because it was not launched within the launch timeout.
    DeletedLaunchTimeout,
    /// Deleted because its NodeClass does not exist.
    DeletedNodeClassNotFound,
    /// Deleted because its NodeClass cannot launch anything (no subnets, security groups or
    /// AMIs resolve): upstream's `NodeClassNotReady`, so its pods are planned again elsewhere.
    DeletedNodeClassNotReady,
    /// Being deleted: the termination controller finalizes it.
    Deleting,
    Ready,
}

/// The phases of a live claim, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not launched yet: launch (or adopt) its instance (`launch.rs`).
    Launch,
    /// Launched, its node joined: take the node over (`registration.rs`).
    Registration,
    /// Launched, no node yet: delete the claim once registration timed out (`liveness.rs`).
    Liveness,
    /// Registered: wait for the node to be ready and complete (`initialization.rs`).
    Initialization,
}

/// Upstream's lifecycle sub-reconcilers, in order.
const PHASES: [Phase; 4] = [
    Phase::Launch,
    Phase::Registration,
    Phase::Liveness,
    Phase::Initialization,
];

/// What a phase decided.
enum Flow {
    /// This phase has nothing (more) to do: the next one runs.
    Continue,
    /// This reconcile ends here.
    Done(Step),
}

/// Reconciles live NodeClaims over the seams.
pub struct Lifecycle {
    ctx: Arc<Context>,
}

fn condition_true(claim: &NodeClaim, type_: &str) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, type_))
}

fn key(claim: &NodeClaim) -> ObjectKey {
    ObjectKey::cluster(claim.name_any())
}

/// The node whose provider id is the claim's.
/// The nodes by `spec.providerID`, built once per pass: a claim's node is a lookup, not a scan
/// of every node (a pass over 400 claims scanned 400 nodes for each, the largest cost of a
/// simulated 3,000-pod burst). Where two nodes name one instance, the first in name order is
/// the claim's, as the scan had it.
#[derive(Debug, Default)]
pub struct NodesByProviderId<'n>(BTreeMap<&'n str, &'n Node>);

impl<'n> NodesByProviderId<'n> {
    pub fn new(nodes: &'n [Arc<Node>]) -> Self {
        let mut by_id = BTreeMap::new();
        for node in nodes {
            if let Some(id) = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()) {
                by_id.entry(id).or_insert(&**node);
            }
        }
        Self(by_id)
    }

    /// The node of `claim` (by its `status.providerID`).
    pub fn of(&self, claim: &NodeClaim) -> Option<&'n Node> {
        let provider_id = claim.status.as_ref()?.provider_id.as_deref()?;
        self.0.get(provider_id).copied()
    }
}

/// Deletes a claim; one already gone is fine.
async fn delete_claim(ctx: &Context, claim: &NodeClaim) -> Result<(), KubeError> {
    let deleted = ctx
        .kube
        .delete(
            &ResourceKind::NODE_CLAIM,
            &key(claim),
            &DeleteOptions::default(),
        )
        .await;
    match deleted {
        Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
        Err(err) => Err(err),
    }
}

impl Lifecycle {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// Reconciles every NodeClaim once, side by side; results in name order. One claim's error
    /// does not stop the rest.
    pub async fn reconcile_all(
        &self,
    ) -> Result<Vec<(String, Result<Step, LifecycleError>)>, KubeError> {
        let (claims, nodes) = {
            let mut state = self.ctx.state.lock().await;
            state.claims.sync(self.ctx.kube.as_ref()).await?;
            let claims = state.claims.to_vec();
            state.nodes.sync(self.ctx.kube.as_ref()).await?;
            (claims, state.nodes.to_vec())
        };
        // Claims are reconciled side by side, up to `lifecycle_reconciles_max` at once, as the
        // spawned operator's keyed workers do: one claim's slow CreateFleet must not hold up the
        // launches and registrations of the others. `buffered` keeps the results in name order
        // and polls the futures in that order, so a seed replays.
        let parallel = self.ctx.options.limits.lifecycle_reconciles_max.max(1);
        let nodes = NodesByProviderId::new(&nodes);
        let mut reconciles: Vec<BoxFuture<'_, (String, Result<Step, LifecycleError>)>> =
            Vec::with_capacity(claims.len());
        for claim in &claims {
            let nodes = &nodes;
            reconciles.push(Box::pin(async move {
                (claim.name_any(), self.reconcile(claim, nodes).await)
            }));
        }
        let out = futures::stream::iter(reconciles)
            .buffered(parallel)
            .collect()
            .await;
        Ok(out)
    }

    /// One reconcile of one claim: the finalizer, then the phases (launch, registration,
    /// liveness, initialization) until one is done.
    pub async fn reconcile(
        &self,
        claim: &NodeClaim,
        nodes: &NodesByProviderId<'_>,
    ) -> Result<Step, LifecycleError> {
        // A deleting claim belongs to the termination controller (drain, instance, finalizers).
        if claim.metadata.deletion_timestamp.is_some() {
            return Ok(Step::Deleting);
        }
        let finalized = self.ensure_finalizer(claim).await?;
        let claim = finalized.as_ref().unwrap_or(claim);
        let node = nodes.of(claim);
        for phase in PHASES {
            let flow = match phase {
                Phase::Launch => self.launch_phase(claim).await?,
                Phase::Registration => self.registration_phase(claim, node).await?,
                Phase::Liveness => self.liveness_phase(claim).await?,
                Phase::Initialization => self.initialization_phase(claim, node).await?,
            };
            if let Flow::Done(step) = flow {
                return Ok(step);
            }
        }
        Ok(Step::Ready)
    }

    /// The termination finalizer goes on before anything is launched, so nothing the claim owns
    /// can outlive it.
    /// The list is written whole, so the write is conditional on the version read (another
    /// controller's finalizer added meanwhile is a conflict and a retry, not lost). Returns the
    /// claim as written, whose version the pass's later writes are conditional on.
    async fn ensure_finalizer(&self, claim: &NodeClaim) -> Result<Option<NodeClaim>, KubeError> {
        if claim
            .finalizers()
            .iter()
            .any(|f| f == TERMINATION_FINALIZER)
        {
            return Ok(None);
        }
        let mut with = claim.finalizers().to_vec();
        with.push(TERMINATION_FINALIZER.to_string());
        let written = self
            .ctx
            .kube
            .patch(
                &ResourceKind::NODE_CLAIM,
                &key(claim),
                &Patch::Merge(json!({"metadata": {
                    "finalizers": with,
                    "resourceVersion": claim.metadata.resource_version,
                }})),
            )
            .await?;
        Ok(NodeClaim::deserialize(&*written).ok())
    }

    /// Sets one condition (recomputing `Ready`) and writes it with `extra` status fields, in one
    /// status patch.
    async fn write_condition(
        &self,
        claim: &NodeClaim,
        (type_, status, reason, message): (&str, ConditionStatus, &str, &str),
        mut extra: Value,
    ) -> Result<(), KubeError> {
        let now = self.ctx.now();
        let mut list = claim.status.clone().unwrap_or_default().conditions;
        conditions::set(&mut list, type_, status, reason, message, None, now);
        conditions::set_ready(&mut list, &cond::READY_DEPENDENTS, None, now);
        extra["conditions"] = json!(list);
        // The condition list is written whole: conditional on the version it was computed from.
        self.ctx
            .kube
            .patch_status(
                &ResourceKind::NODE_CLAIM,
                &key(claim),
                &Patch::Merge(json!({
                    "metadata": {"resourceVersion": claim.metadata.resource_version},
                    "status": extra,
                })),
            )
            .await?;
        Ok(())
    }

    /// Deletes the claim after telling why (a `Warning` event on it).
    async fn delete_with_event(
        &self,
        claim: &NodeClaim,
        reason: &str,
        message: String,
    ) -> Result<(), KubeError> {
        self.ctx
            .recorder
            .publish(Reference::claim(claim), EventType::Warning, reason, message)
            .await;
        delete_claim(&self.ctx, claim).await
    }
}
