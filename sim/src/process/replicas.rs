//! The controller processes of the world: one [`Operator`] normally; two replicas electing a
//! leader over a Lease when leader failover is on. Each process reaches the API server, EC2 and
//! SQS through its [`Fuse`] (a seam layer): when the world kills the process (a crash, a
//! failover), the fuse blows and every later call of that process fails without effect. The dead
//! process is dropped, and a new one, knowing only what the API server and EC2 hold, starts after
//! a downtime.

use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use karpenter_core::catalog::Catalog;
use karpenter_core::context::Context;
use karpenter_core::leader::{LeaderElector, LeaseConfig};
use karpenter_core::operator::{self, Operator, StepReport};
use karpenter_core::seams::iam::InstanceProfiles;
use karpenter_core::seams::layered::Layered;
use karpenter_core::seams::{Clock, Ec2, KubeApi, Sqs};

use crate::faults::CrashPoint;
use crate::process::fuse::{Fuse, Trigger};

/// Where the replicas' Lease lives (upstream Karpenter's lease name).
pub const LEASE_NAMESPACE: &str = "kube-system";
pub const LEASE_NAME: &str = "karpenter-leader-election";

/// Why a leader that stopped leading exited (not a fault: client-go's behaviour).
pub const LOST_LEASE: &str = "it lost its lease";

/// What a process is built from (the same for every process of the world).
pub struct ProcessSeams {
    pub api: Arc<dyn KubeApi>,
    /// Each process's EC2 seam, built from its identity.
    pub ec2: crate::seams::Ec2ForProcess,
    /// Each process's SQS seam, built from its identity.
    pub sqs: crate::seams::SqsForProcess,
    pub clock: Arc<dyn Clock>,
    pub catalog: Arc<Catalog>,
    pub options: operator::Options,
    pub queue_url: String,
    /// IAM for the instance profiles (the world's account IAM).
    pub iam: Option<Arc<dyn InstanceProfiles>>,
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
    /// A process led (acted) for the first time in its life: its controllers' first passes only
    /// take stock of the cluster (the pod-events controller cannot tell what changed before).
    pub fresh_leader: bool,
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
        let kube: Arc<dyn KubeApi> = Arc::new(Layered::new(fuse.clone(), self.seams.api.clone()));
        let ec2: Arc<dyn Ec2> = Arc::new(Layered::new(fuse.clone(), (self.seams.ec2)(&identity)));
        let sqs: Arc<dyn Sqs> = Arc::new(Layered::new(fuse.clone(), (self.seams.sqs)(&identity)));
        let mut ctx = Context::new(
            kube.clone(),
            ec2,
            self.seams.clock.clone(),
            self.seams.catalog.clone(),
            self.seams.options.clone(),
        );
        if let Some(iam) = &self.seams.iam {
            ctx = ctx.with_iam(iam.clone());
        }
        let operator =
            Operator::with_context(ctx).with_interruption_queue(sqs, self.seams.queue_url.clone());
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
            let kube: Arc<dyn KubeApi> = Arc::new(Layered::new(fuse, self.seams.api.clone()));
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
                out.fresh_leader |= !process.led;
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
