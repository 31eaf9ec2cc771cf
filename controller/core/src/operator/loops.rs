//! Every controller as a loop: the adapters between the controllers' passes and reconciles and
//! the runtime's runners (`crate::runtime`), the keys each keyed controller reacts to, and the
//! reports each loop sends back.
//!
//! | controller | shape | wakes on |
//! |---|---|---|
//! | interruption | singleton | its SQS long poll |
//! | provisioning | singleton | pods, nodes, claims, pools; its batch window |
//! | NodeClaim lifecycle | keyed by claim | a claim's change, its node's change; requeues |
//! | termination | singleton | claims, nodes, pods; every second while something terminates |
//! | garbage collection | singleton | its interval |
//! | instance status (impaired instances) | singleton | every minute |
//! | catalog refresh (with a live catalog) | singleton | every minute; each part on its interval |
//! | NodePool counters | singleton | pools, claims |
//! | pod events, expiration, disruption | singleton | pools, claims, nodes, pods; every 10 s |

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kube_core::ResourceExt;
use tokio::sync::mpsc;

use super::{LoopReport, StepError};
use crate::api::NodeClaim;
use crate::api::conditions::{self, nodeclaim as cond};
use crate::catalog::live::LiveCatalog;
use crate::context::Context;
use crate::disruption::{Disruption, Expiration, PodEvents};
use crate::interruption::InterruptionHandler;
use crate::interruption::health::{INSTANCE_STATUS_INTERVAL, InstanceHealth};
use crate::nodeclaim::{GarbageCollector, Lifecycle, LifecycleError, Step};
use crate::nodepool;
use crate::provisioning::{Provisioner, RETRY_INTERVAL};
use crate::runtime::{Reconciler, Requeue, Singleton, Stop, Trigger, WorkQueue};
use crate::seams::kube::{ObjectKey, ResourceKind};
use crate::seams::sqs::RECEIVE_WAIT_MAX;
use crate::termination::Termination;

/// Reports queued for the caller at most; more are dropped (counted by nobody: reports are for
/// logs and the simulation's step line, never for decisions).
pub const REPORTS_QUEUED_MAX: usize = 10_000;
/// How often a loop with nothing to wait for looks again anyway (a resync: a missed trigger
/// costs at most this).
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(5 * 60);
/// A claim waiting for its node (registration, initialization, the registration timeout) is
/// looked at again at least this often.
pub const LIFECYCLE_WAITING_REQUEUE: Duration = Duration::from_secs(10);
/// Termination passes while something is terminating (upstream requeues a draining node every
/// second).
pub const TERMINATION_REQUEUE: Duration = Duration::from_secs(1);
/// Interruption receives start at most this often when the queue answers at once with nothing
/// (an SQS without long polling must not spin the loop).
pub const INTERRUPTION_POLL_INTERVAL_MIN: Duration = Duration::from_secs(1);
/// Provisioning looks for pods still pending this often (upstream requeues them every 10 s).
pub const PROVISIONING_POLL: Duration = RETRY_INTERVAL;

/// Where loops send what they did.
#[derive(Clone, Debug)]
pub struct Reporter {
    sender: mpsc::Sender<LoopReport>,
}

impl Reporter {
    pub fn channel() -> (Self, mpsc::Receiver<LoopReport>) {
        let (sender, receiver) = mpsc::channel(REPORTS_QUEUED_MAX);
        (Self { sender }, receiver)
    }

    pub fn send(&self, report: LoopReport) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(report) {
            tracing::debug!("report queue full; report dropped");
        }
    }

    fn failed(&self, error: StepError) {
        tracing::warn!(%error, "controller pass failed; retrying");
        self.send(LoopReport::Failed(error));
    }
}

/// Provisioning: a tick whenever pods, nodes or claims change, and when its batch window closes.
pub struct ProvisioningLoop {
    pub provisioner: Provisioner,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for ProvisioningLoop {
    fn name(&self) -> &'static str {
        "provisioning"
    }

