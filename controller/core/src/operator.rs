//! The one place the controllers are wired together over the seams. Production, the simulation
//! and e2e build an [`Operator`] from their own seam implementations and start it with
//! [`Operator::spawn`]: every controller then runs as its own loop (`loops`), on the current
//! runtime, fed by informers, with bounded parallel reconciles where upstream has them
//! ([`crate::runtime::Limits`]). Nothing else differs between the worlds.
//!
//! Every controller holds the same `Arc<Context>` (`crate::context`): the seams, the caches, the
//! metrics, the event recorder and the options exist once.
//!
//! [`Operator::step`] runs one pass of every controller, one after another, in a fixed order: it
//! is for unit tests that want to see exactly one pass, never for a running controller (one slow
//! call there holds up every controller).

pub mod loops;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::Catalog;
use crate::context::Context;
use crate::disruption::{Disruption, DisruptionError, Expiration, PassOutcome, PodEvents};
use crate::interruption::{InterruptionHandler, PollReport};
use crate::metrics::Metrics;
use crate::nodeclaim::{self, GarbageCollector, Lifecycle, LifecycleError};
use crate::nodepool;
use crate::provisioning::{Outcome, ProvisionError, Provisioner};
use crate::runtime::{Informers, Stop, StopSender, Trigger, WorkQueue, run_keyed, run_singleton};
use crate::seams::kube::ResourceKind;
use crate::seams::{Clock, Ec2, KubeApi, KubeError, Sqs, SqsError};
use crate::termination::{self, Termination, TerminationError};

pub use crate::context::Options;

/// What one step did, for logs and reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReport {
    /// What the interruption queue brought, when a queue is configured (`Err`: the receive
    /// failed; retried next step).
    pub interruption: Option<Result<PollReport, SqsError>>,
    pub provisioned: Option<Outcome>,
    /// (NodeClaim, what its reconcile did or why it failed).
    pub lifecycle: Vec<(String, Result<nodeclaim::Step, LifecycleError>)>,
    /// (NodeClaim, or `node/NAME` for a Node without one, and its termination stage or error).
    pub termination: Vec<(String, Result<termination::Stage, TerminationError>)>,
    /// What the disruption pass did.
    pub disruption: Option<PassOutcome>,
    /// NodeClaims deleted because they expired.
    pub expired: Vec<String>,
    /// (instances terminated, claims deleted) when garbage collection ran.
    pub collected: Option<(usize, usize)>,
    /// Controllers whose whole pass failed this step (each retried next step; the others ran).
    pub errors: Vec<StepError>,
}

impl StepReport {
    /// Whether every controller pass ran (a claim's own failure, in `lifecycle` or
    /// `termination`, and a failed interruption receive do not count).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// A controller pass that failed as a whole (it could not read the cluster, say); it is retried
/// on the next step.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    #[error("provisioning: {0}")]
    Provisioning(ProvisionError),
    #[error("nodeclaim lifecycle: {0}")]
    Lifecycle(KubeError),
    #[error("termination: {0}")]
    Termination(KubeError),
    #[error("garbage collection: {0}")]
    GarbageCollection(LifecycleError),
    #[error("nodepool counters: {0}")]
    Counters(KubeError),
    #[error("pod events: {0}")]
    PodEvents(KubeError),
    #[error("expiration: {0}")]
    Expiration(KubeError),
    #[error("disruption: {0}")]
    Disruption(DisruptionError),
    #[error("ec2nodeclass status: {0}")]
    NodeClassStatus(KubeError),
    #[error("drift detection: {0}")]
    Drift(crate::nodeclaim::drift::DriftError),
    #[error("instance status: {0}")]
    InstanceHealth(crate::interruption::health::HealthError),
    #[error("capacity reservations: {0}")]
    CapacityReservation(crate::capacityreservation::ReservationError),
    #[error("nodeclaim consistency: {0}")]
    Consistency(KubeError),
    #[error("node and nodepool metrics: {0}")]
    StateMetrics(KubeError),
}

