//! The fault catalogue: every fault the world can inject, named by a stable string, in one plain
//! struct ([`FaultMix`]) that a scenario file (`faults:`), a test or a swarm runner fills in.
//!
//! | name | what the world does |
//! |---|---|
//! | `spot-storm` | at given times or a seeded rate, a share of the live spot instances of one zone (optionally one instance type) get EC2's two-minute interruption warning at once |
//! | `capacity-wave` | every pool of one zone (spot, on-demand or both) runs dry, and is restored after a while |
//! | `slow-boot`, `never-boot` | a fraction of launched instances boot slowly (up to 10 min) or never |
//! | `ec2-throttle`, `ec2-5xx`, `ec2-latency` | EC2 calls are throttled, fail with a 5xx, or are served late (the controller's step then takes that long on the world's clock) |
//! | `ec2-consistency-lag` | launched instances stay invisible to `DescribeInstances` for a while |
//! | `sqs-duplicate`, `sqs-reorder`, `sqs-malformed` | interruption messages are delivered twice, out of order, or are garbage |
//! | `api-conflict`, `api-5xx`, `api-watch-drop` | API-server writes conflict, calls fail with a 503, watches drop |
//! | `controller-crash` | the controller process dies (at any seam call, right after a launch or an eviction) and a new one starts after a downtime |
//! | `leader-failover` | two replicas elect a leader over a Lease; the leader is killed and the other takes over once the lease expires |
//! | `pdb-never-allows` | a PodDisruptionBudget with `maxUnavailable: 0` covers a Deployment |
//! | `ami-release` | a new release of an AMI family is published: `@latest` aliases move to it (its SSM parameters), drifting the nodes on the previous image |
//! | `ec2-lost-response` | a share of `CreateFleet` calls launch their instance, then answer `InternalError` (the answer lost on the way) |
//! | `claim-force-deleted` | at given times or a seeded rate, a user force-deletes one NodeClaim (its finalizer removed, then deleted, as `kubectl patch` + `kubectl delete` do): its instance runs on, owned by nothing, until garbage collection finds it |
//! | `scheduled-maintenance` | at given times or a seeded rate, EC2 schedules one of this cluster's Karpenter instances (drawn by the seed) for a stop: AWS Health's scheduled-change event now, the stop `notice` later (what EC2 does on degraded hardware) |
//! | `tags-lost` | at given times or a seeded rate, a user or an automation (a tag-policy clean-up) deletes Karpenter's tags (`karpenter.sh/*`, `karpenter.k8s.aws/*`) from one of this cluster's Karpenter instances: a claim still finds it by `status.providerID`, garbage collection (which lists by those tags) no longer sees it |
//!
//! What a tally in the report's `faultsInjected` counts: for `ec2-*` rates, `api-*` rates and
//! `sqs-duplicate`/`sqs-reorder`, the calls, watches or messages hit (`sqs-reorder`: receives of
//! two or more messages shuffled); for `slow-boot`/`never-boot`, instances whose boot was drawn
//! slow or never; for `ec2-consistency-lag`, instances launched while it was on; for
//! `pdb-never-allows`, evictions its budgets refused; for `controller-crash`, processes that died;
//! for `ami-release`, releases published; for `ec2-lost-response`, `CreateFleet` answers lost;
//! for `claim-force-deleted`, NodeClaims force-deleted; for `tags-lost`, instances stripped;
//! for `scheduled-maintenance`, instances scheduled for a stop;
//! for the other discrete faults, their firings (a storm that found no spot instance, or a
//! failover with no leader, does not count).
//!
//! Every fault is off unless its field is set. Randomness is per fault: each fault draws from its
//! own streams of the run's seed ([`stream`]), so turning one fault on never changes when or
//! where another fires. What fired is tallied by name in the report's `faultsInjected` and logged
//! in the event log.

use std::time::Duration;

use fakekit::Streams;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Every fault's stable name, in catalogue order.
pub const FAULT_NAMES: [&str; 22] = [
    SPOT_STORM,
    CAPACITY_WAVE,
    SLOW_BOOT,
    NEVER_BOOT,
    EC2_THROTTLE,
    EC2_5XX,
    EC2_LATENCY,
    EC2_CONSISTENCY_LAG,
    SQS_DUPLICATE,
    SQS_REORDER,
    SQS_MALFORMED,
    API_CONFLICT,
    API_5XX,
    API_WATCH_DROP,
    CONTROLLER_CRASH,
    LEADER_FAILOVER,
    PDB_NEVER_ALLOWS,
    AMI_RELEASE,
    EC2_LOST_RESPONSE,
    CLAIM_FORCE_DELETED,
    TAGS_LOST,
    SCHEDULED_MAINTENANCE,
];

