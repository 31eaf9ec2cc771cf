//! Swarm testing: many seeds, each with its own draw of faults (some on, some off), each run
//! through a **safety phase** (faults on; every invariant checked every step) and a **liveness
//! phase** (faults off; the cluster must settle — every pod running, no NodeClaim or node pending
//! or terminating, no instance without a NodeClaim — before a deadline).
//!
//! Faults are a parameter: a [`FaultPlan`] switches them on for the safety phase and off for the
//! liveness phase. [`CatalogueFaults`], the default, draws each seed's mix from the whole fault
//! catalogue ([`crate::faults::FaultMix::draw`]: every fault on or off by the seed, intensities
//! drawn too) and turns it on with `World::set_faults`, then off with `World::clear_faults`.
//!
//! Determinism: a seed's run is a function of (seed, scenario, phases, bug, fault selection,
//! code); seeds run on `jobs` threads, each with its own world (and, under madsim, its own
//! runtime seeded with the seed), and results are sorted by seed, so the output does not depend on
//! `jobs`. Every [`SwarmConfig::determinism_every`]-th seed is run twice and must write the same
//! event log (the `determinism` invariant).

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::bugs::Bug;
use crate::faults::{FAULT_NAMES, FaultMix};
use crate::invariants::{Invariant, liveness, unsettled};
use crate::scenario::Scenario;
use crate::workload_mix::{WorkloadMix, WorkloadSelection};
use crate::world::World;

/// Safety phase length when none is given.
pub const SAFETY_DEFAULT: Duration = Duration::from_secs(30 * 60);
/// Liveness deadline when none is given: the longest legitimate recovery is a claim whose
/// instance never boots (15 min registration timeout) followed by a normal launch, and then the
/// forced drains of the drawn `expiring` pool's nodes that fall due meanwhile, each bounded by
/// its `terminationGracePeriod` (5 min, [`crate::workload_mix::EXPIRING_GRACE`]) with a launch
/// for the pods it evicts. It was 20 min until swarm seed 898 (of 1..1000): a never-booting
/// on-demand claim launched 154 s before the faults stopped timed out 12.5 min into the phase,
/// and four `expiring` nodes reached their `expireAfter` one after another behind it, each
/// drain held by `guarded` pods for its grace period; the cluster settled 1,256 s in (replayed
/// with `--liveness 60m`), as upstream's would (registration timeout, forceful expiry and grace
/// periods are upstream's). It was 25 min until swarm seed 925 (of 1..1000 at 410eb54): the
/// drawn `budget` part's PodDisruptionBudget (`maxUnavailable: 1`) over the `web` Deployment
/// lets a drain evict one of its pods per replacement start (about 13 s here; upstream's
/// eviction queue retries a refused eviction after 100 ms doubling to 10 s, so its pace is the
/// same order), and the phase began with a scheduled change's drain of 41 such pods under way,
/// then met the scenario's burst, an `expiring` node's forced drain and the drift of a node
/// holding 88 pods: about 80 evictions in series, nothing stuck, settled 1,537 s in (replayed
/// with `--liveness 60m`). A seed that settles ends its phase at once, so the longer deadline
/// costs only seeds that do not.
pub const LIVENESS_DEFAULT: Duration = Duration::from_secs(30 * 60);
/// Every seed divisible by this is run twice by default.
pub const DETERMINISM_EVERY_DEFAULT: u64 = 10;
/// Stack of each swarm thread (a world's step is deep async code).
const THREAD_STACK_BYTES: usize = 16 << 20;

/// The fault names `--faults` accepts: the catalogue's ([`crate::faults::FAULT_NAMES`]).
pub const FAULTS: [&str; 22] = FAULT_NAMES;

/// The two phases of a seed's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Faults on; invariants must hold throughout.
    Safety,
    /// Faults off; the cluster must settle by the deadline.
    Liveness,
}

/// Which faults a seed may have.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Selection {
    /// Each fault on or off, drawn from the seed (swarm testing).
    #[default]
    Drawn,
    /// Exactly these faults on (magnitudes still drawn from the seed); empty: none.
    Only(BTreeSet<String>),
}

/// A `--faults` value that is not `drawn`, `none` or a comma-separated list of [`FAULTS`].
#[derive(Debug, thiserror::Error)]
#[error("unknown fault {0:?} (one of: {names}; or drawn, none)", names = FAULTS.join(", "))]
pub struct UnknownFault(String);

