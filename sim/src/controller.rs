//! The controller processes of the world: one [`Operator`] normally; two replicas electing a
//! leader over a Lease when leader failover is on. Each process reaches the API server, EC2 and
//! SQS through a [`Fuse`]: when the world kills the process (a crash, a failover), the fuse
//! blows and every later call of that process fails without effect, so a crash can land in the
//! middle of a step (after a launch, after an eviction, at any call), exactly where a real
//! process can die. The dead process is dropped, and a new one, knowing only what the API server
//! and EC2 hold, starts after a downtime.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use jiff::{SignedDuration, Timestamp};
use karpenter_core::catalog::Catalog;
use karpenter_core::leader::{LeaderElector, LeaseConfig};
use karpenter_core::operator::{self, Operator, StepReport};
use karpenter_core::seams::ec2::{
    CreateFleetRequest, CreateFleetResponse, Filter, Image, ImageQuery, Instance, LaunchTemplate,
    LaunchTemplateRequest, SecurityGroup, Subnet,
};
use karpenter_core::seams::kube::{
    DeleteOptions, DeleteOutcome, EventRecord, ListOptions, ObjectKey, ObjectList, Patch,
    ResourceKind, WatchStream,
};
use karpenter_core::seams::sqs::Message;
use karpenter_core::seams::{Clock, Ec2, Ec2Error, KubeApi, KubeError, Sqs, SqsError};

use crate::faults::CrashPoint;

/// Where the replicas' Lease lives (upstream Karpenter's lease name).
pub const LEASE_NAMESPACE: &str = "kube-system";
pub const LEASE_NAME: &str = "karpenter-leader-election";

/// Why a leader that stopped leading exited (not a fault: client-go's behaviour).
pub const LOST_LEASE: &str = "it lost its lease";

/// What the seams of a dead process answer.
const DEAD: &str = "the controller process is dead";

/// What a seam call did that a crash trigger can wait for.
enum Effect {
    Plain,
    /// A `CreateFleet` that launched (true) or not.
    Launched(bool),
    /// An eviction that went through (true) or not.
    Evicted(bool),
}

/// [`Fuse::call`]'s effect of a call that neither launches nor evicts.
fn plain<T, E>(_: &Result<T, E>) -> Effect {
    Effect::Plain
}

/// When a process's fuse blows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// After this many more seam calls (at the end of the step if it makes fewer).
    AfterCalls(u64),
    /// Right after the next `CreateFleet` that launched an instance.
    AfterLaunch,
    /// Right after the next successful eviction.
    AfterEviction,
}

#[derive(Debug, Default)]
struct FuseState {
    blown: bool,
    armed: Option<Trigger>,
    /// How long the process stays dead once the armed trigger fires.
    downtime: Duration,
    /// What the process was doing when it died (for the event log).
    cause: Option<String>,
}

/// The life of one process: calls pass while it lives; once blown, every call fails with
/// `Unavailable` and does nothing.
#[derive(Debug, Default)]
pub struct Fuse {
    state: Mutex<FuseState>,
}

impl Fuse {
    fn lock(&self) -> MutexGuard<'_, FuseState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The process dies at `trigger` and stays dead for `downtime`.
    pub fn arm(&self, trigger: Trigger, downtime: Duration) {
        let mut state = self.lock();
        state.armed = Some(trigger);
        state.downtime = downtime;
    }

    /// Whether a crash is armed to strike after a number of calls (such a crash strikes at the
    /// end of the step at the latest).
    fn armed_by_calls(&self) -> bool {
        matches!(self.lock().armed, Some(Trigger::AfterCalls(_)))
    }

    fn downtime(&self) -> Duration {
        self.lock().downtime
    }

    /// The process dies now, for `downtime`.
    fn die(&self, cause: &str, downtime: Duration) {
        let mut state = self.lock();
        state.armed = None;
        state.downtime = downtime;
        drop(state);
        self.blow(cause);
    }

    pub fn blow(&self, cause: &str) {
        let mut state = self.lock();
        if !state.blown {
            state.blown = true;
            state.cause = Some(cause.to_string());
        }
    }

    pub fn is_blown(&self) -> bool {
        self.lock().blown
    }

    pub fn cause(&self) -> Option<String> {
        self.lock().cause.clone()
    }

    /// Before a call: whether the process is still alive.
    fn alive(&self) -> bool {
        !self.lock().blown
    }

