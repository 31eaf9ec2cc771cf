//! Preparing a run: NodePools with their compatible types (cheapest first), daemon overhead and
//! limits; existing nodes with what already runs on them; topology groups, their keys and every
//! domain each key can take.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use super::dense::add;
use super::types::TypeView;
use super::{Node, Pool, Solver};
use crate::api::labels::{HOSTNAME_LABEL, NODEPOOL_LABEL, is_well_known, normalize_label};
use crate::api::{NodePool, Taint};
use crate::catalog::{Catalog, InstanceType};
use crate::resources::Resources;
use crate::scheduling::ExistingNode;
use crate::scheduling::PodInfo;
use crate::scheduling::pod::{Strength, tolerates};
use crate::scheduling::requirements::{Requirement, Requirements};
use crate::scheduling::topology::{GroupKind, PodTopology};

/// Each NodePool's compatible instance types, worked out once for many runs over the same
/// pools and catalogs (see [`super::solve_prepared`]): by pool name, the indices into the
/// pool's catalog of the types its requirements allow, cheapest first (ties by name), each
/// with its cheapest offering's price. A run that prepares its own gets the same list.
#[derive(Clone, Debug, Default)]
pub struct PreparedPools {
    types: BTreeMap<String, Arc<[(usize, f64)]>>,
    /// The dense resources of the shared catalog's types, kept across runs (see
    /// [`DenseTypesSlot`]); only when prepared from a [`CompatibleTypesMemo`].
    dense: Option<DenseTypesSlot>,
}

impl PreparedPools {
    /// The compatible types of every pool in `node_pools`, each against its own catalog in
    /// `pool_catalogs` (or `catalog`), as a run over them would work them out.
    pub fn new(
        node_pools: &[NodePool],
        catalog: &Catalog,
        pool_catalogs: &BTreeMap<String, Catalog>,
    ) -> Self {
        let types = node_pools
            .iter()
            .map(|pool| {
                let name = pool.metadata.name.clone().unwrap_or_default();
                let catalog = pool_catalogs.get(&name).unwrap_or(catalog);
                let types = compatible_types(catalog, &pool_requirements(pool, &name));
                (name, types.into())
            })
            .collect();
        Self { types, dense: None }
    }

    /// [`PreparedPools::new`], reading the lists of pools that use `catalog` itself from
    /// `memo` (and leaving there what it works out). A pool with its own catalog in
    /// `pool_catalogs` (capacity reservations) is worked out afresh: those catalogs are built
    /// per pass.
    pub fn remembered(
        node_pools: &[NodePool],
        catalog: &Arc<Catalog>,
        pool_catalogs: &BTreeMap<String, Catalog>,
        memo: &CompatibleTypesMemo,
    ) -> Self {
        let types = node_pools
            .iter()
            .map(|pool| {
                let name = pool.metadata.name.clone().unwrap_or_default();
                let requirements = pool_requirements(pool, &name);
                let types = match pool_catalogs.get(&name) {
                    Some(own) => compatible_types(own, &requirements).into(),
                    None => memo.get_or_work_out(catalog, requirements),
                };
                (name, types)
            })
            .collect();
        Self {
            types,
            dense: Some(memo.dense_slot(catalog)),
        }
    }

    /// The dense resources of `catalog`'s types over `names`, if this was prepared over that
    /// very catalog: remembered across runs, worked out on the first ask for a layout.
    pub(super) fn dense_types(
        &self,
        catalog: &Catalog,
        names: &[String],
    ) -> Option<Arc<DenseTypes>> {
        let slot = self.dense.as_ref()?;
        if !std::ptr::eq(Arc::as_ptr(&slot.catalog), catalog) {
            return None;
        }
        let mut layouts = slot.layouts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = layouts.get(names) {
            return Some(found.clone());
        }
        if layouts.len() >= DENSE_TYPES_MAX_LAYOUTS {
            layouts.clear();
        }
        let table = Arc::new(DenseTypes::new(catalog, names));
        layouts.insert(names.to_vec(), table.clone());
        Some(table)
    }
}

/// How many resource layouts [`DenseTypesSlot`] keeps for one catalog before it starts over: a
/// layout is the names a run meets (the catalog's, then any a pod requests that no type
/// offers), one or two in practice.
pub const DENSE_TYPES_MAX_LAYOUTS: usize = 8;

/// Every type of one catalog as dense vectors over one resource layout, with its name shared.
/// A run's type views start from these instead of looking each resource name up again: that
/// was two fifths of building a solver, which every provisioning pass and every consolidation
/// simulation does (perf, swarm seeds 7..26: building the type views was 5.9 % of the CPU).
#[derive(Debug)]
pub(super) struct DenseTypes {
    /// By type index of the catalog: allocatable, capacity, name.
    pub(super) types: Vec<(super::dense::Dense, super::dense::Dense, Arc<str>)>,
}

