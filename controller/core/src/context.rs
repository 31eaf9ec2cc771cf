//! The one thing every controller holds: an `Arc<Context>` (kube-rs's reconciler-context habit).
//!
//! It carries the seams (Kubernetes, EC2, the optional interruption queue, the clock), the
//! instance catalog, the metrics registry, the watch-fed cluster state, the unavailable-offerings
//! cache, the event recorder and the options. Everything shared between controllers is shared
//! because it sits here, once: no controller creates a private cache of its own, and a controller
//! can later run as its own task with nothing but a clone of the `Arc`.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::catalog::live::LiveCatalog;
use crate::catalog::{Catalog, ReservationAvailability, SharedCatalog, UnavailableOfferings};
use crate::events::Recorder;
use crate::metrics::Metrics;
use crate::nodeclaim;
use crate::nodeclass::instanceprofile::ProfileCache;
use crate::provisioning;
use crate::seams::iam::InstanceProfiles;
use crate::seams::{Clock, Ec2, KubeApi, Sqs};
use crate::state::SharedState;

/// Knobs of the whole controller.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub provisioning: provisioning::Options,
    /// The NodeClaim lifecycle (and the cluster name and Kubernetes version launches use).
    pub lifecycle: nodeclaim::Options,
    /// How often garbage collection runs (upstream: every 2 minutes once settled).
    pub gc_interval: Option<Duration>,
    /// Bounds on the loops' parallel work ([`crate::operator::Operator::spawn`]).
    pub limits: crate::runtime::Limits,
    /// The disruption decision engine (feature gates, drift).
    pub disruption: crate::disruption::Options,
    /// Upstream's `--scheduler-config`: the cluster's default topology spread constraints, which
    /// the provisioner's and disruption's scheduling simulations apply to pods that declare none
    /// (`None`, the default: no defaults, and Services and workload controllers are not read).
    pub scheduler_config: Option<Arc<crate::scheduling::SchedulerConfiguration>>,
}

impl Options {
    /// The scheduler configuration, if any.
    pub fn scheduler_config(&self) -> Option<&crate::scheduling::SchedulerConfiguration> {
        self.scheduler_config.as_deref()
    }
}

/// The SQS queue EventBridge delivers interruption events to.
#[derive(Clone)]
pub struct InterruptionQueue {
    pub sqs: Arc<dyn Sqs>,
    pub url: String,
}