impl StepError {
    /// The controller that failed, as a metric label.
    pub fn metric_label(&self) -> &'static str {
        match self {
            StepError::Provisioning(_) => "provisioning",
            StepError::Lifecycle(_) => "nodeclaim_lifecycle",
            StepError::Termination(_) => "termination",
            StepError::GarbageCollection(_) => "garbage_collection",
            StepError::Counters(_) => "nodepool_counter",
            StepError::PodEvents(_) => "pod_events",
            StepError::Expiration(_) => "expiration",
            StepError::Disruption(_) => "disruption",
            StepError::NodeClassStatus(_) => "ec2nodeclass_status",
            StepError::Drift(_) => "drift_detection",
            StepError::InstanceHealth(_) => "interruption.instancestatus",
            StepError::CapacityReservation(_) => "capacityreservation",
            StepError::Consistency(_) => "nodeclaim.consistency",
            StepError::StateMetrics(_) => "metrics.node",
        }
    }
}

/// What one loop did, as it happened (the running operator's counterpart of [`StepReport`]).
#[derive(Clone, Debug, PartialEq)]
pub enum LoopReport {
    Interruption(Result<PollReport, SqsError>),
    Provisioned(Outcome),
    Lifecycle(String, Result<nodeclaim::Step, LifecycleError>),
    Termination(termination::Reconciled),
    Collected((usize, usize)),
    /// NodeClaims deleted because they expired.
    Expired(Vec<String>),
    /// What a disruption pass did.
    Disrupted(PassOutcome),
    /// NodeClaims of impaired instances the instance-status controller acted on.
    InstanceHealth(crate::interruption::health::HealthReport),
    /// NodeClaims the capacity-reservation controllers deleted or relabelled.
    CapacityReservations(crate::capacityreservation::ReservationReport),
    /// A pass that failed as a whole (retried by its loop).
    Failed(StepError),
}

/// How long a shutdown lets the loops finish the work they started before aborting the rest:
/// inside a pod's default 30 s termination grace period, with 10 s left to release the Lease
/// and exit (upstream's controller-runtime waits up to its 30 s graceful-shutdown timeout).
pub const SHUTDOWN_DRAIN_MAX: Duration = Duration::from_secs(20);

/// How long the events the loops queued may take to be written once the loops are done (on top
/// of the drain: a loop finishing at the bound still gets its events out).
pub const EVENTS_FLUSH_MAX: Duration = Duration::from_secs(1);

/// A controller loop with the name shutdown reports it under.
type NamedLoop = (&'static str, BoxFuture<'static, ()>);

fn named(name: &'static str, future: impl Future<Output = ()> + Send + 'static) -> NamedLoop {
    (name, Box::pin(future))
}

/// What [`OperatorHandle::shutdown`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Loops still working when the drain bound ran out (aborted then), by name.
    pub aborted: Vec<&'static str>,
}

/// The running controllers of an [`Operator`]. Dropping it stops them (every task aborted);
/// [`OperatorHandle::shutdown`] drains them first.
pub struct OperatorHandle {
    /// The controller loops, by name.
    controllers: Vec<(&'static str, JoinHandle<()>)>,
    /// The informers and the event writer: they serve the controllers until those are done.
    support: Vec<JoinHandle<()>>,
    writer: Option<JoinHandle<()>>,
    stop: StopSender,
    lifecycle_queue: Arc<WorkQueue<String>>,
    reports: mpsc::Receiver<LoopReport>,
    ctx: Arc<Context>,
    /// Resolves once every informer has listed (the binary's `/readyz`).
    synced: Option<BoxFuture<'static, ()>>,
}

impl std::fmt::Debug for OperatorHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorHandle")
            .field("controllers", &self.controllers.len())
            .finish_non_exhaustive()
    }
}

impl OperatorHandle {
    /// What the loops reported since the last call, in the order they reported it.
    pub fn reports(&mut self) -> Vec<LoopReport> {
        let mut out = Vec::new();
        while let Ok(report) = self.reports.try_recv() {
            out.push(report);
        }
        out
    }