impl FromStr for Selection {
    type Err = UnknownFault;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "drawn" => Ok(Selection::Drawn),
            "none" | "" => Ok(Selection::Only(BTreeSet::new())),
            list => {
                let mut names = BTreeSet::new();
                for name in list.split(',').map(str::trim) {
                    if !FAULTS.contains(&name) {
                        return Err(UnknownFault(name.to_string()));
                    }
                    names.insert(name.to_string());
                }
                Ok(Selection::Only(names))
            }
        }
    }
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::Drawn => f.write_str("drawn"),
            Selection::Only(names) if names.is_empty() => f.write_str("none"),
            Selection::Only(names) => {
                f.write_str(&names.iter().cloned().collect::<Vec<_>>().join(","))
            }
        }
    }
}

/// Switches a seed's faults on and off: the swarm's fault seam (see the module docs).
pub trait FaultPlan {
    /// Called at the start of each phase: faults on for [`Phase::Safety`], all off for
    /// [`Phase::Liveness`].
    fn configure(&mut self, world: &mut World, seed: u64, phase: Phase);
    /// The faults switched on for this seed.
    fn on(&self) -> Vec<&'static str>;
    /// How many times each fault fired, read at the end of the run.
    fn fired(&self, world: &World) -> BTreeMap<String, u64>;
}

/// Builds a seed's plan: `(seed, selection, safety phase length)`.
pub type PlanFactory = fn(u64, &Selection, Duration) -> Box<dyn FaultPlan>;

/// [`FaultPlan`] over the fault catalogue: the seed's [`FaultMix`] (drawn by
/// [`FaultMix::draw`], or with exactly the selected faults on) over the scenario's own `faults:`
/// for the safety phase, every fault off for the liveness phase. What fired is the world's own tally, by catalogue name.
pub struct CatalogueFaults {
    pub mix: FaultMix,
}

impl CatalogueFaults {
    pub fn new(seed: u64, selection: &Selection) -> Self {
        let mix = match selection {
            Selection::Drawn => FaultMix::draw(seed),
            Selection::Only(names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                FaultMix::draw_only(seed, &names)
            }
        };
        Self { mix }
    }

    /// The default [`PlanFactory`] (the safety phase's length does not change the draw: a
    /// scheduled fault that falls after it simply does not fire).
    pub fn plan(seed: u64, selection: &Selection, _safety: Duration) -> Box<dyn FaultPlan> {
        Box::new(Self::new(seed, selection))
    }
}

impl FaultPlan for CatalogueFaults {
    fn configure(&mut self, world: &mut World, _seed: u64, phase: Phase) {
        match phase {
            Phase::Safety => {
                // The scenario's own faults stay on under the drawn ones.
                self.mix = self.mix.clone().or(world.scenario().faults.clone());
                world.set_faults(self.mix.clone());
            }
            Phase::Liveness => world.clear_faults(),
        }
    }

    fn on(&self) -> Vec<&'static str> {
        self.mix.names()
    }

    fn fired(&self, world: &World) -> BTreeMap<String, u64> {
        let injected = world.faults_injected();
        FAULT_NAMES
            .iter()
            .map(|name| (name.to_string(), injected.get(*name).copied().unwrap_or(0)))
            .collect()
    }
}

/// Everything that defines a swarm run besides its seeds.
#[derive(Clone)]
pub struct SwarmConfig {
    pub scenario: Scenario,
    /// The scenario as named on the command line (a built-in name or a path), for replays.
    pub scenario_arg: String,
    pub safety: Duration,
    pub liveness: Duration,
    pub bug: Bug,
    pub faults: Selection,
    /// Seeds divisible by this run twice and must write the same event log (0: none).
    pub determinism_every: u64,
    pub plan: PlanFactory,
    /// Start no new seed once one has failed (`--stop-on-fail`): a mutation run
    /// (`cargo xtask mutants`) only needs to know that some seed catches the bug, so a caught
    /// mutation costs the seeds up to its first failure instead of the whole range. Seeds
    /// already running finish; the outcomes are then a prefix-ish subset of the seeds (which
    /// seeds ran depends on the threads' timing, each seed's outcome does not).
    pub stop_on_fail: bool,
    /// The scenario's workload with each seed's draw added (the default, as on the command
    /// line), or as written ([`crate::workload_mix`]).
    pub workload: WorkloadSelection,
    /// How a seed's workload is drawn under [`WorkloadSelection::Drawn`] ([`WorkloadMix::draw`];
    /// a test may pin a seed's world as it was before a part existed, a part drawn later
    /// changing only the seeds it is on in).
    pub draw: MixFactory,
}

