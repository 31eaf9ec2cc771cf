//! The solve loop: pods in queue order, each placed on an existing node, else on a NodeClaim
//! already planned in this run (fewest pods first), else on a new NodeClaim from the
//! highest-weight NodePool that can take it; preferences relaxed one step at a time on failure.
//!
//! Resources are dense `i64` vectors indexed per run (cpu, memory, pods, ... then extended
//! resources), so the hot fit checks are a handful of integer compares.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use super::pod::{HostPort, Strength, tolerates};
use super::requirements::{Requirement, Requirements};
use super::topology::{GroupKind, PodTopology, Topology};
use super::{
    ExistingNode, Input, MinValuesPolicy, NodePlacement, PlannedClaim, PreferencePolicy, Results,
    Unschedulable,
};
use crate::api::labels::{
    AWS_WELL_KNOWN_LABELS, CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL,
    NODEPOOL_LABEL, ZONE_LABEL, is_well_known,
};
use crate::api::{NodePool, Operator, Taint};
use crate::catalog::InstanceType;
use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};

type Dense = Vec<i64>;

/// Maps resource names to dense indices for one run.
struct Space {
    names: Vec<String>,
    index: HashMap<String, usize>,
}

impl Space {
    fn new() -> Self {
        let mut space = Space {
            names: Vec::new(),
            index: HashMap::new(),
        };
        for name in [CPU, MEMORY, PODS, EPHEMERAL_STORAGE] {
            space.intern(name);
        }
        space
    }

    fn intern(&mut self, name: &str) -> usize {
        if let Some(i) = self.index.get(name) {
            return *i;
        }
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), self.names.len() - 1);
        self.names.len() - 1
    }

    fn learn(&mut self, resources: &Resources) {
        for (name, _) in resources.iter() {
            self.intern(name);
        }
    }

    fn dense(&self, resources: &Resources) -> Dense {
        let mut out = vec![0; self.names.len()];
        for (name, amount) in resources.iter() {
            if let Some(i) = self.index.get(name) {
                out[*i] = amount;
            }
        }
        out
    }

    fn sparse(&self, dense: &[i64]) -> Resources {
        Resources::from_pairs(
            self.names
                .iter()
                .zip(dense)
                .filter(|(_, v)| **v != 0)
                .map(|(n, v)| (n.as_str(), *v)),
        )
    }
}

fn fits(used: &[i64], request: &[i64], capacity: &[i64]) -> bool {
    used.iter()
        .zip(request)
        .zip(capacity)
        .all(|((u, r), c)| *r <= 0 || u + r <= *c)
}

fn add(into: &mut [i64], other: &[i64]) {
    into.iter_mut().zip(other).for_each(|(a, b)| *a += b);
}

/// Instance-type attribute labels: a type without one of them has it as "does not exist".
fn is_type_attribute(key: &str) -> bool {
    AWS_WELL_KNOWN_LABELS.contains(&key) || key == INSTANCE_TYPE_LABEL
}

/// One instance type as a NodePool sees it.
struct TypeView<'a> {
    it: &'a InstanceType,
    name: Arc<str>,
    /// Allocatable minus the pool's daemon overhead on this type.
    alloc: Dense,
    capacity: Dense,
    daemon: Dense,
}

impl TypeView<'_> {
    /// Whether the type can satisfy `reqs`: shared label keys intersect, and some available
    /// offering matches the zone and capacity-type requirements.
    fn compatible(&self, reqs: &Requirements) -> bool {
        for (key, req) in reqs.iter() {
            if key == ZONE_LABEL || key == CAPACITY_TYPE_LABEL {
                continue;
            }
            let ok = match self.it.labels.get(key) {
                Some(value) => req.has(value),
                // A type without an attribute label has it as "does not exist".
                None if is_type_attribute(key) => {
                    matches!(req.operator(), Operator::NotIn | Operator::DoesNotExist)
                }
                None => true,
            };
            if !ok {
                return false;
            }
        }
        self.cheapest(reqs).is_some()
    }

    /// Price of the cheapest available offering `reqs` allows.
    fn cheapest(&self, reqs: &Requirements) -> Option<f64> {
        let zone = reqs.get(ZONE_LABEL);
        let capacity_type = reqs.get(CAPACITY_TYPE_LABEL);
        self.it
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| zone.is_none_or(|r| r.has(&o.zone)))
            .filter(|o| capacity_type.is_none_or(|r| r.has(o.capacity_type.label())))
            .map(|o| o.price)
            .min_by(f64::total_cmp)
    }

    /// Values this type can give `key` under `reqs` (offerings for zone/capacity type).
    fn values(&self, key: &str, reqs: &Requirements) -> Vec<String> {
        let zone = reqs.get(ZONE_LABEL);
        let capacity_type = reqs.get(CAPACITY_TYPE_LABEL);
        let offerings = self
            .it
            .offerings
            .iter()
            .filter(|o| o.available)
            .filter(|o| zone.is_none_or(|r| r.has(&o.zone)))
            .filter(|o| capacity_type.is_none_or(|r| r.has(o.capacity_type.label())));
        match key {
            ZONE_LABEL => offerings.map(|o| o.zone.clone()).collect(),
            CAPACITY_TYPE_LABEL => offerings
                .map(|o| o.capacity_type.label().to_string())
                .collect(),
            _ => self.it.labels.get(key).cloned().into_iter().collect(),
        }
    }
}

/// Shared instance-type name lists of planned claims.
type TypeNames = Arc<[Arc<str>]>;

/// One cached compatibility result: pool, requirement set, per-type verdicts.
type CompatEntry = (usize, Requirements, Rc<[bool]>);

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
}

/// An existing node during the run.
struct Node<'a> {
    node: &'a ExistingNode,
    used: Dense,
    alloc: Dense,
    host_ports: Vec<HostPort>,
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
}

struct Solver<'a> {
    input: Input<'a>,
    space: Space,
    pools: Vec<Pool<'a>>,
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
}

/// Runs the scheduling simulation.
pub fn solve(input: Input<'_>) -> Results {
    let mut solver = Solver::new(input);
    solver.run()
}

impl<'a> Solver<'a> {
    fn new(input: Input<'a>) -> Self {
        let mut space = Space::new();
        for pod in input.pods.iter().chain(input.daemonsets) {
            space.learn(&pod.requests);
        }
        for it in &input.catalog.instance_types {
            space.learn(&it.allocatable);
            space.learn(&it.capacity);
        }
        for node in input.nodes {
            space.learn(&node.allocatable);
        }
        let mut solver = Solver {
            input,
            pools: Vec::new(),
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
            space,
        };
        solver.build_pools();
        solver.build_nodes();
        solver.build_topology();
        solver
    }