    /// One seam call of the process: refused without effect (`dead()`) once the fuse has blown,
    /// else made and counted towards an armed trigger, with what `effect` says it did.
    async fn call<T, E>(
        &self,
        dead: fn() -> E,
        verb: &'static str,
        object: &'static str,
        call: impl Future<Output = Result<T, E>>,
        effect: impl FnOnce(&Result<T, E>) -> Effect,
    ) -> Result<T, E> {
        if !self.alive() {
            return Err(dead());
        }
        let result = call.await;
        let (launched, evicted) = match effect(&result) {
            Effect::Plain => (false, false),
            Effect::Launched(launched) => (launched, false),
            Effect::Evicted(evicted) => (false, evicted),
        };
        self.called(verb, object, launched, evicted);
        result
    }

    /// After a call that happened (`verb` on `object`): counts it towards an armed trigger.
    fn called(&self, verb: &'static str, object: &'static str, launched: bool, evicted: bool) {
        let mut state = self.lock();
        let fire = match &mut state.armed {
            Some(Trigger::AfterCalls(left)) => {
                *left = left.saturating_sub(1);
                *left == 0
            }
            Some(Trigger::AfterLaunch) => launched,
            Some(Trigger::AfterEviction) => evicted,
            None => false,
        };
        if fire && !state.blown {
            state.blown = true;
            state.armed = None;
            state.cause = Some(if object.is_empty() {
                format!("after {verb}")
            } else {
                format!("after {verb} {object}")
            });
        }
    }
}

/// A process's view of the API server.
pub struct FusedKube {
    inner: Arc<dyn KubeApi>,
    fuse: Arc<Fuse>,
}

fn dead_kube() -> KubeError {
    KubeError::Unavailable(DEAD.into())
}

#[async_trait]
impl KubeApi for FusedKube {
    async fn get(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
    ) -> Result<Option<serde_json::Value>, KubeError> {
        self.fuse
            .call(dead_kube, "get", "", self.inner.get(kind, key), plain)
            .await
    }

    async fn list(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        self.fuse
            .call(dead_kube, "list", "", self.inner.list(kind, options), plain)
            .await
    }

    async fn create(
        &self,
        kind: &ResourceKind,
        object: serde_json::Value,
    ) -> Result<serde_json::Value, KubeError> {
        self.fuse
            .call(
                dead_kube,
                "create",
                kind.plural,
                self.inner.create(kind, object),
                plain,
            )
            .await
    }

