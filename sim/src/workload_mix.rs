//! The swarm's workload draw (issue 22): like the faults, part of each seed's world is drawn
//! from the seed, so that the seeds together meet the situations one fixed workload never does.
//! On top of the scenario's own workload, each of these is on or off by the seed's coin (named
//! stream `workload-mix/draw`, drawn in this order, each with its magnitudes whether it is on or
//! not, so one part's draw never shifts another's):
//!
//! | part | what it adds |
//! |---|---|
//! | `guarded` | a Deployment of 3–10 pods (250m–1 cpu) annotated `karpenter.sh/do-not-disrupt: "true"`, from the start: voluntary disruption must leave their nodes alone, and a drain (an interruption) must not evict them |
//! | `budget` | a PodDisruptionBudget over the scenario's first Deployment, of a drawn shape: `maxUnavailable: 1`, `maxUnavailable: 25%`, `minAvailable: 50%` or `minAvailable: 1` |
//! | `scale-down` | the scenario's first Deployment cut to a third of its replicas at 60–90% of the safety phase (at least one minute before its end), so consolidation runs while the faults are on |
//! | `limited-pool` | a copy of the scenario's first NodePool, `sim-drawn-limited`, weighted above it (its weight + 10) and limited to 3–24 cpu: provisioning fills it first, demand reaches its limit, and the rest must go to the scenario's pool (`nodepool-limits` watches it) ([`DRAW_LIMITED_POOL`]) |
//! | `expiring` | a copy of the scenario's first NodePool, `sim-drawn-expiring`, unweighted, without limits, with an `expireAfter` of 10–20 min and a `terminationGracePeriod` of 5 min, and a Deployment of 1–3 pods (250m–1 cpu) pinned to it: its nodes expire during the run (`expiration-honoured` watches it) ([`DRAW_EXPIRING_AND_PINNED`]) |
//! | `pinned-ami` | a copy of the scenario's first EC2NodeClass, `sim-drawn-pinned`, with its AMI pinned to `al2023@v20250601` (fakecloud's release at start), an unweighted NodePool on it, a Deployment of 1–3 pods (250m) pinned to that pool, and an AL2023 release (the `ami-release` fault) at 5–20 min: `@latest` classes drift, the pinned one must not (`pinned-ami-honoured` watches it) ([`DRAW_EXPIRING_AND_PINNED`]) |
//! | `on-demand` | a copy of the scenario's first NodePool, `sim-drawn-on-demand`, unweighted, without limits, that allows only on-demand capacity, and a Deployment of 2–6 pods (250m–1 cpu) pinned to it, cut to one replica at 30–60% of the safety phase: consolidation of an on-demand node cannot trade it for spot, so a replacement must be a cheaper on-demand type (`consolidation-saves` watches it), and a node whose pods need its own type must stay |
//! | `drought` | a NodePool `sim-drawn-drought` on the scenario's first NodePool's class that can use one offering (one of [`DROUGHT_TYPES`], one zone, on-demand), a drought of that offering (no capacity whatever waves do, [`crate::scenario::Drought`]) from 1–10 min for 4–10 min, and a Deployment of 1–3 pods (250m–1 cpu) pinned to the pool, created as the drought starts: the pods can go nowhere else, so every launch for them meets the dry offering until the drought ends, as a GPU or a rare type runs out in a real region. A controller must not ask EC2 for the offering again within the unavailable-offerings TTL (3 min, shorter than any drought here) of being told it is dry (`unavailable-offerings-honoured` watches it) |
//! | `custom-ami` | an EC2NodeClass `sim-drawn-custom` (a copy of the scenario's first) with `amiFamily: Custom`, the AL2023 EKS image at start selected by name ([`custom_image_name`]) and user data of its own: a plain nodeadm `NodeConfig` naming the world's cluster (name, endpoint, CA, service CIDR) that registers with `karpenter.sh/unregistered:NoExecute` only, as upstream asks of custom user data; a NodePool on it (on-demand only) with the startup taint [`CUSTOM_STARTUP_TAINT`]`:NoSchedule`, and a Deployment of 1–3 pods (250m–1 cpu) pinned to it from the start. Karpenter labels no such node `karpenter.sh/do-not-sync-taints`, so registration must put the startup taint on the node itself; the sim's startup-taint owner removes it once the node has been Ready a while (`startup-taints-honoured` watches that no pod lands before) |
//! | `critical` | a Deployment `kube-system/critical` of 1–2 pods (250m) with `priorityClassName` `system-cluster-critical` or `system-node-critical` (drawn), on the scenario's pools from the start: they share nodes with ordinary pods, and a drain (consolidation, expiry, interruption) must evict them only once the ordinary pods are gone, upstream's eviction tiers (`drain-order` watches it) |
//! | `daemonset` | a DaemonSet `sim-drawn-agent` (100–250m cpu, 64–256 MiB, drawn) in the manifests, so a pod of it runs from the start on every Ready node whose taints it tolerates (the world's DaemonSet stand-in, placed before the scheduler binds anything else to a new node): the provisioner must leave room for it on every node it launches, as upstream counts DaemonSet overhead (`pods-fit-nodes` watches it), and a drain evicts it last (`drain-order`) ([`DRAW_DAEMONSET`]) |
//! | `stateful` | a StatefulSet `sim-drawn-db` of 2–4 replicas (250m–1 cpu, drawn; a zone spread is drawn but not used, [`DRAW_STATEFUL_SPREAD`]: on, it would be `maxSkew: 1`, `DoNotSchedule`, `minDomains` the zones the scenario's first NodePool offers, the pods pinned to that pool and a PodDisruptionBudget of `maxUnavailable: 1`) whose claims use the StorageClass `sim-drawn-zonal` (EBS CSI, `WaitForFirstConsumer`): once a pod's volume is provisioned in a zone, the pod runs only there, so every rehoming (consolidation, expiry, drift, interruption) needs capacity in that zone, upstream's volume topology ([`DRAW_STATEFUL`]) |
//! | `scheduled-budget` | a disruption budget with a cron `schedule` (UTC) and a `duration` added to the scenario's first NodePool (after the CRD's default `nodes: 10%` when it lists none), whose window opens or closes during the safety phase: once at 00:02–00:20 for 3–10 min, every 6, 10 or 15 min for 3, 5 or 7 min, or `@hourly` from the start for 5–30 min; `nodes` `0` (half the draws: no disruption it applies to may start in the window), `1` or `20%`; for every reason or only `Drifted`, `Underutilized`, `Empty` or `Underutilized` and `Empty`. `budgets-respected` judges each command against the budgets active at its start ([`DRAW_SCHEDULED_BUDGET`]) |
//!
//! The draw only adds: a scenario without a Deployment gets only `guarded`, `limited-pool`,
//! `expiring`, `pinned-ami`, `on-demand`, `drought`, `custom-ami`, `critical`, `daemonset`,
//! `stateful` and `scheduled-budget` (`limited-pool` to `custom-ami` and `scheduled-budget` only
//! with a NodePool, and an EC2NodeClass for `pinned-ami` and `custom-ami`, in its manifests).

