//! The invariants every run is held to, one [`Invariant`] each, checked by one checker each (a
//! [`Check`], in its own file, where its exact specification lives). In report order, safety
//! first, then progress:
//!
//! | invariant | checker |
//! |---|---|
//! | `nodepool-limits` | [`limits`] |
//! | `no-leaked-instances` | [`leaks`] |
//! | `foreign-instances-untouched` | [`foreign`] |
//! | `foreign-templates-untouched` | [`templates`] |
//! | `pinned-ami-honoured` | [`pinned`] |
//! | `pods-fit-nodes` | [`fit`] |
//! | `drained-before-terminate` | [`drain`] |
//! | `draining-nodes-closed` | [`draining`] |
//! | `drain-order` | [`drain_order`] |
//! | `startup-taints-honoured` | [`startup_taints`] |
//! | `pdb-respected` | [`pdb`] |
//! | `do-not-disrupt-respected` | [`do_not_disrupt`] |
//! | `disruption-respects-pdbs` | [`pdb_disruption`] |
//! | `budgets-respected` | [`budgets`] |
//! | `consolidate-after-honoured` | [`consolidate_after`] |
//! | `consolidation-saves` | [`consolidation_saves`] |
//! | `consolidation-churn` | [`churn`] |
//! | `claim-storm` | [`claim_storm`] |
//! | `provisioning-bounded` | [`provisioning_bounded`] |
//! | `unavailable-offerings-honoured` | [`unavailable`] |
//! | `interruption-rehomed` | [`rehome`] |
//! | `scheduled-change-acted` | [`maintenance`] |
//! | `nodes-join` | [`nodes_join`] |
//! | `claims-progress` | [`claims_progress`] |
//! | `termination-progress` | [`termination_progress`] |
//! | `expiration-honoured` | [`expiry`] |
//! | `launch-templates-collected` | [`templates`] |
//! | `pods-scheduled` | [`pods_scheduled`] |
//! | `single-leader` | [`single_leader`] |
//! | `liveness` | [`liveness`] (at the end of a run) |
//!
//! After every step the world reads an [`Observation`] and hands the invariants a
//! [`StepFacts`]; [`Invariants::check`] updates what the checkers share across steps (the
//! [`CloudHistory`]: spot warnings, capacity incidents) and runs every checker on one
//! [`StepView`]. Each violation is counted under its invariant and the first one's message kept
//! for the report. The checkers read the API server's objects as raw JSON through their own
//! helpers ([`pod_facts`]), not the controller's code: a check that shared the code under test
//! would share its mistakes.
//!
//! `determinism` (the same seed twice gives the same event log) is the swarm's: it needs two runs.

pub mod budgets;
pub mod churn;
pub mod claim_storm;
pub mod claims_progress;
pub mod cloud_history;
pub mod consolidate_after;
pub mod consolidation_saves;
pub mod do_not_disrupt;
pub mod drain;
pub mod drain_order;
pub mod draining;
pub mod expiry;
pub mod fit;
pub mod foreign;
pub mod leaks;
pub mod limits;
pub mod liveness;
pub mod maintenance;
pub mod nodes_join;
mod observation;
pub mod pdb;
pub mod pdb_disruption;
pub mod pinned;
pub mod pod_facts;
pub mod pods_scheduled;
pub mod provisioning_bounded;
pub mod rehome;
pub mod single_leader;
pub mod startup_taints;
pub mod templates;
pub mod termination_progress;
pub mod unavailable;

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use fakecloud::FakeCloud;
use fakekube::ApiServer;
use jiff::Timestamp;
use karpenter_core::seams::kube::{ResourceKind, SharedObject};
use strum::IntoEnumIterator;

use crate::audit::{Audit, AuditLog};
use crate::report::InvariantResult;

pub use cloud_history::CloudHistory;
pub use liveness::unsettled;
pub use observation::{FOREIGN_OWNER_TAG, Observation, ObserverCache, is_foreign, is_node_group};

