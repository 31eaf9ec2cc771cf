//! The one place the controllers are wired together over the seams. Production, the simulation
//! and e2e build an [`Operator`] from their own seam implementations and call [`Operator::step`]
//! in a loop; nothing else differs between the worlds.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::catalog::Catalog;
use crate::lifecycle::{self, Lifecycle, UnavailableOfferings};
use crate::provisioning::{self, Outcome, Provisioner};
use crate::seams::{Clock, Ec2, KubeApi, KubeError};
use crate::state::SharedState;

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
    pub provisioned: Option<Outcome>,
    /// (NodeClaim, what its reconcile did or why it failed).
    pub lifecycle: Vec<(String, Result<lifecycle::Step, String>)>,
    /// (instances terminated, claims deleted) when garbage collection ran.
    pub collected: Option<(usize, usize)>,
}

/// The controllers over one set of seams.
pub struct Operator {
    clock: Arc<dyn Clock>,
    provisioner: Provisioner,
    lifecycle: Lifecycle,
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
        let lifecycle = Lifecycle::new(kube, ec2, clock.clone(), catalog, ice, options.lifecycle)
            .with_state(state);
        Self {
            clock,
            provisioner,
            lifecycle,
            gc_interval: options.gc_interval.unwrap_or(Duration::from_secs(120)),
            last_gc: None,
        }
    }

    /// One pass of every controller, in a fixed order: provisioning (when its batch closes),
    /// NodeClaim lifecycle, garbage collection (on its interval), NodePool counters. An error in
    /// one controller is reported and the others still run.
    pub async fn step(&mut self) -> Result<StepReport, KubeError> {
        let mut report = StepReport::default();
        match self.provisioner.tick().await {
            Ok(outcome) => report.provisioned = outcome,
            Err(err) => tracing::warn!(%err, "provisioning pass failed; retrying next step"),
        }
        report.lifecycle = self.lifecycle.reconcile_all().await?;
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