    /// A future resolving once every cache has listed (the controllers start then); `None` after
    /// the first call.
    pub fn take_synced(&mut self) -> Option<BoxFuture<'static, ()>> {
        self.synced.take()
    }

    /// Whether any loop has ended (none should while the runtime runs: a loop that ended
    /// panicked).
    pub fn is_degraded(&self) -> bool {
        self.controllers.iter().any(|(_, task)| task.is_finished())
            || self.support.iter().any(JoinHandle::is_finished)
    }

    /// Stops taking work and drains: no loop starts a new pass or reconcile, the ones under way
    /// finish (their writes land, so the next leader does not redo a half-made launch or
    /// drain), queued events are written, and whatever still runs after `drain_max` is
    /// aborted and named in the report; the event writer then gets [`EVENTS_FLUSH_MAX`]. The
    /// caches keep serving the loops until they are done. An interruption long poll is cut
    /// short at once (a message it received is redelivered after the queue's visibility
    /// timeout).
    pub async fn shutdown(mut self, drain_max: Duration) -> ShutdownReport {
        let deadline = tokio::time::Instant::now() + drain_max;
        self.stop.stop();
        self.lifecycle_queue.shut_down();
        let mut report = ShutdownReport::default();
        // Tasks stay in `self` until they are done, so dropping this future half-way (a
        // caller that lost its Lease mid-drain) aborts the rest through `Drop`.
        while let Some((name, task)) = self.controllers.first_mut() {
            let name = *name;
            // `timeout`, not `timeout_at`: madsim's time module has only the former.
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if tokio::time::timeout(left, &mut *task).await.is_err() {
                tracing::warn!(
                    controller = name,
                    "still working at the end of the drain; aborted"
                );
                task.abort();
                report.aborted.push(name);
            }
            self.controllers.remove(0);
        }
        // The writer ends once its queue is empty and its sender is gone.
        self.ctx.recorder.stop_writer();
        if let Some(writer) = self.writer.as_mut()
            && tokio::time::timeout(EVENTS_FLUSH_MAX, &mut *writer)
                .await
                .is_err()
        {
            writer.abort();
            report.aborted.push("events");
        }
        for task in &self.support {
            task.abort();
        }
        report
    }
}

impl Drop for OperatorHandle {
    fn drop(&mut self) {
        for (_, task) in &self.controllers {
            task.abort();
        }
        for task in self.support.iter().chain(&self.writer) {
            task.abort();
        }
        self.ctx.recorder.stop_writer();
    }
}

/// The loops that write status from what they read: the NodePool counters, and the
/// EC2NodeClass status controller followed by drift detection.
/// The loops that run on their own interval: garbage collection, the instance-status health
/// controller, the capacity-reservation controllers, NodeClaim consistency, the node and
/// NodePool metrics and operatorpkg's status-condition metrics.
fn interval_loops(ctx: &Arc<Context>, reports: &loops::Reporter, stop: &Stop) -> [NamedLoop; 6] {
    let gc = loops::GarbageCollectionLoop {
        collector: GarbageCollector::new(ctx.clone()),
        interval: ctx.options.gc_interval.unwrap_or(nodeclaim::GC_INTERVAL),
        reports: reports.clone(),
    };
    let health = loops::InstanceHealthLoop {
        health: crate::interruption::health::InstanceHealth::new(ctx.clone()),
        reports: reports.clone(),
    };
    let reservations = loops::CapacityReservationLoop {
        reservations: crate::capacityreservation::CapacityReservations::new(ctx.clone()),
        reports: reports.clone(),
    };
    [
        named(
            "garbage-collection",
            run_singleton(gc, Trigger::never(), stop.clone()),
        ),
        named(
            "instance-status",
            run_singleton(health, Trigger::never(), stop.clone()),
        ),
        named(
            "capacity-reservations",
            run_singleton(reservations, Trigger::never(), stop.clone()),
        ),
        named(
            "consistency",
            run_singleton(
                loops::ConsistencyLoop {
                    consistency: nodeclaim::consistency::Consistency::new(ctx.clone()),
                    reports: reports.clone(),
                },
                Trigger::never(),
                stop.clone(),
            ),
        ),
        named(
            "metrics",
            run_singleton(
                loops::StateMetricsLoop {
                    metrics: crate::state_metrics::StateMetrics::new(ctx.clone()),
                    reports: reports.clone(),
                },
                Trigger::never(),
                stop.clone(),
            ),
        ),
        named(
            "metrics.status",
            run_singleton(
                loops::StatusMetricsLoop {
                    metrics: crate::status_metrics::StatusMetrics::new(ctx.clone()),
                },
                Trigger::never(),
                stop.clone(),
            ),
        ),
    ]
}