use std::collections::BTreeMap;
use std::time::Duration;

use fakekit::Streams;
use rand::Rng;
use serde::Serialize;

use crate::faults::AmiRelease;
use crate::scenario::{DeploymentSpec, Scenario, StatefulSetSpec, WorkloadEvent};

/// Name of the `guarded` Deployment.
pub const GUARDED: &str = "guarded";
/// Name of the `critical` Deployment.
pub const CRITICAL: &str = "critical";

/// Which workload a swarm seed runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkloadSelection {
    /// The scenario's workload plus the seed's draw ([`WorkloadMix::draw`]).
    #[default]
    Drawn,
    /// The scenario's workload as written.
    Scenario,
}

/// A `--workload` value that is neither `drawn` nor `scenario`.
#[derive(Debug, thiserror::Error)]
#[error("unknown workload selection {0:?} (drawn or scenario)")]
pub struct UnknownWorkload(String);

impl std::str::FromStr for WorkloadSelection {
    type Err = UnknownWorkload;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "drawn" => Ok(Self::Drawn),
            "scenario" => Ok(Self::Scenario),
            other => Err(UnknownWorkload(other.to_string())),
        }
    }
}

impl std::fmt::Display for WorkloadSelection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Drawn => "drawn",
            Self::Scenario => "scenario",
        })
    }
}

/// One seed's drawn additions (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadMix {
    /// `guarded`: replicas and cpu (millicores).
    pub guarded: Option<(u32, u32)>,
    /// `budget`: the PodDisruptionBudget's spec field and value (`maxUnavailable`, `25%`).
    pub budget: Option<(String, String)>,
    /// `scale-down`: when (since the start of the run).
    #[serde(with = "humantime_serde")]
    pub scale_down: Option<Duration>,
    /// `limited-pool`: its cpu limit (cores).
    pub limited_pool: Option<u32>,
    /// `expiring`: the pool's `expireAfter`, and the pinned Deployment's replicas and cpu
    /// (millicores).
    pub expiring: Option<Expiring>,
    /// `pinned-ami`: when the release is published, and the pinned Deployment's replicas.
    pub pinned_ami: Option<PinnedAmi>,
    /// `on-demand`: the pinned Deployment's replicas, cpu and scale-down.
    pub on_demand: Option<OnDemand>,
    /// `drought`: the dry offering, when and how long, and the pinned Deployment.
    pub drought: Option<DroughtPart>,
    /// `custom-ami`: the pinned Deployment's replicas and cpu (millicores).
    pub custom_ami: Option<(u32, u32)>,
    /// `critical`: the Deployment's replicas and priority class.
    pub critical: Option<(u32, String)>,
    /// `daemonset`: its pods' cpu (millicores) and memory (MiB).
    pub daemonset: Option<(u32, u32)>,
    /// `stateful`: the StatefulSet's replicas, cpu and zone spread.
    pub stateful: Option<Stateful>,
    /// `scheduled-budget`: the budget added to the scenario's first NodePool.
    pub scheduled_budget: Option<ScheduledBudget>,
}

/// The `scheduled-budget` part's draw: one disruption budget with a cron `schedule` (UTC) and a
/// `duration`, as a NodePool's `spec.disruption.budgets` entry holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledBudget {
    pub schedule: String,
    /// Whole minutes (`7m`), as the CRD's pattern admits.
    pub duration: String,
    /// A count or a percentage.
    pub nodes: String,
    /// The reasons it applies to (`None`: every reason).
    pub reasons: Option<Vec<String>>,
}

/// The `stateful` part's draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stateful {
    pub replicas: u32,
    /// Millicores per pod.
    pub cpu: u32,
    /// Its pods spread over zones (`maxSkew: 1`, `DoNotSchedule`, `minDomains` the zones the
    /// scenario's first NodePool offers), pinned to that pool, under a PodDisruptionBudget of
    /// `maxUnavailable: 1` (see [`DRAW_STATEFUL_SPREAD`]).
    pub spread_by_zone: bool,
}

/// Name of the `daemonset` DaemonSet.
pub const DAEMONSET: &str = "sim-drawn-agent";
/// Name of the `stateful` StatefulSet.
pub const STATEFUL: &str = "sim-drawn-db";
/// Name of the `stateful` part's StorageClass: EBS-like, zonal, `WaitForFirstConsumer`.
pub const ZONAL_CLASS: &str = "sim-drawn-zonal";

/// The `drought` part's draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DroughtPart {
    pub instance_type: String,
    pub zone: String,
    /// When the drought starts (and the pinned Deployment is created), since the start of the
    /// run.
    #[serde(with = "humantime_serde")]
    pub from: Duration,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    pub replicas: u32,
    /// Millicores per pod.
    pub cpu: u32,
}

/// The instance types a `drought` pool is drawn from: 4 vCPUs (room for its 1–3 pods), on-demand
/// in every built-in zone.
pub const DROUGHT_TYPES: [&str; 3] = ["c6a.xlarge", "m6i.xlarge", "r6i.xlarge"];

/// The `on-demand` part's draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OnDemand {
    pub replicas: u32,
    /// Millicores per pod.
    pub cpu: u32,
    /// When the Deployment is cut to one replica, since the start of the run.
    #[serde(with = "humantime_serde")]
    pub scale_down: Duration,
}

