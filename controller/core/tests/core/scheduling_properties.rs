//! Properties of the scheduling engine over random pods, NodePools, catalogs and clusters, judged
//! by an independent checker.
//!
//! The checker is written from the Kubernetes and Karpenter rules, not from the solver: it reads
//! the Kubernetes objects (pods, NodePools, nodes) and the plan, works out which nodes each planned
//! NodeClaim could become (every listed instance type × every available offering its requirements
//! allow), and checks every hard constraint against every one of them. It never calls solver code
//! or the engine's requirement / toleration / selector helpers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_core::api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, NODEPOOL_LABEL, ZONE_LABEL,
};
use karpenter_core::api::{NodePool, Taint, TaintEffect};
use karpenter_core::catalog::{CapacityType, Catalog, InstanceType};
use karpenter_core::scheduling::{
    ExistingNode, Input, Options, PlannedClaim, PodInfo, Results, solve,
};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::RngSeed;

use super::scheduling::{
    NodeBuilder, PodBuilder, PoolBuilder, Spread, TypeBuilder, ZONES, expr, itype, node, pod, pool,
};

const ARCHES: [&str; 2] = ["amd64", "arm64"];
const TEAMS: [&str; 2] = ["red", "blue"];
const FAMILIES: [&str; 2] = ["fam-a", "fam-b"];
const FAMILY_LABEL: &str = "karpenter.k8s.aws/instance-family";

// ------------------------------------------------------------------------------------------------
// Random inputs
// ------------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct TypeSpec {
    cpu: i64,
    memory_per_cpu: i64,
    arm: bool,
    gpu: bool,
    pods: i64,
    /// Bit i: offered in ZONES[i] (never 0).
    zones: u8,
    on_demand_cents: u32,
    spot_percent: u32,
    /// Bit 2·zone + (0 spot, 1 on-demand): offering unavailable.
    unavailable: u8,
    family: usize,
}

fn type_spec() -> impl Strategy<Value = TypeSpec> {
    (
        prop_oneof![1 => Just(1i64), 2 => Just(2), 3 => Just(4), 3 => Just(8), 2 => Just(16)],
        select(vec![2i64, 4]),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.2),
        select(vec![4i64, 8, 110]),
        1u8..8,
        5u32..200,
        20u32..90,
        prop_oneof![3 => Just(0u8), 1 => 0u8..64],
        0usize..2,
    )
        .prop_map(
            |(
                cpu,
                memory_per_cpu,
                arm,
                gpu,
                pods,
                zones,
                on_demand_cents,
                spot_percent,
                unavailable,
                family,
            )| TypeSpec {
                cpu,
                memory_per_cpu,
                arm,
                gpu,
                pods,
                zones,
                on_demand_cents,
                spot_percent,
                unavailable,
                family,
            },
        )
}

#[derive(Clone, Debug)]
struct PoolSpec {
    weight: Option<i32>,
    /// 0 amd64, 1 arm64, 2 both.
    arch: Option<usize>,
    /// Bit 0 spot, bit 1 on-demand (never 0).
    capacity_types: Option<u8>,
    zones: Option<u8>,
    family_not_in: Option<usize>,
    team: Option<usize>,
    taint: Option<usize>,
    cpu_limit: Option<i64>,
    nodes_limit: Option<i64>,
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        prop::option::weighted(0.4, select(vec![10, 50])),
        prop::option::weighted(0.4, 0usize..3),
        prop::option::weighted(0.4, 1u8..4),
        prop::option::weighted(0.3, 1u8..8),
        prop::option::weighted(0.2, 0usize..2),
        prop::option::weighted(0.3, 0usize..2),
        prop::option::weighted(0.15, 0usize..2),
        prop::option::weighted(0.2, select(vec![8i64, 16, 32, 64])),
        prop::option::weighted(0.1, 1i64..6),
    )
        .prop_map(
            |(
                weight,
                arch,
                capacity_types,
                zones,
                family_not_in,
                team,
                taint,
                cpu_limit,
                nodes_limit,
            )| PoolSpec {
                weight,
                arch,
                capacity_types,
                zones,
                family_not_in,
                team,
                taint,
                cpu_limit,
                nodes_limit,
            },
        )
}

#[derive(Clone, Debug)]
enum NodeSelector {
    Arch(usize),
    Team(usize),
    Zone(usize),
}

#[derive(Clone, Debug)]
enum Term {
    Zones(u8),
    Arch(usize),
    FamilyNotIn(usize),
}

#[derive(Clone, Debug)]
enum Tolerate {
    Team(usize),
    AnyDedicated,
}

#[derive(Clone, Debug)]
struct SpreadSpec {
    hostname: bool,
    max_skew: i32,
    min_domains: Option<i32>,
    schedule_anyway: bool,
}

/// Whom a pod (anti-)affinity term selects.
#[derive(Clone, Debug)]
enum Peer {
    /// The workload with this index (mod the number of workloads).
    Workload(usize),
    /// Pods already running in the cluster.
    Old,
}

#[derive(Clone, Debug)]
struct Workload {
    /// In namespace `team` instead of `default`.
    team_namespace: bool,
    replicas: usize,
    cpu_m: i64,
    memory_mi: i64,
    gpu: bool,
    node_selector: Option<NodeSelector>,
    terms: Vec<Term>,
    tolerate: Option<Tolerate>,
    spread: Option<SpreadSpec>,
    /// (hostname key?, peer)
    affinity: Option<(bool, Peer)>,
    anti_affinity: Option<(bool, Peer)>,
    host_port: Option<i32>,
}

fn term() -> impl Strategy<Value = Term> {
    prop_oneof![
        (1u8..8).prop_map(Term::Zones),
        (0usize..2).prop_map(Term::Arch),
        (0usize..2).prop_map(Term::FamilyNotIn),
    ]
}

fn peer() -> impl Strategy<Value = Peer> {
    prop_oneof![4 => (0usize..8).prop_map(Peer::Workload), 1 => Just(Peer::Old)]
}

fn workload() -> impl Strategy<Value = Workload> {
    let shape = (
        1usize..=5,
        prop_oneof![
            3 => Just(100i64), 3 => Just(250), 3 => Just(500), 2 => Just(1000),
            2 => Just(2000), 1 => Just(3000), 1 => Just(6000)
        ],
        prop_oneof![4 => Just(128i64), 3 => Just(512), 2 => Just(1024), 1 => Just(4096), 1 => Just(12288)],
        prop::bool::weighted(0.05),
        prop::option::weighted(
            0.25,
            prop_oneof![
                (0usize..2).prop_map(NodeSelector::Arch),
                (0usize..2).prop_map(NodeSelector::Team),
                (0usize..3).prop_map(NodeSelector::Zone),
            ],
        ),
        prop_oneof![2 => Just(Vec::new()), 1 => prop::collection::vec(term(), 1..=2)],
    );
    let placement = (
        prop::option::weighted(
            0.3,
            prop_oneof![
                (0usize..2).prop_map(Tolerate::Team),
                Just(Tolerate::AnyDedicated)
            ],
        ),
        prop::option::weighted(
            0.4,
            (
                prop::bool::ANY,
                1i32..=2,
                prop::option::weighted(0.3, 2i32..=4),
                prop::bool::weighted(0.2),
            )
                .prop_map(|(hostname, max_skew, min_domains, schedule_anyway)| {
                    SpreadSpec {
                        hostname,
                        max_skew,
                        min_domains,
                        schedule_anyway,
                    }
                }),
        ),
        prop::option::weighted(0.15, (prop::bool::ANY, peer())),
        prop::option::weighted(0.25, (prop::bool::ANY, peer())),
        prop::option::weighted(0.2, select(vec![8080, 9090])),
    );
    (shape, placement, prop::bool::weighted(0.2)).prop_map(
        |(
            (replicas, cpu_m, memory_mi, gpu, node_selector, terms),
            (tolerate, spread, affinity, anti_affinity, host_port),
            team_namespace,
        )| Workload {
            team_namespace,
            replicas,
            cpu_m,
            memory_mi,
            gpu,
            node_selector,
            terms,
            tolerate,
            spread,
            affinity,
            anti_affinity,
            host_port,
        },
    )
}