pub const SPOT_STORM: &str = "spot-storm";
pub const CAPACITY_WAVE: &str = "capacity-wave";
pub const SLOW_BOOT: &str = "slow-boot";
pub const NEVER_BOOT: &str = "never-boot";
pub const EC2_THROTTLE: &str = "ec2-throttle";
pub const EC2_5XX: &str = "ec2-5xx";
pub const EC2_LATENCY: &str = "ec2-latency";
pub const EC2_CONSISTENCY_LAG: &str = "ec2-consistency-lag";
pub const SQS_DUPLICATE: &str = "sqs-duplicate";
pub const SQS_REORDER: &str = "sqs-reorder";
pub const SQS_MALFORMED: &str = "sqs-malformed";
pub const API_CONFLICT: &str = "api-conflict";
pub const API_5XX: &str = "api-5xx";
pub const API_WATCH_DROP: &str = "api-watch-drop";
pub const CONTROLLER_CRASH: &str = "controller-crash";
pub const LEADER_FAILOVER: &str = "leader-failover";
pub const PDB_NEVER_ALLOWS: &str = "pdb-never-allows";
pub const AMI_RELEASE: &str = "ami-release";
pub const EC2_LOST_RESPONSE: &str = "ec2-lost-response";
pub const CLAIM_FORCE_DELETED: &str = "claim-force-deleted";
pub const TAGS_LOST: &str = "tags-lost";
pub const SCHEDULED_MAINTENANCE: &str = "scheduled-maintenance";

/// What a stream of a fault is used for: when it fires, or what it hits when it does. Kept apart
/// so that what a fault hits (which depends on the cluster) never shifts when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Schedule,
    Target,
}

/// The random stream of one fault's `purpose`: `<fault>/schedule` or `<fault>/target` of the
/// component `faults` of the run's seed. Named, not numbered: adding a fault moves no other
/// fault's draws, and no stream of fakecloud or the API server coincides with one of these.
pub fn stream(seed: u64, fault: &str, purpose: Purpose) -> ChaCha8Rng {
    let purpose = match purpose {
        Purpose::Schedule => "schedule",
        Purpose::Target => "target",
    };
    Streams::new(seed, "faults").stream(&format!("{fault}/{purpose}"))
}

/// `Vec<Duration>` as a list of humantime strings (`[90s, 10m]`).
mod durations {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(values: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        values
            .iter()
            .map(|d| humantime::format_duration(*d).to_string())
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| humantime::parse_duration(text).map_err(serde::de::Error::custom))
            .collect()
    }
}

/// When a discrete fault fires: at the given times since the start of the run, and, with
/// `every`, at a seeded rate (exponential gaps with that mean, drawn from the fault's own
/// stream). Times already past when the fault is turned on are skipped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    pub at: Vec<Duration>,
    pub every: Option<Duration>,
}

impl Schedule {
    pub fn at(times: impl IntoIterator<Item = Duration>) -> Self {
        Self {
            at: times.into_iter().collect(),
            every: None,
        }
    }

    pub fn every(mean: Duration) -> Self {
        Self {
            at: Vec::new(),
            every: Some(mean),
        }
    }
}

/// The discrete faults' `at` and `every`.
pub trait Scheduled {
    fn schedule(&self) -> Schedule;
}

macro_rules! scheduled {
    ($($t:ty),*) => {$(
        impl Scheduled for $t {
            fn schedule(&self) -> Schedule {
                Schedule { at: self.at.clone(), every: self.every }
            }
        }
    )*};
}

scheduled!(
    SpotStorm,
    CapacityWave,
    Malformed,
    ControllerCrash,
    LeaderFailover,
    AmiRelease,
    ClaimForceDeleted,
    TagsLost,
    ScheduledMaintenance
);

/// `spot-storm`: a share of the live spot instances of one zone get an interruption warning at
/// once (EC2 reclaims them two minutes later).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SpotStorm {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
    /// Share of the candidate instances warned (0..1; at least one when there is a candidate).
    #[serde(default = "default_storm_share")]
    pub share: f64,
    /// The zone hit; by default one zone with live spot instances, drawn by the seed.
    #[serde(default)]
    pub zone: Option<String>,
    /// Only instances of this type; by default every type.
    #[serde(default)]
    pub instance_type: Option<String>,
}

fn default_storm_share() -> f64 {
    0.3
}

/// `capacity-wave`: every pool of one zone (of `capacity_type`, or spot and on-demand) has no
/// free capacity for `duration`, then gets back what it had.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityWave {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
    #[serde(with = "humantime_serde", default = "default_wave_duration")]
    pub duration: Duration,
    /// The zone; by default one with live instances (else any), drawn by the seed.
    #[serde(default)]
    pub zone: Option<String>,
    /// `spot` or `on-demand`; by default both.
    #[serde(default)]
    pub capacity_type: Option<String>,
}

fn default_wave_duration() -> Duration {
    Duration::from_secs(10 * 60)
}