    async fn patch(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<serde_json::Value, KubeError> {
        self.fuse
            .call(
                dead_kube,
                "patch",
                kind.plural,
                self.inner.patch(kind, key, patch),
                plain,
            )
            .await
    }

    async fn patch_status(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        patch: &Patch,
    ) -> Result<serde_json::Value, KubeError> {
        self.fuse
            .call(
                dead_kube,
                "patch_status",
                kind.plural,
                self.inner.patch_status(kind, key, patch),
                plain,
            )
            .await
    }

    async fn delete(
        &self,
        kind: &ResourceKind,
        key: &ObjectKey,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        self.fuse
            .call(
                dead_kube,
                "delete",
                kind.plural,
                self.inner.delete(kind, key, options),
                plain,
            )
            .await
    }

    async fn evict(&self, pod: &ObjectKey, options: &DeleteOptions) -> Result<(), KubeError> {
        self.fuse
            .call(
                dead_kube,
                "evict",
                "",
                self.inner.evict(pod, options),
                |r| Effect::Evicted(r.is_ok()),
            )
            .await
    }

    async fn watch(
        &self,
        kind: &ResourceKind,
        options: &ListOptions,
        resource_version: &str,
    ) -> Result<WatchStream, KubeError> {
        self.fuse
            .call(
                dead_kube,
                "watch",
                "",
                self.inner.watch(kind, options, resource_version),
                plain,
            )
            .await
    }

    async fn record_event(&self, event: &EventRecord) -> Result<(), KubeError> {
        self.fuse
            .call(
                dead_kube,
                "record_event",
                "",
                self.inner.record_event(event),
                plain,
            )
            .await
    }
}

/// A process's view of EC2 and SQS.
pub struct FusedCloud {
    ec2: Arc<dyn Ec2>,
    sqs: Arc<dyn Sqs>,
    fuse: Arc<Fuse>,
}

fn dead_ec2() -> Ec2Error {
    Ec2Error::Unavailable(DEAD.into())
}

fn dead_sqs() -> SqsError {
    SqsError::Unavailable(DEAD.into())
}

#[async_trait]
impl Ec2 for FusedCloud {
    async fn create_fleet(
        &self,
        request: &CreateFleetRequest,
    ) -> Result<CreateFleetResponse, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "CreateFleet",
                "",
                self.ec2.create_fleet(request),
                |r| Effect::Launched(r.as_ref().is_ok_and(|r| !r.instances.is_empty())),
            )
            .await
    }

    async fn describe_instances(
        &self,
        instance_ids: &[String],
        filters: &[Filter],
    ) -> Result<Vec<Instance>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "DescribeInstances",
                "",
                self.ec2.describe_instances(instance_ids, filters),
                plain,
            )
            .await
    }

    async fn terminate_instances(&self, instance_ids: &[String]) -> Result<Vec<String>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "TerminateInstances",
                "",
                self.ec2.terminate_instances(instance_ids),
                plain,
            )
            .await
    }

    async fn create_tags(
        &self,
        resource_ids: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<(), Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "CreateTags",
                "",
                self.ec2.create_tags(resource_ids, tags),
                plain,
            )
            .await
    }

    async fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "DescribeSubnets",
                "",
                self.ec2.describe_subnets(filters),
                plain,
            )
            .await
    }

    async fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "DescribeSecurityGroups",
                "",
                self.ec2.describe_security_groups(filters),
                plain,
            )
            .await
    }

    async fn describe_images(&self, query: &ImageQuery) -> Result<Vec<Image>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "DescribeImages",
                "",
                self.ec2.describe_images(query),
                plain,
            )
            .await
    }

    async fn get_parameter(&self, name: &str) -> Result<Option<String>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "GetParameter",
                "",
                self.ec2.get_parameter(name),
                plain,
            )
            .await
    }

    async fn create_launch_template(
        &self,
        request: &LaunchTemplateRequest,
    ) -> Result<LaunchTemplate, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "CreateLaunchTemplate",
                "",
                self.ec2.create_launch_template(request),
                plain,
            )
            .await
    }

    async fn describe_launch_templates(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<LaunchTemplate>, Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "DescribeLaunchTemplates",
                "",
                self.ec2.describe_launch_templates(filters),
                plain,
            )
            .await
    }

    async fn delete_launch_template(&self, name: &str) -> Result<(), Ec2Error> {
        self.fuse
            .call(
                dead_ec2,
                "DeleteLaunchTemplate",
                "",
                self.ec2.delete_launch_template(name),
                plain,
            )
            .await
    }
}

#[async_trait]
impl Sqs for FusedCloud {
    async fn receive_messages(
        &self,
        count_max: u8,
        wait: Duration,
    ) -> Result<Vec<Message>, SqsError> {
        let call = self.sqs.receive_messages(count_max, wait);
        self.fuse
            .call(dead_sqs, "ReceiveMessage", "", call, plain)
            .await
    }

    async fn delete_message(&self, receipt_handle: &str) -> Result<(), SqsError> {
        let call = self.sqs.delete_message(receipt_handle);
        self.fuse
            .call(dead_sqs, "DeleteMessage", "", call, plain)
            .await
    }
}

/// What a process is built from (the same for every process of the world).
pub struct ProcessSeams {
    pub api: Arc<dyn KubeApi>,
    pub ec2: Arc<dyn Ec2>,
    pub sqs: Arc<dyn Sqs>,
    pub clock: Arc<dyn Clock>,
    pub catalog: Arc<Catalog>,
    pub options: operator::Options,
    pub queue_url: String,
}

/// A running process: its controllers, its lease candidate (with election on), its fuse.
struct Process {
    identity: String,
    operator: Operator,
    elector: Option<LeaderElector>,
    fuse: Arc<Fuse>,
    /// It led at its last step.
    led: bool,
}

enum Slot {
    Running(Box<Process>),
    /// Dead; a new process starts at `until`.
    Down {
        until: Timestamp,
    },
}

/// One replica slot (a Deployment's pod): its process, restarted after each death.
struct Replica {
    index: usize,
    /// Processes started in this slot so far (a restarted pod is a new lease candidate).
    generation: u32,
    slot: Slot,
}

/// What one step of the controllers did.
#[derive(Debug, Default)]
pub struct ControllersStep {
    /// The leader's (or the only process's) step report, if a process acted.
    pub report: Option<StepReport>,
    /// Processes that died in this step: (identity, why).
    pub deaths: Vec<(String, String)>,
    /// Processes that started in this step.
    pub starts: Vec<String>,
    /// Replicas that believed they led at the same time (must stay 0).
    pub leaders: usize,
}