#[derive(Clone, Debug)]
struct OldPod {
    cpu_m: i64,
    /// Labelled like workload `w` (mod the number of workloads) instead of `app=old`.
    like_workload: Option<usize>,
    /// (hostname key?, workload index): inverse anti-affinity against new pods.
    anti_affinity: Option<(bool, usize)>,
    host_port: Option<i32>,
}

#[derive(Clone, Debug)]
struct NodeSpec {
    zone: usize,
    arm: bool,
    pool: Option<usize>,
    cpu: i64,
    taint: Option<usize>,
    deleting: bool,
    pods: Vec<OldPod>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    let old_pod = (
        (
            select(vec![100i64, 300, 500]),
            prop::option::weighted(0.3, 0usize..8),
        ),
        prop::option::weighted(0.4, (prop::bool::ANY, 0usize..8)),
        prop::option::weighted(0.2, select(vec![8080, 9090])),
    )
        .prop_map(
            |((cpu_m, like_workload), anti_affinity, host_port)| OldPod {
                cpu_m,
                like_workload,
                anti_affinity,
                host_port,
            },
        );
    (
        0usize..3,
        prop::bool::weighted(0.3),
        prop::option::weighted(0.5, 0usize..3),
        select(vec![2i64, 4]),
        prop::option::weighted(0.2, 0usize..2),
        prop::bool::weighted(0.1),
        prop::collection::vec(old_pod, 0..=2),
    )
        .prop_map(|(zone, arm, pool, cpu, taint, deleting, pods)| NodeSpec {
            zone,
            arm,
            pool,
            cpu,
            taint,
            deleting,
            pods,
        })
}

#[derive(Clone, Debug)]
struct DaemonSpec {
    cpu_m: i64,
    arch: Option<usize>,
    tolerate_all: bool,
}

fn daemon_spec() -> impl Strategy<Value = DaemonSpec> {
    (
        select(vec![100i64, 300]),
        prop::option::weighted(0.3, 0usize..2),
        prop::bool::ANY,
    )
        .prop_map(|(cpu_m, arch, tolerate_all)| DaemonSpec {
            cpu_m,
            arch,
            tolerate_all,
        })
}

#[derive(Clone, Debug)]
struct Case {
    types: Vec<TypeSpec>,
    pools: Vec<PoolSpec>,
    workloads: Vec<Workload>,
    nodes: Vec<NodeSpec>,
    daemons: Vec<DaemonSpec>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(type_spec(), 1..=5),
        prop::collection::vec(pool_spec(), 1..=3),
        prop::collection::vec(workload(), 1..=8),
        prop::collection::vec(node_spec(), 0..=2),
        prop::collection::vec(daemon_spec(), 0..=2),
    )
        .prop_map(|(types, pools, workloads, nodes, daemons)| Case {
            types,
            pools,
            workloads,
            nodes,
            daemons,
        })
}

fn zones_of(mask: u8) -> Vec<&'static str> {
    (0..3)
        .filter(|i| mask & (1 << i) != 0)
        .map(|i| ZONES[i])
        .collect()
}

fn pod_name(w: usize, r: usize) -> String {
    format!("w{w}-{r}")
}

// ------------------------------------------------------------------------------------------------
// The world: Kubernetes objects built from a case
// ------------------------------------------------------------------------------------------------

/// The Kubernetes objects of one case, and what the engine gets from them.
struct World {
    pools: Vec<NodePool>,
    catalog: Catalog,
    nodes: Vec<ExistingNode>,
    /// Pods already running, with the index of their node.
    old_pods: Vec<(usize, Pod)>,
    daemonsets: Vec<Pod>,
    pods: Vec<Pod>,
}