/// A fraction of something (instances that boot slowly or never): 0..1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fraction {
    pub fraction: f64,
}

/// A fraction of calls or messages a fault hits: 0..1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rate {
    pub rate: f64,
}

/// `ec2-latency`: every EC2 call is served after a delay drawn uniformly from the bounds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Latency {
    pub latency_ms_min: u64,
    pub latency_ms_max: u64,
}

/// `ec2-consistency-lag`: how long a launched instance stays invisible to `DescribeInstances`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lag {
    #[serde(with = "humantime_serde")]
    pub lag: Duration,
}

/// `sqs-malformed`: a body that is not an interruption event is put into the queue.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Malformed {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
}

/// `api-watch-drop`: a share of watches end after a number of events drawn up to the bound, as a
/// dropped connection does; the client re-watches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WatchDrop {
    pub rate: f64,
    #[serde(default = "default_watch_events_max")]
    pub after_events_max: u64,
}

fn default_watch_events_max() -> u64 {
    20
}

/// Where in its work a crashing controller dies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashPoint {
    /// At a seam call of its next step drawn by the seed (or after the step, if it makes fewer).
    #[default]
    Anywhere,
    /// Right after its next successful `CreateFleet`, before it records the instance.
    AfterLaunch,
    /// Right after its next successful eviction, with the rest of the drain still to do.
    AfterEviction,
}

/// `controller-crash`: the controller process dies; a new one starts `downtime` later and must
/// carry on from what the API server and EC2 hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ControllerCrash {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
    #[serde(with = "humantime_serde", default = "default_downtime")]
    pub downtime: Duration,
    #[serde(default)]
    pub point: CrashPoint,
}

fn default_downtime() -> Duration {
    Duration::from_secs(20)
}

/// `leader-failover`: two replicas run with leader election over a Lease; at each firing the
/// leader is killed (it restarts `downtime` later as a new candidate) and the other replica takes
/// over once the lease expires.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderFailover {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
    #[serde(with = "humantime_serde", default = "default_downtime")]
    pub downtime: Duration,
}

/// `pdb-never-allows`: a PodDisruptionBudget with `maxUnavailable: 0` over `deployment` (by
/// default over every Deployment of the scenario, one budget each). Drains of nodes holding
/// those pods end only by a terminationGracePeriod or the instance going away.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PdbNeverAllows {
    #[serde(default)]
    pub deployment: Option<String>,
}

/// `ami-release`: a new release of `family` is published (one image per architecture and
/// variant); `@latest` aliases and SSM `recommended` parameters move to it, pinned aliases do
/// not. Releases are named after the simulated date, a day apart per firing (`v20250602`, ...;
/// Bottlerocket `1.41.0`, ...).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmiRelease {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
    /// `al2023` (default), `al2` or `bottlerocket`.
    #[serde(default = "default_ami_family")]
    pub family: String,
}

fn default_ami_family() -> String {
    "al2023".to_string()
}

/// `claim-force-deleted`: a user force-deletes one NodeClaim, drawn by the seed among those that
/// recorded an instance and are not being deleted: its finalizer is removed, then it is deleted,
/// so the controller never terminates its instance. What must end that instance is garbage
/// collection (the `no-leaked-instances` invariant's window), as upstream's instance GC does.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaimForceDeleted {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
}

/// `tags-lost`: someone other than Karpenter deletes Karpenter's tags (every key under
/// `karpenter.sh/` and `karpenter.k8s.aws/`) from one live instance of this cluster's Karpenter,
/// drawn by the seed among those still carrying `karpenter.sh/nodeclaim` — a tag-policy
/// clean-up, or a user's `aws ec2 delete-tags`. `eks:eks-cluster-name` and `Name` stay.
///
/// What a correct controller must do, as upstream does: nothing changes for an instance whose
/// NodeClaim names it (`status.providerID`) — upstream's `Get` and `Delete` address an instance by
/// id, not by tag — so its claim registers, is disrupted and terminates it as any other
/// (`no-leaked-instances`, `termination-progress`, `drained-before-terminate` watch that).
/// Garbage collection must leave it alone while a claim names it (it cannot see it anyway).
///
/// What no controller can do, upstream included: find a stripped instance no claim names.
/// Upstream's garbage collection lists instances by `karpenter.sh/nodepool`,
/// `karpenter.k8s.aws/ec2nodeclass` and `eks:eks-cluster-name` (`instance.List`), and a launch
/// whose answer was lost finds its instance by `karpenter.sh/nodeclaim` only: a stripped instance
/// whose claim is gone (force-deleted, or a lost launch answer the claim never recorded) runs on
/// until someone terminates it. `no-leaked-instances` excuses exactly those instances, and only
/// once stripped (`Invariants::note_tags_lost`): a deliberate, documented limit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TagsLost {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
}

