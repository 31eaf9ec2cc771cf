//! The world: the controller ([`Operator`]), the in-memory API server, the kube-scheduler and
//! kubelet stand-ins and fakecloud, all on one clock and one seed, stepped in a fixed order.
//!
//! Every step: due workload events → fakecloud catches up → kubelet → kube-scheduler →
//! controller → invariants → one event-log line. Time only moves between steps, so a run is a
//! pure function of (seed, scenario, code): the event log's SHA-256 proves it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Config as CloudConfig, FakeCloud, Pool};
use jiff::Timestamp;
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::manifest::{KarpenterObject, Outcome, check_document, parse_documents};
use karpenter_core::operator::{self, Operator};
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, ManualClock};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::apiserver::{ApiServer, ApiServerConfig};
use crate::bugs::{Bug, Seams};
use crate::invariants::{Catalogue, Invariants, Observation, ObserverCache};
use crate::kubelet::{Kubelet, KubeletConfig};
use crate::report::{NodesReport, PodsReport, Report};
use crate::scenario::{Scenario, WorkloadEvent};
use crate::scheduler::{Scheduler, SchedulerConfig};

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
}

pub struct World {
    pub seed: u64,
    pub scenario: Scenario,
    pub clock: Arc<ManualClock>,
    pub api: Arc<ApiServer>,
    pub cloud: Arc<FakeCloud>,
    scheduler: Scheduler,
    kubelet: Kubelet,
    operator: Operator,
    start: Timestamp,
    events: Vec<WorkloadEvent>,
    /// Batch pods and when they finish.
    batch_ends: BTreeMap<String, Timestamp>,
    /// Pod name → first time it was seen pending, and when it started running.
    pending_since: BTreeMap<String, Timestamp>,
    pending_seconds: Vec<f64>,
    log: Sha256,
    log_lines: u64,
    pub invariants: Invariants,
    /// The invariants that need history or attribution (checked after the step's observation).
    catalogue: Catalogue,
    observer: ObserverCache,
    instances_seen: BTreeMap<String, (String, CapacityType)>,
    terminated_seen: usize,
    /// The API server's resourceVersion and the cloud's (live, ready) counts after the last step.
    last_version: Option<String>,
    last_cloud: (usize, usize),
    faults: BTreeMap<String, u64>,
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
        let mut cloud_config = CloudConfig {
            seed,
            cluster_name: CLUSTER.into(),
            ..CloudConfig::default()
        };
        if let Some(tag) = &scenario.cloud.discovery_tag {
            cloud_config.cluster_name = tag.clone();
        }
        if let Some(units) = scenario.cloud.pool_capacity {
            cloud_config.pool_capacity_default = units;
        }
        if let Some(f) = scenario.cloud.never_boot_fraction {
            cloud_config.boot.never_boot_fraction = f;
        }
        if let Some(f) = scenario.cloud.slow_boot_fraction {
            cloud_config.boot.slow_boot_fraction = f;
        }
        if let Some(ms) = scenario.cloud.eventual_consistency_lag_ms {
            cloud_config.eventual_consistency_lag_ms = ms;
        }
        let cloud = Arc::new(FakeCloud::new(clock.clone(), catalog.clone(), cloud_config));
        let throttle = scenario.cloud.ec2_throttle_rate.unwrap_or(0.0);
        let unavailable = scenario.cloud.ec2_unavailable_rate.unwrap_or(0.0);
        if throttle > 0.0 || unavailable > 0.0 {
            cloud.set_fault_rates_all(fakecloud::FaultRates {
                throttle_rate: throttle,
                unavailable_rate: unavailable,
                ..fakecloud::FaultRates::default()
            });
        }
        for (instance_type, zone, capacity_type) in &scenario.cloud.exhausted {
            let ct = CapacityType::from_label(capacity_type).unwrap_or(CapacityType::OnDemand);
            cloud.set_pool_capacity(&Pool::new(instance_type, zone, ct), 0);
        }
        let api = Arc::new(ApiServer::new(
            clock.clone(),
            ApiServerConfig {
                seed,
                ..ApiServerConfig::default()
            },
        ));
        let api_unavailable = scenario.cloud.api_unavailable_rate.unwrap_or(0.0);
        let api_conflict = scenario.cloud.api_conflict_rate.unwrap_or(0.0);
        if api_unavailable > 0.0 || api_conflict > 0.0 {
            api.set_fault_rates_all(crate::apiserver::ApiFaultRates {
                unavailable_rate: api_unavailable,
                conflict_rate: api_conflict,
                ..Default::default()
            });
        }
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
            KubeletConfig::default(),
        );
        let options = operator::Options {
            lifecycle: karpenter_core::lifecycle::Options {
                cluster_name: CLUSTER.into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let operator = Operator::new(
            seams.controller_kube.clone(),
            seams.controller_ec2.clone(),
            clock.clone(),
            Arc::new(catalog),
            options,
        )
        .with_interruption_queue(
            seams.controller_sqs.clone(),
            format!("fakecloud://sqs/{CLUSTER}"),
        );
        let catalogue = Catalogue::new(seams.audit.clone(), &cloud);
        let mut events = scenario.workloads.clone();
        events.sort_by_key(|e| e.at);
        let mut world = World {
            seed,
            scenario,
            clock,
            api,
            cloud,
            scheduler,
            kubelet,
            operator,
            start,
            events,
            batch_ends: BTreeMap::new(),
            pending_since: BTreeMap::new(),
            pending_seconds: Vec::new(),
            log: Sha256::new(),
            log_lines: 0,
            invariants: Invariants::default(),
            catalogue,
            observer: ObserverCache::default(),
            instances_seen: BTreeMap::new(),
            terminated_seen: 0,
            last_version: None,
            last_cloud: (0, 0),
            faults: BTreeMap::new(),
        };
        world.apply_manifests().await?;
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

    fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Simulated time since the run started.
    pub fn elapsed(&self) -> Duration {
        self.now().duration_since(self.start).unsigned_abs()
    }

    fn pod(
        name: &str,
        owner: &str,
        cpu: &str,
        memory: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": owner}, "annotations": annotations},
            "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Pending"}
        })
    }

    /// Applies workload events that are due.
    async fn apply_workloads(&mut self) -> Result<(), WorldError> {
        while self.events.first().is_some_and(|e| e.at <= self.elapsed()) {
            let event = self.events.remove(0);
            if let Some(d) = &event.deployment {
                let pods = self
                    .api
                    .list(&ResourceKind::POD, &Default::default())
                    .await?
                    .items;
                let mut mine: Vec<String> = pods
                    .iter()
                    .filter(|p| {
                        p["metadata"]["labels"]["app"] == json!(d.name)
                            && p["metadata"]["deletionTimestamp"].is_null()
                    })
                    .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                    .collect();
                mine.sort();
                let want = d.replicas as usize;
                let mut next = mine.len();
                while mine.len() < want {
                    let name = format!("{}-{next}", d.name);
                    next += 1;
                    if self
                        .api
                        .create(
                            &ResourceKind::POD,
                            Self::pod(&name, &d.name, &d.cpu, &d.memory, &d.annotations),
                        )
                        .await
                        .is_ok()
                    {
                        mine.push(name);
                    }
                }
                while mine.len() > want {
                    let name = mine.pop().unwrap_or_default();
                    self.api
                        .delete(
                            &ResourceKind::POD,
                            &ObjectKey::namespaced("default", name),
                            &DeleteOptions::default(),
                        )
                        .await?;
                }
            }
            if let Some(b) = &event.batch {
                for i in 0..b.pods {
                    let name = format!("{}-{i}", b.name);
                    self.api
                        .create(
                            &ResourceKind::POD,
                            Self::pod(&name, &b.name, &b.cpu, &b.memory, &BTreeMap::new()),
                        )
                        .await?;
                    let ends = self
                        .now()
                        .saturating_add(
                            jiff::SignedDuration::try_from(b.run_for).unwrap_or_default(),
                        )
                        .unwrap_or(self.now());
                    self.batch_ends.insert(name, ends);
                }
            }
        }
        // Batch pods that ran their course complete (they are deleted, as a Job's pods would be
        // cleaned up).
        let now = self.now();
        if !self.batch_ends.values().any(|end| *end <= now) {
            return Ok(());
        }
        let pods = self
            .api
            .list(&ResourceKind::POD, &Default::default())
            .await?
            .items;
        for pod in pods {
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let running = pod["status"]["phase"] == json!("Running");
            if running && self.batch_ends.get(&name).is_some_and(|end| *end <= now) {
                self.batch_ends.remove(&name);
                self.api
                    .delete(
                        &ResourceKind::POD,
                        &ObjectKey::namespaced("default", name),
                        &DeleteOptions::default(),
                    )
                    .await?;
            }
        }
        Ok(())
    }

    /// One step of the world; returns the event-log line it appended.
    /// Runs harness work (the workload, the observer) with the API server's injected faults
    /// switched off: faults are for the controller, not for the world watching it.
    fn suspend_api_faults(
        &self,
    ) -> BTreeMap<crate::apiserver::ApiOperation, crate::apiserver::ApiFaultRates> {
        let mut saved = BTreeMap::new();
        self.api
            .configure(|c| saved = std::mem::take(&mut c.faults));
        saved
    }

    fn resume_api_faults(
        &self,
        saved: BTreeMap<crate::apiserver::ApiOperation, crate::apiserver::ApiFaultRates>,
    ) {
        self.api.configure(|c| c.faults = saved);
    }

    pub async fn step(&mut self) -> Result<String, WorldError> {
        let saved = self.suspend_api_faults();
        let workloads = self.apply_workloads().await;
        self.resume_api_faults(saved);
        workloads?;
        self.cloud.advance_to_now();
        let kubelet = self.kubelet.tick().await;
        let scheduler = self.scheduler.step().await;
        let controller = self.operator.step().await;
        let saved = self.suspend_api_faults();
        let observation = Observation::read(
            &mut self.observer,
            self.api.as_ref(),
            &self.cloud,
            self.clock.now(),
        )
        .await;
        self.resume_api_faults(saved);
        let observation = observation?;
        self.track(&observation);
        self.invariants.check(&observation, self.now());
        self.catalogue.check(
            &self.api,
            &self.cloud,
            &observation,
            self.now(),
            &mut self.invariants,
        );
        // Names the run chose (generated by the seeded API server) make the log seed-specific.
        let created = controller
            .as_ref()
            .ok()
            .and_then(|r| r.provisioned.as_ref())
            .map(|o| o.created.join(","))
            .unwrap_or_default();
        let line = format!(
            "t={} pods={} running={} pending={} claims={} nodes={} instances={} created=[{}] errors={}",
            self.elapsed().as_secs(),
            observation.pods_total,
            observation.pods_running,
            observation.pods_pending,
            observation.claims,
            observation.nodes,
            observation.instances_alive,
            created,
            u8::from(kubelet.is_err())
                + u8::from(scheduler.is_err())
                + u8::from(controller.is_err()),
        );
        self.log.update(line.as_bytes());
        self.log.update(b"\n");
        self.log_lines += 1;
        self.count_faults();
        // A step that changed nothing (no API write, same cloud) is followed by a longer one:
        // nothing can happen sooner than a timer, and the controllers' own loops poll at 10 s.
        let version = self.api.resource_version().to_string();
        let cloud = (
            observation.instances_alive,
            self.cloud.ready_to_join_ids().len(),
        );
        let idle = self.last_version.as_ref() == Some(&version) && self.last_cloud == cloud;
        self.last_version = Some(version);
        self.last_cloud = cloud;
        self.clock.advance(if idle {
            self.scenario.step.max(IDLE_STEP)
        } else {
            self.scenario.step
        });
        Ok(line)
    }

    /// Injected faults seen so far, by kind (`ec2-throttle`, `ec2-5xx`, `api-5xx`,
    /// `api-conflict`, `api-other`): lets a scenario check its faults really happened.
    pub fn faults_injected(&self) -> &BTreeMap<String, u64> {
        &self.faults
    }

    /// Tallies the injected faults in this step's call logs, then clears them (the logs are
    /// bounded; clearing every step keeps the tally exact).
    fn count_faults(&mut self) {
        for call in self.cloud.calls() {
            let kind = if call.outcome.contains("RequestLimitExceeded") {
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
            let kind = if !outcome.contains("injected fault") {
                None
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
        for name in &observation.pending_names {
            self.pending_since.entry(name.clone()).or_insert(now);
        }
        for name in &observation.running_names {
            if let Some(since) = self.pending_since.remove(name) {
                self.pending_seconds
                    .push(now.duration_since(since).as_secs_f64());
            }
        }
        for (id, info) in &observation.instances {
            self.instances_seen
                .entry(id.clone())
                .or_insert_with(|| info.clone());
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

    /// The history-based invariants and what they counted (spot warnings, capacity errors...).
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Tells the invariants that the harness is about to terminate `instance_id` itself (an
    /// instance terminated outside Karpenter), so it is not counted against the controller.
    pub fn note_external_termination(&mut self, instance_id: &str) {
        self.catalogue.note_external_termination(instance_id);
    }

    /// Ends a run driven step by step: the end-of-run checks (liveness) and the report of
    /// `simulated` seconds.
    pub async fn finish(&mut self, simulated: Duration) -> Result<Report, WorldError> {
        let saved = self.suspend_api_faults();
        let observation = Observation::read(
            &mut self.observer,
            self.api.as_ref(),
            &self.cloud,
            self.clock.now(),
        )
        .await;
        self.resume_api_faults(saved);
        let observation = observation?;
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
            },
            nodes: NodesReport {
                launched: self.instances_seen.len(),
                terminated: self.terminated_seen,
                launched_by_type: launched_by,
                terminated_by_type: terminated_by,
            },
            faults_injected: self.faults.clone(),
            cost_dollars: self.cloud.cost_report().total_dollars,
            simulated_seconds: duration.as_secs_f64(),
            wall_seconds: 0.0,
            event_log_sha256: format!("{:x}", self.log.clone().finalize()),
            event_log_lines: self.log_lines,
        }
    }
}