/// The `pinned-ami` part's draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PinnedAmi {
    /// When the AL2023 release is published, since the start of the run.
    #[serde(with = "humantime_serde")]
    pub release_at: Duration,
    pub replicas: u32,
}

/// The `expiring` part's draw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expiring {
    #[serde(with = "humantime_serde")]
    pub expire_after: Duration,
    pub replicas: u32,
    pub cpu: u32,
}

/// Whether the swarm's draw switches `expiring` and `pinned-ami` on (see [`WorkloadMix::draw`]).
/// Off from f2b0054 to 12b51cc: with them on, the default swarm failed seeds 6, 7, 43, 71
/// (`interruption-rehomed`), 15 (`termination-progress`) and 63 (`budgets-respected`). At
/// 12b51cc, after fixes made for other seeds, only 43 and 71 of seeds 1..100 failed: 71 was the
/// controller's (a warning for a claim already being deleted by expiration did not mark it
/// interrupted, so its PDB-held pods got no replacement) and 43 the invariant's (it did not
/// allow for a scale-up's pods taking the room of a replacement launched in time). Both fixed:
/// seeds 1..300 pass with the parts on. Mutations 14 and 27 need them.
pub const DRAW_EXPIRING_AND_PINNED: bool = true;

/// Whether the swarm's draw switches `limited-pool` on (see [`WorkloadMix::draw`]). Off at
/// 68bb344, where seed 96 failed `nodepool-limits` ("cpu 24000 > limit 17000": a claim being
/// deleted still counted beside its replacement). The invariant was stricter than upstream,
/// whose limits count no node `MarkedForDeletion`; it now counts as upstream does, and with the
/// part on the default swarm (seeds 1..100) passes 100/100. Mutations 08 and 23 need it.
pub const DRAW_LIMITED_POOL: bool = true;

/// Whether the swarm's draw switches `daemonset` on (see [`WorkloadMix::draw`]). On since it
/// was added: with it and `stateful` on, seeds 1..100 pass 100/100 (the two failures of the
/// first run were the `stateful` spread's, [`DRAW_STATEFUL_SPREAD`]).
pub const DRAW_DAEMONSET: bool = true;

/// Whether the swarm's draw switches `stateful` on (see [`WorkloadMix::draw`]); on, without its
/// zone spread ([`DRAW_STATEFUL_SPREAD`]).
pub const DRAW_STATEFUL: bool = true;

/// Whether the `stateful` part's drawn zone spread is used; the coin is drawn either way. Off.
///
/// First (`maxSkew: 1`, `DoNotSchedule`, no `minDomains`), seeds 3 and 65 of swarm 1..100
/// never settled, one replica pending for good, and the world was right to leave it so.
/// kube-scheduler counts spread domains only among the nodes that exist: before any node was in
/// the third zone it bound a second replica into a zone that held one (seed 3: `db-2`, `db-3`
/// and `db-0`'s volumes in us-west-2a, `db-1`'s in 2b), each volume was then provisioned there
/// for good, and once a node existed in us-west-2c (0 replicas) the rescheduled `db-0`, which
/// its volume pins to us-west-2a (2 replicas), broke `maxSkew` there and nowhere else could it
/// go (kubernetes-sigs/karpenter#1239: hard zone spread with zonal volumes).
///
/// The spread a platform team would deploy instead, built here and kept off: `minDomains` the
/// number of zones the pool offers ([`offered_zones`]). kube-scheduler's PodTopologySpread
/// (`filtering.go`: `minMatchNum`) takes the global minimum as 0 while fewer eligible domains
/// than `minDomains` hold a node; upstream Karpenter (`topologygroup.go`: `domainMinCount`)
/// counts domains from the NodePools' requirements and offerings and does the same, and keeps a
/// pod's volume zone out of the domains the minimum is taken over (volume requirements go to
/// the node requirements only, `provisioner.go`). The sim's scheduler stand-in
/// (`scheduler/interpod.rs`) and the controller (`solver/topology_plan.rs`) both do so already.
/// Replicas then go one per zone, and a replica pinned to its volume's zone can always go back.
///
/// It still deadlocks, legitimately, when a replica not yet bound to a volume is scheduled
/// while a bound one is away (evicted, terminating, or its node gone): terminating and pending
/// pods do not count, so the newcomer may take the absent one's zone, two volumes then share a
/// zone while another has none, and the absent replica breaks `maxSkew` in its own zone for
/// good. Swarm 1..100 (madsim release build) with the spread on showed it:
/// `minDomains` alone, 99/100 (seed 9: consolidation evicted `db-1`, `Underutilized`, while
/// `db-0` and `db-2` were still nominated to startup-tainted `custom-ami` claims; from then on
/// the controller found no zone for `db-1`); with a trial `OrderedReady` StatefulSet stand-in
/// too (not kept), 96/100 (4, 60, 82, 93; in seed 4 `db-0` was force-terminated on its
/// `expiring` node while `db-2`, created after it, was not yet bound); pinned to the scenario's
/// first NodePool with a PodDisruptionBudget of `maxUnavailable: 1` (what this builds), 98/100:
/// seeds 9 (`liveness`, `db-0` pending) and 92 (`pods-scheduled`, `db-0` pending 601 s) fail,
/// both with the `api-conflict` fault, both the world's doing (seen with the stand-in's debug
/// log, `KARPENTER_SIM_LOG=karpenter_sim=debug`): the scheduler stand-in chose a node for
/// `db-0`, provisioned its volume in that zone (PreBind), then lost the bind (a guarded merge
/// patch, refused by an injected conflict) and did not count `db-0` there, so `db-1`, next in
/// the same pass, was bound into the same zone (seed 9: both to `ip-10-2-0-4`, us-west-2c;
/// seed 92: `ip-10-1-0-5`, us-west-2b): two volumes in one zone, the deadlock above. The real
/// bind is a `pods/binding` create that no resourceVersion conflict refuses, so this was
/// stricter than a real cluster. fakekube now serves the Binding (and refuses pod updates that
/// set `spec.nodeName`, as Kubernetes does) and the stand-in binds with it (93e36c3): with the
/// spread on, swarm 1..100 passes 100/100 (9 and 92 settle), but 1..1000 passes 993/1000: six
/// seeds end with one `sim-drawn-db` replica pending for good (283 `pods-scheduled`; 570, 596,
/// 603, 740, 817 `liveness`), the deadlock class above as far as the summary shows, each still
/// to be judged from its log; and seed 200 fails `interruption-rehomed` (`web-76`), not judged
/// either. So it stays off until those are. The debug build's run of a seed is not the madsim
/// build's, so a test cannot replay these seeds.
pub const DRAW_STATEFUL_SPREAD: bool = false;