/// `scheduled-maintenance`: EC2 schedules one live instance of this cluster's Karpenter (tagged
/// `karpenter.sh/nodeclaim`, drawn by the seed) for a stop, as it does for degraded hardware:
/// AWS Health's `AWS_EC2_INSTANCE_STOP_SCHEDULED` scheduled-change event at once, the stop
/// `notice` later. Upstream cordons and drains such a node as it does a spot warning; ours also
/// holds the eviction for a replacement, at most until
/// `SCHEDULED_CHANGE_MARGIN` before the stop (`interruption/handler.rs`). The
/// `scheduled-change-acted` invariant holds the controller to having started by the stop.
/// (Real notices are days or weeks; the swarm's are minutes, so they fall inside a run.)
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduledMaintenance {
    /// Fires at these times since the start of the run.
    #[serde(with = "durations", default)]
    pub at: Vec<Duration>,
    /// Fires at a seeded rate with this mean gap.
    #[serde(with = "humantime_serde", default)]
    pub every: Option<Duration>,
    /// From the event to the stop.
    #[serde(with = "humantime_serde", default = "default_maintenance_notice")]
    pub notice: Duration,
}

/// Whether [`FaultMix::draw`] (the default swarm) may switch `scheduled-maintenance` on; its coin
/// and intensities are drawn either way, and `--faults scheduled-maintenance` turns it on. On.
///
/// First drawn, swarm seeds 1..100 (madsim release build) passed 91/100: nine seeds never
/// settled, each with a NodeClaim terminating for good on an instance EC2 had stopped (seed 40:
/// a claim deleted on its scheduled change at 00:29:32, its node holding
/// `karpenter.sh/do-not-disrupt` pods of the `guarded` part and no terminationGracePeriod; seeds
/// 22, 39, 67: pods `terminating` on such a node). The controller did what upstream does: it
/// never evicts a do-not-disrupt pod before a terminationGracePeriod, and a stopped instance is
/// still an instance. The world lacked Kubernetes' taint eviction: a node whose kubelet stopped
/// reporting is tainted `NoExecute`, and its pods, which carry the default 300 s toleration, are
/// deleted after it, do-not-disrupt or not; once stuck terminating they no longer hold the
/// drain (the kubelet stand-in now does this, `kubelet/taint_eviction.rs`, also on a node being
/// deleted). With it 99/100 (seed 40 settled 8 s late: a stop announced just before the faults
/// ended, with a 17-minute notice); with notices of 5–15 min, 100/100.
pub const DRAW_SCHEDULED_MAINTENANCE: bool = true;

fn default_maintenance_notice() -> Duration {
    Duration::from_secs(15 * 60)
}

/// Which faults are on, and how hard. `Default` is every fault off.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct FaultMix {
    pub spot_storm: Option<SpotStorm>,
    pub capacity_wave: Option<CapacityWave>,
    pub slow_boot: Option<Fraction>,
    pub never_boot: Option<Fraction>,
    pub ec2_throttle: Option<Rate>,
    #[serde(rename = "ec2-5xx")]
    pub ec2_5xx: Option<Rate>,
    pub ec2_latency: Option<Latency>,
    pub ec2_consistency_lag: Option<Lag>,
    pub sqs_duplicate: Option<Rate>,
    pub sqs_reorder: Option<Rate>,
    pub sqs_malformed: Option<Malformed>,
    pub api_conflict: Option<Rate>,
    #[serde(rename = "api-5xx")]
    pub api_5xx: Option<Rate>,
    pub api_watch_drop: Option<WatchDrop>,
    pub controller_crash: Option<ControllerCrash>,
    pub leader_failover: Option<LeaderFailover>,
    pub pdb_never_allows: Option<PdbNeverAllows>,
    pub ami_release: Option<AmiRelease>,
    pub ec2_lost_response: Option<Rate>,
    pub claim_force_deleted: Option<ClaimForceDeleted>,
    pub tags_lost: Option<TagsLost>,
    pub scheduled_maintenance: Option<ScheduledMaintenance>,
}

/// The swarm draw's source: the seed's stream, and whether each fault in catalogue order is on.
struct Coins<'a> {
    rng: ChaCha8Rng,
    names: std::slice::Iter<'a, &'static str>,
    choose: &'a dyn Fn(&str, bool) -> bool,
}

impl Coins<'_> {
    /// The next fault's coin, and whether it is on.
    fn on(&mut self) -> bool {
        let coin = self.rng.gen_bool(0.5);
        let name = self.names.next().copied().unwrap_or_default();
        (self.choose)(name, coin)
    }

    fn minutes(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_secs(60 * self.rng.gen_range(lo..=hi))
    }
}