/// Draws a seed's workload mix for a safety phase.
pub type MixFactory = fn(u64, Duration) -> WorkloadMix;

impl SwarmConfig {
    /// Defaults for `scenario` (named `scenario_arg`).
    pub fn new(scenario: Scenario, scenario_arg: &str) -> Self {
        Self {
            scenario,
            scenario_arg: scenario_arg.to_string(),
            safety: SAFETY_DEFAULT,
            liveness: LIVENESS_DEFAULT,
            bug: Bug::None,
            faults: Selection::Drawn,
            determinism_every: DETERMINISM_EVERY_DEFAULT,
            plan: CatalogueFaults::plan,
            stop_on_fail: false,
            workload: WorkloadSelection::Drawn,
            draw: WorkloadMix::draw,
        }
    }

    /// The workload `seed` adds to the scenario (nothing unless [`WorkloadSelection::Drawn`]).
    pub fn workload_mix(&self, seed: u64) -> WorkloadMix {
        match self.workload {
            WorkloadSelection::Drawn => (self.draw)(seed, self.safety),
            WorkloadSelection::Scenario => WorkloadMix::default(),
        }
    }

    /// The one command that replays `seed` as this swarm ran it.
    pub fn replay(&self, seed: u64) -> String {
        let mut command = format!(
            "cargo xtask sim swarm --seeds {seed}..{seed} --scenario {}",
            self.scenario_arg
        );
        if self.safety != SAFETY_DEFAULT {
            command += &format!(" --safety {}", humantime::format_duration(self.safety));
        }
        if self.liveness != LIVENESS_DEFAULT {
            command += &format!(" --liveness {}", humantime::format_duration(self.liveness));
        }
        if self.faults != Selection::Drawn {
            command += &format!(" --faults {}", self.faults);
        }
        if self.bug != Bug::None {
            command += &format!(" --bug {}", self.bug);
        }
        if self.determinism_every != DETERMINISM_EVERY_DEFAULT {
            command += &format!(" --determinism-every {}", self.determinism_every);
        }
        if self.workload != WorkloadSelection::Drawn {
            command += &format!(" --workload {}", self.workload);
        }
        command
    }
}

/// One violated invariant of a seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Violation {
    pub invariant: String,
    pub count: u64,
    pub first: String,
}

/// What one seed did.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedOutcome {
    pub seed: u64,
    /// In report order; empty when the seed passed.
    pub violations: Vec<Violation>,
    pub faults_on: Vec<&'static str>,
    /// The parts of the drawn workload that were on ([`WorkloadMix::names`]).
    pub workload_on: Vec<&'static str>,
    pub fired: BTreeMap<String, u64>,
    pub event_log_sha256: String,
    /// Simulated time the liveness phase took to settle (`None`: it did not).
    pub settled_after: Option<Duration>,
    pub simulated: Duration,
    /// Whether the seed was run twice for `determinism`.
    pub determinism_checked: bool,
    /// `interruption-rehomed` checks made, and those excused because capacity did not exist.
    pub rehome_checked: u64,
    pub rehome_excused: u64,
    /// `drained-before-terminate` terminations judged past a terminationGracePeriod deadline,
    /// and the counted pods they left deleted but not gone.
    pub drain_past_deadline: u64,
    pub drain_past_deadline_deleted: u64,
    /// The event log (one line per step); kept only for failed seeds.
    pub log: Vec<String>,
}

impl SeedOutcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Runs `future` to completion in a runtime of its own: under madsim one seeded with `seed` (so
/// anything drawn from the runtime replays), else a current-thread tokio runtime with paused
/// time (the world's clock is its own; tokio only sleeps injected latency).
#[cfg(madsim)]
pub fn block_on<T>(seed: u64, future: impl std::future::Future<Output = T>) -> Result<T, String> {
    Ok(
        madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default())
            .block_on(future),
    )
}

/// See the madsim variant.
#[cfg(not(madsim))]
pub fn block_on<T>(_seed: u64, future: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("cannot build a runtime: {e}"))
        .map(|runtime| runtime.block_on(future))
}