/// Whether the swarm's draw switches `scheduled-budget` on (see [`WorkloadMix::draw`]). On since
/// it was added (issue 22: no drawn world had a budget with a `schedule`, so mutants of
/// `is_active` in `disruption/budgets.rs` could not be judged): with it on, seeds 1..100 and
/// 101..200 pass 100/100 each (the part on for 49 and 46 of them). cargo-mutants' cm004 (no
/// scheduled budget ever active) fails seed 22 on `budgets-respected` with it, and cm001 (every
/// one always active) seed 19 since that invariant also judges the controller's reported budget
/// blocks (sim/mutations/README.md, cargo-mutants).
pub const DRAW_SCHEDULED_BUDGET: bool = true;

/// Name of the `limited-pool` NodePool.
pub const LIMITED_POOL: &str = "sim-drawn-limited";
/// Name of the `expiring` NodePool and of the Deployment pinned to it.
pub const EXPIRING_POOL: &str = "sim-drawn-expiring";
/// The `expiring` pool's `terminationGracePeriod`: bounds the drain of an expired node that
/// runs `guarded` (do-not-disrupt) pods, as upstream recommends with `expireAfter`.
pub const EXPIRING_GRACE: &str = "5m";
/// Name of the `pinned-ami` EC2NodeClass, NodePool and Deployment.
pub const PINNED_POOL: &str = "sim-drawn-pinned";
/// The alias the `pinned-ami` class pins: fakecloud's AL2023 release at start.
pub const PINNED_ALIAS: &str = "al2023@v20250601";
/// Name of the `on-demand` NodePool and of the Deployment pinned to it.
pub const ON_DEMAND_POOL: &str = "sim-drawn-on-demand";
/// Name of the `drought` NodePool and of the Deployment pinned to it.
pub const DROUGHT_POOL: &str = "sim-drawn-drought";
/// Name of the `custom-ami` EC2NodeClass, NodePool and Deployment.
pub const CUSTOM_POOL: &str = "sim-drawn-custom";
/// The key of the `custom-ami` pool's startup taint (effect `NoSchedule`): an agent's, as a CNI
/// or a security agent declares one, that the sim's startup-taint owner removes.
pub const CUSTOM_STARTUP_TAINT: &str = "example.com/agent-not-ready";

impl WorkloadMix {
    /// The draw of `seed` for a safety phase of `safety`.
    pub fn draw(seed: u64, safety: Duration) -> Self {
        let mut rng = Streams::new(seed, "workload-mix").stream("draw");
        let mut mix = Self::default();
        let (on, replicas, cpu) = (
            rng.gen_bool(0.6),
            rng.gen_range(3..=10u32),
            rng.gen_range(1..=4u32) * 250,
        );
        if on {
            mix.guarded = Some((replicas, cpu));
        }
        let (on, shape) = (rng.gen_bool(0.5), rng.gen_range(0..4u8));
        if on {
            let (field, value) = match shape {
                0 => ("maxUnavailable", "1"),
                1 => ("maxUnavailable", "25%"),
                2 => ("minAvailable", "50%"),
                _ => ("minAvailable", "1"),
            };
            mix.budget = Some((field.to_string(), value.to_string()));
        }
        let (on, share) = (rng.gen_bool(0.5), rng.gen_range(0.6..=0.9));
        if on {
            let at = Duration::from_secs((safety.as_secs_f64() * share) as u64);
            let latest = safety.saturating_sub(Duration::from_secs(60));
            mix.scale_down = Some(at.min(latest));
        }
        // Drawn after the parts above, so each keeps the draws it had before these existed.
        // `limited-pool`: see [`DRAW_LIMITED_POOL`].
        let (on, limit) = (rng.gen_bool(0.5), rng.gen_range(3..=24u32));
        if DRAW_LIMITED_POOL && on {
            mix.limited_pool = Some(limit);
        }
        // `expiring` and `pinned-ami` are drawn (coins and magnitudes) but not yet switched on
        // by the swarm: on, they broke existing invariants on 6 of seeds 1..100 at f2b0054
        // (`interruption-rehomed` on pods pinned to the expiring pool, `budgets-respected` on a
        // drift command beside an expiring node, `termination-progress` with `pinned-ami`),
        // findings still to be judged against upstream (README, mutation testing); switched on
        // again beside `on-demand` (uncommitted tree after 972f8d8) they failed seeds 6, 7 and 71
        // (`interruption-rehomed`, each with `expiring`) and 15 (`termination-progress`, with
        // `pinned-ami`). A mix that sets them (tests, `apply`) gets them.
        let (on, minutes, replicas, cpu) = (
            rng.gen_bool(0.5),
            rng.gen_range(10..=20u64),
            rng.gen_range(1..=3u32),
            rng.gen_range(1..=4u32) * 250,
        );
        if DRAW_EXPIRING_AND_PINNED && on {
            mix.expiring = Some(Expiring {
                expire_after: Duration::from_secs(minutes * 60),
                replicas,
                cpu,
            });
        }
        let (on, minutes, replicas) = (
            rng.gen_bool(0.5),
            rng.gen_range(5..=20u64),
            rng.gen_range(1..=3u32),
        );
        if DRAW_EXPIRING_AND_PINNED && on {
            mix.pinned_ami = Some(PinnedAmi {
                release_at: Duration::from_secs(minutes * 60),
                replicas,
            });
        }
        // `on-demand`: drawn last, so every part above keeps the draws it had before it existed.
        let (on, replicas, cpu, share) = (
            rng.gen_bool(0.5),
            rng.gen_range(2..=6u32),
            rng.gen_range(1..=4u32) * 250,
            rng.gen_range(0.3..=0.6),
        );
        if on {
            let at = Duration::from_secs((safety.as_secs_f64() * share) as u64);
            let latest = safety.saturating_sub(Duration::from_secs(60));
            mix.on_demand = Some(OnDemand {
                replicas,
                cpu,
                scale_down: at.min(latest),
            });
        }
        // `drought`: drawn after `on-demand`, so every part above keeps its draws.
        mix.drought = draw_drought(&mut rng);
        // `custom-ami`: drawn last, so every part above keeps its draws.
        let (on, replicas, cpu) = (
            rng.gen_bool(0.5),
            rng.gen_range(1..=3u32),
            rng.gen_range(1..=4u32) * 250,
        );
        if on {
            mix.custom_ami = Some((replicas, cpu));
        }
        // `critical`, `daemonset`, `stateful`, then `scheduled-budget`: each drawn after every
        // part above, so those keep their draws.
        mix.critical = draw_critical(&mut rng);
        mix.daemonset = draw_daemonset(&mut rng).filter(|_| DRAW_DAEMONSET);
        mix.stateful = draw_stateful(&mut rng).filter(|_| DRAW_STATEFUL);
        mix.scheduled_budget = draw_scheduled_budget(&mut rng).filter(|_| DRAW_SCHEDULED_BUDGET);
        mix
    }