impl FaultMix {
    /// No fault.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every fault on at the intensity [`FaultMix::draw`] uses for it.
    pub fn all() -> Self {
        Self {
            spot_storm: Some(SpotStorm {
                at: Vec::new(),
                every: Some(Duration::from_secs(20 * 60)),
                share: 0.3,
                zone: None,
                instance_type: None,
            }),
            capacity_wave: Some(CapacityWave {
                at: Vec::new(),
                every: Some(Duration::from_secs(30 * 60)),
                duration: Duration::from_secs(10 * 60),
                zone: None,
                capacity_type: None,
            }),
            slow_boot: Some(Fraction { fraction: 0.2 }),
            never_boot: Some(Fraction { fraction: 0.1 }),
            ec2_throttle: Some(Rate { rate: 0.1 }),
            ec2_5xx: Some(Rate { rate: 0.03 }),
            ec2_latency: Some(Latency {
                latency_ms_min: 50,
                latency_ms_max: 500,
            }),
            ec2_consistency_lag: Some(Lag {
                lag: Duration::from_secs(8),
            }),
            sqs_duplicate: Some(Rate { rate: 0.2 }),
            sqs_reorder: Some(Rate { rate: 0.3 }),
            sqs_malformed: Some(Malformed {
                at: Vec::new(),
                every: Some(Duration::from_secs(10 * 60)),
            }),
            api_conflict: Some(Rate { rate: 0.03 }),
            api_5xx: Some(Rate { rate: 0.02 }),
            api_watch_drop: Some(WatchDrop {
                rate: 0.2,
                after_events_max: 20,
            }),
            controller_crash: Some(ControllerCrash {
                at: Vec::new(),
                every: Some(Duration::from_secs(30 * 60)),
                downtime: Duration::from_secs(20),
                point: CrashPoint::Anywhere,
            }),
            leader_failover: Some(LeaderFailover {
                at: Vec::new(),
                every: Some(Duration::from_secs(40 * 60)),
                downtime: Duration::from_secs(30),
            }),
            pdb_never_allows: Some(PdbNeverAllows { deployment: None }),
            ami_release: Some(AmiRelease {
                at: Vec::new(),
                every: Some(Duration::from_secs(60 * 60)),
                family: default_ami_family(),
            }),
            ec2_lost_response: Some(Rate { rate: 0.1 }),
            claim_force_deleted: Some(ClaimForceDeleted {
                at: Vec::new(),
                every: Some(Duration::from_secs(20 * 60)),
            }),
            tags_lost: Some(TagsLost {
                at: Vec::new(),
                every: Some(Duration::from_secs(20 * 60)),
            }),
            scheduled_maintenance: Some(ScheduledMaintenance {
                at: Vec::new(),
                every: Some(Duration::from_secs(20 * 60)),
                notice: default_maintenance_notice(),
            }),
        }
    }

    /// A mix for swarm testing: each fault on or off by the seed (about half of them on), each
    /// with a moderate intensity drawn within a range. Every fault draws the same number of
    /// values from the one stream whether it ends up on or not, so one fault's intensity does
    /// not depend on whether another was drawn on.
    pub fn draw(seed: u64) -> Self {
        Self::draw_choosing(seed, |name, coin| {
            coin && (name != SCHEDULED_MAINTENANCE || DRAW_SCHEDULED_MAINTENANCE)
        })
    }

    /// Like [`FaultMix::draw`], with exactly the faults named in `names` on (intensities still
    /// drawn from the seed, so a fault forced on gets the intensity a draw would give it).
    pub fn draw_only(seed: u64, names: &[&str]) -> Self {
        Self::draw_choosing(seed, |name, _| names.contains(&name))
    }

    /// The draw behind [`FaultMix::draw`]: `choose(fault, coin)` decides whether a fault is on,
    /// given the seed's coin for it. Faults are drawn in catalogue order, each with its coin then
    /// its intensities.
    fn draw_choosing(seed: u64, choose: impl Fn(&str, bool) -> bool) -> Self {
        let mut coins = Coins {
            rng: Streams::new(seed, "fault-mix").stream("draw"),
            names: FAULT_NAMES.iter(),
            choose: &choose,
        };
        let mut mix = Self::default();
        mix.draw_capacity(&mut coins);
        mix.draw_ec2(&mut coins);
        mix.draw_queue_and_api(&mut coins);
        mix.draw_processes(&mut coins);
        mix.draw_releases(&mut coins);
        mix.draw_orphans(&mut coins);
        mix.draw_maintenance(&mut coins);
        mix
    }

    /// Scheduled maintenance (drawn after the orphaning faults, so every fault before keeps the
    /// draws it had before it existed): every 10–40 min, a notice of 5–15 min. The controller's
    /// replacement hold ends 5 min before the stop, so every notice leaves it time; and a stop
    /// announced just before the faults end still lands 10 min before the liveness deadline,
    /// which a stopped node's drain needs (300 s of taint toleration, then a minute per tier for
    /// pods nobody confirms; seed 40 with notices up to 20 min: its node's last pods were still
    /// Terminating 8 s past the deadline).
    fn draw_maintenance(&mut self, c: &mut Coins<'_>) {
        let (flag, every, notice) = (c.on(), c.minutes(10, 40), c.minutes(5, 15));
        if flag {
            self.scheduled_maintenance = Some(ScheduledMaintenance {
                at: Vec::new(),
                every: Some(every),
                notice,
            });
        }
    }