/// The catalog refresh, when the context has a live catalog to refresh from.
fn catalog_refresh_loop(ctx: &Arc<Context>, stop: &Stop) -> Option<NamedLoop> {
    let refresh = loops::CatalogRefreshLoop {
        ctx: ctx.clone(),
        live: ctx.live_catalog.clone()?,
    };
    Some(named(
        "catalog-refresh",
        run_singleton(refresh, Trigger::never(), stop.clone()),
    ))
}

fn status_loops(
    ctx: &Arc<Context>,
    informers: &Informers,
    reports: &loops::Reporter,
    stop: &Stop,
) -> [NamedLoop; 2] {
    let counter = loops::CounterLoop {
        counter: nodepool::Counter::new(ctx.clone()),
        readiness: nodepool::Readiness::new(ctx.clone()),
        reports: reports.clone(),
    };
    [
        named(
            "nodepool-counter",
            run_singleton(
                counter,
                informers.trigger(&loops::CounterLoop::TRIGGERS),
                stop.clone(),
            ),
        ),
        named(
            "drift",
            run_singleton(
                loops::DriftLoop::new(ctx, reports.clone()),
                informers.trigger(&loops::DriftLoop::TRIGGERS),
                stop.clone(),
            ),
        ),
    ]
}

/// The NodeClaim lifecycle: the loop turning claim and node changes into keys, and the keyed
/// reconciler (up to `lifecycle_reconciles_max` at once); with the queue shutdown closes.
fn lifecycle_loops(
    ctx: &Arc<Context>,
    informers: &Informers,
    reports: &loops::Reporter,
    stop: &Stop,
) -> ([NamedLoop; 2], Arc<WorkQueue<String>>) {
    let queue = Arc::new(WorkQueue::new());
    let events = loops::LifecycleEvents::new(
        ctx.clone(),
        queue.clone(),
        informers.trigger(&[ResourceKind::NODE_CLAIM, ResourceKind::NODE]),
    );
    let reconciler = Arc::new(loops::LifecycleReconciler {
        ctx: ctx.clone(),
        lifecycle: Lifecycle::new(ctx.clone()),
        reports: reports.clone(),
    });
    let workers_max = ctx.options.limits.lifecycle_reconciles_max;
    let loops = [
        named("lifecycle-events", events.run(stop.clone())),
        named(
            "lifecycle",
            run_keyed(reconciler, queue.clone(), workers_max),
        ),
    ];
    (loops, queue)
}

/// The controllers over one context.
pub struct Operator {
    ctx: Arc<Context>,
    interruption: Option<InterruptionHandler>,
    provisioner: Provisioner,
    lifecycle: Lifecycle,
    termination: Termination,
    garbage_collector: GarbageCollector,
    counter: nodepool::Counter,
    readiness: nodepool::Readiness,
    pod_events: PodEvents,
    expiration: Expiration,
    disruption: Disruption,
    node_class_status: crate::nodeclass::NodeClassStatus,
    drift: crate::nodeclaim::drift::DriftDetection,
    reservations: crate::capacityreservation::CapacityReservations,
    /// When the capacity-reservation controllers last ran (they run every
    /// `CAPACITY_RESERVATION_INTERVAL`).
    reservations_ran: Option<jiff::Timestamp>,
    status_metrics: crate::status_metrics::StatusMetrics,
    /// When the status-condition metrics last ran (every `STATUS_METRICS_INTERVAL`).
    status_metrics_ran: Option<jiff::Timestamp>,
}