fn build(case: &Case) -> World {
    let types: Vec<TypeBuilder> = case
        .types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let on_demand = f64::from(t.on_demand_cents) / 100.0;
            let mut b = itype(&format!("t{i}"), t.cpu, t.cpu * t.memory_per_cpu)
                .arch(if t.arm { "arm64" } else { "amd64" })
                .gpus(i64::from(t.gpu))
                .pods(t.pods)
                .price(on_demand, on_demand * f64::from(t.spot_percent) / 100.0)
                .zones(&zones_of(t.zones))
                .label(FAMILY_LABEL, FAMILIES[t.family]);
            for (z, zone) in ZONES.iter().enumerate() {
                for (c, ct) in [CapacityType::Spot, CapacityType::OnDemand]
                    .into_iter()
                    .enumerate()
                {
                    if t.unavailable & (1 << (2 * z + c)) != 0 {
                        b = b.unavailable(zone, ct);
                    }
                }
            }
            b
        })
        .collect();
    let catalog = super::scheduling::catalog(types);

    let pools: Vec<NodePool> = case
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut b: PoolBuilder = pool(&format!("pool-{i}"));
            if let Some(w) = p.weight {
                b = b.weight(w);
            }
            if let Some(a) = p.arch {
                let arches: Vec<&str> = match a {
                    0 => vec!["amd64"],
                    1 => vec!["arm64"],
                    _ => ARCHES.to_vec(),
                };
                b = b.requirement(ARCH_LABEL, "In", &arches);
            }
            if let Some(mask) = p.capacity_types {
                let mut cts = Vec::new();
                if mask & 1 != 0 {
                    cts.push("spot");
                }
                if mask & 2 != 0 {
                    cts.push("on-demand");
                }
                b = b.requirement(CAPACITY_TYPE_LABEL, "In", &cts);
            }
            if let Some(mask) = p.zones {
                b = b.requirement(ZONE_LABEL, "In", &zones_of(mask));
            }
            if let Some(f) = p.family_not_in {
                b = b.requirement(FAMILY_LABEL, "NotIn", &[FAMILIES[f]]);
            }
            if let Some(t) = p.team {
                b = b.label("team", TEAMS[t]);
            }
            if let Some(t) = p.taint {
                b = b.taint("dedicated", TEAMS[t], "NoSchedule");
            }
            if let Some(cpu) = p.cpu_limit {
                b = b.limit("cpu", &cpu.to_string());
            }
            if let Some(n) = p.nodes_limit {
                b = b.limit("nodes", &n.to_string());
            }
            b.build()
        })
        .collect();

    let n_workloads = case.workloads.len();
    let mut nodes = Vec::new();
    let mut old_pods = Vec::new();
    for (n, spec) in case.nodes.iter().enumerate() {
        let name = format!("node-{n}");
        let mut b: NodeBuilder = node(&name)
            .zone(ZONES[spec.zone])
            .label(ARCH_LABEL, if spec.arm { "arm64" } else { "amd64" })
            .size(&spec.cpu.to_string(), "8Gi");
        if let Some(p) = spec.pool
            && p < case.pools.len()
        {
            b = b.in_pool(&format!("pool-{p}"));
        }
        if let Some(t) = spec.taint {
            b = b.taint("dedicated", TEAMS[t], TaintEffect::NoSchedule);
        }
        if spec.deleting {
            b = b.deleting();
        }
        for (k, old) in spec.pods.iter().enumerate() {
            let app = match old.like_workload {
                Some(w) => format!("w{}", w % n_workloads),
                None => "old".to_string(),
            };
            let mut p: PodBuilder = pod(&format!("old-{n}-{k}"))
                .app(&app)
                .cpu(&format!("{}m", old.cpu_m));
            if let Some((hostname, w)) = old.anti_affinity {
                p = p.anti_affinity(
                    if hostname { HOSTNAME_LABEL } else { ZONE_LABEL },
                    &format!("app=w{}", w % n_workloads),
                );
            }
            if let Some(port) = old.host_port {
                p = p.host_port(port);
            }
            old_pods.push((n, p.pod()));
            b = b.running(p);
        }
        nodes.push(b.build());
    }

    let daemonsets = case
        .daemons
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut b = super::scheduling::daemonset(&format!("ds-{i}"))
                .app(&format!("ds-{i}"))
                .cpu(&format!("{}m", d.cpu_m))
                .memory("128Mi");
            if let Some(a) = d.arch {
                b = b.node_selector(ARCH_LABEL, ARCHES[a]);
            }
            if d.tolerate_all {
                b = b.tolerate_key("dedicated");
            }
            b.pod()
        })
        .collect();

    let mut pods = Vec::new();
    for (w, spec) in case.workloads.iter().enumerate() {
        let app = format!("w{w}");
        let peer = |p: &Peer| match p {
            Peer::Workload(i) => format!("app=w{}", i % n_workloads),
            Peer::Old => "app=old".to_string(),
        };
        for r in 0..spec.replicas {
            let mut b = pod(&pod_name(w, r))
                .namespace(if spec.team_namespace {
                    "team"
                } else {
                    "default"
                })
                .app(&app)
                .cpu(&format!("{}m", spec.cpu_m))
                .memory(&format!("{}Mi", spec.memory_mi));
            if spec.gpu {
                b = b.gpu("1");
            }
            match &spec.node_selector {
                Some(NodeSelector::Arch(a)) => b = b.node_selector(ARCH_LABEL, ARCHES[*a]),
                Some(NodeSelector::Team(t)) => b = b.node_selector("team", TEAMS[*t]),
                Some(NodeSelector::Zone(z)) => b = b.node_selector(ZONE_LABEL, ZONES[*z]),
                None => {}
            }
            if !spec.terms.is_empty() {
                b = b.require_any(
                    spec.terms
                        .iter()
                        .map(|t| match t {
                            Term::Zones(mask) => vec![expr(ZONE_LABEL, "In", &zones_of(*mask))],
                            Term::Arch(a) => vec![expr(ARCH_LABEL, "In", &[ARCHES[*a]])],
                            Term::FamilyNotIn(f) => {
                                vec![expr(FAMILY_LABEL, "NotIn", &[FAMILIES[*f]])]
                            }
                        })
                        .collect(),
                );
            }
            match spec.tolerate {
                Some(Tolerate::Team(t)) => b = b.tolerate("dedicated", TEAMS[t], "NoSchedule"),
                Some(Tolerate::AnyDedicated) => b = b.tolerate_key("dedicated"),
                None => {}
            }
            if let Some(s) = &spec.spread {
                let selector = format!("app={app}");
                let mut spread = if s.hostname {
                    Spread::hostname(s.max_skew, &selector)
                } else {
                    Spread::zone(s.max_skew, &selector)
                };
                if let Some(m) = s.min_domains {
                    spread = spread.min_domains(m);
                }
                if s.schedule_anyway {
                    spread = spread.schedule_anyway();
                }
                b = b.spread(spread);
            }
            let key = |hostname: bool| if hostname { HOSTNAME_LABEL } else { ZONE_LABEL };
            if let Some((hostname, p)) = &spec.affinity {
                b = b.affinity(key(*hostname), &peer(p));
            }
            if let Some((hostname, p)) = &spec.anti_affinity {
                b = b.anti_affinity(key(*hostname), &peer(p));
            }
            if let Some(port) = spec.host_port {
                b = b.host_port(port);
            }
            pods.push(b.pod());
        }
    }

    World {
        pools,
        catalog,
        nodes,
        old_pods,
        daemonsets,
        pods,
    }
}

fn run(world: &World) -> Results {
    run_with(world, false)
}

/// [`run`], with the pools' compatible types prepared beforehand when `prepared`.
fn run_with(world: &World, prepared: bool) -> Results {
    run_on(
        world,
        &world.catalog,
        if prepared { Prep::New } else { Prep::None },
    )
}

/// How [`run_on`] gets the pools' compatible types.
enum Prep<'m> {
    /// The run works them out.
    None,
    /// `PreparedPools::new` beforehand.
    New,
    /// `PreparedPools::remembered` through this memo, with this catalog.
    Remembered(
        &'m karpenter_core::scheduling::CompatibleTypesMemo,
        Arc<Catalog>,
    ),
}