/// One run of one seed: both phases, in a runtime of its own.
fn run_once(config: &SwarmConfig, seed: u64) -> SeedOutcome {
    let run = async {
        let mut plan = (config.plan)(seed, &config.faults, config.safety);
        let mix = config.workload_mix(seed);
        let scenario = mix.apply(config.scenario.clone());
        let mut world = World::with_bug(seed, scenario, config.bug)
            .await
            .map_err(|e| format!("world: {e}"))?;
        let mut log = Vec::new();
        plan.configure(&mut world, seed, Phase::Safety);
        while world.elapsed() < config.safety {
            world.step().await.map_err(|e| format!("step: {e}"))?;
            log.extend_from_slice(world.last_step_log());
        }
        plan.configure(&mut world, seed, Phase::Liveness);
        let started = world.elapsed();
        let deadline = config.safety + config.liveness;
        let settled_after = loop {
            world.step().await.map_err(|e| format!("step: {e}"))?;
            log.extend_from_slice(world.last_step_log());
            let left = unsettled(world.api(), world.cloud());
            if left.is_empty() {
                break Some(world.elapsed().saturating_sub(started));
            }
            if world.elapsed() >= deadline {
                let waited = world.elapsed().saturating_sub(started);
                world.record_violation(Invariant::Liveness, liveness::not_settled(waited, &left));
                break None;
            }
        };
        let simulated = world.elapsed();
        let report = world
            .finish(simulated)
            .await
            .map_err(|e| format!("finish: {e}"))?;
        let violations = report
            .invariants
            .iter()
            .filter(|i| !i.held)
            .map(|i| Violation {
                invariant: i.name.clone(),
                count: i.violations,
                first: i.first.clone().unwrap_or_default(),
            })
            .collect();
        Ok::<SeedOutcome, String>(SeedOutcome {
            seed,
            violations,
            faults_on: plan.on(),
            workload_on: mix.names(),
            fired: plan.fired(&world),
            event_log_sha256: report.event_log_sha256,
            settled_after,
            simulated,
            determinism_checked: false,
            rehome_checked: world.invariants().counters().rehome_checked,
            rehome_excused: world.invariants().counters().rehome_excused,
            drain_past_deadline: world.invariants().counters().drain_past_deadline,
            drain_past_deadline_deleted: world.invariants().counters().drain_past_deadline_deleted,
            log,
        })
    };
    let failed = |message: String| SeedOutcome {
        seed,
        violations: vec![Violation {
            invariant: "world-error".into(),
            count: 1,
            first: message,
        }],
        faults_on: Vec::new(),
        workload_on: Vec::new(),
        fired: BTreeMap::new(),
        event_log_sha256: String::new(),
        settled_after: None,
        simulated: Duration::ZERO,
        determinism_checked: false,
        rehome_checked: 0,
        rehome_excused: 0,
        drain_past_deadline: 0,
        drain_past_deadline_deleted: 0,
        log: Vec::new(),
    };
    match block_on(seed, run) {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(message)) | Err(message) => failed(message),
    }
}

/// Runs one seed (twice when it is due a determinism check); the event log is kept only when
/// the seed failed.
pub fn run_seed(config: &SwarmConfig, seed: u64) -> SeedOutcome {
    let mut outcome = run_once(config, seed);
    if config.determinism_every > 0 && seed.is_multiple_of(config.determinism_every) {
        outcome.determinism_checked = true;
        let again = run_once(config, seed);
        if again.event_log_sha256 != outcome.event_log_sha256 {
            let line = outcome
                .log
                .iter()
                .zip(&again.log)
                .position(|(a, b)| a != b)
                .unwrap_or(outcome.log.len().min(again.log.len()));
            outcome.violations.push(Violation {
                invariant: "determinism".into(),
                count: 1,
                first: format!(
                    "seed {seed} wrote event log {} then {}; first difference at line {}: {:?} vs {:?}",
                    outcome.event_log_sha256,
                    again.event_log_sha256,
                    line + 1,
                    outcome.log.get(line).map(String::as_str).unwrap_or("<end>"),
                    again.log.get(line).map(String::as_str).unwrap_or("<end>"),
                ),
            });
        }
    }
    if outcome.passed() {
        outcome.log = Vec::new();
    }
    outcome
}