/// One invariant. The declaration order is the report order (safety first, then progress); the
/// kebab-case names are the stable ones reports, replays and tests use.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::EnumIter,
    strum::EnumString,
    strum::Display,
)]
#[strum(serialize_all = "kebab-case")]
pub enum Invariant {
    NodepoolLimits,
    NoLeakedInstances,
    ForeignInstancesUntouched,
    ForeignTemplatesUntouched,
    PinnedAmiHonoured,
    PodsFitNodes,
    DrainedBeforeTerminate,
    DrainingNodesClosed,
    DrainOrder,
    StartupTaintsHonoured,
    PdbRespected,
    DoNotDisruptRespected,
    DisruptionRespectsPdbs,
    BudgetsRespected,
    ConsolidateAfterHonoured,
    ConsolidationSaves,
    ConsolidationChurn,
    ClaimStorm,
    ProvisioningBounded,
    UnavailableOfferingsHonoured,
    InterruptionRehomed,
    ScheduledChangeActed,
    NodesJoin,
    ClaimsProgress,
    TerminationProgress,
    ExpirationHonoured,
    LaunchTemplatesCollected,
    PodsScheduled,
    SingleLeader,
    Liveness,
}

impl Invariant {
    /// The stable name (`nodepool-limits`, ...).
    pub fn name(self) -> &'static str {
        self.into()
    }
}

/// One finding of a checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// How many violations it stands for.
    pub count: u64,
    /// What the report shows if it is the invariant's first.
    pub message: String,
}

impl Violation {
    /// One violation found at `at` (the message is prefixed with the time).
    pub fn at(at: Timestamp, message: String) -> Self {
        Self {
            count: 1,
            message: format!("{at}: {message}"),
        }
    }

    /// `count` violations at once, described by `message` as is.
    pub fn counted(count: u64, message: String) -> Self {
        Self { count, message }
    }
}

/// A checker of one invariant. It keeps whatever history its invariant needs between steps.
pub trait Check {
    /// The invariant it checks.
    fn invariant(&self) -> Invariant;

    /// Looks at the world after one step. Default: nothing to check per step.
    fn check(&mut self, _step: &StepView<'_>) -> Vec<Violation> {
        Vec::new()
    }

    /// Looks at the world at the end of a run. Default: nothing to check then.
    fn finish(&mut self, _observation: &Observation) -> Option<Violation> {
        None
    }
}

/// What the world hands the invariants after a step.
pub struct StepFacts<'a> {
    pub api: &'a ApiServer,
    pub cloud: &'a FakeCloud,
    /// The observer's cache, as the step's observation read it.
    pub observed: &'a ObserverCache,
    pub observation: &'a Observation,
    /// Controller replicas that led (acted) in the step.
    pub leaders: usize,
    /// A process acted for the first time in its life in the step (a start, a restart after a
    /// crash, a new leader).
    pub fresh_leader: bool,
    pub now: Timestamp,
}

/// What a checker looks at: the step's facts, what the controller did in it (the audit), the
/// shared cloud history, and the API server's objects read on first use (most steps need none).
pub struct StepView<'a> {
    pub api: &'a ApiServer,
    pub cloud: &'a FakeCloud,
    pub observed: &'a ObserverCache,
    pub observation: &'a Observation,
    pub leaders: usize,
    /// See [`StepFacts::fresh_leader`].
    pub fresh_leader: bool,
    pub now: Timestamp,
    /// The controller's removals and claim deletions since the last step.
    pub audit: &'a AuditLog,
    pub history: &'a CloudHistory,
    pods: OnceCell<Vec<SharedObject>>,
    nodes: OnceCell<Vec<SharedObject>>,
    claims: OnceCell<Vec<SharedObject>>,
    pdbs: OnceCell<Vec<SharedObject>>,
    pools: OnceCell<Vec<SharedObject>>,
}

impl StepView<'_> {
    fn objects<'s>(
        &self,
        slot: &'s OnceCell<Vec<SharedObject>>,
        kind: &ResourceKind,
    ) -> &'s [SharedObject] {
        slot.get_or_init(|| self.api.objects(kind))
    }

    /// Pods, as the API server holds them now.
    pub fn pods(&self) -> &[SharedObject] {
        self.objects(&self.pods, &ResourceKind::POD)
    }

    pub fn nodes(&self) -> &[SharedObject] {
        self.objects(&self.nodes, &ResourceKind::NODE)
    }

    pub fn claims(&self) -> &[SharedObject] {
        self.objects(&self.claims, &ResourceKind::NODE_CLAIM)
    }

    pub fn pdbs(&self) -> &[SharedObject] {
        self.objects(&self.pdbs, &ResourceKind::POD_DISRUPTION_BUDGET)
    }

    pub fn pools(&self) -> &[SharedObject] {
        self.objects(&self.pools, &ResourceKind::NODE_POOL)
    }
}

