//! The one place the controllers are wired together over the seams. Production, the simulation
//! and e2e build an [`Operator`] from their own seam implementations and call [`Operator::step`]
//! in a loop; nothing else differs between the worlds.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::catalog::Catalog;
use crate::interruption::{InterruptionHandler, PollReport};
use crate::lifecycle::{self, Lifecycle, UnavailableOfferings};
use crate::metrics::Metrics;
use crate::provisioning::{self, Outcome, Provisioner};
use crate::seams::{Clock, Ec2, KubeApi, KubeError, Sqs};
use crate::state::SharedState;
use crate::termination::{self, Termination};

/// Knobs of the whole controller.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub provisioning: provisioning::Options,
    pub lifecycle: lifecycle::Options,
    /// How often garbage collection runs (upstream: every 2 minutes once settled).
    pub gc_interval: Option<Duration>,
}

/// What one step did, for logs and reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepReport {
    /// What the interruption queue brought, when a queue is configured (`Err`: the receive
    /// failed; retried next step).
    pub interruption: Option<Result<PollReport, String>>,
    pub provisioned: Option<Outcome>,
    /// (NodeClaim, what its reconcile did or why it failed).
    pub lifecycle: Vec<(String, Result<lifecycle::Step, String>)>,
    /// (NodeClaim, or `node/NAME` for a Node without one, and its termination stage or error).
    pub termination: Vec<(String, Result<termination::Stage, String>)>,
    /// (instances terminated, claims deleted) when garbage collection ran.
    pub collected: Option<(usize, usize)>,
}

/// The controllers over one set of seams.
pub struct Operator {
    kube: Arc<dyn KubeApi>,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    ice: Arc<UnavailableOfferings>,
    interruption: Option<InterruptionHandler>,
    provisioner: Provisioner,
    lifecycle: Lifecycle,
    termination: Termination,
    gc_interval: Duration,
    last_gc: Option<Timestamp>,
}

impl Operator {
    pub fn new(
        kube: Arc<dyn KubeApi>,
        ec2: Arc<dyn Ec2>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        options: Options,
    ) -> Self {
        let ice = Arc::new(UnavailableOfferings::new());
        let state = SharedState::default();
        let provisioner = Provisioner::new(
            kube.clone(),
            clock.clone(),
            catalog.clone(),
            options.provisioning,
        )
        .with_unavailable_offerings(ice.clone())
        .with_state(state.clone());
        let metrics = Arc::new(Metrics::new());
        let termination =
            Termination::new(kube.clone(), ec2.clone(), clock.clone(), metrics.clone())
                .with_state(state.clone());
        let lifecycle = Lifecycle::new(
            kube.clone(),
            ec2,
            clock.clone(),
            catalog,
            ice.clone(),
            options.lifecycle,
        )
        .with_state(state);
        Self {
            kube,
            clock,
            metrics,
            ice,
            interruption: None,
            provisioner,
            lifecycle,
            termination,
            gc_interval: options.gc_interval.unwrap_or(Duration::from_secs(120)),
            last_gc: None,
        }
    }

    /// Polls `queue_url` (through `sqs`) for interruption events at the start of every step.
    /// Without it the controller runs without interruption handling, as upstream does when
    /// `INTERRUPTION_QUEUE` is empty.
    pub fn with_interruption_queue(mut self, sqs: Arc<dyn Sqs>, queue_url: String) -> Self {
        self.interruption = Some(
            InterruptionHandler::new(
                self.kube.clone(),
                sqs,
                self.clock.clone(),
                self.metrics.clone(),
                queue_url,
            )
            .with_unavailable_offerings(self.ice.clone()),
        );
        self
    }

    /// The controllers' metrics (encode them with [`Metrics::encode`] for `/metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// One pass of every controller, in a fixed order: interruption (when a queue is
    /// configured), provisioning (when its batch closes), NodeClaim lifecycle, termination,
    /// garbage collection (on its interval), NodePool counters. Interruption runs first so that
    /// the claims it deletes are provisioned for (replacement first) and start terminating in the
    /// same step. An error in one controller is reported and the others still run.
    pub async fn step(&mut self) -> Result<StepReport, KubeError> {
        let mut report = StepReport::default();
        if let Some(handler) = &self.interruption {
            let polled = handler.poll().await;
            if let Err(err) = &polled {
                tracing::warn!(queue = handler.queue_url(), %err, "polling the interruption queue failed; retrying next step");
            }
            report.interruption = Some(polled.map_err(|e| e.to_string()));
        }
        match self.provisioner.tick().await {
            Ok(outcome) => report.provisioned = outcome,
            Err(err) => tracing::warn!(%err, "provisioning pass failed; retrying next step"),
        }
        report.lifecycle = self.lifecycle.reconcile_all().await?;
        match self.termination.reconcile_all().await {
            Ok(stages) => report.termination = stages,
            Err(err) => tracing::warn!(%err, "termination pass failed; retrying next step"),
        }
        let now = self.clock.now();
        let due = self
            .last_gc
            .is_none_or(|t| now.duration_since(t).unsigned_abs() >= self.gc_interval);
        if due {
            match self.lifecycle.garbage_collect().await {
                Ok(counts) => report.collected = Some(counts),
                Err(err) => {
                    tracing::warn!(%err, "garbage collection failed; retrying next interval")
                }
            }
            self.last_gc = Some(now);
        }
        self.lifecycle.count_nodepools().await?;
        Ok(report)
    }
}