impl Operator {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        ec2: Arc<dyn Ec2>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        options: Options,
    ) -> Self {
        Self::with_context(Context::new(kube, ec2, clock, catalog, options))
    }

    /// The controllers over `ctx` (with interruption handling when it has a queue).
    pub fn with_context(ctx: Context) -> Self {
        let ctx = Arc::new(ctx);
        Self {
            interruption: InterruptionHandler::new(ctx.clone()),
            provisioner: Provisioner::new(ctx.clone()),
            lifecycle: Lifecycle::new(ctx.clone()),
            termination: Termination::new(ctx.clone()),
            garbage_collector: GarbageCollector::new(ctx.clone()),
            counter: nodepool::Counter::new(ctx.clone()),
            readiness: nodepool::Readiness::new(ctx.clone()),
            pod_events: PodEvents::new(ctx.clone()),
            expiration: Expiration::new(ctx.clone()),
            reservations: crate::capacityreservation::CapacityReservations::new(ctx.clone()),
            reservations_ran: None,
            status_metrics: crate::status_metrics::StatusMetrics::new(ctx.clone()),
            status_metrics_ran: None,
            disruption: Disruption::new(ctx.clone()),
            node_class_status: crate::nodeclass::NodeClassStatus::new(ctx.clone()),
            drift: crate::nodeclaim::drift::DriftDetection::new(ctx.clone()),
            ctx,
        }
    }

    /// Polls `queue_url` (through `sqs`) for interruption events at the start of every step.
    /// Without it the controller runs without interruption handling, as upstream does when
    /// `INTERRUPTION_QUEUE` is empty. A builder: the controllers are rebuilt over the new
    /// context, so call it before the first step.
    pub fn with_interruption_queue(self, sqs: Arc<dyn Sqs>, queue_url: String) -> Self {
        let ctx = Context::clone(&self.ctx).with_interruption_queue(sqs, queue_url);
        Self::with_context(ctx)
    }

    /// The controllers' metrics (encode them with [`Metrics::encode`] for `/metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.ctx.metrics
    }

    /// The context every controller shares.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Starts every controller as its own loop on the current runtime (tokio, or madsim's
    /// seeded scheduler): the informers, then, once every cache has listed, interruption,
    /// provisioning, the NodeClaim lifecycle (keyed, up to `lifecycle_reconciles_max` at once),
    /// termination, garbage collection and the NodePool counters, plus the event writer. The
    /// loops build their own controllers over this operator's context; [`Operator::step`] must
    /// not be used on the same operator afterwards (the informers own the caches).
    pub fn spawn(&self) -> OperatorHandle {
        use loops::*;
        let ctx = self.ctx.clone();
        let (reports, receiver) = Reporter::channel();
        let (stop_sender, stop) = Stop::channel();
        let informers = Informers::start(&ctx);
        let synced: BoxFuture<'static, ()> = Box::pin(informers.synced_owned());
        let mut loops: Vec<NamedLoop> = Vec::new();
        if let Some(handler) = InterruptionHandler::new(ctx.clone()) {
            let interruption = InterruptionLoop {
                handler,
                reports: reports.clone(),
                stop: stop.clone(),
            };
            loops.push(named(
                "interruption",
                run_singleton(interruption, Trigger::never(), stop.clone()),
            ));
        }
        let kinds = [
            ResourceKind::POD,
            ResourceKind::NODE,
            ResourceKind::NODE_CLAIM,
            ResourceKind::NODE_POOL,
        ];
        let provisioning = ProvisioningLoop {
            provisioner: Provisioner::new(ctx.clone()),
            reports: reports.clone(),
        };
        loops.push(named(
            "provisioning",
            run_singleton(provisioning, informers.trigger(&kinds), stop.clone()),
        ));
        let (lifecycle, queue) = lifecycle_loops(&ctx, &informers, &reports, &stop);
        loops.extend(lifecycle);
        let termination = TerminationLoop {
            termination: Termination::new(ctx.clone()),
            reports: reports.clone(),
        };
        let termination_kinds = [
            ResourceKind::NODE_CLAIM,
            ResourceKind::NODE,
            ResourceKind::POD,
        ];
        loops.push(named(
            "termination",
            run_singleton(
                termination,
                informers.trigger(&termination_kinds),
                stop.clone(),
            ),
        ));
        loops.extend(interval_loops(&ctx, &reports, &stop));
        loops.extend(catalog_refresh_loop(&ctx, &stop));
        loops.extend(status_loops(&ctx, &informers, &reports, &stop));
        let disruption = DisruptionLoop {
            pod_events: PodEvents::new(ctx.clone()),
            expiration: Expiration::new(ctx.clone()),
            disruption: Disruption::new(ctx.clone()),
            reports: reports.clone(),
        };
        let disruption_kinds = [
            ResourceKind::NODE_POOL,
            ResourceKind::NODE_CLAIM,
            ResourceKind::NODE,
            ResourceKind::POD,
        ];
        loops.push(named(
            "disruption",
            run_singleton(
                disruption,
                informers.trigger(&disruption_kinds),
                stop.clone(),
            ),
        ));
        let writer = tokio::spawn(ctx.recorder.start_writer());
        // Every loop starts once every cache has listed.
        let controllers = loops
            .into_iter()
            .map(|(name, future)| {
                let synced = informers.synced_owned();
                let task = tokio::spawn(async move {
                    synced.await;
                    future.await;
                });
                (name, task)
            })
            .collect();
        OperatorHandle {
            controllers,
            support: informers.into_tasks(),
            writer: Some(writer),
            stop: stop_sender,
            lifecycle_queue: queue,
            reports: receiver,
            ctx,
            synced: Some(synced),
        }
    }

    /// One pass of every controller, in a fixed order: interruption (when a queue is
    /// configured), provisioning (when its batch closes), NodeClaim lifecycle, termination,
    /// pod events, expiration, disruption, garbage collection (on its interval), NodePool
    /// counters, the status-condition metrics (on their interval). For unit tests only: a running controller uses [`Operator::spawn`]. Interruption
    /// runs first so that
    /// the claims it deletes are provisioned for (replacement first) and start terminating in the
    /// same step. A pass that fails as a whole is reported in [`StepReport::errors`] (and logged)
    /// and the others still run; every pass is retried on the next step.
    pub async fn step(&mut self) -> StepReport {
        let mut report = StepReport::default();
        if let Some(handler) = &self.interruption {
            let polled = handler.poll().await;
            if let Err(err) = &polled {
                tracing::warn!(queue = handler.queue_url(), %err, "polling the interruption queue failed; retrying next step");
            }
            report.interruption = Some(polled);
        }
        if let Err(err) = self.node_class_status.reconcile_all().await {
            report.errors.push(StepError::NodeClassStatus(err));
        }
        match self.provisioner.tick().await {
            Ok(outcome) => report.provisioned = outcome,
            Err(err) => {
                tracing::warn!(%err, "provisioning pass failed; retrying next step");
                report.errors.push(StepError::Provisioning(err));
            }
        }
        match self.lifecycle.reconcile_all().await {
            Ok(steps) => report.lifecycle = steps,
            Err(err) => {
                tracing::warn!(%err, "nodeclaim lifecycle pass failed; retrying next step");
                report.errors.push(StepError::Lifecycle(err));
            }
        }
        match self.termination.reconcile_all().await {
            Ok(stages) => report.termination = stages,
            Err(err) => {
                tracing::warn!(%err, "termination pass failed; retrying next step");
                report.errors.push(StepError::Termination(err));
            }
        }
        if let Err(err) = self.pod_events.pass().await {
            report.errors.push(StepError::PodEvents(err));
        }
        match self.expiration.pass().await {
            Ok(expired) => report.expired = expired,
            Err(err) => report.errors.push(StepError::Expiration(err)),
        }
        if let Err(err) = self.drift.pass().await {
            report.errors.push(StepError::Drift(err));
        }
        match self.disruption.pass().await {
            Ok(outcome) => report.disruption = Some(outcome),
            Err(err) => report.errors.push(StepError::Disruption(err)),
        }
        match self.garbage_collector.collect_if_due().await {
            Some(Ok(counts)) => report.collected = Some(counts),
            Some(Err(err)) => {
                tracing::warn!(%err, "garbage collection failed; retrying with backoff");
                report.errors.push(StepError::GarbageCollection(err));
            }
            None => {}
        }
        let now = self.ctx.now();
        let reservations_due = self.reservations_ran.is_none_or(|t| {
            now.duration_since(t).unsigned_abs()
                >= crate::capacityreservation::CAPACITY_RESERVATION_INTERVAL
        });
        if reservations_due {
            self.reservations_ran = Some(now);
            if let Err(err) = self.reservations.reconcile().await {
                report.errors.push(StepError::CapacityReservation(err));
            }
        }
        if let Err(err) = self.readiness.reconcile_all().await {
            tracing::warn!(%err, "nodepool readiness pass failed; retrying next step");
            report.errors.push(StepError::Counters(err));
        }
        if let Err(err) = self.counter.count().await {
            tracing::warn!(%err, "nodepool counter pass failed; retrying next step");
            report.errors.push(StepError::Counters(err));
        }
        // Last: the caches as this step's controllers left them.
        let now = self.ctx.now();
        let status_due = self.status_metrics_ran.is_none_or(|t| {
            now.duration_since(t).unsigned_abs() >= crate::status_metrics::STATUS_METRICS_INTERVAL
        });
        if status_due {
            self.status_metrics_ran = Some(now);
            self.status_metrics.reconcile().await;
        }
        report
    }
}
