//! The world: the controller ([`Operator`]), the in-memory API server, the kube-scheduler and
//! kubelet stand-ins and fakecloud, all on one clock and one seed, stepped in a fixed order.
//!
//! Every step: faults turned on or off since the last step take effect → due workload events and
//! the ReplicaSet stand-in → fakecloud catches up → due faults fire → kubelet → kube-scheduler →
//! controller processes → invariants → one event-log line, plus one line per fault that fired.
//! Time only moves between steps, so a run is a pure function of (seed, scenario, faults, code):
//! the event log's SHA-256 proves it.
//!
//! Faults ([`FaultMix`]) come from the scenario's `faults:` section and can be turned on and off
//! during a run ([`World::set_faults`], [`World::clear_faults`]); with none on, the world is
//! exactly the one without the fault machinery (same event log).

mod event_log;
mod inject;
mod knobs;
mod nodegroup;
pub use nodegroup::SYSTEM_PODS;
mod workloads;

pub use nodegroup::{
    NEIGHBOUR_CLUSTER, NODE_GROUP, neighbour_launch_template, node_group_instance,
};

pub use event_log::{EventLog, RECENT_LINES_MAX};
pub use inject::{CRASH_CALLS_MAX, NEVER_ALLOWS_PDB_PREFIX, Storm};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{BootModel, FakeCloud};
use jiff::Timestamp;
use karpenter_core::api::labels::NODEPOOL_LABEL;
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::manifest::{KarpenterObject, Outcome, check_document, parse_documents};
use karpenter_core::operator::{self, StepReport};
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{Clock, KubeApi, ManualClock};

use fakekit::Fake;
use fakekube::{ApiServer, ApiServerConfig};

use crate::bugs::Bug;
use crate::faults::{self, CrashPoint, FaultMix};
use crate::invariants::{Invariant, Invariants, Observation, ObserverCache, StepFacts};
use crate::kubelet::{Kubelet, KubeletConfig};
use crate::process::{Controllers, ControllersStep, LOST_LEASE, ProcessSeams};
use crate::report::{NodesReport, PodsReport, Report};
use crate::scenario::Scenario;
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::seams::Seams;
use inject::{Fired, Injector, count};
use workloads::Workloads;

/// The simulated epoch every run starts at.
pub const EPOCH: &str = "2026-01-01T00:00:00Z";
/// The cluster name the world's cloud and controller share.
pub const CLUSTER: &str = "sim";

/// Why a world could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error("scenario manifests: {0}")]
    Manifests(String),
    #[error("api: {0}")]
    Api(#[from] karpenter_core::seams::KubeError),
    #[error("faults: {0}")]
    Faults(String),
}

/// One simulated cluster: the controller processes, the stand-ins, the API server and fakecloud,
/// with the invariants that watch them and the event log that fingerprints the run.
pub struct World {
    seed: u64,
    scenario: Scenario,
    clock: Arc<ManualClock>,
    api: Arc<ApiServer>,
    cloud: Arc<FakeCloud>,
    scheduler: Scheduler,
    kubelet: Kubelet,
    controllers: Controllers,
    start: Timestamp,
    workloads: Workloads,
    /// Pod name → first time it was seen pending, and when it started running.
    pending_since: BTreeMap<String, Timestamp>,
    pending_seconds: Vec<f64>,
    /// When every pod first ran (none pending): what follows is rescheduling (drains, rolls,
    /// interruptions) or new demand, measured apart from the first burst.
    settled_at: Option<Timestamp>,
    /// Most pods pending at once since `settled_at`.
    pending_max_settled: usize,
    /// Longest wait of a pod that went pending after `settled_at`, in seconds.
    pending_seconds_max_settled: f64,
    log: EventLog,
    invariants: Invariants,
    observer: ObserverCache,
    instances_seen: BTreeMap<String, (String, CapacityType)>,
    terminated_seen: usize,
    /// The API server's resourceVersion and the cloud's (live, ready) counts after the last step.
    last_version: Option<String>,
    last_cloud: (usize, usize),
    faults: BTreeMap<String, u64>,
    /// EC2 calls the controller made so far, by action (the report's `ec2Calls`).
    ec2_calls: BTreeMap<String, u64>,
    injector: Injector,
    /// A fault mix to turn on at the start of the next step.
    pending_faults: Option<FaultMix>,
    /// Instances the world started for other owners (the managed node group), sorted.
    foreign_instances: Vec<String>,
}

/// Simulated time after a step in which nothing changed.
pub const IDLE_STEP: Duration = Duration::from_secs(10);