impl DenseTypes {
    fn new(catalog: &Catalog, names: &[String]) -> Self {
        let space = super::dense::Space::with_names(names.to_vec());
        let types = catalog
            .instance_types
            .iter()
            .map(|it| {
                (
                    space.dense(&it.allocatable),
                    space.dense(&it.capacity),
                    Arc::from(it.name.as_str()),
                )
            })
            .collect();
        Self { types }
    }
}

/// One catalog's [`DenseTypes`] by layout, shared by the [`PreparedPools`] of every pass over
/// that catalog (the catalog is held, so its address cannot be reused while it is the key).
#[derive(Clone, Debug)]
struct DenseTypesSlot {
    catalog: Arc<Catalog>,
    layouts: Arc<Mutex<BTreeMap<Vec<String>, Arc<DenseTypes>>>>,
}

/// How many requirement sets [`CompatibleTypesMemo`] keeps for one catalog before it starts
/// over: one per NodePool in practice; the bound only keeps pools whose requirements keep
/// changing from growing it without end.
pub const COMPATIBLE_TYPES_MEMO_MAX_ENTRIES: usize = 256;

/// The compatible types of a NodePool's requirements against one catalog, kept across passes:
/// they change only when the catalog is replaced (a refresh, or a change of the
/// unavailable-offerings cache, each a new `Arc`) or the pool's requirements change. Working
/// them out in every provisioning and disruption pass was 8 % of a swarm seed's CPU (perf,
/// seeds 1..16). The catalog is held, so its address cannot be reused while it is the key.
#[derive(Debug, Default)]
pub struct CompatibleTypesMemo {
    current: Mutex<Option<MemoEntries>>,
}

#[derive(Debug)]
struct MemoEntries {
    catalog: Arc<Catalog>,
    lists: HashMap<Requirements, Arc<[(usize, f64)]>>,
    dense: DenseTypesSlot,
}

impl MemoEntries {
    fn new(catalog: &Arc<Catalog>) -> Self {
        MemoEntries {
            catalog: catalog.clone(),
            lists: HashMap::new(),
            dense: DenseTypesSlot {
                catalog: catalog.clone(),
                layouts: Arc::default(),
            },
        }
    }
}

impl CompatibleTypesMemo {
    /// The dense types slot of `catalog`'s entries (new entries if the catalog changed).
    fn dense_slot(&self, catalog: &Arc<Catalog>) -> DenseTypesSlot {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        match current.as_mut() {
            Some(entries) if Arc::ptr_eq(&entries.catalog, catalog) => entries.dense.clone(),
            _ => current.insert(MemoEntries::new(catalog)).dense.clone(),
        }
    }

    fn get_or_work_out(
        &self,
        catalog: &Arc<Catalog>,
        requirements: Requirements,
    ) -> Arc<[(usize, f64)]> {
        let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        let entries = match current.as_mut() {
            Some(entries)
                if Arc::ptr_eq(&entries.catalog, catalog)
                    && entries.lists.len() < COMPATIBLE_TYPES_MEMO_MAX_ENTRIES =>
            {
                entries
            }
            _ => current.insert(MemoEntries::new(catalog)),
        };
        if let Some(list) = entries.lists.get(&requirements) {
            return list.clone();
        }
        let list: Arc<[(usize, f64)]> = compatible_types(catalog, &requirements).into();
        entries.lists.insert(requirements, list.clone());
        list
    }
}

/// A pool's requirements: its template's, its template labels and its own name.
fn pool_requirements(pool: &NodePool, name: &str) -> Requirements {
    let template = &pool.spec.template;
    let mut requirements = Requirements::from_api(&template.spec.requirements);
    if let Some(meta) = &template.metadata {
        requirements.add_all(&Requirements::from_labels(&meta.labels));
    }
    requirements.add(NODEPOOL_LABEL, Requirement::single(name));
    requirements
}

/// The types of `catalog` compatible with `requirements` (indices), cheapest first, ties by
/// name, each with its cheapest price. Each type's cheapest price is worked out once, not in
/// every comparison of the sort (perf: pricing inside the comparator was a tenth of a
/// simulation's CPU); compatibility reads only the type.
fn compatible_types(catalog: &Catalog, requirements: &Requirements) -> Vec<(usize, f64)> {
    let mut priced: Vec<(usize, f64)> = catalog
        .instance_types
        .iter()
        .enumerate()
        .filter_map(|(i, it)| {
            let bare = TypeView::bare(it, &catalog.zone_ids);
            bare.compatible(requirements)
                .then(|| (i, bare.cheapest(requirements).unwrap_or(f64::MAX)))
        })
        .collect();
    let name = |i: usize| &catalog.instance_types[i].name;
    priced.sort_by(|(a, pa), (b, pb)| pa.total_cmp(pb).then_with(|| name(*a).cmp(name(*b))));
    priced
}