    /// The names of the parts that are on.
    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.guarded.is_some(), "guarded"),
            (self.budget.is_some(), "budget"),
            (self.scale_down.is_some(), "scale-down"),
            (self.limited_pool.is_some(), "limited-pool"),
            (self.expiring.is_some(), "expiring"),
            (self.pinned_ami.is_some(), "pinned-ami"),
            (self.on_demand.is_some(), "on-demand"),
            (self.drought.is_some(), "drought"),
            (self.custom_ami.is_some(), "custom-ami"),
            (self.critical.is_some(), "critical"),
            (self.daemonset.is_some(), "daemonset"),
            (self.stateful.is_some(), "stateful"),
            (self.scheduled_budget.is_some(), "scheduled-budget"),
        ]
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| name)
        .collect()
    }

    /// `scenario` with the mix added.
    pub fn apply(&self, mut scenario: Scenario) -> Scenario {
        let first = scenario.workloads.iter().find_map(|e| e.deployment.clone());
        self.add_pools(&mut scenario);
        // After the copies of the first NodePool: only the first itself gets the budget.
        if let Some(budget) = &self.scheduled_budget {
            scenario.manifests = with_scheduled_budget(&scenario.manifests, budget);
        }
        if let Some((replicas, cpu)) = self.guarded {
            let annotations = BTreeMap::from([(
                karpenter_core::api::labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
                "true".to_string(),
            )]);
            scenario.workloads.insert(
                0,
                deployment_event(
                    Duration::ZERO,
                    DeploymentSpec {
                        name: GUARDED.to_string(),
                        replicas,
                        cpu: format!("{cpu}m"),
                        memory: "512Mi".to_string(),
                        annotations,
                        node_selector: BTreeMap::new(),
                        priority_class_name: None,
                        namespace: None,
                    },
                ),
            );
        }
        if let Some((replicas, class)) = &self.critical {
            scenario.workloads.insert(
                0,
                deployment_event(
                    Duration::ZERO,
                    DeploymentSpec {
                        name: CRITICAL.to_string(),
                        replicas: *replicas,
                        cpu: "250m".to_string(),
                        memory: "256Mi".to_string(),
                        annotations: BTreeMap::new(),
                        node_selector: BTreeMap::new(),
                        priority_class_name: Some(class.clone()),
                        namespace: Some("kube-system".to_string()),
                    },
                ),
            );
        }
        self.add_daemonset_and_stateful(&mut scenario);
        let Some(first) = first else {
            return scenario;
        };
        if let Some((field, value)) = &self.budget {
            let value = match value.parse::<u32>() {
                Ok(n) => n.to_string(),
                Err(_) => format!("{value:?}"),
            };
            scenario.manifests += &format!(
                "\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: sim-drawn-{name}, namespace: default}}\nspec:\n  {field}: {value}\n  selector: {{matchLabels: {{app: {name}}}}}\n",
                name = first.name
            );
        }
        if let Some(at) = self.scale_down {
            let in_effect = scenario
                .workloads
                .iter()
                .filter(|e| e.at <= at)
                .filter_map(|e| e.deployment.as_ref())
                .rfind(|d| d.name == first.name)
                .map_or(first.replicas, |d| d.replicas);
            let mut spec = first.clone();
            spec.replicas = in_effect.div_ceil(3);
            let index = scenario.workloads.partition_point(|e| e.at <= at);
            scenario.workloads.insert(index, deployment_event(at, spec));
        }
        scenario
    }
}

