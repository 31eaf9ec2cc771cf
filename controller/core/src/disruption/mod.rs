//! Disruption: removing or replacing nodes that are no longer needed (empty, underutilized,
//! drifted) within budgets, PodDisruptionBudgets and `do-not-disrupt`, and expiring old ones.
//!
//! Two halves, as upstream's controller but with the seams kept out of the decisions:
//!
//! - **The decision engine** (pure: a [`ClusterView`] in, a [`Decision`] out; no clock, no I/O):
//!   [`view`] (the cluster as plain facts, built the same way by the controller and by
//!   `karpenter plan --disrupt`), [`candidates`] (shared blockers and ordering), [`budgets`] (the
//!   one choke point for every method), [`pdb`], [`simulate`] (the provisioner's solver over the
//!   cluster without the candidates), [`consolidation`] (replacement pricing and spot rules), the
//!   methods in upstream's order — [`emptiness`], [`drift`], [`multinode`], [`singlenode`] —
//!   and [`engine`] (one pass, the 15-second re-check, successive passes for the dry run).
//!   [`expiration`] decides which claims are past `expireAfter`.
//! - **Orchestration** ([`orchestration`]: [`Disruption::pass`]; [`expiration::Expiration`];
//!   [`podevents`] for `status.lastPodEventTime`): taint, launch replacements, wait for them,
//!   delete; every step is recorded in the API server, so a restarted controller finishes or
//!   undoes a half-done command.
//!
//! Deliberate differences from upstream: every candidate is considered on every pass (no
//! 100-candidate cap, no one- and three-minute timeouts: the solver is fast enough), and the
//! command queue lives in the API server (taints, a condition and annotations) instead of memory.

pub mod budgets;
pub mod candidates;
pub mod consolidation;
pub mod drift;
pub mod emptiness;
pub mod engine;
pub mod expiration;
pub mod multinode;
pub mod orchestration;
pub mod pdb;
pub mod podevents;
pub mod prune;
pub mod queue;
pub mod simulate;
pub mod singlenode;
pub mod view;

use serde::Serialize;

pub use candidates::Exclusions;
pub use consolidation::Replacement;
pub use engine::{Decision, Evaluation, decide, decide_timed, plan_all, validate};
pub use expiration::Expiration;
pub use orchestration::{Disruption, DisruptionError, PassOutcome};
pub use podevents::PodEvents;
pub use view::{Cluster, ClusterView, NodeFacts, Objects, PodFacts, Scheduling};

use crate::api::nodepool::DisruptionReason;
use crate::scheduling;

/// Knobs of the decision engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Feature gate `SpotToSpotConsolidation` (upstream default off): spot nodes may be
    /// consolidated onto cheaper spot nodes.
    pub spot_to_spot: bool,
    /// Replace drifted nodes (upstream's `Drift`, on by default).
    pub drift: bool,
    pub scheduling: scheduling::Options,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            spot_to_spot: false,
            drift: true,
            // Upstream's disruption simulations fall back from reserved offerings.
            scheduling: scheduling::Options {
                reserved_offering_mode: scheduling::ReservedOfferingMode::Fallback,
                ..scheduling::Options::default()
            },
        }
    }
}

/// Why a command disrupts its nodes (the `method` of `plan --disrupt`, the reason of the
/// `DisruptionReason` condition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Method {
    Empty,
    Drifted,
    Underutilized,
    Expired,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Empty => "Empty",
            Method::Drifted => "Drifted",
            Method::Underutilized => "Underutilized",
            Method::Expired => "Expired",
        }
    }

    /// Upstream's `consolidation_type` metric label for a command over `nodes` nodes.
    pub fn consolidation_type(self, nodes: usize) -> &'static str {
        match self {
            Method::Empty => "empty",
            Method::Underutilized if nodes > 1 => "multi",
            Method::Underutilized => "single",
            Method::Drifted | Method::Expired => "",
        }
    }

    /// The budget reason it counts against (`None`: expiration ignores budgets).
    pub fn budget_reason(self) -> Option<DisruptionReason> {
        match self {
            Method::Empty => Some(DisruptionReason::Empty),
            Method::Drifted => Some(DisruptionReason::Drifted),
            Method::Underutilized => Some(DisruptionReason::Underutilized),
            Method::Expired => None,
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            Method::Empty,
            Method::Drifted,
            Method::Underutilized,
            Method::Expired,
        ]
        .into_iter()
        .find(|m| m.as_str() == text)
    }
}

/// One node a command disrupts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandNode {
    pub node: String,
    pub claim: Option<String>,
    pub pool: String,
}

/// What one pass decided to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    pub method: Method,
    /// Sorted by node name.
    pub nodes: Vec<CommandNode>,
    /// New nodes to launch first (empty for a delete).
    pub replacements: Vec<Replacement>,
    /// Hourly price of the nodes minus that of the replacements.
    pub savings_per_hour: f64,
}

impl Command {
    /// Its labels for the `voluntary_disruption_*` metrics.
    pub fn metric_labels(&self) -> crate::metrics::DecisionLabels {
        crate::metrics::DecisionLabels {
            decision: if self.replacements.is_empty() {
                "delete"
            } else {
                "replace"
            }
            .to_string(),
            reason: self.method.as_str().to_lowercase(),
            consolidation_type: self.method.consolidation_type(self.nodes.len()).to_string(),
        }
    }

    /// A command over `candidates` (sorted by node name).
    pub(crate) fn new(
        method: Method,
        candidates: &[&candidates::Candidate<'_>],
        replacements: Vec<Replacement>,
    ) -> Self {
        let mut nodes: Vec<CommandNode> = candidates
            .iter()
            .map(|c| CommandNode {
                node: c.facts.node.clone(),
                claim: c.facts.claim.clone(),
                pool: c.facts.pool.clone(),
            })
            .collect();
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        let price: f64 = candidates.iter().map(|c| c.price).sum();
        let cost: f64 = replacements.iter().map(|r| r.planned.price).sum();
        Self {
            method,
            nodes,
            replacements,
            savings_per_hour: price - cost,
        }
    }

    /// Node names, sorted.
    pub fn node_names(&self) -> Vec<&str> {
        self.nodes.iter().map(|n| n.node.as_str()).collect()
    }
}