/// A pool's DaemonSets (see [`Solver::pool_daemons`]).
struct PoolDaemons<'a> {
    daemons: Vec<(&'a PodInfo, Requirements)>,
    keys: BTreeSet<String>,
}

impl<'a> Solver<'a> {
    /// The NodePools, highest weight first, each with its compatible types; then what existing
    /// nodes already count against their limits.
    pub(super) fn build_pools(&mut self) {
        let mut pools: Vec<&'a NodePool> = self.input.node_pools.iter().collect();
        // Highest weight first; ties by name (upstream orders ties by name descending, which is
        // arbitrary; ascending reads naturally and is just as deterministic).
        pools.sort_by(|a, b| {
            let wa = a.spec.weight.unwrap_or(0);
            let wb = b.spec.weight.unwrap_or(0);
            wb.cmp(&wa)
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        for pool in pools {
            let prepared = self.prepare_pool(pool);
            self.pools.push(prepared);
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

    /// One NodePool: its requirements (template labels and its own name included), the types
    /// compatible with them (cheapest first), and its limits.
    fn prepare_pool(&mut self, pool: &'a NodePool) -> Pool<'a> {
        let name = pool.metadata.name.clone().unwrap_or_default();
        let template = &pool.spec.template;
        let requirements = pool_requirements(pool, &name);
        let taints = template.spec.taints.as_slice();
        let catalog = self
            .input
            .pool_catalogs
            .get(&name)
            .unwrap_or(self.input.catalog);
        let daemons = self.pool_daemons(taints);
        // Compatibility first: it reads only the type, and most of a catalog is ruled out by it
        // before the daemon overhead is worked out (perf: type views of incompatible types were
        // a seventh of a simulation's CPU). Prepared once for many runs where given (perf: a
        // disruption pass asks one question per candidate, and working the list out in each was
        // a ninth of a swarm seed's CPU).
        let own;
        let compatible: &[(usize, f64)] = match self.prepared.and_then(|p| p.types.get(&name)) {
            Some(prepared) => prepared,
            None => {
                own = compatible_types(catalog, &requirements);
                &own
            }
        };
        let dense = self
            .dense_types
            .as_ref()
            .filter(|_| std::ptr::eq(catalog, self.input.catalog));
        let types: Vec<TypeView> = compatible
            .iter()
            .map(|(i, _)| {
                self.type_view(
                    &catalog.instance_types[*i],
                    dense.map(|d| &d.types[*i]),
                    &catalog.zone_ids,
                    &requirements,
                    &daemons,
                )
            })
            .collect();
        let mut limits = Vec::new();
        let mut nodes_limit = None;
        for (resource, quantity) in pool.spec.limits.iter().flatten() {
            let Ok(amount) = crate::resources::parse_quantity(resource, quantity.as_str()) else {
                continue;
            };
            if resource == "nodes" {
                nodes_limit = Some(amount);
            } else {
                limits.push((self.space.intern(resource), amount));
            }
        }
        let daemon_host_ports = daemons
            .daemons
            .iter()
            .filter(|(_, ds_reqs)| requirements.compatible(ds_reqs, is_well_known).is_ok())
            .map(|(ds, _)| ds)
            .flat_map(|ds| ds.host_ports.iter().cloned())
            .collect();
        Pool {
            name,
            taints,
            requirements,
            types,
            limits,
            nodes_limit,
            used: Vec::new(),
            node_count: 0,
            daemon_host_ports,
        }
    }

    /// The DaemonSets whose pods tolerate `taints`, each with its node requirements (selector
    /// and first required term), and every key those requirements name: worked out once per
    /// pool, not once per instance type.
    fn pool_daemons(&self, taints: &[Taint]) -> PoolDaemons<'a> {
        let mut keys = BTreeSet::new();
        let daemons = self
            .input
            .daemonsets
            .iter()
            .filter(|ds| tolerates(&ds.tolerations, taints).is_ok())
            .map(|ds| {
                let mut reqs = ds.node_selector.clone();
                if let Some(first) = ds.required_terms.first() {
                    reqs.add_all(first);
                }
                keys.extend(reqs.iter().map(|(k, _)| k.to_string()));
                (ds, reqs)
            })
            .collect();
        PoolDaemons { daemons, keys }
    }

    /// `it` as a pool with `requirements` sees it: its allocatable less the requests of the
    /// pool's DaemonSets (`daemons`) that would run on it. `dense`: the type's allocatable,
    /// capacity and name from [`DenseTypes`], over a layout this run's space extends.
    fn type_view(
        &self,
        it: &'a InstanceType,
        dense: Option<&(super::dense::Dense, super::dense::Dense, Arc<str>)>,
        zone_ids: &'a BTreeMap<String, String>,
        requirements: &Requirements,
        daemons: &PoolDaemons<'a>,
    ) -> TypeView<'a> {
        // The pool's requirements narrowed by the type's labels, on the keys the DaemonSets
        // name only: `compatible` looks at no other key, and building the whole set for every
        // type was a fifth of a simulation's CPU (perf, default scenario).
        // DaemonSets that name no key (no selector, no required term) need no label scan.
        let mut type_reqs = Requirements::new();
        if !daemons.keys.is_empty() {
            for (key, req) in requirements.iter() {
                if daemons.keys.contains(key) {
                    type_reqs.add(key, req.clone());
                }
            }
            for (label, value) in &it.labels {
                let key = normalize_label(label);
                if daemons.keys.contains(key) {
                    type_reqs.add(key, Requirement::single(value));
                }
            }
        }
        let mut daemon = Resources::new();
        for (ds, ds_reqs) in &daemons.daemons {
            if type_reqs.compatible(ds_reqs, is_well_known).is_ok() {
                daemon = daemon.plus(&ds.requests);
            }
        }
        let daemon = self.space.dense(&daemon);
        let width = self.space.names.len();
        // The layout is the space as it stood once the run had learnt its pods', types' and
        // nodes' names; a name interned since (a NodePool limit) is one no type offers (else it
        // was learnt from that type), so it is zero in every type's vector.
        let (mut alloc, capacity, name) = match dense {
            Some((alloc, capacity, name)) => {
                let widen = |v: &super::dense::Dense| {
                    let mut v = v.clone();
                    v.resize(width, 0);
                    v
                };
                (widen(alloc), widen(capacity), name.clone())
            }
            None => (
                self.space.dense(&it.allocatable),
                self.space.dense(&it.capacity),
                Arc::from(it.name.as_str()),
            ),
        };
        alloc.iter_mut().zip(&daemon).for_each(|(a, d)| *a -= d);
        TypeView {
            it,
            zone_ids,
            name,
            alloc,
            capacity,
            daemon,
        }
    }

    pub(super) fn build_nodes(&mut self) {
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
            let mut volumes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for pod in &node.pods {
                add(&mut used, &self.space.dense(&pod.requests));
                host_ports.extend(pod.host_ports.iter().cloned());
                for (driver, ids) in &pod.csi_volumes {
                    volumes
                        .entry(driver.clone())
                        .or_default()
                        .extend(ids.iter().cloned());
                }
            }
            // Daemons that belong on this node but are not running yet will take their share.
            for ds in self.input.daemonsets {
                let running = node
                    .pods
                    .iter()
                    .any(|p| p.daemonset.is_some() && p.daemonset == ds.daemonset);
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
                volumes,
                placed: Vec::new(),
            });
        }
    }

    pub(super) fn build_topology(&mut self) {
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
        let keys: BTreeSet<String> = self
            .topology
            .groups
            .iter()
            .map(|g| g.topology_key.clone())
            .filter(|k| k != HOSTNAME_LABEL)
            .collect();
        for key in keys {
            let domains = self.domains(&key);
            self.keys.push(key);
            self.universe.push(domains);
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
        self.count_existing(owners);
    }

    /// Every value topology key `key` can take, sorted: from the pools, their types and the
    /// nodes.
    fn domains(&self, key: &str) -> Vec<String> {
        let mut values = BTreeSet::new();
        for pool in &self.pools {
            for t in &pool.types {
                for v in t.values(key, &pool.requirements) {
                    if pool.requirements.get(key).is_none_or(|r| r.has(&v)) {
                        values.insert(v);
                    }
                }
            }
            if let Some(r) = pool.requirements.get(key) {
                values.extend(r.values().map(str::to_string));
            }
        }
        for node in &self.nodes {
            if let Some(v) = node.node.labels.get(key) {
                values.insert(v.clone());
            }
        }
        values.into_iter().collect()
    }

    /// Existing pods count in the domains of their nodes; `owners` (existing pods with
    /// anti-affinity, by node) block the domains of their nodes for pods they select.
    fn count_existing(&mut self, owners: Vec<(usize, PodTopology)>) {
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
    pub(super) fn node_domain(&self, n: usize, g: usize) -> Option<usize> {
        match self.group_key[g] {
            None => Some(n),
            Some(k) => self.nodes[n]
                .node
                .labels
                .get(&self.keys[k])
                .and_then(|v| self.domain_id(k, v)),
        }
    }

    pub(super) fn domain_id(&self, key: usize, value: &str) -> Option<usize> {
        self.universe[key]
            .binary_search_by(|d| d.as_str().cmp(value))
            .ok()
    }
}