    /// Faults that orphan instances: lost launch answers, force-deleted claims, lost tags (drawn
    /// after the releases, each after the one before it, so every fault before keeps the draws it
    /// had before these existed).
    fn draw_orphans(&mut self, c: &mut Coins<'_>) {
        let (flag, rate) = (c.on(), c.rng.gen_range(0.05..=0.3));
        if flag {
            self.ec2_lost_response = Some(Rate { rate });
        }
        let (flag, every) = (c.on(), c.minutes(5, 20));
        if flag {
            self.claim_force_deleted = Some(ClaimForceDeleted {
                at: Vec::new(),
                every: Some(every),
            });
        }
        let (flag, every) = (c.on(), c.minutes(5, 20));
        if flag {
            self.tags_lost = Some(TagsLost {
                at: Vec::new(),
                every: Some(every),
            });
        }
    }

    /// AMI releases (drawn last: the faults before keep the draws they had before it existed).
    fn draw_releases(&mut self, c: &mut Coins<'_>) {
        let (flag, every) = (c.on(), c.minutes(20, 90));
        if flag {
            self.ami_release = Some(AmiRelease {
                at: Vec::new(),
                every: Some(every),
                family: default_ami_family(),
            });
        }
    }

    /// Spot storms, capacity waves, slow and never-booting instances.
    fn draw_capacity(&mut self, c: &mut Coins<'_>) {
        let (flag, every, share) = (c.on(), c.minutes(10, 40), c.rng.gen_range(0.1..=0.5));
        if flag {
            self.spot_storm = Some(SpotStorm {
                at: Vec::new(),
                every: Some(every),
                share,
                zone: None,
                instance_type: None,
            });
        }
        let (flag, every, duration) = (c.on(), c.minutes(20, 60), c.minutes(3, 15));
        if flag {
            self.capacity_wave = Some(CapacityWave {
                at: Vec::new(),
                every: Some(every),
                duration,
                zone: None,
                capacity_type: None,
            });
        }
        let (flag, fraction) = (c.on(), c.rng.gen_range(0.05..=0.3));
        if flag {
            self.slow_boot = Some(Fraction { fraction });
        }
        let (flag, fraction) = (c.on(), c.rng.gen_range(0.02..=0.15));
        if flag {
            self.never_boot = Some(Fraction { fraction });
        }
    }

    /// EC2 throttling, 5xx, latency and consistency lag.
    fn draw_ec2(&mut self, c: &mut Coins<'_>) {
        let (flag, rate) = (c.on(), c.rng.gen_range(0.02..=0.2));
        if flag {
            self.ec2_throttle = Some(Rate { rate });
        }
        let (flag, rate) = (c.on(), c.rng.gen_range(0.01..=0.05));
        if flag {
            self.ec2_5xx = Some(Rate { rate });
        }
        let (flag, max) = (c.on(), c.rng.gen_range(100..=2000));
        if flag {
            self.ec2_latency = Some(Latency {
                latency_ms_min: 20,
                latency_ms_max: max,
            });
        }
        let (flag, lag) = (c.on(), c.rng.gen_range(2..=30));
        if flag {
            self.ec2_consistency_lag = Some(Lag {
                lag: Duration::from_secs(lag),
            });
        }
    }

    /// SQS delivery faults and API-server faults.
    fn draw_queue_and_api(&mut self, c: &mut Coins<'_>) {
        let (flag, rate) = (c.on(), c.rng.gen_range(0.05..=0.3));
        if flag {
            self.sqs_duplicate = Some(Rate { rate });
        }
        let (flag, rate) = (c.on(), c.rng.gen_range(0.1..=0.5));
        if flag {
            self.sqs_reorder = Some(Rate { rate });
        }
        let (flag, every) = (c.on(), c.minutes(2, 20));
        if flag {
            self.sqs_malformed = Some(Malformed {
                at: Vec::new(),
                every: Some(every),
            });
        }
        let (flag, rate) = (c.on(), c.rng.gen_range(0.01..=0.05));
        if flag {
            self.api_conflict = Some(Rate { rate });
        }
        let (flag, rate) = (c.on(), c.rng.gen_range(0.005..=0.03));
        if flag {
            self.api_5xx = Some(Rate { rate });
        }
        let (flag, rate, events) = (c.on(), c.rng.gen_range(0.05..=0.3), c.rng.gen_range(5..=50));
        if flag {
            self.api_watch_drop = Some(WatchDrop {
                rate,
                after_events_max: events,
            });
        }
    }