impl World {
    pub async fn new(seed: u64, scenario: Scenario) -> Result<Self, WorldError> {
        Self::with_bug(seed, scenario, Bug::None).await
    }

    /// A world whose controller (or scheduler stand-in) sees the seams `bug` breaks: test-only,
    /// to show an invariant catches the behaviour (see [`crate::bugs`]).
    pub async fn with_bug(seed: u64, scenario: Scenario, bug: Bug) -> Result<Self, WorldError> {
        let start: Timestamp = EPOCH.parse().expect("EPOCH is a valid timestamp");
        let clock = Arc::new(ManualClock::new(start));
        let catalog = Catalog::builtin();
        let cloud_config = scenario.cloud.cloud_config(seed);
        let options = operator_options(&cloud_config, &scenario.cloud, &scenario.settings)?;
        let iam = Arc::new(fakecloud::FakeIam::new(
            clock.clone(),
            &cloud_config.account_id,
            seed,
        ));
        iam.add_role(&fakecloud::node_role_name(&cloud_config.cluster_name), "/");
        let cloud = Arc::new(FakeCloud::new(clock.clone(), catalog.clone(), cloud_config));
        cloud.attach_iam(iam.clone());
        let api_config = ApiServerConfig {
            seed,
            // The simulated cluster is EKS: Windows pods get their address from its webhook.
            vpc_admission_webhook: true,
            ..ApiServerConfig::default()
        };
        let api = Arc::new(ApiServer::new(clock.clone(), api_config));
        scenario.cloud.apply(seed, &cloud, &api);
        scenario.faults.validate().map_err(WorldError::Faults)?;
        let kube: Arc<dyn KubeApi> = api.clone();
        let seams = Seams::new(bug, api.clone(), cloud.clone(), clock.clone());
        let scheduler = Scheduler::new(
            seams.scheduler_kube.clone(),
            clock.clone(),
            SchedulerConfig::default(),
        );
        let kubelet = Kubelet::new(
            kube.clone(),
            clock.clone(),
            cloud.clone(),
            KubeletConfig {
                ready_delay_ms: scenario
                    .cloud
                    .kubelet_ready_delay_ms
                    .unwrap_or_else(|| ready_delay_ms(seed)),
                ..KubeletConfig::default()
            },
        );
        let controllers = Controllers::new(ProcessSeams {
            api: seams.controller_kube.clone(),
            ec2: seams.controller_ec2.clone(),
            sqs: seams.controller_sqs.clone(),
            clock: clock.clone(),
            catalog: Arc::new(catalog),
            options,
            queue_url: format!("fakecloud://sqs/{CLUSTER}"),
            iam: Some(iam),
        });
        let invariants = Invariants::new(seams.audit.clone(), &cloud);
        let workloads = Workloads::new(scenario.workloads.clone());
        let pending_faults = (!scenario.faults.is_empty()).then(|| scenario.faults.clone());
        let mut world = World {
            seed,
            scenario,
            clock,
            api,
            cloud,
            scheduler,
            kubelet,
            controllers,
            start,
            workloads,
            pending_since: BTreeMap::new(),
            pending_seconds: Vec::new(),
            settled_at: None,
            pending_max_settled: 0,
            pending_seconds_max_settled: 0.0,
            log: EventLog::default(),
            invariants,
            observer: ObserverCache::default(),
            instances_seen: BTreeMap::new(),
            terminated_seen: 0,
            last_version: None,
            last_cloud: (0, 0),
            faults: BTreeMap::new(),
            ec2_calls: BTreeMap::new(),
            injector: Injector::new(seed),
            pending_faults,
            foreign_instances: Vec::new(),
        };
        world.apply_manifests().await?;
        world.start_node_group().await?;
        Ok(world)
    }