    async fn pass(&mut self) -> Duration {
        match self.provisioner.tick().await {
            Ok(Some(outcome)) => self.reports.send(LoopReport::Provisioned(outcome)),
            Ok(None) => {}
            Err(err) => self.reports.failed(StepError::Provisioning(err)),
        }
        self.provisioner.next_tick(PROVISIONING_POLL)
    }
}

/// Interruption: long-polls the queue, acts, polls again.
pub struct InterruptionLoop {
    pub handler: InterruptionHandler,
    pub reports: Reporter,
    /// Cuts the long poll short at shutdown.
    pub stop: Stop,
}

#[async_trait]
impl Singleton for InterruptionLoop {
    fn name(&self) -> &'static str {
        "interruption"
    }

    async fn pass(&mut self) -> Duration {
        let started = tokio::time::Instant::now();
        let polled = self
            .handler
            .poll_waiting_until(RECEIVE_WAIT_MAX, &mut self.stop)
            .await;
        let received = polled.as_ref().is_ok_and(|r| !r.messages.is_empty());
        if let Err(err) = &polled {
            tracing::warn!(queue = self.handler.queue_url(), %err, "receiving interruption messages failed; retrying");
        }
        if polled.as_ref().is_err() || received {
            self.reports.send(LoopReport::Interruption(polled));
        }
        if received {
            return Duration::ZERO;
        }
        INTERRUPTION_POLL_INTERVAL_MIN.saturating_sub(started.elapsed())
    }
}

/// Termination: a pass over every terminating claim when claims, nodes or pods change, and every
/// [`TERMINATION_REQUEUE`] while one is terminating.
pub struct TerminationLoop {
    pub termination: Termination,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for TerminationLoop {
    fn name(&self) -> &'static str {
        "termination"
    }

    async fn pass(&mut self) -> Duration {
        match self.termination.reconcile_all().await {
            Ok(stages) if stages.is_empty() => RESYNC_INTERVAL,
            Ok(stages) => {
                self.reports.send(LoopReport::Termination(stages));
                TERMINATION_REQUEUE
            }
            Err(err) => {
                self.reports.failed(StepError::Termination(err));
                TERMINATION_REQUEUE
            }
        }
    }
}

/// How often the catalog refresh loop asks [`LiveCatalog::refresh`] whether a part is due: each
/// part keeps its own interval (instance types and on-demand prices 12 h, spot prices 1 h), so
/// this bounds how late a due part is read and how soon a failed read is tried again.
pub const CATALOG_REFRESH_POLL: Duration = Duration::from_secs(60);

/// Refreshes the instance catalog while the loops run and swaps the new one into the context
/// (upstream's instance-type and pricing controllers). A failed read keeps the catalog in use
/// and is tried again at the next poll.
pub struct CatalogRefreshLoop {
    pub ctx: Arc<Context>,
    pub live: Arc<tokio::sync::Mutex<LiveCatalog>>,
}

#[async_trait]
impl Singleton for CatalogRefreshLoop {
    fn name(&self) -> &'static str {
        "catalog_refresh"
    }

    async fn pass(&mut self) -> Duration {
        let mut live = self.live.lock().await;
        match live.refresh().await {
            Ok(true) => {
                if let Some(catalog) = live.catalog() {
                    tracing::info!(
                        instance_types = catalog.instance_types.len(),
                        prices = ?live.price_source(),
                        "refreshed the instance catalog"
                    );
                    self.ctx.catalog.replace(catalog);
                }
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, "refreshing the instance catalog failed; keeping the one in use");
            }
        }
        CATALOG_REFRESH_POLL
    }
}

/// Garbage collection, on its interval.
pub struct GarbageCollectionLoop {
    pub collector: GarbageCollector,
    pub interval: Duration,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for GarbageCollectionLoop {
    fn name(&self) -> &'static str {
        "garbage_collection"
    }

    async fn pass(&mut self) -> Duration {
        match self.collector.collect_if_due().await {
            Some(Ok(counts)) => self.reports.send(LoopReport::Collected(counts)),
            Some(Err(err)) => self.reports.failed(StepError::GarbageCollection(err)),
            None => {}
        }
        // Sooner after a failed pass (backoff), never later than the loop's interval.
        self.collector.next_pass_after().min(self.interval)
    }
}