impl WorkloadMix {
    /// The `limited-pool` and `expiring` NodePools (copies of the scenario's first NodePool) and
    /// the `expiring` Deployment.
    fn add_pools(&self, scenario: &mut Scenario) {
        let Some(first) = first_of(&scenario.manifests, "NodePool") else {
            return;
        };
        if let Some(cpu) = self.limited_pool {
            let mut pool = renamed(&first, LIMITED_POOL);
            let weight = first["spec"]["weight"].as_u64().unwrap_or(0) + 10;
            pool["spec"]["weight"] = serde_json::json!(weight.min(100));
            pool["spec"]["limits"] = serde_json::json!({ "cpu": cpu.to_string() });
            scenario.manifests += &document(&pool);
        }
        if let Some(expiring) = &self.expiring {
            let mut pool = renamed(&first, EXPIRING_POOL);
            if let Some(spec) = pool["spec"].as_object_mut() {
                spec.remove("weight");
                spec.remove("limits");
            }
            let minutes = expiring.expire_after.as_secs() / 60;
            pool["spec"]["template"]["spec"]["expireAfter"] =
                serde_json::json!(format!("{minutes}m"));
            pool["spec"]["template"]["spec"]["terminationGracePeriod"] =
                serde_json::json!(EXPIRING_GRACE);
            scenario.manifests += &document(&pool);
            scenario.workloads.insert(
                0,
                pinned_deployment(EXPIRING_POOL, expiring.replicas, expiring.cpu),
            );
        }
        let class = first_of(&scenario.manifests, "EC2NodeClass");
        if let (Some(pinned), Some(class)) = (&self.pinned_ami, class) {
            let mut class = renamed(&class, PINNED_POOL);
            class["spec"]["amiSelectorTerms"] = serde_json::json!([{ "alias": PINNED_ALIAS }]);
            let mut pool = renamed(&first, PINNED_POOL);
            if let Some(spec) = pool["spec"].as_object_mut() {
                spec.remove("weight");
                spec.remove("limits");
            }
            pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] =
                serde_json::json!(PINNED_POOL);
            scenario.manifests += &document(&class);
            scenario.manifests += &document(&pool);
            scenario
                .workloads
                .insert(0, pinned_deployment(PINNED_POOL, pinned.replicas, 250));
            let release = scenario.faults.ami_release.get_or_insert(AmiRelease {
                at: Vec::new(),
                every: None,
                family: "al2023".to_string(),
            });
            release.at.push(pinned.release_at);
        }
        self.add_on_demand_pool(scenario, &first);
        self.add_drought_pool(scenario, &first);
        self.add_custom_pool(scenario, &first);
    }

    /// The `custom-ami` EC2NodeClass (a copy of the scenario's first with `amiFamily: Custom`,
    /// an image by name and its own NodeConfig), the NodePool on it with a startup taint, and the
    /// Deployment pinned to that pool.
    fn add_custom_pool(&self, scenario: &mut Scenario, first: &serde_json::Value) {
        let (Some((replicas, cpu)), Some(class)) = (
            self.custom_ami,
            first_of(&scenario.manifests, "EC2NodeClass"),
        ) else {
            return;
        };
        let cloud = scenario.cloud.cloud_config(0);
        let mut class = renamed(&class, CUSTOM_POOL);
        class["spec"]["amiFamily"] = serde_json::json!("Custom");
        class["spec"]["amiSelectorTerms"] =
            serde_json::json!([{ "name": custom_image_name(&cloud) }]);
        class["spec"]["userData"] = serde_json::json!(custom_user_data(&cloud.cluster_identity()));
        let mut pool = renamed(first, CUSTOM_POOL);
        if let Some(spec) = pool["spec"].as_object_mut() {
            spec.remove("weight");
            spec.remove("limits");
        }
        // On-demand only: a spot warning on a node holding a pinned pod that a budget keeps there
        // until the reclaim lets unpinned pods take the room its replacement brought (seed 7 of
        // the first swarm with this part: `web` pods filled the replacement before the reclaim,
        // as kube-scheduler would upstream), which `interruption-rehomed` does not excuse (the
        // class of the unjudged `expiring` failures, README). This part is about registration.
        only_on_demand(&mut pool);
        let template = &mut pool["spec"]["template"]["spec"];
        template["nodeClassRef"]["name"] = serde_json::json!(CUSTOM_POOL);
        template["startupTaints"] =
            serde_json::json!([{ "key": CUSTOM_STARTUP_TAINT, "effect": "NoSchedule" }]);
        scenario.manifests += &document(&class);
        scenario.manifests += &document(&pool);
        scenario
            .workloads
            .insert(0, pinned_deployment(CUSTOM_POOL, replicas, cpu));
    }

    /// The `drought` NodePool (on `first`'s class, able to use one offering), its drought and
    /// the Deployment pinned to it, created as the drought starts.
    fn add_drought_pool(&self, scenario: &mut Scenario, first: &serde_json::Value) {
        let Some(drought) = &self.drought else {
            return;
        };
        let mut pool = renamed(first, DROUGHT_POOL);
        if let Some(spec) = pool["spec"].as_object_mut() {
            spec.remove("weight");
            spec.remove("limits");
        }
        let on_demand = karpenter_core::api::labels::CAPACITY_TYPE_ON_DEMAND;
        pool["spec"]["template"]["spec"]["requirements"] = serde_json::json!([
            { "key": karpenter_core::api::labels::INSTANCE_TYPE_LABEL, "operator": "In",
              "values": [drought.instance_type] },
            { "key": karpenter_core::api::labels::ZONE_LABEL, "operator": "In",
              "values": [drought.zone] },
            { "key": karpenter_core::api::labels::CAPACITY_TYPE_LABEL, "operator": "In",
              "values": [on_demand] },
        ]);
        scenario.manifests += &document(&pool);
        scenario.cloud.droughts.push(crate::scenario::Drought {
            instance_type: drought.instance_type.clone(),
            zone: drought.zone.clone(),
            capacity_type: on_demand.to_string(),
            from: drought.from,
            duration: drought.duration,
        });
        let mut event = pinned_deployment(DROUGHT_POOL, drought.replicas, drought.cpu);
        event.at = drought.from;
        let index = scenario.workloads.partition_point(|e| e.at <= drought.from);
        scenario.workloads.insert(index, event);
    }

    /// The `on-demand` NodePool (a copy of `first` allowing only on-demand capacity), its
    /// pinned Deployment and the Deployment's cut to one replica.
    fn add_on_demand_pool(&self, scenario: &mut Scenario, first: &serde_json::Value) {
        let Some(on_demand) = &self.on_demand else {
            return;
        };
        let mut pool = renamed(first, ON_DEMAND_POOL);
        if let Some(spec) = pool["spec"].as_object_mut() {
            spec.remove("weight");
            spec.remove("limits");
        }
        only_on_demand(&mut pool);
        scenario.manifests += &document(&pool);
        let start = pinned_deployment(ON_DEMAND_POOL, on_demand.replicas, on_demand.cpu);
        let mut cut = start.clone();
        cut.at = on_demand.scale_down;
        if let Some(deployment) = cut.deployment.as_mut() {
            deployment.replicas = 1;
        }
        scenario.workloads.insert(0, start);
        let index = scenario
            .workloads
            .partition_point(|e| e.at <= on_demand.scale_down);
        scenario.workloads.insert(index, cut);
    }
}

/// The name of the x86_64 AL2023 EKS image fakecloud publishes at start for the world's
/// Kubernetes version (`amazon-eks-node-al2023-x86_64-standard-1.33-v20250601`): an image EKS
/// builds, so it boots with nodeadm, which reads the `custom-ami` class's own user data.
pub fn custom_image_name(cloud: &fakecloud::Config) -> String {
    format!(
        "amazon-eks-node-al2023-x86_64-standard-{}-{}",
        cloud.kubernetes_version, cloud.ami_release_al2023
    )
}