    async fn apply_manifests(&mut self) -> Result<(), WorldError> {
        let documents = parse_documents(&self.scenario.manifests)
            .map_err(|e| WorldError::Manifests(e.to_string()))?;
        for (index, document) in documents {
            let checked = check_document(&document);
            let kind = match checked.outcome {
                Outcome::Valid(KarpenterObject::NodePool(_)) => ResourceKind::NODE_POOL,
                Outcome::Valid(KarpenterObject::EC2NodeClass(_)) => ResourceKind::EC2_NODE_CLASS,
                Outcome::Valid(KarpenterObject::NodeClaim(_)) => ResourceKind::NODE_CLAIM,
                Outcome::Invalid(v) => {
                    return Err(WorldError::Manifests(format!("document {index}: {v}")));
                }
                Outcome::Other if checked.kind == "Namespace" => ResourceKind::NAMESPACE,
                Outcome::Other if checked.kind == "PodDisruptionBudget" => {
                    ResourceKind::POD_DISRUPTION_BUDGET
                }
                Outcome::Other if checked.kind == "StorageClass" => ResourceKind::STORAGE_CLASS,
                // Stored (the provisioner leaves room for its pods) and run by the world's
                // DaemonSet stand-in.
                Outcome::Other if checked.kind == "DaemonSet" => {
                    let daemonset = crate::workloads::DaemonSet::from_manifest(&document)
                        .map_err(|e| WorldError::Manifests(format!("document {index}: {e}")))?;
                    self.workloads.add_daemonset(daemonset);
                    ResourceKind::DAEMON_SET
                }
                Outcome::Other => {
                    return Err(WorldError::Manifests(format!(
                        "document {index}: unsupported kind {}",
                        checked.kind
                    )));
                }
            };
            self.api.create(&kind, document).await?;
        }
        Ok(())
    }

    /// The seed everything in the world draws from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The scenario the world was built from.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The world's clock: simulated time, moved only between steps.
    pub fn clock(&self) -> &Arc<ManualClock> {
        &self.clock
    }

    /// The in-memory API server (without the controller's view of it: no bug distorts it).
    pub fn api(&self) -> &Arc<ApiServer> {
        &self.api
    }

    /// Fakecloud (EC2 and SQS).
    pub fn cloud(&self) -> &Arc<FakeCloud> {
        &self.cloud
    }

    /// The invariants' tallies and what their checkers counted.
    pub fn invariants(&self) -> &Invariants {
        &self.invariants
    }