/// The EC2 instance-status health controller, every [`INSTANCE_STATUS_INTERVAL`].
pub struct InstanceHealthLoop {
    pub health: InstanceHealth,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for InstanceHealthLoop {
    fn name(&self) -> &'static str {
        "interruption.instancestatus"
    }

    async fn pass(&mut self) -> Duration {
        match self.health.reconcile().await {
            Ok(report) if report.acted.is_empty() => {}
            Ok(report) => self.reports.send(LoopReport::InstanceHealth(report)),
            Err(err) => self.reports.failed(StepError::InstanceHealth(err)),
        }
        INSTANCE_STATUS_INTERVAL
    }
}

/// The capacity-reservation controllers (expiring capacity blocks, ended reservations), every
/// minute.
pub struct CapacityReservationLoop {
    pub reservations: crate::capacityreservation::CapacityReservations,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for CapacityReservationLoop {
    fn name(&self) -> &'static str {
        "capacityreservation"
    }

    async fn pass(&mut self) -> Duration {
        match self.reservations.reconcile().await {
            Ok(report) if report == Default::default() => {}
            Ok(report) => self.reports.send(LoopReport::CapacityReservations(report)),
            Err(err) => self.reports.failed(StepError::CapacityReservation(err)),
        }
        crate::capacityreservation::CAPACITY_RESERVATION_INTERVAL
    }
}

/// The NodeClaim consistency checks, every minute (each claim every ten).
pub struct ConsistencyLoop {
    pub consistency: crate::nodeclaim::consistency::Consistency,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for ConsistencyLoop {
    fn name(&self) -> &'static str {
        "nodeclaim.consistency"
    }

    async fn pass(&mut self) -> Duration {
        if let Err(err) = self.consistency.reconcile().await {
            self.reports.failed(StepError::Consistency(err));
        }
        crate::nodeclaim::consistency::CONSISTENCY_INTERVAL
    }
}

/// The node and NodePool metric gauges, every [`crate::state_metrics::STATE_METRICS_INTERVAL`].
pub struct StateMetricsLoop {
    pub metrics: crate::state_metrics::StateMetrics,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for StateMetricsLoop {
    fn name(&self) -> &'static str {
        "metrics.node"
    }

    async fn pass(&mut self) -> Duration {
        if let Err(err) = self.metrics.reconcile().await {
            self.reports.failed(StepError::StateMetrics(err));
        }
        crate::state_metrics::STATE_METRICS_INTERVAL
    }
}

/// operatorpkg's status-condition metrics, every
/// [`crate::status_metrics::STATUS_METRICS_INTERVAL`].
pub struct StatusMetricsLoop {
    pub metrics: crate::status_metrics::StatusMetrics,
}

#[async_trait]
impl Singleton for StatusMetricsLoop {
    fn name(&self) -> &'static str {
        "metrics.status"
    }

    async fn pass(&mut self) -> Duration {
        self.metrics.reconcile().await;
        crate::status_metrics::STATUS_METRICS_INTERVAL
    }
}

/// NodePool counters and conditions, when pools, claims or classes change.
pub struct CounterLoop {
    pub counter: nodepool::Counter,
    pub readiness: nodepool::Readiness,
    pub reports: Reporter,
}

impl CounterLoop {
    /// The kinds whose changes start a pass.
    pub const TRIGGERS: [ResourceKind; 3] = [
        ResourceKind::NODE_POOL,
        ResourceKind::NODE_CLAIM,
        ResourceKind::EC2_NODE_CLASS,
    ];
}

#[async_trait]
impl Singleton for CounterLoop {
    fn name(&self) -> &'static str {
        "nodepool_counter"
    }

    async fn pass(&mut self) -> Duration {
        if let Err(err) = self.counter.count().await {
            self.reports.failed(StepError::Counters(err));
            return TERMINATION_REQUEUE;
        }
        if let Err(err) = self.readiness.reconcile_all().await {
            self.reports.failed(StepError::Counters(err));
            return TERMINATION_REQUEUE;
        }
        RESYNC_INTERVAL
    }
}