/// Runs every seed on `jobs` threads; outcomes sorted by seed. `progress(done, total)` is
/// called after each seed. With [`SwarmConfig::stop_on_fail`], no seed starts after one failed.
pub fn run_swarm(
    config: &SwarmConfig,
    seeds: &[u64],
    jobs: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<SeedOutcome>, String> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let results = Mutex::new(Vec::with_capacity(seeds.len()));
    let worker = || {
        loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(seed) = seeds.get(index) else {
                break;
            };
            let outcome = run_seed(config, *seed);
            if config.stop_on_fail && !outcome.passed() {
                stop.store(true, Ordering::Relaxed);
            }
            results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(outcome);
            progress(done.fetch_add(1, Ordering::Relaxed) + 1, seeds.len());
        }
    };
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for _ in 0..jobs.clamp(1, seeds.len().max(1)) {
            let handle = std::thread::Builder::new()
                .stack_size(THREAD_STACK_BYTES)
                .spawn_scoped(scope, worker)
                .map_err(|e| format!("cannot start a swarm thread: {e}"))?;
            handles.push(handle);
        }
        for handle in handles {
            handle
                .join()
                .map_err(|_| "a swarm thread panicked".to_string())?;
        }
        Ok::<(), String>(())
    })?;
    let mut outcomes = results.into_inner().unwrap_or_else(|p| p.into_inner());
    outcomes.sort_by_key(|o| o.seed);
    Ok(outcomes)
}

/// One failed seed in the summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedSeed {
    pub seed: u64,
    /// The first invariant violated (report order).
    pub invariant: String,
    /// Its first violation.
    pub first: String,
    /// Every invariant the seed violated.
    pub invariants: Vec<Violation>,
    pub faults_on: Vec<String>,
    /// The drawn workload's parts that were on.
    pub workload_on: Vec<String>,
    pub replay: String,
    /// The event log file, when written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// The swarm's result (`--json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub scenario: String,
    pub bug: String,
    pub faults: String,
    pub safety_seconds: u64,
    pub liveness_seconds: u64,
    pub seeds: usize,
    pub passed: usize,
    pub failed: Vec<FailedSeed>,
    /// Seeds with each fault switched on.
    pub faults_on: BTreeMap<String, u64>,
    /// Times each fault fired, over all seeds.
    pub faults_fired: BTreeMap<String, u64>,
    /// Seeds with each part of the drawn workload on.
    pub workload_on: BTreeMap<String, u64>,
    pub determinism_checked: usize,
    /// `interruption-rehomed` checks made over all seeds, and those excused (no capacity).
    pub rehome_checked: u64,
    pub rehome_excused: u64,
    /// `drained-before-terminate` terminations judged past a terminationGracePeriod deadline over
    /// all seeds, and the counted pods they left deleted but not gone.
    pub drain_past_deadline: u64,
    pub drain_past_deadline_deleted: u64,
    /// Liveness phase: the longest time to settle among seeds that settled, seconds.
    pub settle_seconds_max: u64,
    /// Each seed's event-log SHA-256: two builds behave the same on these seeds iff the maps are
    /// equal (how a refactor proves it changed no behaviour).
    pub event_logs: BTreeMap<u64, String>,
    pub commit: String,
    pub wall_seconds: f64,
}