    /// Counts a violation of `invariant` found now by the caller (the swarm's liveness phase).
    pub fn record_violation(&mut self, invariant: Invariant, message: String) {
        let now = self.now();
        self.invariants.record(invariant, message, now);
    }

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Simulated time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.now().duration_since(self.start).unsigned_abs()
    }

    /// Turns `mix` on from the next step (replacing the faults on now). Rate-like faults take
    /// effect at once then; discrete ones fire at their times from then on (times already past
    /// are skipped). Knobs the mix leaves unset keep the scenario's values.
    pub fn set_faults(&mut self, mix: FaultMix) {
        self.pending_faults = Some(mix);
    }

    /// Turns every fault off from the next step: knobs back to the scenario's, capacity waves
    /// ended (pools refilled), budgets removed, no more storms, crashes or failovers. Controller
    /// processes that are down still restart after their downtime, and replicas elected with
    /// leader failover keep electing (removing the election would be a fault of its own).
    pub fn clear_faults(&mut self) {
        self.pending_faults = Some(FaultMix::default());
    }

    /// The faults on now (as of the last step).
    pub fn faults(&self) -> &FaultMix {
        &self.injector.mix
    }

    /// Spot storms that hit, in order.
    pub fn storms(&self) -> &[Storm] {
        &self.injector.storms
    }

    /// Kills the controller process now (the leader, or the only one), as `kubectl delete pod`
    /// would; it restarts after `downtime` with empty memory and finds its work in the API
    /// server. Returns the killed process's identity.
    pub fn crash_controller(&mut self, downtime: Duration) -> Option<String> {
        let now = self.clock.now();
        let index = self
            .controllers
            .leader_index()
            .or_else(|| self.controllers.running_indices().first().copied())?;
        self.controllers
            .kill(index, "killed by the scenario", now, downtime)
    }

    /// The controller processes (for tests: who leads, how often leadership changed).
    pub fn controllers(&self) -> &Controllers {
        &self.controllers
    }

    /// Replica counts of the Deployments as last set by the workload.
    pub fn deployments(&self) -> BTreeMap<String, u32> {
        self.workloads.replicas()
    }

    /// Turns on the mix set since the last step, if any; true if it did.
    async fn apply_pending_faults(&mut self) -> Result<bool, WorldError> {
        let Some(mix) = self.pending_faults.take() else {
            return Ok(false);
        };
        mix.validate().map_err(WorldError::Faults)?;
        let cleared = mix.is_empty();
        let deployments = Workloads::deployment_names(&self.scenario.workloads);
        self.injector
            .set(
                mix,
                self.elapsed(),
                &self.scenario.cloud,
                &deployments,
                &self.cloud,
                &self.api,
            )
            .await?;
        if self.injector.mix.leader_failover.is_some() {
            self.controllers.enable_election();
        }
        if cleared {
            self.injector.restore_all(&self.cloud);
        }
        Ok(true)
    }

    /// One step of the world; returns the step's event-log line (fault lines follow it in the
    /// log).
    pub async fn step(&mut self) -> Result<String, WorldError> {
        self.log.start_step();
        let before = self.faults.clone();
        let elapsed = self.elapsed();
        self.run_harness(elapsed).await?;
        self.cloud.advance_to_now();
        let mut fault_lines = Vec::new();
        let fired = self
            .injector
            .fire(elapsed, &self.cloud, &mut self.faults, &mut fault_lines);
        let force_deletes = self.carry_out(fired, &mut fault_lines);
        self.force_delete_claims(force_deletes, &mut fault_lines)
            .await?;
        let kubelet = self.kubelet.tick().await;
        self.run_daemonsets().await?;
        let scheduler = self.scheduler.step().await;
        let slept = |world: &Self| world.cloud.slept_total() + world.api.slept_total();
        let latency_before = slept(self);
        let started = tokio::time::Instant::now();
        let controllers = self.controllers.step().await;
        let waited = step_wait(
            slept(self).saturating_sub(latency_before),
            started.elapsed(),
        );
        self.note_processes(&controllers, elapsed, &mut fault_lines);
        let observation = self.observe().await?;
        self.track(&observation);
        self.invariants.check(&StepFacts {
            api: &self.api,
            cloud: &self.cloud,
            observed: &self.observer,
            observation: &observation,
            leaders: controllers.leaders,
            fresh_leader: controllers.fresh_leader,
            now: self.now(),
        });
        let errors = u8::from(kubelet.is_err())
            + u8::from(scheduler.is_err())
            + u8::from(controllers.report.as_ref().is_some_and(|r| !r.is_ok()));
        let line = step_line(
            self.elapsed(),
            &observation,
            controllers.report.as_ref(),
            errors,
        );
        self.log.append(&line);
        self.count_faults();
        self.injector.tally_cloud(&self.cloud, &mut self.faults);
        self.log_faults(&before, fault_lines);
        let advance = self.next_advance(&observation);
        // A controller step that waited on EC2/SQS/API-server latency took that long on the world's clock
        // (which the calls themselves do not move): its next look at the world comes no sooner,
        // so latency delays reactions, as a slow EC2 API does. (A fault falling due within that
        // wait fires at the next step.)
        self.clock.advance(advance.max(waited));
        Ok(line)
    }

    /// The harness's part of a step, with the API server's injected faults off: turning on the
    /// faults set since the last step (a new mix's rates are what is resumed afterwards), then
    /// the workload.
    async fn run_harness(&mut self, elapsed: Duration) -> Result<(), WorldError> {
        let mut saved = self.api.suspend_faults();
        let setup = self.apply_pending_faults().await;
        if matches!(setup, Ok(true)) {
            saved = self.api.suspend_faults();
        }
        let now = self.now();
        let workloads = self.workloads.step(self.api.as_ref(), elapsed, now).await;
        self.api.resume_faults(saved);
        setup?;
        workloads?;
        Ok(())
    }

    /// The DaemonSet stand-ins' pass, with the API server's injected faults off, between the
    /// kubelet (which makes nodes Ready) and the scheduler: the DaemonSet controller reacts to a
    /// node's Ready within milliseconds, so a node's daemons are on it before the scheduler fills
    /// it with pods that were waiting (the room the provisioner left for them stays theirs).
    async fn run_daemonsets(&mut self) -> Result<(), WorldError> {
        let saved = self.api.suspend_faults();
        let result = self.workloads.run_daemonsets(self.api.as_ref()).await;
        self.api.resume_faults(saved);
        Ok(result?)
    }

    /// Logs the controller processes that started or died in the step; a death that was not a
    /// lost lease is a crash, and counted as one.
    fn note_processes(
        &mut self,
        controllers: &ControllersStep,
        elapsed: Duration,
        lines: &mut Vec<String>,
    ) {
        let t = elapsed.as_secs();
        for identity in &controllers.starts {
            lines.push(format!("t={t} controller {identity} started"));
        }
        for (identity, cause) in &controllers.deaths {
            if cause.contains(LOST_LEASE) {
                // Not a fault: what a process does when its lease runs out.
                lines.push(format!("t={t} controller {identity} exited: {cause}"));
            } else {
                lines.push(format!(
                    "t={t} fault={} {identity} died {cause}",
                    faults::CONTROLLER_CRASH
                ));
                count(&mut self.faults, faults::CONTROLLER_CRASH, 1);
            }
        }
    }

    /// Reads the step's observation, with the API server's injected faults off (they are for
    /// the controller, not for the world watching it).
    async fn observe(&mut self) -> Result<Observation, WorldError> {
        let saved = self.api.suspend_faults();
        let observation =
            Observation::read(&mut self.observer, self.api.as_ref(), &self.cloud).await;
        self.api.resume_faults(saved);
        Ok(observation?)
    }

    /// Appends the step's fault lines, then one line with what each fault's tally grew by
    /// since `before` (if any grew).
    fn log_faults(&mut self, before: &BTreeMap<String, u64>, fault_lines: Vec<String>) {
        let counted: Vec<String> = self
            .faults
            .iter()
            .filter_map(|(name, n)| {
                let was = before.get(name).copied().unwrap_or(0);
                (*n > was).then(|| format!("{name}+{}", n - was))
            })
            .collect();
        for fault_line in fault_lines {
            self.log.append(&fault_line);
        }
        if !counted.is_empty() {
            self.log.append(&format!(
                "t={} faults {}",
                self.elapsed().as_secs(),
                counted.join(" ")
            ));
        }
    }

    /// How far the clock moves after this step: the scenario's step, or, after a step that
    /// changed nothing (no API write, the same live and ready-to-join instances), a longer one
    /// (nothing can happen sooner than a timer, and the controllers' own loops poll at
    /// [`IDLE_STEP`]). An idle step never skips a lease renewal (with leader election on, a
    /// leader renews every retry period), a fault that falls due or a process that restarts:
    /// they happen on time.
    fn next_advance(&mut self, observation: &Observation) -> Duration {
        let version = self.api.resource_version().to_string();
        let cloud = (
            observation.instances_alive,
            self.cloud.ready_to_join_count(),
        );
        let idle = self.last_version.as_ref() == Some(&version) && self.last_cloud == cloud;
        self.last_version = Some(version);
        self.last_cloud = cloud;
        if !idle {
            return self.scenario.step;
        }
        let idle_step = if self.controllers.election() {
            IDLE_STEP.min(karpenter_core::leader::RETRY_PERIOD)
        } else {
            IDLE_STEP
        };
        let elapsed = self.elapsed();
        let restart = self
            .controllers
            .next_restart()
            .map(|t| t.duration_since(self.start).unsigned_abs());
        let idle_step = [self.injector.next_due(), restart]
            .into_iter()
            .flatten()
            .filter(|due| *due > elapsed)
            .map(|due| due - elapsed)
            .fold(idle_step, Duration::min);
        self.scenario.step.max(idle_step)
    }

    /// Every event-log line the last step appended: its step line, then what faults did.
    pub fn last_step_log(&self) -> &[String] {
        self.log.step_lines()
    }

    /// The last event-log lines (at most [`RECENT_LINES_MAX`]), oldest first: what happened just
    /// before a failure.
    pub fn recent_log(&self) -> Vec<String> {
        self.log.recent()
    }

    /// `claim-force-deleted` firings of this step (their draws), carried out as a user would:
    /// with the API server's injected faults off (they are for the controller).
    async fn force_delete_claims(
        &mut self,
        picks: Vec<u64>,
        lines: &mut Vec<String>,
    ) -> Result<(), WorldError> {
        let t = self.elapsed().as_secs();
        for pick in picks {
            let saved = self.api.suspend_faults();
            let deleted = inject::force_delete_claim(&self.api, pick).await;
            self.api.resume_faults(saved);
            if let Some((claim, instance)) = deleted? {
                // Nothing drains the node of a claim deleted behind the controller's back:
                // garbage collection terminates the instance as it finds it (as upstream's), and
                // `drained-before-terminate` does not hold the controller to a drain.
                self.note_external_termination(&instance);
                let now = self.now();
                self.invariants.note_claim_lost(&instance, now);
                lines.push(format!(
                    "t={t} fault={} claim={claim} instance={instance}",
                    faults::CLAIM_FORCE_DELETED
                ));
                count(&mut self.faults, faults::CLAIM_FORCE_DELETED, 1);
            }
        }
        Ok(())
    }

    /// Crashes and failovers the injector fired this step; returns the `claim-force-deleted`
    /// firings (their draws) for [`World::force_delete_claims`].
    fn carry_out(&mut self, fired: Vec<Fired>, lines: &mut Vec<String>) -> Vec<u64> {
        let t = self.elapsed().as_secs();
        let now = self.now();
        let mut force_deletes = Vec::new();
        for fault in fired {
            match fault {
                Fired::Crash {
                    point,
                    calls,
                    downtime,
                    pick,
                } => {
                    // A crash at a launch or an eviction strikes the process doing that work
                    // (the leader); one anywhere strikes any running process.
                    let running = self.controllers.running_indices();
                    let leader = self.controllers.leader_index();
                    let index = match (point, leader) {
                        (CrashPoint::AfterLaunch | CrashPoint::AfterEviction, Some(leader)) => {
                            leader
                        }
                        _ if running.is_empty() => continue,
                        _ => running[(pick % running.len() as u64) as usize],
                    };
                    if let Some(identity) =
                        self.controllers.arm_crash(index, point, calls, downtime)
                    {
                        lines.push(format!(
                            "t={t} fault={} armed {identity} point={point:?} calls={calls}",
                            faults::CONTROLLER_CRASH
                        ));
                    }
                }
                Fired::Failover { downtime } => {
                    let Some(index) = self.controllers.leader_index() else {
                        continue;
                    };
                    if let Some(identity) =
                        self.controllers
                            .kill(index, "killed as the leader", now, downtime)
                    {
                        lines.push(format!(
                            "t={t} fault={} killed leader {identity}",
                            faults::LEADER_FAILOVER
                        ));
                        count(&mut self.faults, faults::LEADER_FAILOVER, 1);
                    }
                }
                Fired::ForceDeleteClaim { pick } => force_deletes.push(pick),
                Fired::TagsLost { instance } => self.invariants.note_tags_lost(&instance),
                Fired::ScheduledMaintenance { instance, start } => {
                    let claims = self.api.objects(&ResourceKind::NODE_CLAIM);
                    let claim = crate::invariants::maintenance::claim_naming(
                        claims.iter().map(|c| &**c),
                        &instance,
                    );
                    self.invariants
                        .note_scheduled_change(&instance, claim, now, start);
                }
            }
        }
        force_deletes
    }

    /// Injected faults seen so far, by name (the names of [`faults::FAULT_NAMES`], plus
    /// `api-other` for API faults of no listed kind): lets a scenario check its faults really
    /// happened.
    pub fn faults_injected(&self) -> &BTreeMap<String, u64> {
        &self.faults
    }

    /// Tallies the injected faults (and the EC2 calls by action) in this step's call logs, then
    /// clears them (the logs are
    /// bounded; clearing every step keeps the tally exact).
    fn count_faults(&mut self) {
        for call in self.cloud.calls() {
            if !matches!(
                call.operation,
                fakecloud::Operation::ReceiveMessage | fakecloud::Operation::DeleteMessage
            ) {
                count(&mut self.ec2_calls, &call.operation.to_string(), 1);
            }
            // `ec2-lost-response` answers `InternalError` (which no other fault of the mix
            // does: `ec2-5xx` is `Unavailable`).
            let lost = call.operation == fakecloud::Operation::CreateFleet
                && call.outcome.contains("InternalError:")
                && self.injector.mix.ec2_lost_response.is_some();
            let kind = if lost {
                Some(faults::EC2_LOST_RESPONSE)
            } else if call.outcome.contains("RequestLimitExceeded") {
                Some("ec2-throttle")
            } else if call.outcome.contains("InternalError:")
                || call.outcome.contains("Unavailable: The server")
            {
                Some("ec2-5xx")
            } else {
                None
            };
            if let Some(kind) = kind {
                *self.faults.entry(kind.to_string()).or_insert(0) += 1;
            }
        }
        for call in self.api.calls() {
            let outcome = format!("{call:?}");
            let refused_by_sim_budget = call.operation == fakekube::ApiOperation::Evict
                && outcome.contains(NEVER_ALLOWS_PDB_PREFIX);
            let kind = if refused_by_sim_budget {
                Some(faults::PDB_NEVER_ALLOWS)
            } else if !outcome.contains("injected fault") {
                None
            } else if outcome.contains("drops after") {
                Some(faults::API_WATCH_DROP)
            } else if outcome.contains("503") {
                Some("api-5xx")
            } else if outcome.contains("modified") {
                Some("api-conflict")
            } else {
                Some("api-other")
            };
            if let Some(kind) = kind {
                *self.faults.entry(kind.to_string()).or_insert(0) += 1;
            }
        }
        self.cloud.clear_calls();
        self.api.clear_calls();
    }

    fn track(&mut self, observation: &Observation) {
        let now = self.now();
        for name in observation.pending_names.iter() {
            self.pending_since.entry(name.clone()).or_insert(now);
        }
        for name in observation.running_names.iter() {
            if let Some(since) = self.pending_since.remove(name) {
                let waited = now.duration_since(since).as_secs_f64();
                self.pending_seconds.push(waited);
                if self.settled_at.is_some_and(|at| since >= at) {
                    self.pending_seconds_max_settled = self.pending_seconds_max_settled.max(waited);
                }
            }
        }
        let pending = observation.pending_names.len();
        if self.settled_at.is_none() && pending == 0 && !observation.running_names.is_empty() {
            self.settled_at = Some(now);
        }
        if self.settled_at.is_some() {
            self.pending_max_settled = self.pending_max_settled.max(pending);
        }
        let lagging = self.injector.mix.ec2_consistency_lag.is_some();
        let boot_ms_max = BootModel::default().boot_duration_ms_max;
        for (id, info) in &observation.instances {
            if self.instances_seen.contains_key(id) {
                continue;
            }
            self.instances_seen.insert(id.clone(), info.clone());
            // What the boot model drew for it: never, or slower than a normal boot can be.
            if let Some(boot) = self.cloud.boot(id) {
                match boot.ready_at {
                    None => count(&mut self.faults, faults::NEVER_BOOT, 1),
                    Some(ready) => {
                        let ms = ready.duration_since(boot.launch_time).as_millis();
                        if ms > i128::from(boot_ms_max) {
                            count(&mut self.faults, faults::SLOW_BOOT, 1);
                        }
                    }
                }
            }
            // Launched while describes lag: invisible to DescribeInstances for that long.
            if lagging {
                count(&mut self.faults, faults::EC2_CONSISTENCY_LAG, 1);
            }
        }
        self.terminated_seen = self
            .instances_seen
            .len()
            .saturating_sub(observation.instances_alive);
    }

    /// Runs the scenario (or `duration`) to the end, calling `progress(done, total)` each step.
    pub async fn run(
        &mut self,
        duration: Option<Duration>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Report, WorldError> {
        let duration = duration.unwrap_or(self.scenario.duration);
        let total = duration.as_secs();
        while self.elapsed() < duration {
            self.step().await?;
            progress(self.elapsed().as_secs().min(total), total);
        }
        self.finish(duration).await
    }

    /// Tells the invariants that the harness is about to terminate `instance_id` itself (an
    /// instance terminated outside Karpenter), so it is not counted against the controller.
    pub fn note_external_termination(&mut self, instance_id: &str) {
        self.invariants.note_external_termination(instance_id);
    }

    /// Ends a run driven step by step: the end-of-run checks (liveness) and the report of
    /// `simulated` seconds.
    pub async fn finish(&mut self, simulated: Duration) -> Result<Report, WorldError> {
        let observation = self.observe().await?;
        self.invariants.finish(&observation);
        Ok(self.report(&observation, simulated))
    }

    fn report(&self, observation: &Observation, duration: Duration) -> Report {
        let mut waits = self.pending_seconds.clone();
        waits.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if waits.is_empty() {
                0.0
            } else {
                waits[((waits.len() - 1) as f64 * p).round() as usize]
            }
        };
        let mut launched_by: BTreeMap<String, usize> = BTreeMap::new();
        let mut terminated_by: BTreeMap<String, usize> = BTreeMap::new();
        for (id, (instance_type, ct)) in &self.instances_seen {
            let kind = format!("{instance_type}/{}", ct.label());
            if !observation.instances.contains_key(id) {
                *terminated_by.entry(kind.clone()).or_insert(0) += 1;
            }
            *launched_by.entry(kind).or_insert(0) += 1;
        }
        Report {
            seed: self.seed,
            scenario: self.scenario.name.clone(),
            commit: option_env!("KARPENTER_SIM_COMMIT")
                .unwrap_or("unknown")
                .to_string(),
            converged: observation.pods_pending == 0,
            invariants: self.invariants.results(),
            pods: PodsReport {
                total: observation.pods_total,
                running: observation.pods_running,
                pending_seconds_p50: pct(0.5),
                pending_seconds_p99: pct(0.99),
                settled_seconds: self
                    .settled_at
                    .map(|at| at.duration_since(self.start).as_secs_f64()),
                pending_max_after_settled: self.pending_max_settled,
                pending_seconds_max_after_settled: self.pending_seconds_max_settled,
            },
            nodes: NodesReport {
                launched: self.instances_seen.len(),
                terminated: self.terminated_seen,
                launched_by_type: launched_by,
                terminated_by_type: terminated_by,
                live_by_pool_and_image: live_by_pool_and_image(&self.cloud),
            },
            faults_injected: self.faults.clone(),
            ec2_calls: self.ec2_calls.clone(),
            ec2_calls_per_launch: crate::report::calls_per_launch(
                &self.ec2_calls,
                self.instances_seen.len(),
            ),
            interruption_response: crate::report::InterruptionResponse::of(
                self.invariants.interruption_responses(),
            ),
            cost_dollars: self.cloud.cost_report().total_dollars,
            cost_per_hour_end: dollars(observation.hourly_cost(Catalog::builtin_ref())),
            fresh_cost_per_hour_end: dollars(crate::report::fresh_cost_per_hour(&self.api)),
            simulated_seconds: duration.as_secs_f64(),
            wall_seconds: 0.0,
            event_log_sha256: self.log.sha256_hex(),
            event_log_lines: self.log.lines(),
        }
    }
}