/// The `custom-ami` class's user data: a nodeadm `NodeConfig` (plain YAML, which nodeadm reads as
/// readily as a MIME part) naming `cluster`, registering with the `karpenter.sh/unregistered`
/// taint only. Upstream injects that taint into the user data it generates; with `amiFamily:
/// Custom` it generates none, and its docs ask the user to register with the taint so no pod
/// lands before Karpenter has registered the node. The pool's startup taint is left out: that
/// is registration's to add (the node carries no `karpenter.sh/do-not-sync-taints`).
pub fn custom_user_data(cluster: &fakecloud::bootstrap::ClusterIdentity) -> String {
    format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: {}\n    apiServerEndpoint: {}\n    certificateAuthority: {}\n    cidr: {}\n  kubelet:\n    config:\n      registerWithTaints:\n      - key: {}\n        effect: NoExecute\n",
        cluster.name,
        cluster.endpoint,
        cluster.ca_bundle,
        cluster.cidr,
        karpenter_core::api::labels::UNREGISTERED_TAINT_KEY,
    )
}

/// `pool` with its capacity-type requirement replaced by one allowing only on-demand capacity.
fn only_on_demand(pool: &mut serde_json::Value) {
    let capacity_type = karpenter_core::api::labels::CAPACITY_TYPE_LABEL;
    let requirements = &mut pool["spec"]["template"]["spec"]["requirements"];
    let mut kept: Vec<serde_json::Value> = requirements
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["key"] != capacity_type)
        .cloned()
        .collect();
    kept.push(serde_json::json!({
        "key": capacity_type,
        "operator": "In",
        "values": [karpenter_core::api::labels::CAPACITY_TYPE_ON_DEMAND],
    }));
    *requirements = serde_json::Value::Array(kept);
}

impl WorkloadMix {
    /// The `daemonset` DaemonSet (in the manifests, so the world runs it from the start) and the
    /// `stateful` StatefulSet with its zonal StorageClass.
    fn add_daemonset_and_stateful(&self, scenario: &mut Scenario) {
        if let Some((cpu, memory)) = self.daemonset {
            let daemonset = crate::workloads::DaemonSet::manifest(
                DAEMONSET,
                &format!("{cpu}m"),
                &format!("{memory}Mi"),
                false,
            );
            scenario.manifests += &document(&daemonset);
        }
        let Some(stateful) = &self.stateful else {
            return;
        };
        // With the spread (see `DRAW_STATEFUL_SPREAD`): pinned to the scenario's first NodePool,
        // `minDomains` the zones it offers, and a PodDisruptionBudget of `maxUnavailable: 1`.
        let pool = stateful
            .spread_by_zone
            .then(|| first_of(&scenario.manifests, "NodePool"))
            .flatten();
        let min_domains = pool.as_ref().map(offered_zones).filter(|zones| *zones > 0);
        let node_selector: BTreeMap<String, String> = pool
            .as_ref()
            .and_then(|p| p["metadata"]["name"].as_str())
            .map(|name| {
                BTreeMap::from([(
                    karpenter_core::api::labels::NODEPOOL_LABEL.to_string(),
                    name.to_string(),
                )])
            })
            .unwrap_or_default();
        if stateful.spread_by_zone {
            scenario.manifests += &document(&serde_json::json!({
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": { "name": STATEFUL, "namespace": "default" },
                "spec": {
                    "maxUnavailable": 1,
                    "selector": { "matchLabels": { "app": STATEFUL } },
                },
            }));
        }
        scenario.manifests += &document(&serde_json::json!({
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": { "name": ZONAL_CLASS },
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "reclaimPolicy": "Delete",
        }));
        scenario.workloads.insert(
            0,
            WorkloadEvent {
                at: Duration::ZERO,
                deployment: None,
                batch: None,
                statefulset: Some(StatefulSetSpec {
                    name: STATEFUL.to_string(),
                    replicas: stateful.replicas,
                    cpu: format!("{}m", stateful.cpu),
                    memory: "1Gi".to_string(),
                    storage: "10Gi".to_string(),
                    storage_class: ZONAL_CLASS.to_string(),
                    spread_by_zone: stateful.spread_by_zone,
                    min_domains,
                    node_selector,
                }),
                apply: None,
            },
        );
    }
}

/// The `daemonset` part's coin, cpu (100–250m) and memory (64–256 MiB), drawn whether it is on
/// or not.
fn draw_daemonset(rng: &mut impl Rng) -> Option<(u32, u32)> {
    let (on, cpu, memory) = (
        rng.gen_bool(0.5),
        rng.gen_range(2..=5u32) * 50,
        rng.gen_range(1..=4u32) * 64,
    );
    on.then_some((cpu, memory))
}

/// The `stateful` part's coin, replicas (2–4), cpu (250m–1) and zone spread, drawn whether it is
/// on or not.
fn draw_stateful(rng: &mut impl Rng) -> Option<Stateful> {
    let (on, replicas, cpu, spread_by_zone) = (
        rng.gen_bool(0.5),
        rng.gen_range(2..=4u32),
        rng.gen_range(1..=4u32) * 250,
        rng.gen_bool(0.5),
    );
    on.then_some(Stateful {
        replicas,
        cpu,
        spread_by_zone: DRAW_STATEFUL_SPREAD && spread_by_zone,
    })
}

/// The `scheduled-budget` part's coin and shape, drawn whether it is on or not. Every window
/// opens or closes inside the swarm's 30-minute safety phase, which starts at the world's epoch
/// (00:00 UTC): once a day at 00:02–00:20 for 3–10 min; every 6, 10 or 15 min for half of that;
/// or `@hourly` (00:00, the start) for 5–30 min. Its `nodes` is `0` (half the draws: the window
/// blocks every disruption it applies to), `1` or `20%`; its reasons none (every reason),
/// `Drifted`, `Underutilized`, `Empty`, or `Underutilized` and `Empty`.
fn draw_scheduled_budget(rng: &mut impl Rng) -> Option<ScheduledBudget> {
    let (on, shape, minute, length, every, nodes, reasons) = (
        rng.gen_bool(0.5),
        rng.gen_range(0..3u8),
        rng.gen_range(2..=20u32),
        rng.gen_range(3..=10u32),
        [6u32, 10, 15][rng.gen_range(0..3usize)],
        ["0", "0", "1", "20%"][rng.gen_range(0..4usize)],
        rng.gen_range(0..5u8),
    );
    let (schedule, minutes) = match shape {
        0 => (format!("{minute} 0 * * *"), length),
        1 => (format!("*/{every} * * * *"), every / 2),
        _ => ("@hourly".to_string(), minute + length),
    };
    let reasons: Option<&[&str]> = match reasons {
        0 => None,
        1 => Some(&["Drifted"]),
        2 => Some(&["Underutilized"]),
        3 => Some(&["Empty"]),
        _ => Some(&["Underutilized", "Empty"]),
    };
    on.then(|| ScheduledBudget {
        schedule,
        duration: format!("{minutes}m"),
        nodes: nodes.to_string(),
        reasons: reasons.map(|r| r.iter().map(|r| r.to_string()).collect()),
    })
}