/// How many times faults the invariants can see happened (the swarm reports them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub spot_warnings: u64,
    /// CreateFleet answers that launched nothing for lack of capacity.
    pub capacity_errors: u64,
    /// EC2 calls that failed with throttling or a 5xx.
    pub ec2_errors: u64,
    pub slow_boots: u64,
    pub never_boots: u64,
    /// `interruption-rehomed` checks made, and those skipped because capacity did not exist.
    pub rehome_checked: u64,
    pub rehome_excused: u64,
    /// `drained-before-terminate` terminations judged past their terminationGracePeriod deadline,
    /// and the counted pods they left deleted but not gone.
    pub drain_past_deadline: u64,
    pub drain_past_deadline_deleted: u64,
}

/// One checker per invariant, in report order.
#[derive(Debug, Default)]
struct Checkers {
    limits: limits::Limits,
    leaks: leaks::Leaks,
    foreign: foreign::ForeignUntouched,
    foreign_templates: templates::ForeignTemplatesUntouched,
    pinned: pinned::PinnedAmi,
    fit: fit::Fit,
    drain: drain::Drain,
    draining: draining::DrainingClosed,
    drain_order: drain_order::DrainOrder,
    startup_taints: startup_taints::StartupTaintsHonoured,
    pdb: pdb::Pdb,
    do_not_disrupt: do_not_disrupt::DoNotDisrupt,
    pdb_disruption: pdb_disruption::DisruptionRespectsPdbs,
    budgets: budgets::BudgetsRespected,
    consolidate_after: consolidate_after::ConsolidateAfter,
    consolidation_saves: consolidation_saves::ConsolidationSaves,
    churn: churn::ConsolidationChurn,
    claim_storm: claim_storm::ClaimStorm,
    provisioning_bounded: provisioning_bounded::ProvisioningBounded,
    unavailable: unavailable::UnavailableHonoured,
    rehome: rehome::Rehome,
    maintenance: maintenance::ScheduledChangeActed,
    nodes_join: nodes_join::NodesJoin,
    claims_progress: claims_progress::ClaimsProgress,
    termination_progress: termination_progress::TerminationProgress,
    expiry: expiry::ExpirationHonoured,
    templates: templates::TemplatesCollected,
    pods_scheduled: pods_scheduled::PodsScheduled,
    single_leader: single_leader::SingleLeader,
    liveness: liveness::Liveness,
}

impl Checkers {
    fn all(&mut self) -> [&mut dyn Check; 30] {
        [
            &mut self.limits,
            &mut self.leaks,
            &mut self.foreign,
            &mut self.foreign_templates,
            &mut self.pinned,
            &mut self.fit,
            &mut self.drain,
            &mut self.draining,
            &mut self.drain_order,
            &mut self.startup_taints,
            &mut self.pdb,
            &mut self.do_not_disrupt,
            &mut self.pdb_disruption,
            &mut self.budgets,
            &mut self.consolidate_after,
            &mut self.consolidation_saves,
            &mut self.churn,
            &mut self.claim_storm,
            &mut self.provisioning_bounded,
            &mut self.unavailable,
            &mut self.rehome,
            &mut self.maintenance,
            &mut self.nodes_join,
            &mut self.claims_progress,
            &mut self.termination_progress,
            &mut self.expiry,
            &mut self.templates,
            &mut self.pods_scheduled,
            &mut self.single_leader,
            &mut self.liveness,
        ]
    }
}

/// Violations of one invariant so far, and the first one's message.
#[derive(Clone, Debug, Default)]
struct Tally {
    count: u64,
    first: Option<String>,
}

/// Every invariant's checker and running tally.
pub struct Invariants {
    /// Where the controller's wrapped seam records what it removed and deleted.
    audit: Arc<Audit>,
    history: CloudHistory,
    checkers: Checkers,
    tallies: BTreeMap<Invariant, Tally>,
}

impl Invariants {
    pub fn new(audit: Arc<Audit>, cloud: &FakeCloud) -> Self {
        Self {
            audit,
            history: CloudHistory::new(cloud),
            checkers: Checkers::default(),
            tallies: BTreeMap::new(),
        }
    }