impl std::fmt::Debug for InterruptionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptionQueue")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What every controller reads and writes through.
#[derive(Clone)]
pub struct Context {
    pub kube: Arc<dyn KubeApi>,
    pub ec2: Arc<dyn Ec2>,
    /// `None`: no interruption handling (upstream, with `INTERRUPTION_QUEUE` empty).
    pub queue: Option<InterruptionQueue>,
    pub clock: Arc<dyn Clock>,
    /// The instance catalog; a pass reads [`SharedCatalog::current`] once.
    pub catalog: SharedCatalog,
    /// Where the catalog is refreshed from while the loops run (`None`: a fixed catalog, as in
    /// the simulation and unit tests).
    pub live_catalog: Option<Arc<tokio::sync::Mutex<LiveCatalog>>>,
    pub metrics: Arc<Metrics>,
    /// Watch-fed caches the controllers read.
    pub state: SharedState,
    /// Offerings that recently failed with insufficient capacity: launch and interruption fill
    /// it, provisioning and launch plan around it.
    pub unavailable: Arc<UnavailableOfferings>,
    /// Instances each capacity reservation can still launch: the EC2NodeClass status controller
    /// syncs it, launches and interruptions adjust it, provisioning and launch read it.
    pub reservations: Arc<ReservationAvailability>,
    pub recorder: Recorder,
    pub options: Options,
    /// IAM, for the instance profiles of EC2NodeClasses (a `role:` class gets a profile the
    /// EC2NodeClass status controller creates; an `instanceProfile:` class's is checked). `None`
    /// (unit tests over a bare EC2): profiles are not managed and launches name the computed
    /// profile unchecked.
    pub iam: Option<Arc<dyn InstanceProfiles>>,
    /// Profiles known to be in place, so a pass over many classes costs one IAM read each.
    pub profiles: Arc<ProfileCache>,
    /// When the provisioner first saw, decided on and placed each pending pod (the alpha
    /// `pods_provisioning_*` series read them).
    pub pod_times: Arc<crate::pod_metrics::PodSchedulingTimes>,
    /// When each launch template was last used, for deleting the unused ones
    /// ([`crate::nodeclass::garbagecollection`]).
    pub templates: Arc<crate::nodeclass::garbagecollection::TemplateUsage>,
    /// Nodes the provisioner just planned pending pods onto: disruption leaves them alone for
    /// the nomination window.
    pub nominations: Arc<crate::provisioning::Nominations>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("queue", &self.queue)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context over these seams, with a fresh metrics registry, cluster state and
    /// unavailable-offerings cache, and no interruption queue.
    pub fn new(
        kube: Arc<dyn KubeApi>,
        ec2: Arc<dyn Ec2>,
        clock: Arc<dyn Clock>,
        catalog: Arc<Catalog>,
        options: Options,
    ) -> Self {
        Self {
            recorder: Recorder::new(kube.clone(), clock.clone()),
            kube,
            ec2,
            queue: None,
            clock,
            catalog: SharedCatalog::new(catalog),
            live_catalog: None,
            metrics: Arc::new(Metrics::new()),
            state: SharedState::default(),
            unavailable: Arc::new(UnavailableOfferings::new()),
            reservations: Arc::new(ReservationAvailability::new()),
            options,
            iam: None,
            profiles: Arc::new(ProfileCache::default()),
            templates: Arc::default(),
            pod_times: Arc::default(),
            nominations: Arc::default(),
        }
    }

    /// Refreshes the catalog from `live` while the loops run (each part on its interval: see
    /// [`LiveCatalog::refresh`]); `live` should hold the catalog this context started with.
    pub fn with_live_catalog(mut self, live: LiveCatalog) -> Self {
        self.live_catalog = Some(Arc::new(tokio::sync::Mutex::new(live)));
        self
    }

    /// Manages and checks instance profiles through `iam` (see [`Context::iam`]).
    pub fn with_iam(mut self, iam: Arc<dyn InstanceProfiles>) -> Self {
        self.iam = Some(iam);
        self
    }

    /// Polls `url` (through `sqs`) for interruption events.
    pub fn with_interruption_queue(mut self, sqs: Arc<dyn Sqs>, url: String) -> Self {
        self.queue = Some(InterruptionQueue { sqs, url });
        self
    }

    /// Spends EC2 calls as upstream does: the slowly-changing answers a launch needs (subnets,
    /// security groups, images, SSM parameters, launch templates) through a cache with upstream's
    /// TTLs ([`crate::nodeclass::CachedEc2`]), and concurrent TerminateInstances batched
    /// ([`crate::seams::batch::BatchedEc2`]). Worlds with EC2 latency want it; unit tests that
    /// change subnets between two launches do not.
    pub fn with_ec2_economy(mut self) -> Self {
        self.ec2 = Arc::new(
            crate::seams::batch::BatchedEc2::new(self.ec2.clone())
                .with_metrics(self.metrics.clone()),
        );
        self.with_ec2_cache()
    }

    /// The cache half of [`Context::with_ec2_economy`] alone: what needs no runtime timer (the
    /// terminate batcher's window does), so a world stepped without a reactor can have it.
    pub fn with_ec2_cache(mut self) -> Self {
        self.ec2 = Arc::new(crate::nodeclass::CachedEc2::new(
            self.ec2.clone(),
            self.clock.clone(),
        ));
        self
    }

    /// Now, from the Clock seam.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }
}