/// [`run`] against `catalog`, the compatible types got as `prep` says.
fn run_on(world: &World, catalog: &Catalog, prep: Prep<'_>) -> Results {
    let pods: Vec<PodInfo> = world
        .pods
        .iter()
        .map(|p| PodInfo::from_pod(p, Vec::new()).expect("generated pods are valid"))
        .collect();
    let daemonsets: Vec<PodInfo> = world
        .daemonsets
        .iter()
        .map(|p| PodInfo::from_pod(p, Vec::new()).expect("generated daemons are valid"))
        .collect();
    let namespaces = BTreeMap::new();
    let pool_catalogs = &karpenter_core::scheduling::NO_POOL_CATALOGS;
    let input = Input {
        node_pools: &world.pools,
        catalog,
        pool_catalogs,
        nodes: &world.nodes,
        daemonsets: &daemonsets,
        pods: &pods,
        namespaces: &namespaces,
        options: Options::default(),
    };
    match prep {
        Prep::None => solve(input),
        Prep::New => {
            let pools = karpenter_core::scheduling::PreparedPools::new(
                &world.pools,
                catalog,
                pool_catalogs,
            );
            karpenter_core::scheduling::solve_prepared(input, &pools)
        }
        Prep::Remembered(memo, shared) => {
            assert!(
                std::ptr::eq(&*shared, catalog),
                "the memo's catalog is the run's"
            );
            let pools = karpenter_core::scheduling::PreparedPools::remembered(
                &world.pools,
                &shared,
                pool_catalogs,
                memo,
            );
            karpenter_core::scheduling::solve_prepared(input, &pools)
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The checker's own reading of Kubernetes objects
// ------------------------------------------------------------------------------------------------

fn pod_key(p: &Pod) -> String {
    format!(
        "{}/{}",
        p.metadata.namespace.as_deref().unwrap_or("default"),
        p.metadata.name.as_deref().unwrap_or_default()
    )
}

fn namespace(p: &Pod) -> &str {
    p.metadata.namespace.as_deref().unwrap_or("default")
}

fn labels(p: &Pod) -> BTreeMap<String, String> {
    p.metadata.labels.clone().unwrap_or_default()
}

/// A quantity in the unit the scheduler compares: millicores for cpu, bytes for memory, a count
/// otherwise. Only the forms the generator writes (`500m`, `2`, `512Mi`, `8Gi`).
fn quantity(resource: &str, text: &str) -> i64 {
    let (number, multiplier) = if let Some(n) = text.strip_suffix("Mi") {
        (n, 1i64 << 20)
    } else if let Some(n) = text.strip_suffix("Gi") {
        (n, 1i64 << 30)
    } else if let Some(n) = text.strip_suffix('m') {
        assert_eq!(resource, "cpu", "milli quantities are cpu only here");
        return n.parse().expect("a number");
    } else {
        (text, 1)
    };
    let value: i64 = number.parse().expect("a number");
    if resource == "cpu" {
        value * 1000
    } else {
        value * multiplier
    }
}

/// What a pod asks of a node: the containers' requests plus one `pods` slot (the generator
/// writes no init containers or overhead).
fn requests(p: &Pod) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::from([("pods".to_string(), 1)]);
    let spec = p.spec.as_ref().expect("pods have a spec");
    assert!(spec.init_containers.is_none() && spec.overhead.is_none());
    for c in &spec.containers {
        let Some(resources) = &c.resources else {
            continue;
        };
        for (name, q) in resources.requests.iter().flatten() {
            *out.entry(name.clone()).or_insert(0) += quantity(name, &q.0);
        }
    }
    out
}

/// A node selector operator applied to a node's label (absent labels satisfy only the negative
/// operators).
fn operator_holds(operator: &str, values: &[String], label: Option<&String>) -> bool {
    let number = |s: &str| s.parse::<i64>().ok();
    let bound = values.first().and_then(|v| number(v));
    let value = label.and_then(|l| number(l));
    match operator {
        "In" => label.is_some_and(|l| values.contains(l)),
        "NotIn" => label.is_none_or(|l| !values.contains(l)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" => matches!((value, bound), (Some(v), Some(b)) if v > b),
        "Lt" => matches!((value, bound), (Some(v), Some(b)) if v < b),
        "Gte" => matches!((value, bound), (Some(v), Some(b)) if v >= b),
        "Lte" => matches!((value, bound), (Some(v), Some(b)) if v <= b),
        other => panic!("unknown operator {other}"),
    }
}

/// nodeSelector and required node affinity (any one term, all of its expressions).
fn node_constraints_hold(p: &Pod, node_labels: &BTreeMap<String, String>) -> bool {
    let spec = p.spec.as_ref().expect("pods have a spec");
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node_labels.get(k) == Some(v));
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone());
    let affinity_ok = match terms {
        None => true,
        Some(terms) => terms.iter().any(|t| {
            t.match_expressions.iter().flatten().all(|e| {
                operator_holds(
                    &e.operator,
                    e.values.as_deref().unwrap_or_default(),
                    node_labels.get(&e.key),
                )
            })
        }),
    };
    selector_ok && affinity_ok
}

fn effect(e: TaintEffect) -> &'static str {
    match e {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// Kubernetes toleration matching.
fn tolerated_by(taint: &Taint, t: &Toleration) -> bool {
    let effect_ok = t
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == effect(taint.effect));
    let exists = t.operator.as_deref() == Some("Exists");
    let key_ok = match t.key.as_deref() {
        None | Some("") => exists,
        Some(k) => k == taint.key,
    };
    let value_ok = exists
        || t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default();
    effect_ok && key_ok && value_ok
}

/// Every NoSchedule / NoExecute taint is tolerated.
fn tolerates(p: &Pod, taints: &[Taint]) -> bool {
    let tolerations = p
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    taints
        .iter()
        .filter(|t| t.effect != TaintEffect::PreferNoSchedule)
        .all(|taint| tolerations.iter().any(|t| tolerated_by(taint, t)))
}

fn host_ports(p: &Pod) -> Vec<(String, i32)> {
    let spec = p.spec.as_ref().expect("pods have a spec");
    spec.containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|port| {
            port.host_port.filter(|h| *h > 0).map(|h| {
                (
                    port.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                    h,
                )
            })
        })
        .collect()
}

fn selects(selector: Option<&LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(selector) = selector else {
        return false;
    };
    assert!(
        selector.match_expressions.is_none(),
        "generator writes matchLabels only"
    );
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
}

/// A required pod (anti-)affinity term, read from the pod.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct AffinityTerm {
    key: String,
    /// Canonical selector text.
    selector: String,
    namespaces: BTreeSet<String>,
}

impl AffinityTerm {
    fn selects(&self, p: &Pod) -> bool {
        let selector: LabelSelector =
            serde_json::from_str(&self.selector).expect("canonical selector");
        self.namespaces.contains(namespace(p)) && selects(Some(&selector), &labels(p))
    }
}

fn terms(p: &Pod, anti: bool) -> Vec<AffinityTerm> {
    let affinity = p.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let list = if anti {
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .clone()
            })
    } else {
        affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .clone()
            })
    };
    list.unwrap_or_default()
        .into_iter()
        .map(|t| {
            let mut namespaces: BTreeSet<String> =
                t.namespaces.unwrap_or_default().into_iter().collect();
            assert!(t.namespace_selector.is_none());
            if namespaces.is_empty() {
                namespaces.insert(namespace(p).to_string());
            }
            AffinityTerm {
                key: t.topology_key,
                selector: serde_json::to_string(&t.label_selector).expect("selector serializes"),
                namespaces,
            }
        })
        .collect()
}

/// A `DoNotSchedule` topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct HardSpread {
    key: String,
    max_skew: i32,
    min_domains: Option<i32>,
    selector: String,
    namespace: String,
}

fn hard_spreads(p: &Pod) -> Vec<HardSpread> {
    p.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.when_unsatisfiable == "DoNotSchedule")
        .map(|c| {
            assert!(c.match_label_keys.is_none() && c.node_affinity_policy.is_none());
            HardSpread {
                key: c.topology_key,
                max_skew: c.max_skew,
                min_domains: c.min_domains,
                selector: serde_json::to_string(&c.label_selector).expect("selector serializes"),
                namespace: namespace(p).to_string(),
            }
        })
        .collect()
}

fn has_soft_constraints_only(p: &Pod) -> bool {
    let spec = p.spec.as_ref().expect("pods have a spec");
    spec.node_selector.is_none()
        && spec.affinity.is_none()
        && hard_spreads(p).is_empty()
        && host_ports(p).is_empty()
}

// ------------------------------------------------------------------------------------------------
// The checker
// ------------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Node(usize),
    Claim(usize),
}

/// One node a planned claim could become.
struct Launch {
    labels: BTreeMap<String, String>,
}

fn pool_named<'w>(world: &'w World, name: &str) -> &'w NodePool {
    world
        .pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("claim names unknown NodePool {name}"))
}

fn pool_labels(pool: &NodePool) -> BTreeMap<String, String> {
    let mut out = pool
        .spec
        .template
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    out.insert(
        NODEPOOL_LABEL.to_string(),
        pool.metadata.name.clone().unwrap_or_default(),
    );
    out
}

/// Labels a node of `it` from `pool` has before an offering is chosen.
fn type_labels(pool: &NodePool, it: &InstanceType) -> BTreeMap<String, String> {
    let mut out = pool_labels(pool);
    out.extend(it.labels.clone());
    out
}