    /// Runs every checker after one step.
    pub fn check(&mut self, facts: &StepFacts<'_>) {
        let audit = self.audit.take();
        let oldest_pending = self.checkers.pods_scheduled.oldest_pending();
        self.history
            .update(facts.cloud, facts.observation, facts.now, oldest_pending);
        let step = StepView {
            api: facts.api,
            cloud: facts.cloud,
            observed: facts.observed,
            observation: facts.observation,
            leaders: facts.leaders,
            fresh_leader: facts.fresh_leader,
            now: facts.now,
            audit: &audit,
            history: &self.history,
            pods: OnceCell::new(),
            nodes: OnceCell::new(),
            claims: OnceCell::new(),
            pdbs: OnceCell::new(),
            pools: OnceCell::new(),
        };
        for checker in self.checkers.all() {
            let invariant = checker.invariant();
            for violation in checker.check(&step) {
                Self::count(&mut self.tallies, invariant, violation);
            }
        }
    }

    /// End-of-run checks (liveness).
    pub fn finish(&mut self, observation: &Observation) {
        for checker in self.checkers.all() {
            let invariant = checker.invariant();
            if let Some(violation) = checker.finish(observation) {
                Self::count(&mut self.tallies, invariant, violation);
            }
        }
    }

    /// Counts one violation of `invariant` found at `now` (from outside the checkers: the
    /// swarm's liveness phase).
    pub fn record(&mut self, invariant: Invariant, message: String, now: Timestamp) {
        Self::count(&mut self.tallies, invariant, Violation::at(now, message));
    }

    fn count(tallies: &mut BTreeMap<Invariant, Tally>, invariant: Invariant, found: Violation) {
        let tally = tallies.entry(invariant).or_default();
        tally.count += found.count;
        tally.first.get_or_insert(found.message);
    }

    /// The first violation of `invariant`, if any.
    pub fn first(&self, invariant: Invariant) -> Option<&str> {
        self.tallies
            .get(&invariant)
            .and_then(|t| t.first.as_deref())
    }

    /// Records that the harness (not the controller) terminated `instance_id`, as a user or EC2
    /// would outside Karpenter: `drained-before-terminate` does not hold the controller to it.
    pub fn note_external_termination(&mut self, instance_id: &str) {
        self.checkers.drain.note_external_termination(instance_id);
    }

    /// Records that a user force-deleted the NodeClaim of `instance_id` at `at` (the
    /// `claim-force-deleted` fault): `interruption-rehomed` counts its node's room as taken by
    /// the world.
    pub fn note_claim_lost(&mut self, instance_id: &str, at: jiff::Timestamp) {
        self.checkers.rehome.note_claim_lost(instance_id, at);
    }

    /// Records that the world deleted Karpenter's tags from `instance_id` (the `tags-lost`
    /// fault): `no-leaked-instances` no longer holds the controller to finding it once no claim
    /// names it (upstream's garbage collection cannot either).
    pub fn note_tags_lost(&mut self, instance_id: &str) {
        self.checkers.leaks.note_tags_lost(instance_id);
    }

    /// Records that EC2 announced at `announced` a stop of `instance_id` at `start` (the
    /// `scheduled-maintenance` fault): `scheduled-change-acted` holds the controller to deleting
    /// the NodeClaim that named it then (`None`: none did) before the stop.
    pub fn note_scheduled_change(
        &mut self,
        instance_id: &str,
        claim: Option<String>,
        announced: Timestamp,
        start: Timestamp,
    ) {
        self.checkers
            .rehome
            .note_scheduled_change(instance_id, announced);
        self.checkers
            .maintenance
            .note(instance_id, claim, announced, start);
    }

    /// How fast the spot warnings so far were acted on.
    pub fn interruption_responses(&self) -> &rehome::Responses {
        self.checkers.rehome.responses()
    }

    /// What the checkers counted (spot warnings, capacity errors, rehome checks...).
    pub fn counters(&self) -> Counters {
        let (rehome_checked, rehome_excused) = self.checkers.rehome.counts();
        let (drain_past_deadline, drain_past_deadline_deleted) =
            self.checkers.drain.past_deadline_counts();
        Counters {
            rehome_checked,
            rehome_excused,
            drain_past_deadline,
            drain_past_deadline_deleted,
            ..self.history.counters().clone()
        }
    }

    /// Every invariant in report order, held or not.
    pub fn results(&self) -> Vec<InvariantResult> {
        Invariant::iter()
            .map(|invariant| {
                let tally = self.tallies.get(&invariant).cloned().unwrap_or_default();
                InvariantResult {
                    name: invariant.name().to_string(),
                    held: tally.count == 0,
                    violations: tally.count,
                    first: tally.first,
                }
            })
            .collect()
    }
}