/// How often the EC2NodeClass status is re-resolved without a trigger (upstream refreshes AMIs
/// every minute, `AMI_REFRESH_INTERVAL`), so a new AMI release is seen within a minute.
pub const NODECLASS_REFRESH: Duration = Duration::from_secs(60);

/// The EC2NodeClass status controller, then drift detection (which reads that status).
pub struct DriftLoop {
    pub status: crate::nodeclass::NodeClassStatus,
    pub drift: crate::nodeclaim::drift::DriftDetection,
    pub reports: Reporter,
}

impl DriftLoop {
    /// The kinds whose changes start a pass (a class, pool or claim change may drift a claim).
    pub const TRIGGERS: [ResourceKind; 3] = [
        ResourceKind::EC2_NODE_CLASS,
        ResourceKind::NODE_POOL,
        ResourceKind::NODE_CLAIM,
    ];

    pub fn new(ctx: &Arc<Context>, reports: Reporter) -> Self {
        Self {
            status: crate::nodeclass::NodeClassStatus::new(ctx.clone()),
            drift: crate::nodeclaim::drift::DriftDetection::new(ctx.clone()),
            reports,
        }
    }
}

#[async_trait]
impl Singleton for DriftLoop {
    fn name(&self) -> &'static str {
        "drift"
    }

    /// Drift detection runs even when a class's status failed: it decides on the statuses
    /// written so far, and a class that keeps failing must not stop drift everywhere.
    async fn pass(&mut self) -> Duration {
        let mut next = NODECLASS_REFRESH;
        if let Err(err) = self.status.reconcile_all().await {
            self.reports.failed(StepError::NodeClassStatus(err));
            next = TERMINATION_REQUEUE;
        }
        if let Err(err) = self.drift.pass().await {
            self.reports.failed(StepError::Drift(err));
            next = TERMINATION_REQUEUE;
        }
        next
    }
}

/// How often disruption looks at the cluster without a trigger (upstream's disruption
/// controller polls every 10 s).
pub const DISRUPTION_POLL: Duration = Duration::from_secs(10);

/// Pod events, expiration and disruption, one after another (they decide on the same view).
pub struct DisruptionLoop {
    pub pod_events: PodEvents,
    pub expiration: Expiration,
    pub disruption: Disruption,
    pub reports: Reporter,
}

#[async_trait]
impl Singleton for DisruptionLoop {
    fn name(&self) -> &'static str {
        "disruption"
    }

    async fn pass(&mut self) -> Duration {
        if let Err(err) = self.pod_events.pass().await {
            self.reports.failed(StepError::PodEvents(err));
        }
        match self.expiration.pass().await {
            Ok(expired) if !expired.is_empty() => self.reports.send(LoopReport::Expired(expired)),
            Ok(_) => {}
            Err(err) => self.reports.failed(StepError::Expiration(err)),
        }
        match self.disruption.pass().await {
            Ok(outcome) => self.reports.send(LoopReport::Disrupted(outcome)),
            Err(err) => self.reports.failed(StepError::Disruption(err)),
        }
        DISRUPTION_POLL
    }
}

/// Why a lifecycle reconcile is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleRetry {
    #[error(transparent)]
    Failed(#[from] LifecycleError),
    /// The launch failed in a way the claim's conditions report (an EC2 error).
    #[error("launch failed: {0}")]
    LaunchFailed(String),
}

/// The NodeClaim lifecycle, one claim per reconcile.
pub struct LifecycleReconciler {
    pub ctx: Arc<Context>,
    pub lifecycle: Lifecycle,
    pub reports: Reporter,
}

fn launched(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, cond::LAUNCHED))
}

#[async_trait]
impl Reconciler for LifecycleReconciler {
    type Key = String;
    type Error = LifecycleRetry;