    fn build_pools(&mut self) {
        let mut pools: Vec<&NodePool> = self.input.node_pools.iter().collect();
        // Highest weight first; ties by name (upstream orders ties by name descending, which is
        // arbitrary; ascending reads naturally and is just as deterministic).
        pools.sort_by(|a, b| {
            let wa = a.spec.weight.unwrap_or(0);
            let wb = b.spec.weight.unwrap_or(0);
            wb.cmp(&wa)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        for pool in pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let template = &pool.spec.template;
            let mut requirements = Requirements::from_api(&template.spec.requirements);
            if let Some(meta) = &template.metadata {
                requirements.add_all(&Requirements::from_labels(&meta.labels));
            }
            requirements.add(NODEPOOL_LABEL, Requirement::single(&name));
            let taints = template.spec.taints.as_slice();
            let mut types: Vec<TypeView> = Vec::new();
            for it in &self.input.catalog.instance_types {
                let mut daemon = Resources::new();
                let mut type_reqs = requirements.clone();
                type_reqs.add_all(&Requirements::from_labels(&it.labels));
                for ds in self.input.daemonsets {
                    if tolerates(&ds.tolerations, taints).is_err() {
                        continue;
                    }
                    let mut ds_reqs = ds.node_selector.clone();
                    if let Some(first) = ds.required_terms.first() {
                        ds_reqs.add_all(first);
                    }
                    if type_reqs.compatible(&ds_reqs, is_well_known).is_ok() {
                        daemon = daemon.plus(&ds.requests);
                    }
                }
                let daemon = self.space.dense(&daemon);
                let mut alloc = self.space.dense(&it.allocatable);
                alloc.iter_mut().zip(&daemon).for_each(|(a, d)| *a -= d);
                let view = TypeView {
                    it,
                    name: Arc::from(it.name.as_str()),
                    alloc,
                    capacity: self.space.dense(&it.capacity),
                    daemon,
                };
                if view.compatible(&requirements) {
                    types.push(view);
                }
            }
            types.sort_by(|a, b| {
                let pa = a.cheapest(&requirements).unwrap_or(f64::MAX);
                let pb = b.cheapest(&requirements).unwrap_or(f64::MAX);
                pa.total_cmp(&pb).then_with(|| a.it.name.cmp(&b.it.name))
            });
            let mut limits = Vec::new();
            let mut nodes_limit = None;
            if let Some(list) = &pool.spec.limits {
                for (resource, quantity) in list {
                    let Ok(amount) = crate::resources::parse_quantity(resource, quantity.as_str())
                    else {
                        continue;
                    };
                    if resource == "nodes" {
                        nodes_limit = Some(amount);
                    } else {
                        let dim = self.space.intern(resource);
                        limits.push((dim, amount));
                    }
                }
            }
            self.pools.push(Pool {
                name,
                taints,
                requirements,
                types,
                limits,
                nodes_limit,
                used: Vec::new(),
                node_count: 0,
            });
        }
        // Interning limit names may have grown the space: size every dense vector to it.
        let width = self.space.names.len();
        for pool in &mut self.pools {
            pool.used = vec![0; width];
            for t in &mut pool.types {
                t.alloc.resize(width, 0);
                t.capacity.resize(width, 0);
                t.daemon.resize(width, 0);
            }
        }
        for r in &mut self.requests {
            r.resize(width, 0);
        }
        for node in self.input.nodes {
            if let Some(pool) = node
                .nodepool()
                .and_then(|n| self.pools.iter_mut().find(|p| p.name == n))
            {
                add(&mut pool.used, &self.space.dense(&node.capacity));
                pool.node_count += 1;
            }
        }
    }

    fn build_nodes(&mut self) {
        let mut order: Vec<&ExistingNode> =
            self.input.nodes.iter().filter(|n| !n.deleting).collect();
        order.sort_by(|a, b| {
            b.initialized
                .cmp(&a.initialized)
                .then_with(|| a.name.cmp(&b.name))
        });
        for node in order {
            let mut used = vec![0; self.space.names.len()];
            let mut host_ports = Vec::new();
            for pod in &node.pods {
                add(&mut used, &self.space.dense(&pod.requests));
                host_ports.extend(pod.host_ports.iter().cloned());
            }
            // Daemons that belong on this node but are not running yet will take their share.
            for ds in self.input.daemonsets {
                let running = node
                    .pods
                    .iter()
                    .any(|p| p.daemonset_owned && p.labels == ds.labels);
                let mut ds_reqs = ds.node_selector.clone();
                if let Some(first) = ds.required_terms.first() {
                    ds_reqs.add_all(first);
                }
                if !running
                    && tolerates(&ds.tolerations, &node.taints).is_ok()
                    && ds_reqs.matches_labels(&node.labels)
                {
                    add(&mut used, &self.space.dense(&ds.requests));
                }
            }

            self.nodes.push(Node {
                node,
                used,
                alloc: self.space.dense(&node.allocatable),
                host_ports,
                placed: Vec::new(),
            });
        }
    }

    fn build_topology(&mut self) {
        let namespaces = self.input.namespaces;
        for pod in self.input.pods {
            let refs = self.topology.register(pod, namespaces);
            self.pod_topology.push(refs);
        }
        // Existing pods with anti-affinity constrain incoming pods (inverse anti-affinity).
        let mut owners = Vec::new();
        for (n, node) in self.nodes.iter().enumerate() {
            for pod in &node.node.pods {
                if !pod.anti_affinity.is_empty() {
                    owners.push((n, self.topology.register(pod, namespaces)));
                }
            }
        }
        // Domains: every value a topology key can take, from pools, their types and nodes.
        let keys: BTreeSet<String> = self
            .topology
            .groups
            .iter()
            .map(|g| g.topology_key.clone())
            .filter(|k| k != HOSTNAME_LABEL)
            .collect();
        for key in keys {
            let mut values = BTreeSet::new();
            for pool in &self.pools {
                for t in &pool.types {
                    for v in t.values(&key, &pool.requirements) {
                        if pool.requirements.get(&key).is_none_or(|r| r.has(&v)) {
                            values.insert(v);
                        }
                    }
                }
                if let Some(r) = pool.requirements.get(&key) {
                    values.extend(r.values().map(str::to_string));
                }
            }
            for node in &self.nodes {
                if let Some(v) = node.node.labels.get(&key) {
                    values.insert(v.clone());
                }
            }
            self.keys.push(key);
            self.universe.push(values.into_iter().collect());
        }
        self.by_pin = self
            .universe
            .iter()
            .map(|u| vec![BTreeSet::new(); u.len()])
            .collect();
        self.unpinned = vec![BTreeSet::new(); self.keys.len()];
        self.group_key = self
            .topology
            .groups
            .iter()
            .map(|g| self.keys.iter().position(|k| *k == g.topology_key))
            .collect();
        // Which groups count which pods.
        self.counted_by = self
            .input
            .pods
            .iter()
            .map(|pod| {
                (0..self.topology.groups.len())
                    .filter(|g| self.topology.groups[*g].counts_pod(&pod.namespace, &pod.labels))
                    .collect()
            })
            .collect();
        for (g, group) in self.topology.groups.iter().enumerate() {
            let one_per_host = match group.kind {
                GroupKind::AntiAffinity => true,
                GroupKind::Spread { max_skew, .. } => max_skew == 1,
                GroupKind::Affinity => false,
            };
            if group.is_hostname() && one_per_host {
                self.free.insert(g, BTreeSet::new());
            }
        }
        // Existing pods count in the domains of their nodes.
        for n in 0..self.nodes.len() {
            for pod in &self.nodes[n].node.pods {
                for g in 0..self.topology.groups.len() {
                    if !self.topology.groups[g].counts_pod(&pod.namespace, &pod.labels) {
                        continue;
                    }
                    if let Some(d) = self.node_domain(n, g) {
                        if self.group_key[g].is_some() {
                            self.topology.groups[g].record_at(d, n);
                        } else {
                            self.topology.groups[g].record(d);
                        }
                    }
                }
            }
        }
        for (n, refs) in owners {
            for r in refs
                .anti_affinity
                .iter()
                .filter(|r| r.strength == Strength::Required)
            {
                if let Some(d) = self.node_domain(n, r.group) {
                    self.topology.groups[r.group].record_owner(d);
                }
            }
        }
    }

    /// The domain id of existing node `n` for group `g` (its slot for hostname groups).
    fn node_domain(&self, n: usize, g: usize) -> Option<usize> {
        match self.group_key[g] {
            None => Some(n),
            Some(k) => self.nodes[n]
                .node
                .labels
                .get(&self.keys[k])
                .and_then(|v| self.domain_id(k, v)),
        }
    }

    fn domain_id(&self, key: usize, value: &str) -> Option<usize> {
        self.universe[key]
            .binary_search_by(|d| d.as_str().cmp(value))
            .ok()
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
        let mut failures: BTreeMap<usize, String> = BTreeMap::new();
        loop {
            let mut progress = false;
            let mut failed = Vec::new();
            for &p in &queue {
                loop {
                    match self.place(p, &relax[p]) {
                        Ok(()) => {
                            progress = true;
                            failures.remove(&p);
                            break;
                        }
                        Err(reason) => {
                            if !self.relax(p, &mut relax[p]) {
                                failures.insert(p, reason);
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
        let preferred = |refs: &[super::topology::GroupRef]| {
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
    fn active(
        &self,
        refs: &[super::topology::GroupRef],
        dropped: usize,
    ) -> Vec<super::topology::GroupRef> {
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

    fn place(&mut self, p: usize, relax: &Relaxation) -> Result<(), String> {
        let pod = &self.input.pods[p];
        let base = self.pod_requirements(p, relax);
        let topo = &self.pod_topology[p];
        let constraints = Constraints {
            spread: self.active(&topo.spread, relax.dropped_spread),
            affinity: self.active(&topo.affinity, relax.dropped_affinity),
            anti: self.active(&topo.anti_affinity, relax.dropped_anti_affinity),
        };
        let alternatives: Vec<Requirements> = if pod.volume_terms.is_empty() {
            vec![base]
        } else {
            pod.volume_terms
                .iter()
                .map(|v| {
                    let mut r = base.clone();
                    r.add_all(v);
                    r
                })
                .collect()
        };
        let mut reasons = Vec::new();
        let mut plans = Vec::new();
        for reqs in alternatives {
            match self.plan_topology(p, &constraints) {
                Ok(plan) => plans.push((reqs, plan)),
                Err(reason) => reasons.push(reason),
            }
        }
        for (reqs, plan) in &plans {
            let found = (0..self.nodes.len()).find_map(|n| {
                self.try_node(p, n, reqs, &constraints, plan)
                    .map(|extra| (n, extra))
            });
            if let Some((n, _)) = found {
                self.commit_node(p, n, &constraints);
                return Ok(());
            }
        }
        for (reqs, plan) in &plans {
            let sets = self.candidates(p, &constraints, plan);
            let found = Merge::new(&sets).find_map(|(_, c)| {
                self.try_claim(p, c, reqs, &constraints, plan)
                    .map(|a| (c, a))
            });
            if let Some((c, attempt)) = found {
                self.commit_claim(p, c, attempt, &constraints);
                return Ok(());
            }
        }
        for (reqs, plan) in &plans {
            for pool in 0..self.pools.len() {
                match self.try_new_claim(p, pool, reqs, &constraints, plan) {
                    Ok(claim) => {
                        self.claims.push(claim);
                        let c = self.claims.len() - 1;
                        let attempt = Attempt {
                            requirements: None,
                            types: self.claims[c].types.clone(),
                        };
                        self.commit_claim(p, c, attempt, &constraints);
                        return Ok(());
                    }
                    Err(reason) => {
                        reasons.push(format!("NodePool {:?}: {reason}", self.pools[pool].name))
                    }
                }
            }
        }
        if self.pools.is_empty() {
            reasons.push("no NodePool is ready".to_string());
        }
        reasons.dedup();
        Err(reasons.join("; "))
    }

    /// The planned claims a pod may go to, fewest pods first: a free set when one of the pod's
    /// hostname constraints admits only claims without a matching pod, else every claim.
    /// The planned claims a pod may go to, as ordered sets whose union holds every claim it could
    /// fit (fewest pods first): every claim; or the claims free of a one-per-host group that
    /// binds the pod; or the claims pinned to (or still open for) the domains its topology
    /// permits — whichever is smallest. Scanning a superset in the same order keeps first-fit
    /// exactly as if every claim were tried.
    fn candidates<'s>(
        &'s self,
        p: usize,
        c: &Constraints,
        plan: &TopologyPlan,
    ) -> Vec<&'s BTreeSet<(usize, usize)>> {
        let pod = &self.input.pods[p];
        let mut best: Vec<&BTreeSet<(usize, usize)>> = vec![&self.claim_order];
        let mut best_len = self.claim_order.len();
        let restricting = c.anti.iter().chain(c.spread.iter()).filter(|r| {
            let g = &self.topology.groups[r.group];
            match g.kind {
                GroupKind::AntiAffinity => true,
                GroupKind::Spread { max_skew, .. } => {
                    max_skew == 1 && g.counts_pod(&pod.namespace, &pod.labels)
                }
                GroupKind::Affinity => false,
            }
        });
        for r in restricting {
            if let Some(set) = self.free.get(&r.group)
                && set.len() < best_len
            {
                best_len = set.len();
                best = vec![set];
            }
        }
        for (k, kp) in &plan.keys {
            let mut sets: Vec<&BTreeSet<(usize, usize)>> = vec![&self.unpinned[*k]];
            sets.extend(
                (0..self.universe[*k].len())
                    .filter(|d| kp.permits(*d))
                    .map(|d| &self.by_pin[*k][d]),
            );
            let len: usize = sets.iter().map(|s| s.len()).sum();
            if len < best_len {
                best_len = len;
                best = sets;
            }
        }
        best
    }

    fn try_node(
        &self,
        p: usize,
        n: usize,
        reqs: &Requirements,
        c: &Constraints,
        plan: &TopologyPlan,
    ) -> Option<Requirements> {
        let node = &self.nodes[n];
        let pod = &self.input.pods[p];
        if !fits(&node.used, &self.requests[p], &node.alloc) {
            return None;
        }
        if pod.tolerates(&node.node.taints).is_err() || !reqs.matches_labels(&node.node.labels) {
            return None;
        }
        if pod
            .host_ports
            .iter()
            .any(|h| node.host_ports.iter().any(|o| o.conflicts(h)))
        {
            return None;
        }
        if !self.hostname_ok(p, n, c) {
            return None;
        }
        let view = TargetView::Node {
            labels: &node.node.labels,
            solver: self,
        };
        let extra = self.target_topology(plan, &view, reqs)?;
        extra.matches_labels(&node.node.labels).then_some(extra)
    }

    fn try_claim(
        &self,
        p: usize,
        c: usize,
        reqs: &Requirements,
        constraints: &Constraints,
        plan: &TopologyPlan,
    ) -> Option<Attempt> {
        let claim = &self.claims[c];
        let pod = &self.input.pods[p];
        let pool = &self.pools[claim.pool];
        let request = &self.requests[p];
        if !fits(&claim.used, request, &claim.max_alloc) {
            return None;
        }
        if pod.tolerates(pool.taints).is_err() {
            return None;
        }
        if pod
            .host_ports
            .iter()
            .any(|h| claim.host_ports.iter().any(|o| o.conflicts(h)))
        {
            return None;
        }
        if !self.hostname_ok(p, self.nodes.len() + c, constraints) {
            return None;
        }
        // A claim already pinned to a domain the plan rules out: reject before requirement work.
        for (k, kp) in &plan.keys {
            if let Some(d) = claim.pinned[*k]
                && !kp.permits(d)
            {
                return None;
            }
        }
        claim.requirements.compatible(reqs, is_well_known).ok()?;
        // Most pods add no node requirements: borrow the claim's until something changes.
        let narrowed_owned;
        let narrowed: &Requirements = if reqs.is_empty() {
            &claim.requirements
        } else {
            let mut r = claim.requirements.clone();
            r.add_all(reqs);
            narrowed_owned = r;
            &narrowed_owned
        };
        let target = TargetView::Claim {
            pool,
            types: &claim.types,
            pinned: &claim.pinned,
        };
        let extra = self.target_topology(plan, &target, narrowed)?;
        // Pins that repeat what the claim already is change nothing: skip re-filtering types.
        let changed = !reqs.is_empty()
            || extra
                .iter()
                .any(|(k, r)| claim.requirements.get(k) != Some(r));
        let requirements = if changed {
            let mut r = narrowed.clone();
            r.add_all(&extra);
            Some(r)
        } else {
            None
        };
        let final_reqs = requirements.as_ref().unwrap_or(&claim.requirements);
        let compat = changed.then(|| self.compatible_types(claim.pool, final_reqs));
        let types: Vec<u32> = claim
            .types
            .iter()
            .copied()
            .filter(|t| {
                let view = &pool.types[*t as usize];
                fits(&claim.used, request, &view.alloc)
                    && compat.as_ref().is_none_or(|c| c[*t as usize])
            })
            .collect();
        if types.is_empty() {
            return None;
        }
        // Fewer types (by requirements or by fit) may no longer cover a requirement's minValues.
        if changed || types.len() != claim.types.len() {
            self.check_min_values(claim.pool, final_reqs, &types).ok()?;
        }
        Some(Attempt {
            requirements,
            types,
        })
    }

    /// Which of `pool`'s types satisfy `reqs` (cached per distinct requirement set).
    fn compatible_types(&self, pool: usize, reqs: &Requirements) -> Rc<[bool]> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        (pool, reqs).hash(&mut hasher);
        let hash = hasher.finish();
        if let Some(bucket) = self.compat_cache.borrow().get(&hash)
            && let Some((_, _, hit)) = bucket.iter().find(|(p, r, _)| *p == pool && r == reqs)
        {
            return hit.clone();
        }
        let computed: Rc<[bool]> = self.pools[pool]
            .types
            .iter()
            .map(|t| t.compatible(reqs))
            .collect();
        self.compat_cache
            .borrow_mut()
            .entry(hash)
            .or_default()
            .push((pool, reqs.clone(), computed.clone()));
        computed
    }

    fn check_min_values(
        &self,
        pool: usize,
        reqs: &Requirements,
        types: &[u32],
    ) -> Result<(), String> {
        if self.input.options.min_values_policy == MinValuesPolicy::BestEffort {
            return Ok(());
        }
        for (key, req) in reqs.iter() {
            let Some(min) = req.min_values else { continue };
            let mut seen = BTreeSet::new();
            for t in types {
                let view = &self.pools[pool].types[*t as usize];
                if key == INSTANCE_TYPE_LABEL {
                    seen.insert(view.it.name.clone());
                } else {
                    seen.extend(view.values(key, reqs).into_iter().filter(|v| req.has(v)));
                }
            }
            if (seen.len() as i64) < min {
                return Err(format!(
                    "minValues: {key} needs {min} distinct values, the instance types that fit offer {}",
                    seen.len()
                ));
            }
        }
        Ok(())
    }

    fn try_new_claim(
        &self,
        p: usize,
        pool_index: usize,
        reqs: &Requirements,
        constraints: &Constraints,
        plan: &TopologyPlan,
    ) -> Result<Claim, String> {
        let pool = &self.pools[pool_index];
        let pod = &self.input.pods[p];
        if let Err(taint) = pod.tolerates(pool.taints) {
            return Err(format!(
                "does not tolerate taint {}={}:{}",
                taint.key,
                taint.value.as_deref().unwrap_or_default(),
                super::pod::effect_name(taint.effect)
            ));
        }
        pool.requirements
            .compatible(reqs, is_well_known)
            .map_err(|e| format!("incompatible requirements, {e}"))?;
        if let Some(limit) = pool.nodes_limit
            && pool.node_count >= limit
        {
            return Err(format!("limit nodes={limit} reached"));
        }
        let mut narrowed = pool.requirements.clone();
        narrowed.add_all(reqs);
        let request = &self.requests[p];
        let zero = vec![0; self.space.names.len()];
        let (mut compatible, mut fitting) = (0, 0);
        let mut within_limits = Vec::new();
        let compat = self.compatible_types(pool_index, &narrowed);
        for (t, view) in pool.types.iter().enumerate() {
            if !compat[t] {
                continue;
            }
            compatible += 1;
            if !fits(&zero, request, &view.alloc) {
                continue;
            }
            fitting += 1;
            if pool
                .limits
                .iter()
                .all(|(dim, limit)| pool.used[*dim] + view.capacity[*dim] <= *limit)
            {
                within_limits.push(t as u32);
            }
        }
        if within_limits.is_empty() {
            return Err(if pool.types.is_empty() {
                "no instance type satisfies the NodePool's requirements".to_string()
            } else if compatible == 0 {
                format!("no instance type satisfies requirements {narrowed}")
            } else if fitting == 0 {
                format!(
                    "no instance type has enough resources for requests {} (plus daemonset overhead)",
                    self.space.sparse(request)
                )
            } else {
                let limits: Vec<String> = pool
                    .limits
                    .iter()
                    .map(|(d, l)| format!("{}={l}", self.space.names[*d]))
                    .collect();
                format!("limits {} would be exceeded", limits.join(", "))
            });
        }
        let slot = self.nodes.len() + self.claims.len();
        if !self.hostname_ok(p, slot, constraints) {
            return Err(
                "pod affinity on kubernetes.io/hostname cannot be met by a new node".to_string(),
            );
        }
        let unpinned = vec![None; self.keys.len()];
        let target = TargetView::Claim {
            pool,
            types: &within_limits,
            pinned: &unpinned,
        };
        let extra = self
            .target_topology(plan, &target, &narrowed)
            .ok_or_else(|| {
                "no topology domain satisfies the pod's spread and affinity".to_string()
            })?;
        let types = if extra.is_empty() {
            within_limits
        } else {
            narrowed.add_all(&extra);
            let compat = self.compatible_types(pool_index, &narrowed);
            within_limits
                .into_iter()
                .filter(|t| compat[*t as usize])
                .collect()
        };
        if types.is_empty() {
            return Err("no instance type offers the topology domain the pod needs".to_string());
        }
        self.check_min_values(pool_index, &narrowed, &types)?;
        let width = self.space.names.len();
        let mut claim = Claim {
            pool: pool_index,
            requirements: narrowed,
            types,
            used: vec![0; width],
            max_alloc: vec![0; width],
            max_capacity: vec![0; width],
            pods: Vec::new(),
            host_ports: Vec::new(),
            pinned: vec![None; self.keys.len()],
        };
        self.refresh_maxima(&mut claim);
        Ok(claim)
    }

    fn refresh_maxima(&self, claim: &mut Claim) {
        let pool = &self.pools[claim.pool];
        claim.max_alloc.iter_mut().for_each(|v| *v = i64::MIN);
        claim.max_capacity.iter_mut().for_each(|v| *v = 0);
        for t in &claim.types {
            let view = &pool.types[*t as usize];
            for (i, v) in view.alloc.iter().enumerate() {
                claim.max_alloc[i] = claim.max_alloc[i].max(*v);
            }
            for (i, v) in view.capacity.iter().enumerate() {
                claim.max_capacity[i] = claim.max_capacity[i].max(*v);
            }
        }
    }

    /// Hostname-keyed checks (each node or claim is its own domain), cheap enough to run before
    /// any requirement work.
    fn hostname_ok(&self, p: usize, slot: usize, c: &Constraints) -> bool {
        let pod = &self.input.pods[p];
        for r in &c.spread {
            let g = &self.topology.groups[r.group];
            if let GroupKind::Spread { max_skew, .. } = g.kind
                && g.is_hostname()
                && g.counts_pod(&pod.namespace, &pod.labels)
                && g.count(slot) as i64 + 1 > max_skew as i64
            {
                return false;
            }
        }
        for r in &c.affinity {
            let g = &self.topology.groups[r.group];
            if g.is_hostname()
                && g.count(slot) == 0
                && (g.total() > 0 || !g.counts_pod(&pod.namespace, &pod.labels))
            {
                return false;
            }
        }
        for r in &c.anti {
            let g = &self.topology.groups[r.group];
            if g.is_hostname() && g.count(slot) > 0 {
                return false;
            }
        }
        for g in &self.topology.anti_groups {
            let g = &self.topology.groups[*g];
            if g.is_hostname()
                && g.has_owners()
                && g.owner_count(slot) > 0
                && g.counts_pod(&pod.namespace, &pod.labels)
            {
                return false;
            }
        }
        true
    }

    /// Per-domain counts of group `g` restricted to nodes and claims pod `p`'s node affinity
    /// allows (`None` when the pod has no node affinity to honour: the plain counts apply).
    fn honored_counts(&self, p: usize, g: usize) -> Option<Vec<u32>> {
        let pod = &self.input.pods[p];
        if pod.node_selector.is_empty() && pod.required_terms.is_empty() {
            return None;
        }
        let k = self.group_key[g]?;
        let group = &self.topology.groups[g];
        let mut counts: Vec<u32> = (0..self.universe[k].len())
            .map(|d| group.count(d))
            .collect();
        let terms: Vec<Requirements> = if pod.required_terms.is_empty() {
            vec![pod.node_selector.clone()]
        } else {
            pod.required_terms
                .iter()
                .map(|t| {
                    let mut r = pod.node_selector.clone();
                    r.add_all(t);
                    r
                })
                .collect()
        };
        for &(slot, d) in group.placements() {
            let allowed = if slot < self.nodes.len() {
                terms
                    .iter()
                    .any(|t| t.matches_labels(&self.nodes[slot].node.labels))
            } else {
                let claim = &self.claims[slot - self.nodes.len()];
                terms
                    .iter()
                    .any(|t| claim.requirements.compatible(t, is_well_known).is_ok())
            };
            if !allowed && counts[d] > 0 {
                counts[d] -= 1;
            }
        }
        Some(counts)
    }

    /// The target-independent part of the pod's topology: for every non-hostname key it touches,
    /// which domains it may use and how to choose among them. Every such key is pinned to one
    /// domain at placement, so the pod is recorded exactly where it lands.
    fn plan_topology(&self, p: usize, c: &Constraints) -> Result<TopologyPlan, String> {
        let pod = &self.input.pods[p];
        let mut plan = TopologyPlan::default();
        for r in &c.spread {
            let g = &self.topology.groups[r.group];
            let GroupKind::Spread {
                max_skew,
                min_domains,
            } = g.kind
            else {
                continue;
            };
            let Some(k) = self.group_key[r.group] else {
                continue;
            };
            let key = &self.keys[k];
            let universe = &self.universe[k];
            let honor = pod
                .spread
                .iter()
                .find(|s| &s.topology_key == key)
                .is_some_and(|s| s.honor_node_affinity);
            // nodeAffinityPolicy Honor: domains and counted pods are limited to nodes the pod's
            // whole node affinity (nodeSelector and every OR term, relaxed or not) allows.
            let affinity_allows = |d: &str| {
                pod.node_selector.get(key).is_none_or(|q| q.has(d))
                    && (pod.required_terms.is_empty()
                        || pod
                            .required_terms
                            .iter()
                            .any(|t| t.get(key).is_none_or(|q| q.has(d))))
            };
            let counts = if honor {
                self.honored_counts(p, r.group)
            } else {
                None
            };
            let count = |d: usize| counts.as_ref().map_or_else(|| g.count(d), |c| c[d]);
            let eligible: Vec<usize> = (0..universe.len())
                .filter(|d| !honor || affinity_allows(&universe[*d]))
                .collect();
            let mut min = eligible.iter().map(|d| count(*d)).min().unwrap_or(0) as i64;
            if min_domains.is_some_and(|m| (eligible.len() as i64) < m as i64) {
                min = 0;
            }
            let own = i64::from(g.counts_pod(&pod.namespace, &pod.labels));
            let allowed: Vec<bool> = (0..universe.len())
                .map(|d| count(d) as i64 + own - min <= max_skew as i64)
                .collect();
            if !allowed.iter().any(|a| *a) {
                return Err(format!(
                    "topology spread on {key} (maxSkew {max_skew}) cannot be met"
                ));
            }
            let kp = plan.key(k, universe.len());
            kp.restrict(&allowed);
            kp.order.get_or_insert(Order::Fewest(vec![r.group]));
        }
        for r in &c.affinity {
            let g = &self.topology.groups[r.group];
            let Some(k) = self.group_key[r.group] else {
                continue;
            };
            let width = self.universe[k].len();
            let occupied: Vec<bool> = (0..width).map(|d| g.count(d) > 0).collect();
            let self_match = g.counts_pod(&pod.namespace, &pod.labels);
            let kp = plan.key(k, width);
            if !occupied.iter().any(|o| *o) {
                if !self_match {
                    return Err(format!(
                        "pod affinity on {}: no pod matches its selector",
                        self.keys[k]
                    ));
                }
                // Self-affinity with no peers yet: any domain, chosen by name.
                kp.order.get_or_insert(Order::Fewest(Vec::new()));
            } else {
                kp.restrict(&occupied);
                kp.order.get_or_insert(Order::Most(r.group));
            }
        }
        for r in &c.anti {
            let g = &self.topology.groups[r.group];
            let Some(k) = self.group_key[r.group] else {
                continue;
            };
            let width = self.universe[k].len();
            let kp = plan.key(k, width);
            for d in 0..width {
                if g.count(d) > 0 {
                    kp.blocked[d] = true;
                }
            }
        }
        for gi in &self.topology.anti_groups {
            let g = &self.topology.groups[*gi];
            let Some(k) = self.group_key[*gi] else {
                continue;
            };
            if !g.has_owners() || !g.counts_pod(&pod.namespace, &pod.labels) {
                continue;
            }
            let width = self.universe[k].len();
            let kp = plan.key(k, width);
            for d in 0..width {
                if g.owner_count(d) > 0 {
                    kp.blocked[d] = true;
                }
            }
        }
        for g in &self.counted_by[p] {
            let Some(k) = self.group_key[*g] else {
                continue;
            };
            let kp = plan.key(k, self.universe[k].len());
            match &mut kp.order {
                Some(Order::Fewest(groups)) if !groups.contains(g) => groups.push(*g),
                Some(_) => {}
                None => kp.order = Some(Order::Fewest(vec![*g])),
            }
        }
        for (k, kp) in &plan.keys {
            if !(0..self.universe[*k].len()).any(|d| kp.permits(d)) {
                return Err(format!(
                    "no {} domain is left: spread, affinity and anti-affinity rule them all out",
                    self.keys[*k]
                ));
            }
        }
        Ok(plan)
    }

    /// Pins each planned key to one domain the target can be in, or `None` if it cannot. A key
    /// the target is already pinned to adds nothing.
    fn target_topology(
        &self,
        plan: &TopologyPlan,
        target: &TargetView,
        reqs: &Requirements,
    ) -> Option<Requirements> {
        let mut extra = Requirements::new();
        for (k, kp) in &plan.keys {
            if let Some(pinned) = target.pinned(*k) {
                if !kp.permits(pinned) {
                    return None;
                }
                continue;
            }
            let possible = self.possible(target, *k, reqs, &extra);
            let candidates = possible.into_iter().filter(|d| kp.permits(*d));
            let choice = match &kp.order {
                Some(Order::Most(g)) => {
                    let g = &self.topology.groups[*g];
                    candidates.max_by_key(|d| (g.count(*d), std::cmp::Reverse(*d)))
                }
                Some(Order::Fewest(groups)) => candidates.min_by_key(|d| {
                    (
                        groups
                            .iter()
                            .map(|g| self.topology.groups[*g].count(*d))
                            .sum::<u32>(),
                        *d,
                    )
                }),
                None => candidates.min(),
            }?;
            extra.add(
                &self.keys[*k],
                Requirement::single(&self.universe[*k][choice]),
            );
        }
        Some(extra)
    }

    /// Domain ids of key `k` the target can still be in, given `reqs` and `extra`, ascending.
    fn possible(
        &self,
        target: &TargetView,
        k: usize,
        reqs: &Requirements,
        extra: &Requirements,
    ) -> Vec<usize> {
        let key = &self.keys[k];
        let allowed = |v: &str| {
            reqs.get(key).is_none_or(|r| r.has(v)) && extra.get(key).is_none_or(|r| r.has(v))
        };
        match target {
            TargetView::Node { labels, .. } => labels
                .get(key)
                .filter(|v| allowed(v))
                .and_then(|v| self.domain_id(k, v))
                .into_iter()
                .collect(),
            TargetView::Claim { pool, types, .. } => {
                let merged_owned;
                let merged: &Requirements = if extra.is_empty() {
                    reqs
                } else {
                    let mut m = reqs.clone();
                    m.add_all(extra);
                    merged_owned = m;
                    &merged_owned
                };
                let universe = &self.universe[k];
                let type_key =
                    key == ZONE_LABEL || key == CAPACITY_TYPE_LABEL || is_type_attribute(key);
                let mut found = vec![false; universe.len()];
                if type_key {
                    let mut left = universe.len();
                    for t in *types {
                        for v in pool.types[*t as usize].values(key, merged) {
                            if let Some(d) = self.domain_id(k, &v)
                                && !found[d]
                            {
                                found[d] = true;
                                left -= 1;
                            }
                        }
                        if left == 0 {
                            break;
                        }
                    }
                } else {
                    found.iter_mut().for_each(|f| *f = true);
                }
                (0..universe.len())
                    .filter(|d| found[*d] && allowed(&universe[*d]))
                    .collect()
            }
        }
    }

    /// Counts the pod in every group that selects it, and as an owner of its anti-affinity
    /// terms, in the domains of the target (`domain_of(group)`).
    fn record(
        &mut self,
        p: usize,
        slot: usize,
        domain_of: &dyn Fn(&Self, usize) -> Option<usize>,
        c: &Constraints,
    ) {
        for i in 0..self.counted_by[p].len() {
            let g = self.counted_by[p][i];
            if let Some(d) = domain_of(self, g) {
                if self.group_key[g].is_some() {
                    self.topology.groups[g].record_at(d, slot);
                } else {
                    self.topology.groups[g].record(d);
                }
            }
        }
        for r in &c.anti {
            if let Some(d) = domain_of(self, r.group) {
                self.topology.groups[r.group].record_owner(d);
            }
        }
    }

    fn commit_node(&mut self, p: usize, n: usize, c: &Constraints) {
        let request = self.requests[p].clone();
        let node = &mut self.nodes[n];
        add(&mut node.used, &request);
        node.host_ports
            .extend(self.input.pods[p].host_ports.iter().cloned());
        node.placed.push(p);
        self.record(p, n, &|solver, g| solver.node_domain(n, g), c);
    }

    fn commit_claim(&mut self, p: usize, c: usize, attempt: Attempt, constraints: &Constraints) {
        let request = self.requests[p].clone();
        let old_pods = self.claims[c].pods.len();
        let is_new = old_pods == 0;
        let types_changed = attempt.types.len() != self.claims[c].types.len() || is_new;
        {
            let claim = &mut self.claims[c];
            if let Some(requirements) = attempt.requirements {
                claim.requirements = requirements;
            }
            claim.types = attempt.types;
            add(&mut claim.used, &request);
            claim
                .host_ports
                .extend(self.input.pods[p].host_ports.iter().cloned());
            claim.pods.push(p);
        }
        if types_changed {
            // Limits: swap this claim's old worst case for the new one.
            let old_capacity = self.claims[c].max_capacity.clone();
            let mut claim = std::mem::replace(&mut self.claims[c], placeholder());
            self.refresh_maxima(&mut claim);
            let pool = &mut self.pools[claim.pool];
            if is_new {
                pool.node_count += 1;
            } else {
                pool.used
                    .iter_mut()
                    .zip(&old_capacity)
                    .for_each(|(u, o)| *u -= o);
            }
            add(&mut pool.used, &claim.max_capacity);
            self.claims[c] = claim;
        }
        self.claim_order.remove(&(old_pods, c));
        self.claim_order.insert((old_pods + 1, c));
        let slot = self.nodes.len() + c;
        // Keys the claim is now pinned to; the pin indices follow.
        for k in 0..self.keys.len() {
            match self.claims[c].pinned[k] {
                Some(d) => self.by_pin[k][d].remove(&(old_pods, c)),
                None => self.unpinned[k].remove(&(old_pods, c)),
            };
            if self.claims[c].pinned[k].is_some() {
                self.by_pin[k][self.claims[c].pinned[k].unwrap_or_default()]
                    .insert((old_pods + 1, c));
                continue;
            }
            let pin = self.claims[c]
                .requirements
                .get(&self.keys[k])
                .filter(|r| r.len() == 1)
                .and_then(|r| r.values().next().and_then(|v| self.domain_id(k, v)));
            self.claims[c].pinned[k] = pin;
            match pin {
                Some(d) => self.by_pin[k][d].insert((old_pods + 1, c)),
                None => self.unpinned[k].insert((old_pods + 1, c)),
            };
        }
        for (g, set) in self.free.iter_mut() {
            let was_free = set.remove(&(old_pods, c)) || is_new;
            let counted = self.counted_by[p].contains(g);
            if was_free && !counted {
                set.insert((old_pods + 1, c));
            }
        }
        self.record(
            p,
            slot,
            &|solver, g| match solver.group_key[g] {
                None => Some(slot),
                Some(k) => solver.claims[c].pinned[k],
            },
            constraints,
        );
    }

    fn results(&self, failures: BTreeMap<usize, String>) -> Results {
        let mut results = Results::default();
        // Many claims end with the same type list: share one copy of each.
        let mut lists: HashMap<(usize, Vec<u32>), TypeNames> = HashMap::new();
        for claim in &self.claims {
            let pool = &self.pools[claim.pool];
            let zone = claim.requirements.get(ZONE_LABEL);
            let capacity_type = claim.requirements.get(CAPACITY_TYPE_LABEL);
            let mut capacity_types = BTreeSet::new();
            let mut priced: Vec<(f64, u32)> = Vec::with_capacity(claim.types.len());
            for &t in &claim.types {
                let mut cheapest: Option<f64> = None;
                for o in pool.types[t as usize]
                    .it
                    .offerings
                    .iter()
                    .filter(|o| o.available)
                {
                    if zone.is_none_or(|r| r.has(&o.zone))
                        && capacity_type.is_none_or(|r| r.has(o.capacity_type.label()))
                    {
                        capacity_types.insert(o.capacity_type.label());
                        cheapest = Some(cheapest.map_or(o.price, |c| c.min(o.price)));
                    }
                }
                if let Some(price) = cheapest {
                    priced.push((price, t));
                }
            }
            // Ties keep the pool's order (its cheapest price, then name).
            priced.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            priced.truncate(self.input.options.instance_types_max);
            let mut reqs = claim.requirements.clone();
            let capacity_types: Vec<&str> = capacity_types.into_iter().collect();
            reqs.add(CAPACITY_TYPE_LABEL, Requirement::any_of(&capacity_types));
            let daemon = priced
                .iter()
                .map(|(_, t)| &pool.types[*t as usize].daemon)
                .min_by_key(|d| (d[0], d[1]))
                .cloned()
                .unwrap_or_else(|| vec![0; self.space.names.len()]);
            let mut requests = claim.used.clone();
            add(&mut requests, &daemon);
            let mut requirements = reqs.to_api();
            requirements.retain(|r| r.key != INSTANCE_TYPE_LABEL || r.min_values.is_some());
            let ids: Vec<u32> = priced.iter().map(|(_, t)| *t).collect();
            let names = lists
                .entry((claim.pool, ids))
                .or_insert_with_key(|(_, ids)| {
                    ids.iter()
                        .map(|t| pool.types[*t as usize].name.clone())
                        .collect()
                })
                .clone();
            results.new_claims.push(PlannedClaim {
                node_pool: pool.name.clone(),
                instance_types: names,
                requirements,
                pods: claim
                    .pods
                    .iter()
                    .map(|p| self.input.pods[*p].key.clone())
                    .collect(),
                requests: self.space.sparse(&requests),
                price: priced.first().map_or(0.0, |(p, _)| *p),
            });
        }
        for node in &self.nodes {
            if !node.placed.is_empty() {
                results.existing_nodes.push(NodePlacement {
                    node: node.node.name.clone(),
                    pods: node
                        .placed
                        .iter()
                        .map(|p| self.input.pods[*p].key.clone())
                        .collect(),
                });
            }
        }
        for (p, reason) in failures {
            results.unschedulable.push(Unschedulable {
                pod: self.input.pods[p].key.clone(),
                reason,
            });
        }
        results.unschedulable.sort_by(|a, b| a.pod.cmp(&b.pod));
        results
    }
}

fn placeholder() -> Claim {
    Claim {
        pool: 0,
        requirements: Requirements::new(),
        types: Vec::new(),
        used: Vec::new(),
        max_alloc: Vec::new(),
        max_capacity: Vec::new(),
        pods: Vec::new(),
        host_ports: Vec::new(),
        pinned: Vec::new(),
    }
}

/// A pod's active topology constraints under its relaxation state.
struct Constraints {
    spread: Vec<super::topology::GroupRef>,
    affinity: Vec<super::topology::GroupRef>,
    anti: Vec<super::topology::GroupRef>,
}

/// A successful dry run of adding a pod to a claim.
struct Attempt {
    /// The claim's narrowed requirements; `None` when they do not change.
    requirements: Option<Requirements>,
    types: Vec<u32>,
}

/// Merges ordered sets of `(pod count, claim)` into one ascending sequence.
struct Merge<'s> {
    heads: Vec<std::iter::Peekable<std::collections::btree_set::Iter<'s, (usize, usize)>>>,
}

impl<'s> Merge<'s> {
    fn new(sets: &[&'s BTreeSet<(usize, usize)>]) -> Self {
        Self {
            heads: sets.iter().map(|s| s.iter().peekable()).collect(),
        }
    }
}

impl Iterator for Merge<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<Self::Item> {
        let mut best: Option<(usize, (usize, usize))> = None;
        for (i, head) in self.heads.iter_mut().enumerate() {
            if let Some(&&item) = head.peek()
                && best.is_none_or(|(_, b)| item < b)
            {
                best = Some((i, item));
            }
        }
        let (i, item) = best?;
        self.heads[i].next();
        Some(item)
    }
}

/// What topology evaluation needs to know about a target.
enum TargetView<'b, 'a> {
    Node {
        labels: &'b BTreeMap<String, String>,
        solver: &'b Solver<'a>,
    },
    Claim {
        pool: &'b Pool<'a>,
        types: &'b [u32],
        pinned: &'b [Option<usize>],
    },
}

impl TargetView<'_, '_> {
    /// The domain of key `k` the target is fixed to, if any.
    fn pinned(&self, k: usize) -> Option<usize> {
        match self {
            TargetView::Node { labels, solver } => labels
                .get(&solver.keys[k])
                .and_then(|v| solver.domain_id(k, v)),
            TargetView::Claim { pinned, .. } => pinned.get(k).copied().flatten(),
        }
    }
}

/// How to choose among a key's permitted domains.
#[derive(Clone, Debug)]
enum Order {
    /// The domain where these groups count the fewest pods (spread, and pinning counted pods).
    Fewest(Vec<usize>),
    /// The domain where this group counts the most pods (affinity).
    Most(usize),
}

/// What one topology key allows for a pod, by domain id.
#[derive(Clone, Debug, Default)]
struct KeyPlan {
    /// `None`: any domain.
    allowed: Option<Vec<bool>>,
    blocked: Vec<bool>,
    order: Option<Order>,
}

impl KeyPlan {
    fn restrict(&mut self, to: &[bool]) {
        self.allowed = Some(match self.allowed.take() {
            Some(current) => current.iter().zip(to).map(|(a, b)| *a && *b).collect(),
            None => to.to_vec(),
        });
    }

    fn permits(&self, domain: usize) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|a| a.get(domain).copied().unwrap_or(false))
            && !self.blocked.get(domain).copied().unwrap_or(false)
    }
}

/// The target-independent topology decisions for one pod placement, by key id.
#[derive(Clone, Debug, Default)]
struct TopologyPlan {
    keys: BTreeMap<usize, KeyPlan>,
}

impl TopologyPlan {
    fn key(&mut self, k: usize, width: usize) -> &mut KeyPlan {
        self.keys.entry(k).or_insert_with(|| KeyPlan {
            allowed: None,
            blocked: vec![false; width],
            order: None,
        })
    }
}