    /// Controller crashes, leader failover, budgets that never allow.
    fn draw_processes(&mut self, c: &mut Coins<'_>) {
        let (flag, every, point) = (c.on(), c.minutes(10, 60), c.rng.gen_range(0..3u8));
        if flag {
            self.controller_crash = Some(ControllerCrash {
                at: Vec::new(),
                every: Some(every),
                downtime: Duration::from_secs(20),
                point: match point {
                    0 => CrashPoint::Anywhere,
                    1 => CrashPoint::AfterLaunch,
                    _ => CrashPoint::AfterEviction,
                },
            });
        }
        let (flag, every) = (c.on(), c.minutes(15, 60));
        if flag {
            self.leader_failover = Some(LeaderFailover {
                at: Vec::new(),
                every: Some(every),
                downtime: Duration::from_secs(30),
            });
        }
        let flag = c.on();
        if flag {
            self.pdb_never_allows = Some(PdbNeverAllows { deployment: None });
        }
    }

    /// Every fault that is on in `self`, and every other one as `base` has it: a swarm's drawn
    /// mix over a scenario's own faults.
    pub fn or(self, base: FaultMix) -> Self {
        Self {
            spot_storm: self.spot_storm.or(base.spot_storm),
            capacity_wave: self.capacity_wave.or(base.capacity_wave),
            slow_boot: self.slow_boot.or(base.slow_boot),
            never_boot: self.never_boot.or(base.never_boot),
            ec2_throttle: self.ec2_throttle.or(base.ec2_throttle),
            ec2_5xx: self.ec2_5xx.or(base.ec2_5xx),
            ec2_latency: self.ec2_latency.or(base.ec2_latency),
            ec2_consistency_lag: self.ec2_consistency_lag.or(base.ec2_consistency_lag),
            sqs_duplicate: self.sqs_duplicate.or(base.sqs_duplicate),
            sqs_reorder: self.sqs_reorder.or(base.sqs_reorder),
            sqs_malformed: self.sqs_malformed.or(base.sqs_malformed),
            api_conflict: self.api_conflict.or(base.api_conflict),
            api_5xx: self.api_5xx.or(base.api_5xx),
            api_watch_drop: self.api_watch_drop.or(base.api_watch_drop),
            controller_crash: self.controller_crash.or(base.controller_crash),
            leader_failover: self.leader_failover.or(base.leader_failover),
            pdb_never_allows: self.pdb_never_allows.or(base.pdb_never_allows),
            ami_release: self.ami_release.or(base.ami_release),
            ec2_lost_response: self.ec2_lost_response.or(base.ec2_lost_response),
            claim_force_deleted: self.claim_force_deleted.or(base.claim_force_deleted),
            tags_lost: self.tags_lost.or(base.tags_lost),
            scheduled_maintenance: self.scheduled_maintenance.or(base.scheduled_maintenance),
        }
    }

    /// Whether no fault is on.
    pub fn is_empty(&self) -> bool {
        self.names().is_empty()
    }