/// `manifests` with `budget` added to the first NodePool's budgets (after the CRD's default,
/// `nodes: 10%`, when it declares none: a NodePool that lists budgets gets no default).
fn with_scheduled_budget(manifests: &str, budget: &ScheduledBudget) -> String {
    let Ok(mut documents) = karpenter_core::manifest::parse_documents(manifests) else {
        return manifests.to_string();
    };
    let Some((_, pool)) = documents.iter_mut().find(|(_, d)| d["kind"] == "NodePool") else {
        return manifests.to_string();
    };
    let budgets = &mut pool["spec"]["disruption"]["budgets"];
    if !budgets.is_array() {
        *budgets = serde_json::json!([{ "nodes": "10%" }]);
    }
    let mut entry = serde_json::json!({
        "nodes": budget.nodes,
        "schedule": budget.schedule,
        "duration": budget.duration,
    });
    if let Some(reasons) = &budget.reasons {
        entry["reasons"] = serde_json::json!(reasons);
    }
    if let Some(list) = budgets.as_array_mut() {
        list.push(entry);
    }
    documents.iter().map(|(_, d)| document(d)).collect()
}

/// The `critical` part's coin, replicas and priority class (drawn whether it is on or not).
fn draw_critical(rng: &mut impl Rng) -> Option<(u32, String)> {
    let (on, replicas, node_critical) = (
        rng.gen_bool(0.5),
        rng.gen_range(1..=2u32),
        rng.gen_bool(0.5),
    );
    let class = if node_critical {
        "system-node-critical"
    } else {
        "system-cluster-critical"
    };
    on.then(|| (replicas, class.to_string()))
}

/// The `drought` part's coin and magnitudes (drawn whether it is on or not).
fn draw_drought(rng: &mut impl Rng) -> Option<DroughtPart> {
    let zones = karpenter_core::catalog::builtin::ZONES;
    let (on, kind, zone, from, minutes, replicas, cpu) = (
        rng.gen_bool(0.5),
        rng.gen_range(0..DROUGHT_TYPES.len()),
        rng.gen_range(0..zones.len()),
        rng.gen_range(1..=10u64),
        rng.gen_range(4..=10u64),
        rng.gen_range(1..=3u32),
        rng.gen_range(1..=4u32) * 250,
    );
    on.then(|| DroughtPart {
        instance_type: DROUGHT_TYPES[kind].to_string(),
        zone: zones[zone].to_string(),
        from: Duration::from_secs(from * 60),
        duration: Duration::from_secs(minutes * 60),
        replicas,
        cpu,
    })
}

/// A Deployment of `replicas` pods of `cpu` millicores pinned to NodePool `pool`, from the start.
fn pinned_deployment(pool: &str, replicas: u32, cpu: u32) -> WorkloadEvent {
    deployment_event(
        Duration::ZERO,
        DeploymentSpec {
            name: pool.to_string(),
            replicas,
            cpu: format!("{cpu}m"),
            memory: "512Mi".to_string(),
            annotations: BTreeMap::new(),
            node_selector: BTreeMap::from([(
                karpenter_core::api::labels::NODEPOOL_LABEL.to_string(),
                pool.to_string(),
            )]),
            priority_class_name: None,
            namespace: None,
        },
    )
}

/// How many of the world's zones ([`karpenter_core::catalog::builtin::ZONES`]) NodePool `pool`
/// offers: those its `topology.kubernetes.io/zone` requirements (`In`, `NotIn`) leave, all of
/// them without one. The `stateful` spread's `minDomains`: equal to the zones a replica can be
/// given, the spread's global minimum counts every one of them, an empty one as 0, whether or
/// not a node is there yet.
fn offered_zones(pool: &serde_json::Value) -> u32 {
    let requirements = pool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let values = |r: &serde_json::Value| -> Vec<String> {
        r["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let allowed = |zone: &str| {
        requirements
            .iter()
            .filter(|r| r["key"] == karpenter_core::api::labels::ZONE_LABEL)
            .all(|r| match r["operator"].as_str() {
                Some("In") => values(r).iter().any(|v| v == zone),
                Some("NotIn") => !values(r).iter().any(|v| v == zone),
                Some("DoesNotExist") => false,
                _ => true,
            })
    };
    let offered = karpenter_core::catalog::builtin::ZONES
        .iter()
        .filter(|zone| allowed(zone))
        .count();
    u32::try_from(offered).unwrap_or(0)
}

/// The first object of `kind` in `manifests` (a scenario's are valid: the scenario was read).
fn first_of(manifests: &str, kind: &str) -> Option<serde_json::Value> {
    karpenter_core::manifest::parse_documents(manifests)
        .ok()?
        .into_iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == kind)
}

/// `pool` under another name, without the status or identity a written object may carry.
fn renamed(pool: &serde_json::Value, name: &str) -> serde_json::Value {
    let mut pool = pool.clone();
    pool["metadata"] = serde_json::json!({ "name": name });
    if let Some(object) = pool.as_object_mut() {
        object.remove("status");
    }
    pool
}

/// One more YAML document (JSON is YAML).
fn document(object: &serde_json::Value) -> String {
    format!("\n---\n{object}\n")
}

fn deployment_event(at: Duration, deployment: DeploymentSpec) -> WorkloadEvent {
    WorkloadEvent {
        at,
        deployment: Some(deployment),
        batch: None,
        statefulset: None,
        apply: None,
    }
}
