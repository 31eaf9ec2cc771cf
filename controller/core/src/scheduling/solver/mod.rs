//! The solve loop: pods in queue order, each placed on an existing node, else on a NodeClaim
//! already planned in this run (fewest pods first), else on a new NodeClaim from the
//! highest-weight NodePool that can take it; preferences relaxed one step at a time on failure.
//!
//! Resources are dense `i64` vectors indexed per run (cpu, memory, pods, ... then extended
//! resources), so the hot fit checks are a handful of integer compares.
//!
//! Where the code is: this module holds the [`Solver`] state, the run loop and relaxation;
//! `dense.rs` the resource space, `types.rs` instance-type views, the compatibility cache and
//! `minValues`, `build.rs` the run's preparation, `place.rs` placing and committing a pod,
//! `topology_plan.rs` topology decisions, `results.rs` the answer.

mod build;
pub use build::{COMPATIBLE_TYPES_MEMO_MAX_ENTRIES, CompatibleTypesMemo, PreparedPools};
mod dense;
mod place;
mod reservations;
mod results;
mod topology_plan;
mod types;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use dense::{Dense, Space};
use types::{CompatEntry, TypeView};

use super::pod::{HostPort, Strength};
use super::requirements::Requirements;
use super::topology::{GroupRef, PodTopology, Topology};
use super::{ExistingNode, Input, MinValuesPolicy, PreferencePolicy, Results};
use crate::api::Taint;

/// A NodePool prepared for the run.
struct Pool<'a> {
    name: String,
    taints: &'a [Taint],
    requirements: Requirements,
    /// Compatible types, cheapest first.
    types: Vec<TypeView<'a>>,
    /// Limited dimensions and their limits.
    limits: Vec<(usize, i64)>,
    nodes_limit: Option<i64>,
    /// Capacity of existing nodes plus the worst case of every planned claim.
    used: Dense,
    node_count: i64,
    /// Host ports the pool's DaemonSets bind on each of its new nodes (upstream's
    /// `DaemonOverheadGroup.HostPortUsage`): a pending pod cannot take them there.
    daemon_host_ports: Vec<HostPort>,
}

/// A NodeClaim being planned.
struct Claim {
    pool: usize,
    requirements: Requirements,
    /// Indices into the pool's `types`, cheapest first (u32: thousands of claims hold hundreds).
    types: Vec<u32>,
    used: Dense,
    /// Component-wise maximum of the remaining types' allocatable: a cheap necessary condition.
    max_alloc: Dense,
    /// Component-wise maximum capacity of the remaining types (what limits count).
    max_capacity: Dense,
    pods: Vec<usize>,
    host_ports: Vec<HostPort>,
    /// Per topology key id: the domain the claim is pinned to.
    pinned: Vec<Option<usize>>,
    /// Capacity reservations held for this claim (one instance each): every reservation of a
    /// reserved offering it could launch into (upstream reserves pessimistically).
    reserved: BTreeSet<String>,
}

/// An existing node during the run.
struct Node<'a> {
    node: &'a ExistingNode,
    used: Dense,
    alloc: Dense,
    host_ports: Vec<HostPort>,
    /// Volumes attached by driver (its pods' and those placed here), against
    /// `node.volume_limits`.
    volumes: BTreeMap<String, BTreeSet<String>>,
    placed: Vec<usize>,
}

/// A pod's relaxation state.
#[derive(Clone, Default)]
struct Relaxation {
    /// Index of the required node-affinity term in use.
    term: usize,
    dropped_preferred_node: usize,
    dropped_affinity: usize,
    dropped_anti_affinity: usize,
    dropped_spread: usize,
    /// The last step (upstream's `toleratePreferNoScheduleTaints`): `PreferNoSchedule` taints
    /// are tolerated. Taken only when some NodePool has such a taint, as upstream takes it.
    prefer_no_schedule_relaxed: bool,
}