    /// The names of the faults that are on, in catalogue order.
    pub fn names(&self) -> Vec<&'static str> {
        let on = [
            self.spot_storm.is_some(),
            self.capacity_wave.is_some(),
            self.slow_boot.is_some(),
            self.never_boot.is_some(),
            self.ec2_throttle.is_some(),
            self.ec2_5xx.is_some(),
            self.ec2_latency.is_some(),
            self.ec2_consistency_lag.is_some(),
            self.sqs_duplicate.is_some(),
            self.sqs_reorder.is_some(),
            self.sqs_malformed.is_some(),
            self.api_conflict.is_some(),
            self.api_5xx.is_some(),
            self.api_watch_drop.is_some(),
            self.controller_crash.is_some(),
            self.leader_failover.is_some(),
            self.pdb_never_allows.is_some(),
            self.ami_release.is_some(),
            self.ec2_lost_response.is_some(),
            self.claim_force_deleted.is_some(),
            self.tags_lost.is_some(),
            self.scheduled_maintenance.is_some(),
        ];
        FAULT_NAMES
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect()
    }

    /// Checks the intensities (fractions and rates within 0..1, bounds in order, schedules with
    /// a non-zero mean gap); the error names the fault and the field.
    pub fn validate(&self) -> Result<(), String> {
        let unit = |name: &str, field: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(format!("{name}.{field} must be within 0..1, not {v}"))
            }
        };
        let schedule = |name: &str, s: &Schedule| match s.every {
            Some(d) if d.is_zero() => Err(format!("{name}.every must be longer than 0s")),
            _ => Ok(()),
        };
        if let Some(f) = &self.spot_storm {
            schedule(SPOT_STORM, &f.schedule())?;
            unit(SPOT_STORM, "share", f.share)?;
        }
        if let Some(f) = &self.capacity_wave {
            schedule(CAPACITY_WAVE, &f.schedule())?;
            if let Some(ct) = &f.capacity_type
                && !matches!(ct.as_str(), "spot" | "on-demand")
            {
                return Err(format!(
                    "{CAPACITY_WAVE}.capacityType must be spot or on-demand, not {ct:?}"
                ));
            }
        }
        for (name, f) in [(SLOW_BOOT, &self.slow_boot), (NEVER_BOOT, &self.never_boot)] {
            if let Some(f) = f {
                unit(name, "fraction", f.fraction)?;
            }
        }
        for (name, r) in [
            (EC2_THROTTLE, &self.ec2_throttle),
            (EC2_5XX, &self.ec2_5xx),
            (SQS_DUPLICATE, &self.sqs_duplicate),
            (SQS_REORDER, &self.sqs_reorder),
            (API_CONFLICT, &self.api_conflict),
            (API_5XX, &self.api_5xx),
            (EC2_LOST_RESPONSE, &self.ec2_lost_response),
        ] {
            if let Some(r) = r {
                unit(name, "rate", r.rate)?;
            }
        }
        if let Some(l) = &self.ec2_latency
            && l.latency_ms_min > l.latency_ms_max
        {
            return Err(format!(
                "{EC2_LATENCY}.latencyMsMin {} is above latencyMsMax {}",
                l.latency_ms_min, l.latency_ms_max
            ));
        }
        if let Some(f) = &self.sqs_malformed {
            schedule(SQS_MALFORMED, &f.schedule())?;
        }
        if let Some(w) = &self.api_watch_drop {
            unit(API_WATCH_DROP, "rate", w.rate)?;
        }
        if let Some(f) = &self.controller_crash {
            schedule(CONTROLLER_CRASH, &f.schedule())?;
        }
        if let Some(f) = &self.leader_failover {
            schedule(LEADER_FAILOVER, &f.schedule())?;
        }
        if let Some(f) = &self.claim_force_deleted {
            schedule(CLAIM_FORCE_DELETED, &f.schedule())?;
        }
        if let Some(f) = &self.tags_lost {
            schedule(TAGS_LOST, &f.schedule())?;
        }
        if let Some(f) = &self.scheduled_maintenance {
            schedule(SCHEDULED_MAINTENANCE, &f.schedule())?;
            if f.notice.is_zero() {
                return Err(format!("{SCHEDULED_MAINTENANCE}.notice must be above zero"));
            }
        }
        if let Some(f) = &self.ami_release {
            schedule(AMI_RELEASE, &f.schedule())?;
            if !matches!(f.family.as_str(), "al2023" | "al2" | "bottlerocket") {
                return Err(format!(
                    "{AMI_RELEASE}.family must be al2023, al2 or bottlerocket, not {:?}",
                    f.family
                ));
            }
        }
        Ok(())
    }
}

/// When a discrete fault fires next: its fixed times and, with a rate, exponential gaps drawn from
/// the fault's schedule stream (one draw per firing, whatever the cluster looks like).
#[derive(Clone, Debug)]
pub(crate) struct Timer {
    /// Fixed times still to come, ascending.
    at: Vec<Duration>,
    every: Option<Duration>,
    next_random: Option<Duration>,
    rng: ChaCha8Rng,
}

impl Timer {
    /// A timer for `schedule` started at `now` (times since the start of the run).
    pub fn new(schedule: &Schedule, rng: ChaCha8Rng, now: Duration) -> Self {
        let mut at: Vec<Duration> = schedule.at.iter().copied().filter(|t| *t >= now).collect();
        at.sort();
        let mut timer = Self {
            at,
            every: schedule.every,
            next_random: None,
            rng,
        };
        timer.next_random = timer.gap().map(|gap| now + gap);
        timer
    }

    fn gap(&mut self) -> Option<Duration> {
        let mean = self.every?.as_secs_f64();
        // Exponential with that mean, in whole seconds (the world's step), at least one.
        let uniform: f64 = self.rng.r#gen::<f64>();
        let seconds = -mean * (1.0 - uniform).ln();
        Some(Duration::from_secs(
            seconds.clamp(1.0, mean * 50.0).round() as u64
        ))
    }

    /// When it fires next, if ever.
    pub fn next(&self) -> Option<Duration> {
        [self.at.first().copied(), self.next_random]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the fault fires at `now` (at most once per call; a time missed fires late, and
    /// the ones after it keep their places).
    pub fn due(&mut self, now: Duration) -> bool {
        if self.at.first().is_some_and(|t| *t <= now) {
            self.at.remove(0);
            return true;
        }
        if let Some(due) = self.next_random.filter(|t| *t <= now) {
            // From when it was due, not when it fired: the times are the stream's alone.
            self.next_random = self.gap().map(|gap| due + gap);
            return true;
        }
        false
    }
}