/// This cluster's Karpenter's live instances (pending or running) by `nodepool/image`: where a
/// roll stands.
fn live_by_pool_and_image(cloud: &FakeCloud) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for instance in cloud.instances() {
        let live = matches!(
            instance.state,
            InstanceState::Pending | InstanceState::Running
        );
        if let Some(pool) = instance.tags.get(NODEPOOL_LABEL)
            && live
            && !crate::invariants::is_foreign(&instance)
        {
            *out.entry(format!("{pool}/{}", instance.image_id))
                .or_insert(0) += 1;
        }
    }
    out
}

/// How long this seed's nodes stay NotReady after registering: 2-30 s, the CNI starting (a
/// per-seed knob, so the swarm covers fast and slow starts; a hash of the seed, no stream).
fn ready_delay_ms(seed: u64) -> u64 {
    2_000 + (seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % 28_000
}

/// The controller's options in the world: upstream's defaults, with the world's cluster name, the
/// join data (endpoint, CA, service CIDR) startup discovery would find in it and the scenario's
/// feature gates.
fn operator_options(
    cloud: &fakecloud::Config,
    knobs: &crate::scenario::CloudKnobs,
    settings: &crate::scenario::Settings,
) -> Result<operator::Options, WorldError> {
    let endpoint = knobs
        .controller_cluster_endpoint
        .as_deref()
        .unwrap_or(&cloud.cluster_endpoint);
    let cluster = karpenter_core::nodeclass::cluster::ClusterInfo::new(
        CLUSTER,
        endpoint,
        &cloud.cluster_ca_bundle,
        Some(&cloud.cluster_service_cidr),
        None,
    )
    .map_err(|e| WorldError::Manifests(format!("the world's cluster: {e}")))?;
    Ok(operator::Options {
        lifecycle: karpenter_core::nodeclaim::Options {
            cluster_name: CLUSTER.into(),
            cluster: Some(cluster),
            ..Default::default()
        },
        disruption: karpenter_core::disruption::Options {
            spot_to_spot: settings.feature_gates.spot_to_spot_consolidation,
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The step's event-log line. The names the run chose (generated by the seeded API server, in
/// `created`) make the log seed-specific.
fn step_line(
    elapsed: Duration,
    observation: &Observation,
    controller: Option<&StepReport>,
    errors: u8,
) -> String {
    let created = controller
        .and_then(|r| r.provisioned.as_ref())
        .map(|o| o.created.join(","))
        .unwrap_or_default();
    format!(
        "t={} pods={} running={} pending={} claims={} nodes={} instances={} created=[{}] errors={}",
        elapsed.as_secs(),
        observation.pods_total,
        observation.pods_running,
        observation.pods_pending,
        observation.claims,
        observation.nodes,
        observation.instances_alive,
        created,
        errors,
    )
}

/// Dollars rounded to the micro-dollar, so a report prints without float noise.
fn dollars(amount: f64) -> f64 {
    (amount * 1e6).round() / 1e6
}

/// How long a controller step took on the world's clock: the runtime's virtual time that passed
/// while it ran (calls made side by side overlap, as they do against EC2), never more than the
/// latency its calls slept in all. A step that slept nothing took no time: without latency the
/// runtime may have no timer (the cucumber specs' executor), and its clock must not leak into the
/// world's.
fn step_wait(slept_total: Duration, runtime_elapsed: Duration) -> Duration {
    if slept_total.is_zero() {
        return Duration::ZERO;
    }
    // Whole milliseconds, as every latency is drawn.
    Duration::from_millis(runtime_elapsed.min(slept_total).as_millis() as u64)
}