struct Solver<'a> {
    input: Input<'a>,
    /// The pools' compatible types, when worked out before the run ([`solve_prepared`]).
    prepared: Option<&'a PreparedPools>,
    /// Told the pods still to place every [`PROGRESS_EVERY_PODS`] placements (upstream's
    /// queue-depth and unfinished-work gauges).
    progress: &'a dyn Fn(usize),
    space: Space,
    /// The shared catalog's types as dense vectors over the layout this run's space starts
    /// with (see [`build::DenseTypes`]), when prepared from a memo.
    dense_types: Option<std::sync::Arc<build::DenseTypes>>,
    pools: Vec<Pool<'a>>,
    /// Whether some NodePool taints its nodes `PreferNoSchedule`: only then does relaxation end
    /// by tolerating such taints (upstream's rule).
    pools_prefer_no_schedule: bool,
    nodes: Vec<Node<'a>>,
    claims: Vec<Claim>,
    /// (pod count, claim index): iteration order for planned claims.
    claim_order: BTreeSet<(usize, usize)>,
    /// For hostname groups that allow one matching pod per node (required anti-affinity,
    /// spread with maxSkew 1): the planned claims with none yet, in the same order. A pod bound
    /// by such a group only scans these, instead of every claim.
    free: BTreeMap<usize, BTreeSet<(usize, usize)>>,
    /// Per topology key id and domain id: the claims pinned there, in the same order.
    by_pin: Vec<Vec<BTreeSet<(usize, usize)>>>,
    /// Per topology key id: the claims not pinned to any domain of it yet.
    unpinned: Vec<BTreeSet<(usize, usize)>>,
    /// Which of a pool's types satisfy a requirement set. Claims narrow to a handful of distinct
    /// sets (a zone pin, a capacity type), so each is evaluated once instead of per attempt.
    compat_cache: RefCell<HashMap<u64, Vec<CompatEntry>>>,
    topology: Topology,
    /// Per pod: its references into the topology.
    pod_topology: Vec<PodTopology>,
    /// Per pod: the groups whose selectors count it.
    counted_by: Vec<Vec<usize>>,
    requests: Vec<Dense>,
    /// Topology keys other than hostname, sorted; their index is the key id.
    keys: Vec<String>,
    /// Per key id: every domain (zone, label value) it can take, sorted; the index is the
    /// domain id groups count by.
    universe: Vec<Vec<String>>,
    /// Per group: its key id (`None` for hostname groups, which count by host slot).
    group_key: Vec<Option<usize>>,
    /// Instances each capacity reservation can still take in this run (upstream's
    /// `ReservationManager`).
    reservations: BTreeMap<String, u32>,
}

/// How often a run reports its progress, in pods attempted.
pub const PROGRESS_EVERY_PODS: usize = 100;

/// Runs the scheduling simulation.
pub fn solve(input: Input<'_>) -> Results {
    solve_with_progress(input, None, &|_| {})
}

/// [`solve`], telling `progress` how many pods are left to place every [`PROGRESS_EVERY_PODS`]
/// attempts (and once at the start). Progress reports never change the result. `prepared`, if
/// given, is as [`solve_prepared`]'s.
pub fn solve_with_progress(
    input: Input<'_>,
    prepared: Option<&PreparedPools>,
    progress: &dyn Fn(usize),
) -> Results {
    let mut solver = Solver::new(input, prepared, progress);
    solver.run()
}

/// [`solve`] with the pools' compatible types worked out beforehand: `prepared` must be
/// [`PreparedPools::new`] over this input's `node_pools`, `catalog` and `pool_catalogs` (many
/// runs over one cluster view with different pods and nodes share it).
pub fn solve_prepared(input: Input<'_>, prepared: &PreparedPools) -> Results {
    let mut solver = Solver::new(input, Some(prepared), &|_| {});
    solver.run()
}