/// The controller replicas of the world.
pub struct Controllers {
    seams: ProcessSeams,
    replicas: Vec<Replica>,
    election: bool,
    /// Steps in which more than one replica led (a safety violation of the election).
    overlaps: u64,
    /// Who led after the last step, and how many times leadership changed hands.
    leader: Option<String>,
    leader_changes: u64,
}

impl Controllers {
    /// One process without leader election (what a single-replica install runs).
    pub fn new(seams: ProcessSeams) -> Self {
        let mut controllers = Self {
            seams,
            replicas: Vec::new(),
            election: false,
            overlaps: 0,
            leader: None,
            leader_changes: 0,
        };
        let process = controllers.start(0, 0);
        controllers.replicas.push(Replica {
            index: 0,
            generation: 0,
            slot: Slot::Running(Box::new(process)),
        });
        controllers
    }

    fn start(&self, index: usize, generation: u32) -> Process {
        let identity = format!("karpenter-{index}-{generation}");
        let fuse = Arc::new(Fuse::default());
        let kube: Arc<dyn KubeApi> = Arc::new(FusedKube {
            inner: self.seams.api.clone(),
            fuse: fuse.clone(),
        });
        let cloud = Arc::new(FusedCloud {
            ec2: self.seams.ec2.clone(),
            sqs: self.seams.sqs.clone(),
            fuse: fuse.clone(),
        });
        let operator = Operator::new(
            kube.clone(),
            cloud.clone(),
            self.seams.clock.clone(),
            self.seams.catalog.clone(),
            self.seams.options.clone(),
        )
        .with_interruption_queue(cloud, self.seams.queue_url.clone());
        let elector = self.election.then(|| self.elector(kube, &identity));
        Process {
            identity,
            operator,
            elector,
            fuse,
            led: false,
        }
    }

    fn elector(&self, kube: Arc<dyn KubeApi>, identity: &str) -> LeaderElector {
        LeaderElector::new(
            kube,
            self.seams.clock.clone(),
            LeaseConfig::new(LEASE_NAMESPACE, LEASE_NAME, identity),
        )
        .unwrap_or_else(|err| unreachable!("client-go's default timings are valid: {err}"))
    }

    /// Runs two replicas electing a leader from now on: the running process becomes a candidate
    /// (it takes the free lease at its next step, so there is no gap), and a second replica
    /// starts as a standby. Idempotent.
    pub fn enable_election(&mut self) {
        if self.election {
            return;
        }
        self.election = true;
        let mut candidates = Vec::new();
        for replica in &mut self.replicas {
            if let Slot::Running(process) = &replica.slot
                && process.elector.is_none()
            {
                candidates.push((
                    replica.index,
                    process.fuse.clone(),
                    process.identity.clone(),
                ));
            }
        }
        for (index, fuse, identity) in candidates {
            let kube: Arc<dyn KubeApi> = Arc::new(FusedKube {
                inner: self.seams.api.clone(),
                fuse,
            });
            let elector = self.elector(kube, &identity);
            if let Some(Replica {
                slot: Slot::Running(process),
                ..
            }) = self.replicas.get_mut(index)
            {
                process.elector = Some(elector);
            }
        }
        if self.replicas.len() < 2 {
            let process = self.start(1, 0);
            self.replicas.push(Replica {
                index: 1,
                generation: 0,
                slot: Slot::Running(Box::new(process)),
            });
        }
    }

    pub fn election(&self) -> bool {
        self.election
    }

    /// Identities of the running processes, by replica.
    pub fn running(&self) -> Vec<String> {
        self.replicas
            .iter()
            .filter_map(|r| match &r.slot {
                Slot::Running(p) => Some(p.identity.clone()),
                Slot::Down { .. } => None,
            })
            .collect()
    }

    /// The replica leading now: the one process without election, else the one whose elector
    /// says so.
    pub fn leader_index(&self) -> Option<usize> {
        self.replicas.iter().find_map(|r| match &r.slot {
            Slot::Running(p) if p.elector.as_ref().is_none_or(|e| e.is_leader()) => Some(r.index),
            _ => None,
        })
    }

    /// Indices of the running replicas.
    pub fn running_indices(&self) -> Vec<usize> {
        self.replicas
            .iter()
            .filter(|r| matches!(r.slot, Slot::Running(_)))
            .map(|r| r.index)
            .collect()
    }