impl Summary {
    pub fn of(config: &SwarmConfig, outcomes: &[SeedOutcome]) -> Self {
        let mut faults_on: BTreeMap<String, u64> =
            FAULTS.iter().map(|f| (f.to_string(), 0)).collect();
        let mut faults_fired: BTreeMap<String, u64> =
            FAULTS.iter().map(|f| (f.to_string(), 0)).collect();
        for outcome in outcomes {
            for fault in &outcome.faults_on {
                *faults_on.entry(fault.to_string()).or_default() += 1;
            }
            for (fault, count) in &outcome.fired {
                *faults_fired.entry(fault.clone()).or_default() += count;
            }
        }
        let mut workload_on: BTreeMap<String, u64> = BTreeMap::new();
        for part in outcomes.iter().flat_map(|o| &o.workload_on) {
            *workload_on.entry(part.to_string()).or_default() += 1;
        }
        let failed = outcomes
            .iter()
            .filter_map(|o| {
                let first = o.violations.first()?;
                Some(FailedSeed {
                    seed: o.seed,
                    invariant: first.invariant.clone(),
                    first: first.first.clone(),
                    invariants: o.violations.clone(),
                    faults_on: o.faults_on.iter().map(|f| f.to_string()).collect(),
                    workload_on: o.workload_on.iter().map(|f| f.to_string()).collect(),
                    replay: config.replay(o.seed),
                    log: None,
                })
            })
            .collect();
        Self {
            scenario: config.scenario_arg.clone(),
            bug: config.bug.to_string(),
            faults: config.faults.to_string(),
            safety_seconds: config.safety.as_secs(),
            liveness_seconds: config.liveness.as_secs(),
            seeds: outcomes.len(),
            passed: outcomes.iter().filter(|o| o.passed()).count(),
            failed,
            faults_on,
            faults_fired,
            workload_on,
            determinism_checked: outcomes.iter().filter(|o| o.determinism_checked).count(),
            rehome_checked: outcomes.iter().map(|o| o.rehome_checked).sum(),
            rehome_excused: outcomes.iter().map(|o| o.rehome_excused).sum(),
            drain_past_deadline: outcomes.iter().map(|o| o.drain_past_deadline).sum(),
            drain_past_deadline_deleted: outcomes
                .iter()
                .map(|o| o.drain_past_deadline_deleted)
                .sum(),
            settle_seconds_max: outcomes
                .iter()
                .filter_map(|o| o.settled_after)
                .map(|d| d.as_secs())
                .max()
                .unwrap_or(0),
            event_logs: outcomes
                .iter()
                .map(|o| (o.seed, o.event_log_sha256.clone()))
                .collect(),
            commit: option_env!("KARPENTER_SIM_COMMIT")
                .unwrap_or("unknown")
                .to_string(),
            wall_seconds: 0.0,
        }
    }
}

/// Parses `A..B` (inclusive at both ends: `17..17` is seed 17) or a single `N`.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let parse = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("seeds {text:?}: {e}"))
    };
    match text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (parse(a)?, parse(b.trim_start_matches('='))?);
            if a > b {
                return Err(format!("seeds {text:?}: {a} is after {b}"));
            }
            Ok((a..=b).collect())
        }
        None => Ok(vec![parse(text)?]),
    }
}

/// Rebuilds the swarm a [`SwarmConfig::replay`] command describes (its seeds and config), with a
/// scenario path resolved against `root` (the workspace, where `cargo xtask` runs): what a test
/// uses to show the printed replay command reproduces a failure.
pub fn from_replay(
    replay: &str,
    root: &std::path::Path,
) -> Result<(SwarmConfig, Vec<u64>), String> {
    let args = replay
        .strip_prefix("cargo xtask sim swarm ")
        .ok_or_else(|| format!("not a swarm replay command: {replay:?}"))?;
    let tokens: Vec<&str> = args.split_whitespace().collect();
    let mut flags: BTreeMap<&str, &str> = BTreeMap::new();
    for pair in tokens.chunks(2) {
        match pair {
            [flag, value] if flag.starts_with("--") => {
                flags.insert(flag.trim_start_matches("--"), value);
            }
            _ => return Err(format!("replay {replay:?}: cannot read {pair:?}")),
        }
    }
    let name = flags.get("scenario").copied().unwrap_or("default");
    let scenario = match crate::scenario::BUILTIN.iter().any(|(n, _)| *n == name) {
        true => Scenario::load(name),
        false => Scenario::load(&root.join(name).to_string_lossy()),
    }
    .map_err(|e| e.to_string())?;
    let mut config = SwarmConfig::new(scenario, name);
    config.workload = match flags.get("workload") {
        Some(text) => text
            .parse()
            .map_err(|e: crate::workload_mix::UnknownWorkload| e.to_string())?,
        None => WorkloadSelection::Drawn,
    };
    let duration = |key: &str, default: Duration| match flags.get(key) {
        Some(text) => humantime::parse_duration(text).map_err(|e| format!("--{key}: {e}")),
        None => Ok(default),
    };
    config.safety = duration("safety", SAFETY_DEFAULT)?;
    config.liveness = duration("liveness", LIVENESS_DEFAULT)?;
    if let Some(faults) = flags.get("faults") {
        config.faults = faults.parse().map_err(|e: UnknownFault| e.to_string())?;
    }
    if let Some(bug) = flags.get("bug") {
        config.bug = bug
            .parse()
            .map_err(|e: crate::bugs::UnknownBug| e.to_string())?;
    }
    if let Some(every) = flags.get("determinism-every") {
        config.determinism_every = every
            .parse()
            .map_err(|e| format!("--determinism-every: {e}"))?;
    }
    let seeds = parse_seeds(flags.get("seeds").copied().unwrap_or("1"))?;
    Ok((config, seeds))
}