impl<'a> Solver<'a> {
    fn new(
        input: Input<'a>,
        prepared: Option<&'a PreparedPools>,
        progress: &'a dyn Fn(usize),
    ) -> Self {
        let mut space = Space::new();
        for pod in input.pods.iter().chain(input.daemonsets) {
            space.learn(&pod.requests);
        }
        let pool_types = input.pool_catalogs.values().flat_map(|c| &c.instance_types);
        for it in input.catalog.instance_types.iter().chain(pool_types) {
            space.learn(&it.allocatable);
            space.learn(&it.capacity);
        }
        for node in input.nodes {
            space.learn(&node.allocatable);
        }
        let dense_types = prepared.and_then(|p| p.dense_types(input.catalog, &space.names));
        let mut solver = Solver {
            input,
            prepared,
            progress,
            dense_types,
            pools: Vec::new(),
            pools_prefer_no_schedule: false,
            nodes: Vec::new(),
            claims: Vec::new(),
            claim_order: BTreeSet::new(),
            free: BTreeMap::new(),
            by_pin: Vec::new(),
            unpinned: Vec::new(),
            compat_cache: RefCell::new(HashMap::new()),
            topology: Topology::default(),
            pod_topology: Vec::new(),
            counted_by: Vec::new(),
            requests: input
                .pods
                .iter()
                .map(|p| space.dense(&p.requests))
                .collect(),
            keys: Vec::new(),
            universe: Vec::new(),
            group_key: Vec::new(),
            reservations: BTreeMap::new(),
            space,
        };
        solver.build_pools();
        solver.build_reservations();
        solver.pools_prefer_no_schedule = solver.pools.iter().any(|p| {
            p.taints
                .iter()
                .any(|t| t.effect == crate::api::TaintEffect::PreferNoSchedule)
        });
        solver.build_nodes();
        solver.build_topology();
        solver
    }

    fn run(&mut self) -> Results {
        let mut queue: Vec<usize> = (0..self.input.pods.len())
            .filter(|i| !self.input.pods[*i].daemonset_owned)
            .collect();
        let cpu = 0;
        let memory = 1;
        queue.sort_by(|a, b| {
            let (pa, pb) = (&self.input.pods[*a], &self.input.pods[*b]);
            self.requests[*b][cpu]
                .cmp(&self.requests[*a][cpu])
                .then(self.requests[*b][memory].cmp(&self.requests[*a][memory]))
                .then_with(|| pa.created.cmp(&pb.created))
                .then_with(|| pa.uid.cmp(&pb.uid))
        });
        let mut relax: Vec<Relaxation> = vec![Relaxation::default(); self.input.pods.len()];
        if self.input.options.preference_policy == PreferencePolicy::Ignore {
            for (i, pod) in self.input.pods.iter().enumerate() {
                let r = &mut relax[i];
                r.dropped_preferred_node = pod.preferred_terms.len();
                r.dropped_affinity = usize::MAX;
                r.dropped_anti_affinity = usize::MAX;
                r.dropped_spread = usize::MAX;
            }
        }
        let mut failures: BTreeMap<usize, Failure> = BTreeMap::new();
        (self.progress)(queue.len());
        loop {
            let mut progress = false;
            let mut failed = Vec::new();
            for (attempted, &p) in queue.iter().enumerate() {
                if attempted > 0 && attempted % PROGRESS_EVERY_PODS == 0 {
                    (self.progress)(queue.len() - attempted);
                }
                loop {
                    match self.place(p, &relax[p]) {
                        Ok(()) => {
                            progress = true;
                            failures.remove(&p);
                            break;
                        }
                        Err(failure) => {
                            // Waiting for reserved capacity is not a reason to relax: the pod
                            // may get it later in this run or the next (upstream's rule).
                            if failure.awaiting_reservation || !self.relax(p, &mut relax[p]) {
                                failures.insert(p, failure);
                                failed.push(p);
                                break;
                            }
                        }
                    }
                }
            }
            if failed.is_empty() || !progress {
                break;
            }
            // Pods placed later may have made room (affinity targets, spread domains): retry the
            // failures from their strictest form.
            for p in &failed {
                relax[*p] = Relaxation::default();
                if self.input.options.preference_policy == PreferencePolicy::Ignore {
                    let pod = &self.input.pods[*p];
                    relax[*p] = Relaxation {
                        term: 0,
                        dropped_preferred_node: pod.preferred_terms.len(),
                        dropped_affinity: usize::MAX,
                        dropped_anti_affinity: usize::MAX,
                        dropped_spread: usize::MAX,
                        prefer_no_schedule_relaxed: false,
                    };
                }
            }
            queue = failed;
        }
        self.results(failures)
    }