    fn name(&self) -> &'static str {
        "nodeclaim_lifecycle"
    }

    async fn reconcile(&self, name: &String) -> Result<Requeue, LifecycleRetry> {
        let key = ObjectKey::cluster(name.clone());
        let (cached, nodes) = {
            let state = self.ctx.state.lock().await;
            (state.claims.get(&key).cloned(), state.nodes.to_vec())
        };
        let Some(mut claim) = cached else {
            return Ok(Requeue::Never);
        };
        if !launched(&claim) && claim.metadata.deletion_timestamp.is_none() {
            // About to launch: read the claim itself, not the cache, which may not have seen this
            // controller's own last write yet (a launch must never be repeated on stale state).
            match self.ctx.kube.get(&ResourceKind::NODE_CLAIM, &key).await {
                Ok(Some(value)) => match serde_json::from_value::<NodeClaim>(value) {
                    Ok(fresh) => claim = Arc::new(fresh),
                    Err(err) => tracing::warn!(claim = %name, %err, "undecodable NodeClaim"),
                },
                Ok(None) => return Ok(Requeue::Never),
                Err(err) => return Err(LifecycleError::Kube(err).into()),
            }
        }
        let nodes = crate::nodeclaim::NodesByProviderId::new(&nodes);
        let step = self.lifecycle.reconcile(&claim, &nodes).await;
        self.reports
            .send(LoopReport::Lifecycle(claim.name_any(), step.clone()));
        match step {
            Ok(Step::LaunchFailed(err)) => Err(LifecycleRetry::LaunchFailed(err.to_string())),
            Ok(Step::Waiting) => Ok(Requeue::After(LIFECYCLE_WAITING_REQUEUE)),
            Ok(Step::Ready | Step::Deleting) => Ok(Requeue::Never),
            // Each phase that acted is followed by the next once its write comes back through
            // the watch; the requeue covers a watch that is slow to say so.
            Ok(_) => Ok(Requeue::After(LIFECYCLE_WAITING_REQUEUE)),
            Err(err) => Err(err.into()),
        }
    }
}

/// Feeds the lifecycle queue: every claim whose object changed, and the claim of every node that
/// changed (registration and initialization wait on the node).
pub struct LifecycleEvents {
    pub ctx: Arc<Context>,
    pub queue: Arc<WorkQueue<String>>,
    pub trigger: Trigger,
    /// Versions already enqueued for, by claim and by node.
    claims_seen: BTreeMap<String, String>,
    nodes_seen: BTreeMap<String, String>,
}

impl LifecycleEvents {
    pub fn new(ctx: Arc<Context>, queue: Arc<WorkQueue<String>>, trigger: Trigger) -> Self {
        Self {
            ctx,
            queue,
            trigger,
            claims_seen: BTreeMap::new(),
            nodes_seen: BTreeMap::new(),
        }
    }

    /// Runs forever: on each trigger, enqueue what changed.
    /// Enqueues changed claims until `stop` fires.
    pub async fn run(mut self, mut stop: Stop) {
        while !stop.is_stopping() {
            self.enqueue_changed().await;
            tokio::select! {
                biased;
                () = stop.stopped() => {}
                () = self.trigger.changed() => {}
            }
        }
    }

    async fn enqueue_changed(&mut self) {
        let state = self.ctx.state.lock().await;
        let version =
            |meta: &kube_core::ObjectMeta| meta.resource_version.clone().unwrap_or_default();
        let mut by_provider: BTreeMap<&str, String> = BTreeMap::new();
        let mut claims_now = BTreeMap::new();
        for claim in state.claims.iter() {
            let name = claim.name_any();
            if let Some(provider) = claim.status.as_ref().and_then(|s| s.provider_id.as_deref()) {
                by_provider.insert(provider, name.clone());
            }
            let rv = version(&claim.metadata);
            if self.claims_seen.get(&name) != Some(&rv) {
                self.queue.add(name.clone());
            }
            claims_now.insert(name, rv);
        }
        let mut nodes_now = BTreeMap::new();
        for node in state.nodes.iter() {
            let name = node.name_any();
            let rv = version(&node.metadata);
            if self.nodes_seen.get(&name) != Some(&rv)
                && let Some(claim) = node
                    .spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .and_then(|p| by_provider.get(p))
            {
                self.queue.add(claim.clone());
            }
            nodes_now.insert(name, rv);
        }
        self.claims_seen = claims_now;
        self.nodes_seen = nodes_now;
    }
}