/// Every node the claim could launch as: each listed type × each available offering, labelled
/// by pool template + type + offering (+ single-valued custom requirements), kept when the
/// claim's own requirements allow it.
fn launches(world: &World, claim: &PlannedClaim) -> Vec<Launch> {
    let pool = pool_named(world, &claim.node_pool);
    let requirements = claim.nodeclaim_requirements();
    let mut out = Vec::new();
    for name in claim.instance_types.iter() {
        let it = world
            .catalog
            .get(name)
            .unwrap_or_else(|| panic!("claim lists unknown type {name}"));
        for o in it.offerings.iter().filter(|o| o.available) {
            let mut labels = type_labels(pool, it);
            labels.insert(ZONE_LABEL.to_string(), o.zone.clone());
            labels.insert(
                CAPACITY_TYPE_LABEL.to_string(),
                o.capacity_type.label().to_string(),
            );
            for r in &requirements {
                if format!("{:?}", r.operator) == "In" && r.values.len() == 1 {
                    labels
                        .entry(r.key.clone())
                        .or_insert_with(|| r.values[0].clone());
                }
            }
            let allowed = requirements.iter().all(|r| {
                operator_holds(&format!("{:?}", r.operator), &r.values, labels.get(&r.key))
            });
            if allowed {
                out.push(Launch { labels });
            }
        }
    }
    out
}

/// Daemon requests on a node of `it` from `pool` (daemons that tolerate the pool's taints and
/// whose node selector the node matches).
fn daemon_overhead(world: &World, pool: &NodePool, it: &InstanceType) -> BTreeMap<String, i64> {
    let labels = type_labels(pool, it);
    let mut out = BTreeMap::new();
    for ds in &world.daemonsets {
        if tolerates(ds, &pool.spec.template.spec.taints) && node_constraints_hold(ds, &labels) {
            for (k, v) in requests(ds) {
                *out.entry(k).or_insert(0) += v;
            }
        }
    }
    out
}

fn sum(into: &mut BTreeMap<String, i64>, more: &BTreeMap<String, i64>) {
    for (k, v) in more {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

fn fits(used: &BTreeMap<String, i64>, allocatable: &karpenter_core::resources::Resources) -> bool {
    used.iter()
        .all(|(k, v)| *v <= 0 || *v <= allocatable.get(k))
}

/// A pod somewhere in the final picture.
struct Entry<'w> {
    pod: &'w Pod,
    target: Target,
    /// Already running before the run.
    old: bool,
}

struct Checker<'w> {
    world: &'w World,
    results: &'w Results,
    /// Per claim: its possible launches.
    launches: Vec<Vec<Launch>>,
    entries: Vec<Entry<'w>>,
    errors: Vec<String>,
}

impl<'w> Checker<'w> {
    fn fail(&mut self, message: String) {
        self.errors.push(message);
    }

    /// Values `key` can take on `target` (its own name for hostname).
    fn values(&self, target: Target, key: &str) -> BTreeSet<String> {
        if key == HOSTNAME_LABEL {
            return BTreeSet::from([format!("{target:?}")]);
        }
        match target {
            Target::Node(n) => self.world.nodes[n]
                .labels
                .get(key)
                .cloned()
                .into_iter()
                .collect(),
            Target::Claim(c) => self.launches[c]
                .iter()
                .filter_map(|l| l.labels.get(key).cloned())
                .collect(),
        }
    }

    fn definite(&self, target: Target, key: &str) -> Option<String> {
        let values = self.values(target, key);
        (values.len() == 1).then(|| values.into_iter().next().expect("one value"))
    }

    fn check_accounting(&mut self) {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let placed = self
            .results
            .existing_nodes
            .iter()
            .flat_map(|n| n.pods.iter())
            .chain(self.results.new_claims.iter().flat_map(|c| c.pods.iter()));
        for key in placed.chain(self.results.unschedulable.iter().map(|u| &u.pod)) {
            *seen.entry(key.clone()).or_insert(0) += 1;
        }
        for p in &self.world.pods {
            let key = pod_key(p);
            match seen.remove(&key) {
                Some(1) => {}
                Some(n) => self.fail(format!("{key} appears {n} times in the results")),
                None => self.fail(format!("{key} is neither placed nor unschedulable")),
            }
        }
        for (key, _) in seen {
            self.fail(format!("results name {key}, which is not a pending pod"));
        }
        for u in &self.results.unschedulable {
            if u.reason.trim().is_empty() {
                self.fail(format!("{} is unschedulable without a reason", u.pod));
            }
        }
    }