    /// One relaxation step in upstream's order; false when nothing is left to relax.
    fn relax(&self, p: usize, r: &mut Relaxation) -> bool {
        let pod = &self.input.pods[p];
        if r.term + 1 < pod.required_terms.len() {
            r.term += 1;
            return true;
        }
        let preferred = |refs: &[GroupRef]| {
            refs.iter()
                .filter(|g| g.strength != Strength::Required)
                .count()
        };
        let topo = &self.pod_topology[p];
        if r.dropped_affinity < preferred(&topo.affinity) {
            r.dropped_affinity += 1;
            return true;
        }
        if r.dropped_anti_affinity < preferred(&topo.anti_affinity) {
            r.dropped_anti_affinity += 1;
            return true;
        }
        if r.dropped_preferred_node < pod.preferred_terms.len() {
            r.dropped_preferred_node += 1;
            return true;
        }
        if r.dropped_spread < preferred(&topo.spread) {
            r.dropped_spread += 1;
            return true;
        }
        if !r.prefer_no_schedule_relaxed && self.pools_prefer_no_schedule {
            r.prefer_no_schedule_relaxed = true;
            return true;
        }
        false
    }

    /// The pod's node requirements under its relaxation state (volume alternatives separate).
    fn pod_requirements(&self, p: usize, r: &Relaxation) -> Requirements {
        let pod = &self.input.pods[p];
        let mut reqs = pod.node_selector.clone();
        if let Some(term) = pod.required_terms.get(r.term) {
            reqs.add_all(term);
        }
        if let Some((_, term)) = pod.preferred_terms.get(r.dropped_preferred_node) {
            reqs.add_all(term);
        }
        reqs
    }

    /// Active topology references: required ones plus preferred ones not yet dropped
    /// (the heaviest preferred are dropped first).
    fn active(&self, refs: &[GroupRef], dropped: usize) -> Vec<GroupRef> {
        let mut preferred: Vec<_> = refs
            .iter()
            .filter(|g| g.strength != Strength::Required)
            .copied()
            .collect();
        preferred.sort_by_key(|g| match g.strength {
            Strength::Preferred(w) => -w,
            Strength::Required => 0,
        });
        let kept = preferred.into_iter().skip(dropped);
        refs.iter()
            .filter(|g| g.strength == Strength::Required)
            .copied()
            .chain(kept)
            .collect()
    }
}

/// A pod's active topology constraints under its relaxation state.
struct Constraints {
    spread: Vec<GroupRef>,
    affinity: Vec<GroupRef>,
    anti: Vec<GroupRef>,
    /// `PreferNoSchedule` taints tolerated (the last relaxation step).
    prefer_no_schedule_relaxed: bool,
}

/// A successful dry run of adding a pod to a claim.
struct Attempt {
    /// The claim's narrowed requirements; `None` when they do not change.
    requirements: Option<Requirements>,
    types: Vec<u32>,
    /// The reservations the claim holds after the pod is added.
    reserved: BTreeSet<String>,
}

/// Why a pod could not be placed.
#[derive(Clone, Debug)]
struct Failure {
    reason: String,
    /// Reserved offerings it could use exist, but other claims of the run hold them all.
    awaiting_reservation: bool,
}

impl From<String> for Failure {
    fn from(reason: String) -> Self {
        Failure {
            reason,
            awaiting_reservation: false,
        }
    }
}
