//! The scheduling simulation: given pending pods, existing nodes and NodePools, decide which pods
//! go to existing nodes and which new NodeClaims to launch, cheaply and within every constraint.
//!
//! Pure and deterministic: no I/O, no clock, no randomness; inputs are iterated in defined
//! orders, so the same input always gives the same plan.

pub mod defaults;
pub mod pod;
pub mod requirements;
mod solver;
pub mod topology;
pub mod volumes;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use defaults::{DefaultSpreads, SchedulerConfigError, SchedulerConfiguration, SelectorSources};
pub use pod::{PodError, PodInfo};
pub use requirements::{Requirement, Requirements};
pub use solver::{
    COMPATIBLE_TYPES_MEMO_MAX_ENTRIES, CompatibleTypesMemo, PROGRESS_EVERY_PODS, PreparedPools,
    solve, solve_prepared, solve_with_progress,
};

use crate::api::{NodePool, Requirement as ApiRequirement, Taint};
use crate::catalog::Catalog;
use crate::resources::Resources;

/// How soft constraints (preferred affinities, `ScheduleAnyway` spread) are treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreferencePolicy {
    /// Treated as required, then relaxed one at a time when a pod does not fit (upstream default).
    #[default]
    Respect,
    /// Ignored entirely.
    Ignore,
}

/// What happens when the instance types left cannot cover a requirement's `minValues`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinValuesPolicy {
    /// The NodeClaim is not created (upstream default).
    #[default]
    Strict,
    /// `minValues` is lowered to what is left.
    BestEffort,
}

/// What a pod does when the reserved offerings it could use are all taken by other NodeClaims of
/// the same run (upstream's `ReservedOfferingMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReservedOfferingMode {
    /// It waits for the next run instead of falling back to on-demand or spot, or to a NodePool
    /// of lower weight (upstream's provisioner: a reservation freed or synced by then is used).
    #[default]
    Strict,
    /// It falls back to the other offerings (upstream's disruption simulations).
    Fallback,
}

/// Knobs of one scheduling run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub preference_policy: PreferencePolicy,
    pub min_values_policy: MinValuesPolicy,
    /// Most instance types written to one NodeClaim (upstream `MaxInstanceTypes`).
    pub instance_types_max: usize,
    pub reserved_offering_mode: ReservedOfferingMode,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            preference_policy: PreferencePolicy::Respect,
            min_values_policy: MinValuesPolicy::Strict,
            instance_types_max: 600,
            reserved_offering_mode: ReservedOfferingMode::Strict,
        }
    }
}

/// A node already in the cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ExistingNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub capacity: Resources,
    pub allocatable: Resources,
    /// Pods bound to it (their requests are in use; their labels count for topology).
    pub pods: Vec<PodInfo>,
    /// Ready and initialized nodes are tried first.
    pub initialized: bool,
    /// Being deleted: nothing new is placed on it.
    pub deleting: bool,
    /// Volumes each CSI driver may attach to it (its CSINode's `allocatable.count`); a driver
    /// not listed has no known limit (a node that has not registered its drivers yet, or a
    /// NodeClaim: upstream does not limit those either).
    pub volume_limits: BTreeMap<String, i64>,
}

impl ExistingNode {
    /// The NodePool that owns it, if Karpenter manages it.
    pub fn nodepool(&self) -> Option<&str> {
        self.labels
            .get(crate::api::labels::NODEPOOL_LABEL)
            .map(String::as_str)
    }
}

/// No NodePool with a catalog of its own: every pool uses [`Input::catalog`].
pub static NO_POOL_CATALOGS: BTreeMap<String, Catalog> = BTreeMap::new();

/// Everything one scheduling run looks at.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    pub node_pools: &'a [NodePool],
    pub catalog: &'a Catalog,
    /// By NodePool name: the catalog as that pool's EC2NodeClass launches it, where it differs
    /// from `catalog` (see [`crate::catalog::nodeclass`]). [`NO_POOL_CATALOGS`] when none does.
    pub pool_catalogs: &'a BTreeMap<String, Catalog>,
    pub nodes: &'a [ExistingNode],
    /// One pod per DaemonSet (its template): daemon overhead on every compatible node.
    pub daemonsets: &'a [PodInfo],
    /// Pods to place.
    pub pods: &'a [PodInfo],
    /// Namespace labels, for `namespaceSelector` in affinity terms.
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    pub options: Options,
}

/// A NodeClaim the run decided to launch.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedClaim {
    pub node_pool: String,
    /// Instance types that fit, cheapest first (at most `instance_types_max`). Shared strings:
    /// thousands of claims list the same few hundred names.
    pub instance_types: Arc<[Arc<str>]>,
    /// Requirements other than the instance-type list (see [`Self::nodeclaim_requirements`]).
    pub requirements: Vec<ApiRequirement>,
    /// Pods placed on it, in placement order.
    pub pods: Vec<String>,
    /// Pod requests plus daemon overhead.
    pub requests: Resources,
    /// Hourly price of the cheapest instance type's cheapest compatible offering.
    pub price: f64,
}

impl PlannedClaim {
    /// Requirements as written to the NodeClaim's spec, by key, including
    /// `node.kubernetes.io/instance-type In [instance_types]`.
    pub fn nodeclaim_requirements(&self) -> Vec<ApiRequirement> {
        let mut out = self.requirements.clone();
        out.push(ApiRequirement {
            key: crate::api::labels::INSTANCE_TYPE_LABEL.to_string(),
            operator: crate::api::Operator::In,
            values: self.instance_types.iter().map(|n| n.to_string()).collect(),
            min_values: self
                .requirements
                .iter()
                .find(|r| r.key == crate::api::labels::INSTANCE_TYPE_LABEL)
                .and_then(|r| r.min_values),
        });
        out.retain(|r| {
            r.key != crate::api::labels::INSTANCE_TYPE_LABEL
                || r.values.len() == self.instance_types.len()
        });
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

/// Pods placed on one existing node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePlacement {
    pub node: String,
    pub pods: Vec<String>,
}

/// A pod nothing can run, and why (readable, per NodePool).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unschedulable {
    pub pod: String,
    pub reason: String,
    /// The pod waits for reserved capacity other NodeClaims of the run took
    /// ([`ReservedOfferingMode::Strict`]): it is planned again next pass, and upstream records
    /// no `FailedScheduling` event for it.
    pub awaiting_reservation: bool,
}

/// The outcome of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Results {
    pub new_claims: Vec<PlannedClaim>,
    pub existing_nodes: Vec<NodePlacement>,
    pub unschedulable: Vec<Unschedulable>,
}
