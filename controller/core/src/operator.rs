//! The one place the controllers are wired together over the seams. Production, the simulation
//! and e2e build an [`Operator`] from their own seam implementations and call [`Operator::step`]
//! in a loop; nothing else differs between the worlds.
//!
//! Every controller holds the same `Arc<Context>` (`crate::context`): the seams, the caches, the
//! metrics, the event recorder and the options exist once. The step runs them one after another,
//! in a fixed order; each could as well run as its own task over a clone of the context.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::context::Context;
use crate::interruption::{InterruptionHandler, PollReport};
use crate::metrics::Metrics;
use crate::nodeclaim::{self, GarbageCollector, Lifecycle, LifecycleError};
use crate::nodepool;
use crate::provisioning::{Outcome, ProvisionError, Provisioner};
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
        }
    }
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

    /// One pass of every controller, in a fixed order: interruption (when a queue is
    /// configured), provisioning (when its batch closes), NodeClaim lifecycle, termination,
    /// garbage collection (on its interval), NodePool counters. Interruption runs first so that
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
        match self.garbage_collector.collect_if_due().await {
            Some(Ok(counts)) => report.collected = Some(counts),
            Some(Err(err)) => {
                tracing::warn!(%err, "garbage collection failed; retrying next interval");
                report.errors.push(StepError::GarbageCollection(err));
            }
            None => {}
        }
        if let Err(err) = self.counter.count().await {
            tracing::warn!(%err, "nodepool counter pass failed; retrying next step");
            report.errors.push(StepError::Counters(err));
        }
        report
    }
}