    fn pod(&self, key: &str) -> &'w Pod {
        self.world
            .pods
            .iter()
            .find(|p| pod_key(p) == key)
            .unwrap_or_else(|| panic!("unknown pod {key}"))
    }

    fn check_claims(&mut self) {
        for (c, claim) in self.results.new_claims.iter().enumerate() {
            let pool = pool_named(self.world, &claim.node_pool);
            if self.launches[c].is_empty() {
                self.fail(format!(
                    "claim {c} ({}) can launch nothing: types {:?}, requirements {:?}",
                    claim.node_pool, claim.instance_types, claim.requirements
                ));
            }
            let pods: Vec<&Pod> = claim.pods.iter().map(|k| self.pod(k)).collect();
            let mut ports = BTreeSet::new();
            let mut used = BTreeMap::new();
            for p in &pods {
                let key = pod_key(p);
                if !tolerates(p, &pool.spec.template.spec.taints) {
                    self.fail(format!(
                        "{key} does not tolerate the taints of {}",
                        claim.node_pool
                    ));
                }
                let bad: Vec<&BTreeMap<String, String>> = self.launches[c]
                    .iter()
                    .map(|l| &l.labels)
                    .filter(|l| !node_constraints_hold(p, l))
                    .collect();
                if let Some(labels) = bad.first() {
                    self.fail(format!(
                        "{key} on claim {c} could land on a node it does not select: {labels:?}"
                    ));
                }
                for port in host_ports(p) {
                    if !ports.insert(port.clone()) {
                        self.fail(format!("claim {c}: host port {port:?} used twice"));
                    }
                }
                sum(&mut used, &requests(p));
            }
            for name in claim.instance_types.iter() {
                let it = self.world.catalog.get(name).expect("known type");
                let mut total = used.clone();
                sum(&mut total, &daemon_overhead(self.world, pool, it));
                if !fits(&total, &it.allocatable) {
                    self.fail(format!(
                        "claim {c}: pods + daemons {total:?} exceed {name}'s allocatable {:?}",
                        it.allocatable
                    ));
                }
            }
        }
    }

    fn check_existing_nodes(&mut self) {
        for placement in &self.results.existing_nodes {
            let Some(n) = self
                .world
                .nodes
                .iter()
                .position(|n| n.name == placement.node)
            else {
                self.fail(format!("placement on unknown node {}", placement.node));
                continue;
            };
            let node = &self.world.nodes[n];
            if node.deleting {
                self.fail(format!("pods placed on deleting node {}", node.name));
            }
            let mut used = BTreeMap::new();
            let mut ports = BTreeSet::new();
            let old = self.world.old_pods.iter().filter(|(i, _)| *i == n);
            for (_, p) in old {
                sum(&mut used, &requests(p));
                ports.extend(host_ports(p));
            }
            for key in &placement.pods {
                let p = self.pod(key);
                if !tolerates(p, &node.taints) {
                    self.fail(format!("{key} does not tolerate {}'s taints", node.name));
                }
                if !node_constraints_hold(p, &node.labels) {
                    self.fail(format!("{key} does not select node {}", node.name));
                }
                for port in host_ports(p) {
                    if !ports.insert(port.clone()) {
                        self.fail(format!("{}: host port {port:?} used twice", node.name));
                    }
                }
                sum(&mut used, &requests(p));
            }
            if !fits(&used, &node.allocatable) {
                self.fail(format!(
                    "{}: pods {used:?} exceed allocatable {:?}",
                    node.name, node.allocatable
                ));
            }
        }
    }

    fn check_limits(&mut self) {
        for pool in &self.world.pools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            let Some(limits) = &pool.spec.limits else {
                continue;
            };
            let claims: Vec<&PlannedClaim> = self
                .results
                .new_claims
                .iter()
                .filter(|c| c.node_pool == name)
                .collect();
            if claims.is_empty() {
                continue;
            }
            let owned: Vec<&ExistingNode> = self
                .world
                .nodes
                .iter()
                .filter(|n| n.labels.get(NODEPOOL_LABEL) == Some(&name))
                .collect();
            for (resource, limit) in limits {
                let limit = quantity(resource, limit.as_str());
                let total = if resource == "nodes" {
                    (owned.len() + claims.len()) as i64
                } else {
                    let existing: i64 = owned.iter().map(|n| n.capacity.get(resource)).sum();
                    let planned: i64 = claims
                        .iter()
                        .map(|c| {
                            c.instance_types
                                .iter()
                                .map(|t| {
                                    self.world
                                        .catalog
                                        .get(t)
                                        .expect("known type")
                                        .capacity
                                        .get(resource)
                                })
                                .max()
                                .unwrap_or(0)
                        })
                        .sum();
                    existing + planned
                };
                if total > limit {
                    self.fail(format!(
                        "NodePool {name}: {resource} may reach {total}, limit {limit}"
                    ));
                }
            }
        }
    }

    fn check_anti_affinity(&mut self) {
        let mut found = Vec::new();
        for (i, a) in self.entries.iter().enumerate() {
            for term in terms(a.pod, true) {
                for (j, b) in self.entries.iter().enumerate() {
                    if i == j || (a.old && b.old) || !term.selects(b.pod) {
                        continue;
                    }
                    let shared = a.target == b.target
                        || (term.key != HOSTNAME_LABEL
                            && !self
                                .values(a.target, &term.key)
                                .is_disjoint(&self.values(b.target, &term.key)));
                    if shared {
                        found.push(format!(
                            "anti-affinity of {} ({}) is broken by {}: {:?} / {:?}",
                            pod_key(a.pod),
                            term.key,
                            pod_key(b.pod),
                            a.target,
                            b.target
                        ));
                    }
                }
            }
        }
        self.errors.extend(found);
    }

    /// Required pod affinity, order-independently: every pod carrying a term must share its
    /// domain with a matching pod that could have been there first (a pod without the term, or
    /// one already running), except that one domain may be bootstrapped by a pod matching its
    /// own term when no running pod matches it.
    fn check_affinity(&mut self) {
        let mut by_term: BTreeMap<AffinityTerm, Vec<usize>> = BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.old {
                continue;
            }
            for t in terms(e.pod, false) {
                by_term.entry(t).or_default().push(i);
            }
        }
        let mut found = Vec::new();
        for (term, carriers) in by_term {
            let matching: Vec<usize> = (0..self.entries.len())
                .filter(|i| term.selects(self.entries[*i].pod))
                .collect();
            let old_match = matching.iter().any(|i| self.entries[*i].old);
            let mut seed_values = BTreeSet::new();
            let mut seed_targets = BTreeSet::new();
            for i in &matching {
                let e = &self.entries[*i];
                if e.old || !carriers.contains(i) {
                    seed_targets.insert(e.target);
                    if let Some(v) = self.definite(e.target, &term.key) {
                        seed_values.insert(v);
                    }
                }
            }
            // Domains held only by carriers: a definite value, or the claim itself.
            let mut lonely: BTreeMap<String, bool> = BTreeMap::new();
            for i in &carriers {
                let e = &self.entries[*i];
                if seed_targets.contains(&e.target) {
                    continue;
                }
                let possible = self.values(e.target, &term.key);
                if !possible.is_empty() && possible.is_subset(&seed_values) {
                    continue;
                }
                let domain = self
                    .definite(e.target, &term.key)
                    .unwrap_or_else(|| format!("{:?}", e.target));
                *lonely.entry(domain).or_insert(false) |= term.selects(e.pod);
            }
            let describe = || {
                carriers
                    .iter()
                    .map(|i| {
                        format!(
                            "{} on {:?}",
                            pod_key(self.entries[*i].pod),
                            self.entries[*i].target
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !lonely.is_empty() && old_match {
                found.push(format!(
                    "affinity {term:?}: pods away from every running match: {}",
                    describe()
                ));
            } else if lonely.len() > 1 {
                found.push(format!(
                    "affinity {term:?}: more than one domain without a match ({:?}): {}",
                    lonely.keys().collect::<Vec<_>>(),
                    describe()
                ));
            } else if lonely.values().any(|self_match| !self_match) {
                found.push(format!(
                    "affinity {term:?}: a domain with no matching pod: {}",
                    describe()
                ));
            }
        }
        self.errors.extend(found);
    }

    fn check_spread(&mut self) {
        let mut by_constraint: BTreeMap<HardSpread, Vec<usize>> = BTreeMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            if e.old {
                continue;
            }
            for s in hard_spreads(e.pod) {
                by_constraint.entry(s).or_default().push(i);
            }
        }
        // Zones any node could ever be in: the catalog's offerings and existing nodes.
        let mut all_zones: BTreeSet<String> = self
            .world
            .catalog
            .instance_types
            .iter()
            .flat_map(|it| it.offerings.iter().map(|o| o.zone.clone()))
            .collect();
        all_zones.extend(
            self.world
                .nodes
                .iter()
                .filter_map(|n| n.labels.get(ZONE_LABEL).cloned()),
        );
        let mut found = Vec::new();
        for (spread, carriers) in by_constraint {
            let selector: LabelSelector =
                serde_json::from_str(&spread.selector).expect("canonical selector");
            let carrier_pods: Vec<&Pod> = carriers.iter().map(|i| self.entries[*i].pod).collect();
            // nodeAffinityPolicy Honor (the default): only nodes every carrier may use count.
            let eligible = |labels: &BTreeMap<String, String>| {
                carrier_pods
                    .iter()
                    .all(|p| node_constraints_hold(p, labels))
            };
            let target_eligible = |t: Target| match t {
                Target::Node(n) => eligible(&self.world.nodes[n].labels),
                Target::Claim(c) => self.launches[c].iter().all(|l| eligible(&l.labels)),
            };
            let members: Vec<usize> = (0..self.entries.len())
                .filter(|i| {
                    let e = &self.entries[*i];
                    namespace(e.pod) == spread.namespace
                        && selects(Some(&selector), &labels(e.pod))
                        && target_eligible(e.target)
                })
                .collect();
            // Pods placed now that match the selector without carrying the constraint may go
            // anywhere; only judge skew when every new matching pod carries it.
            if members
                .iter()
                .any(|i| !self.entries[*i].old && !carriers.contains(i))
            {
                continue;
            }
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            let mut complete = true;
            for i in &members {
                let e = &self.entries[*i];
                match self.definite(e.target, &spread.key) {
                    Some(domain) => *counts.entry(domain).or_insert(0) += 1,
                    None if carriers.contains(i) => found.push(format!(
                        "{} has a {} spread but its node may be in {:?}",
                        pod_key(e.pod),
                        spread.key,
                        self.values(e.target, &spread.key)
                    )),
                    None => complete = false,
                }
            }
            if !complete {
                continue;
            }
            let skew = i64::from(spread.max_skew);
            if spread.key == HOSTNAME_LABEL {
                // Karpenter: a new node is always a possible empty hostname domain, so the global
                // minimum is 0 and no host may take a matching pod beyond maxSkew.
                for i in &carriers {
                    let domain = format!("{:?}", self.entries[*i].target);
                    let count = counts.get(&domain).copied().unwrap_or(0);
                    if count > skew {
                        found.push(format!(
                            "spread {spread:?}: {domain} holds {count} > maxSkew: {counts:?}"
                        ));
                    }
                }
                continue;
            }
            // Empty domains: eligible existing nodes and claims pinned to a zone.
            let mut domains = counts.clone();
            for (n, node) in self.world.nodes.iter().enumerate() {
                if !node.deleting
                    && eligible(&node.labels)
                    && let Some(d) = self.definite(Target::Node(n), &spread.key)
                {
                    domains.entry(d).or_insert(0);
                }
            }
            for c in 0..self.results.new_claims.len() {
                if target_eligible(Target::Claim(c))
                    && let Some(d) = self.definite(Target::Claim(c), &spread.key)
                {
                    domains.entry(d).or_insert(0);
                }
            }
            let mut min = domains.values().copied().min().unwrap_or(0);
            if spread
                .min_domains
                .is_some_and(|m| (all_zones.len() as i64) < i64::from(m))
            {
                min = 0;
            }
            // The last new pod into each domain saw at most its final count and a global minimum
            // no larger than the final one.
            let receiving: BTreeSet<String> = carriers
                .iter()
                .filter_map(|i| self.definite(self.entries[*i].target, &spread.key))
                .collect();
            for d in receiving {
                let count = domains.get(&d).copied().unwrap_or(0);
                if count - min > skew {
                    found.push(format!(
                        "spread {spread:?}: {d} holds {count}, global minimum {min}, skew > {skew}: {domains:?}"
                    ));
                }
            }
        }
        self.errors.extend(found);
    }

    /// A pod with no hard constraint beyond its requests, selected by no anti-affinity term, that
    /// fits an instance type of an unlimited NodePool whose taints it tolerates, is placed.
    fn check_trivially_placeable(&mut self) {
        let unschedulable: BTreeSet<&str> = self
            .results
            .unschedulable
            .iter()
            .map(|u| u.pod.as_str())
            .collect();
        let mut found = Vec::new();
        for p in &self.world.pods {
            let key = pod_key(p);
            if !unschedulable.contains(key.as_str()) || !has_soft_constraints_only(p) {
                continue;
            }
            let running = self
                .world
                .old_pods
                .iter()
                .filter(|(n, _)| !self.world.nodes[*n].deleting)
                .map(|(_, q)| q);
            let repelled = self
                .world
                .pods
                .iter()
                .chain(running)
                .any(|q| terms(q, true).iter().any(|t| t.selects(p)));
            if repelled {
                continue;
            }
            let need = requests(p);
            let place = self.world.pools.iter().find_map(|pool| {
                if pool.spec.limits.is_some() || !tolerates(p, &pool.spec.template.spec.taints) {
                    return None;
                }
                self.world.catalog.instance_types.iter().find_map(|it| {
                    let launchable = it.offerings.iter().filter(|o| o.available).any(|o| {
                        let mut labels = type_labels(pool, it);
                        labels.insert(ZONE_LABEL.to_string(), o.zone.clone());
                        labels.insert(
                            CAPACITY_TYPE_LABEL.to_string(),
                            o.capacity_type.label().to_string(),
                        );
                        pool.spec.template.spec.requirements.iter().all(|r| {
                            operator_holds(
                                &format!("{:?}", r.operator),
                                &r.values,
                                labels.get(&r.key),
                            )
                        })
                    });
                    let mut total = need.clone();
                    sum(&mut total, &daemon_overhead(self.world, pool, it));
                    (launchable && fits(&total, &it.allocatable)).then(|| {
                        format!(
                            "{} on {}",
                            it.name,
                            pool.metadata.name.as_deref().unwrap_or_default()
                        )
                    })
                })
            });
            if let Some(place) = place {
                found.push(format!("{key} is unschedulable but fits {place}"));
            }
        }
        self.errors.extend(found);
    }
}

fn check(world: &World, results: &Results) -> Vec<String> {
    let launches = results
        .new_claims
        .iter()
        .map(|c| launches(world, c))
        .collect();
    let mut entries = Vec::new();
    for (n, p) in &world.old_pods {
        if !world.nodes[*n].deleting {
            entries.push(Entry {
                pod: p,
                target: Target::Node(*n),
                old: true,
            });
        }
    }
    let by_key: BTreeMap<String, &Pod> = world.pods.iter().map(|p| (pod_key(p), p)).collect();
    for placement in &results.existing_nodes {
        if let Some(n) = world.nodes.iter().position(|n| n.name == placement.node) {
            for key in &placement.pods {
                if let Some(p) = by_key.get(key) {
                    entries.push(Entry {
                        pod: p,
                        target: Target::Node(n),
                        old: false,
                    });
                }
            }
        }
    }
    for (c, claim) in results.new_claims.iter().enumerate() {
        for key in &claim.pods {
            if let Some(p) = by_key.get(key) {
                entries.push(Entry {
                    pod: p,
                    target: Target::Claim(c),
                    old: false,
                });
            }
        }
    }
    let mut checker = Checker {
        world,
        results,
        launches,
        entries,
        errors: Vec::new(),
    };
    checker.check_accounting();
    checker.check_claims();
    checker.check_existing_nodes();
    checker.check_limits();
    checker.check_anti_affinity();
    checker.check_affinity();
    checker.check_spread();
    checker.check_trivially_placeable();
    checker.errors
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: RngSeed::Fixed(0x5EED_CAFE),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_plan_keeps_every_hard_constraint(case in case()) {
        let world = build(&case);
        let results = run(&world);
        let errors = check(&world, &results);
        prop_assert!(errors.is_empty(), "{} violations:\n{}\n\nresults: {results:#?}", errors.len(), errors.join("\n"));
    }

    /// Disruption prepares the pools' compatible types once for a pass's many questions: the
    /// plan must be exactly the one a run that works them out itself makes.
    #[test]
    fn a_run_with_prepared_pools_plans_exactly_as_one_without(case in case()) {
        let world = build(&case);
        let plain = format!("{:?}", run_with(&world, false));
        let prepared = format!("{:?}", run_with(&world, true));
        prop_assert_eq!(plain, prepared);
    }

    /// Provisioning and disruption keep the pools' compatible types across passes, by catalog,
    /// and the catalog's types as dense resource vectors by layout: a remembered list and table
    /// (the memo's first answer, its second, and its answer once the catalog is replaced by one
    /// listing the types in another order) plan exactly as a run that works them out itself.
    #[test]
    fn a_run_with_remembered_pools_plans_exactly_as_one_without(case in case()) {
        let world = build(&case);
        let memo = karpenter_core::scheduling::CompatibleTypesMemo::default();
        let first = Arc::new(world.catalog.clone());
        let plain = format!("{:?}", run_on(&world, &first, Prep::None));
        let remembered = format!("{:?}", run_on(&world, &first, Prep::Remembered(&memo, first.clone())));
        prop_assert_eq!(&plain, &remembered);
        let again = format!("{:?}", run_on(&world, &first, Prep::Remembered(&memo, first.clone())));
        prop_assert_eq!(&plain, &again);
        let mut reordered = world.catalog.clone();
        reordered.instance_types.reverse();
        let second = Arc::new(reordered);
        let plain = format!("{:?}", run_on(&world, &second, Prep::None));
        let remembered = format!("{:?}", run_on(&world, &second, Prep::Remembered(&memo, second.clone())));
        prop_assert_eq!(plain, remembered);
    }
}

/// The checker must be able to fail: a hand-broken plan is caught.
#[test]
fn the_checker_catches_a_broken_plan() {
    let case = Case {
        types: vec![TypeSpec {
            cpu: 2,
            memory_per_cpu: 2,
            arm: false,
            gpu: false,
            pods: 110,
            zones: 0b111,
            on_demand_cents: 10,
            spot_percent: 50,
            unavailable: 0,
            family: 0,
        }],
        pools: vec![PoolSpec {
            weight: None,
            arch: None,
            capacity_types: None,
            zones: None,
            family_not_in: None,
            team: None,
            taint: Some(0),
            cpu_limit: None,
            nodes_limit: None,
        }],
        workloads: vec![Workload {
            team_namespace: false,
            replicas: 2,
            cpu_m: 500,
            memory_mi: 128,
            gpu: false,
            node_selector: None,
            terms: Vec::new(),
            tolerate: Some(Tolerate::Team(0)),
            spread: None,
            affinity: None,
            anti_affinity: Some((true, Peer::Workload(0))),
            host_port: Some(8080),
        }],
        nodes: Vec::new(),
        daemons: Vec::new(),
    };
    let world = build(&case);
    let mut results = run(&world);
    assert!(check(&world, &results).is_empty(), "{results:#?}");
    // Put both pods on one claim: anti-affinity and the host port break; drop one pod entirely.
    assert_eq!(results.new_claims.len(), 2);
    let moved = results.new_claims.remove(1).pods;
    results.new_claims[0].pods.extend(moved);
    let errors = check(&world, &results);
    assert!(
        errors.iter().any(|e| e.contains("anti-affinity")),
        "{errors:?}"
    );
    assert!(errors.iter().any(|e| e.contains("host port")), "{errors:?}");
    results.new_claims[0].pods.pop();
    let errors = check(&world, &results);
    assert!(
        errors.iter().any(|e| e.contains("neither placed")),
        "{errors:?}"
    );
    // A pod that does not tolerate the pool's taint.
    let mut intolerant = world;
    let spec = intolerant.pods[0].spec.as_mut().expect("spec");
    spec.tolerations = None;
    let errors = check(&intolerant, &run(&build(&case)));
    assert!(errors.iter().any(|e| e.contains("tolerate")), "{errors:?}");
}

fn plain_workload(replicas: usize) -> Workload {
    Workload {
        team_namespace: false,
        replicas,
        cpu_m: 500,
        memory_mi: 128,
        gpu: false,
        node_selector: None,
        terms: Vec::new(),
        tolerate: None,
        spread: None,
        affinity: None,
        anti_affinity: None,
        host_port: None,
    }
}

/// One 2-cpu amd64 type in every zone, one unconstrained pool.
fn simple_case(workloads: Vec<Workload>) -> Case {
    Case {
        types: vec![TypeSpec {
            cpu: 2,
            memory_per_cpu: 2,
            arm: false,
            gpu: false,
            pods: 110,
            zones: 0b111,
            on_demand_cents: 10,
            spot_percent: 50,
            unavailable: 0,
            family: 0,
        }],
        pools: vec![PoolSpec {
            weight: None,
            arch: None,
            capacity_types: None,
            zones: None,
            family_not_in: None,
            team: None,
            taint: None,
            cpu_limit: None,
            nodes_limit: None,
        }],
        workloads,
        nodes: Vec::new(),
        daemons: Vec::new(),
    }
}

#[test]
fn the_checker_catches_resource_limit_and_selector_breaches() {
    let case = simple_case(vec![plain_workload(2)]);
    let world = build(&case);
    let results = run(&world);
    assert!(check(&world, &results).is_empty(), "{results:#?}");

    // The type turns out smaller than the pods on it.
    let mut shrunk = build(&case);
    shrunk.catalog.instance_types[0].allocatable.set("cpu", 500);
    let errors = check(&shrunk, &results);
    assert!(errors.iter().any(|e| e.contains("exceed")), "{errors:?}");

    // The pool's cpu limit is lower than the claim's worst case.
    let mut limited = build(&case);
    limited.pools[0].spec.limits = Some(BTreeMap::from([(
        "cpu".to_string(),
        karpenter_core::api::Quantity::new("1"),
    )]));
    let errors = check(&limited, &results);
    assert!(errors.iter().any(|e| e.contains("limit")), "{errors:?}");

    // A pod that selects a node the claim can never be.
    let mut picky = build(&case);
    picky.pods[0].spec.as_mut().expect("spec").node_selector = Some(BTreeMap::from([(
        ARCH_LABEL.to_string(),
        "s390x".to_string(),
    )]));
    let errors = check(&picky, &results);
    assert!(
        errors.iter().any(|e| e.contains("does not select")),
        "{errors:?}"
    );
}

/// Pins claim `c` of `results` to `zone`.
fn pin_zone(results: &mut Results, c: usize, zone: &str) {
    let claim = &mut results.new_claims[c];
    claim.requirements.retain(|r| r.key != ZONE_LABEL);
    claim
        .requirements
        .push(karpenter_core::api::Requirement::new(
            ZONE_LABEL,
            karpenter_core::api::Operator::In,
            &[zone],
        ));
}

#[test]
fn the_checker_catches_spread_and_affinity_breaches() {
    // Three pods spread over zones, 1.5 cpu each so every one needs its own node.
    let mut spread = plain_workload(3);
    spread.cpu_m = 1500;
    spread.spread = Some(SpreadSpec {
        hostname: false,
        max_skew: 1,
        min_domains: None,
        schedule_anyway: false,
    });
    let world = build(&simple_case(vec![spread]));
    let mut results = run(&world);
    assert!(check(&world, &results).is_empty(), "{results:#?}");
    assert_eq!(results.new_claims.len(), 3, "{results:#?}");
    // Move the zone-c pod next to another one: counts 2/1/0 with the zone-c claim still there.
    let moved = results.new_claims[2].pods.pop().expect("a pod");
    results.new_claims[0].pods.push(moved);
    let errors = check(&world, &results);
    assert!(errors.iter().any(|e| e.contains("spread")), "{errors:?}");

    // w1 follows w0 by zone; put it on a claim of its own in another zone.
    let mut follower = plain_workload(1);
    follower.affinity = Some((false, Peer::Workload(0)));
    let world = build(&simple_case(vec![plain_workload(1), follower]));
    let mut results = run(&world);
    assert!(check(&world, &results).is_empty(), "{results:#?}");
    let mut split = results.new_claims[0].clone();
    let w1 = "default/w1-0".to_string();
    results.new_claims[0].pods.retain(|p| *p != w1);
    split.pods = vec![w1];
    results.new_claims.push(split);
    pin_zone(&mut results, 0, "zone-a");
    pin_zone(&mut results, 1, "zone-b");
    let errors = check(&world, &results);
    assert!(errors.iter().any(|e| e.contains("affinity")), "{errors:?}");
}