    /// Arms a crash of replica `index` (no effect on a dead one); returns its identity.
    pub fn arm_crash(
        &self,
        index: usize,
        point: CrashPoint,
        calls: u64,
        downtime: Duration,
    ) -> Option<String> {
        let Some(Replica {
            slot: Slot::Running(process),
            ..
        }) = self.replicas.get(index)
        else {
            return None;
        };
        let trigger = match point {
            CrashPoint::Anywhere => Trigger::AfterCalls(calls.max(1)),
            CrashPoint::AfterLaunch => Trigger::AfterLaunch,
            CrashPoint::AfterEviction => Trigger::AfterEviction,
        };
        process.fuse.arm(trigger, downtime);
        Some(process.identity.clone())
    }

    /// Kills replica `index` now (before its next call); it restarts `downtime` later.
    pub fn kill(
        &mut self,
        index: usize,
        cause: &str,
        now: Timestamp,
        downtime: Duration,
    ) -> Option<String> {
        let replica = self.replicas.get_mut(index)?;
        let Slot::Running(process) = &replica.slot else {
            return None;
        };
        process.fuse.blow(cause);
        let identity = process.identity.clone();
        replica.slot = Slot::Down {
            until: after(now, downtime),
        };
        Some(identity)
    }

    /// When the next dead process restarts, if one is down.
    pub fn next_restart(&self) -> Option<Timestamp> {
        self.replicas
            .iter()
            .filter_map(|r| match r.slot {
                Slot::Down { until } => Some(until),
                Slot::Running(_) => None,
            })
            .min()
    }

    /// Steps in which two replicas led at once (the election's safety; must stay 0).
    pub fn leader_overlaps(&self) -> u64 {
        self.overlaps
    }

    /// How many times the leading process changed (a failover is one change).
    pub fn leader_changes(&self) -> u64 {
        self.leader_changes
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// One step: restart processes whose downtime ended, run elections, step the leader (or the
    /// only process), and bury processes whose fuse blew. A process whose crash was armed to
    /// strike after some number of calls and that made fewer dies at the end of its step. A
    /// process that led and lost its lease exits (Karpenter exits when it stops leading) and is
    /// restarted at once, as its pod would be.
    pub async fn step(&mut self) -> ControllersStep {
        let now = self.seams.clock.now();
        let mut out = ControllersStep::default();
        for index in 0..self.replicas.len() {
            let restart = matches!(self.replicas[index].slot, Slot::Down { until } if until <= now);
            if restart {
                let generation = self.replicas[index].generation + 1;
                let process = self.start(index, generation);
                out.starts.push(process.identity.clone());
                let replica = &mut self.replicas[index];
                replica.generation = generation;
                replica.slot = Slot::Running(Box::new(process));
            }
        }
        let mut leaders = Vec::new();
        for replica in &mut self.replicas {
            let Slot::Running(process) = &mut replica.slot else {
                continue;
            };
            let leads = match &mut process.elector {
                None => true,
                Some(elector) => {
                    if let Err(err) = elector.step().await {
                        tracing::debug!(identity = %process.identity, %err, "leader election attempt failed");
                    }
                    elector.is_leader()
                }
            };
            if leads {
                leaders.push(process.identity.clone());
                let report = process.operator.step().await;
                if out.report.is_none() {
                    out.report = Some(report);
                }
            } else if process.led {
                process.fuse.die(LOST_LEASE, Duration::ZERO);
            }
            process.led = leads;
            if process.fuse.armed_by_calls() {
                process.fuse.blow("after its step");
            }
            if process.fuse.is_blown() {
                let cause = process.fuse.cause().unwrap_or_default();
                out.deaths.push((process.identity.clone(), cause));
                replica.slot = Slot::Down {
                    until: after(now, process.fuse.downtime()),
                };
            }
        }
        out.leaders = leaders.len();
        if leaders.len() > 1 {
            self.overlaps += 1;
        }
        let leader = leaders.first().cloned();
        if leader.is_some() && leader != self.leader {
            if self.leader.is_some() {
                self.leader_changes += 1;
            }
            self.leader = leader;
        }
        out
    }
}

fn after(time: Timestamp, by: Duration) -> Timestamp {
    time.saturating_add(SignedDuration::try_from(by).unwrap_or(SignedDuration::MAX))
        .unwrap_or(time)
}
