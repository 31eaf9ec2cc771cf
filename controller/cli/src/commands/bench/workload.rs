//! Upstream Karpenter's scheduling benchmark, re-created: `fake.InstanceTypes(400)` and the
//! `makeDiversePods` mix (generic, zonal spread, hostname spread, zonal self-affinity, hostname
//! self-anti-affinity), one NodePool with huge limits, an empty cluster.
//!
//! A workload generator, not product code: it lives with `karpenter bench-scheduling` (and so
//! `cargo xtask bench`), whose test checks that a small run schedules every pod. Deterministic: the
//! pod mix is drawn from a fixed-seed generator.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodAffinity,
    PodAffinityTerm, PodAntiAffinity, PodSpec, PreferredSchedulingTerm, ResourceRequirements,
    TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use karpenter_core::api::NodePool;
use karpenter_core::api::labels::{
    ARCH_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, OS_LABEL, ZONE_LABEL,
};
use karpenter_core::catalog::{CapacityType, Catalog, InstanceType, Offering};
use karpenter_core::resources::Resources;

/// SplitMix64: a tiny, fixed pseudo-random sequence so the pod mix is the same on every run.
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[(self.next() % from.len() as u64) as usize]
    }
}

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// `fake.InstanceTypes(n)`: type `i` has `i+1` cpus, `2(i+1)` GiB, `10(i+1)` pods, allocatable
/// = capacity − 100m cpu − 10Mi, five offerings (spot in zones 1-2, on-demand in zones 1-3) at
/// upstream's fake price `0.1·cpu + 0.1·memory_GB`.
pub fn instance_types(n: usize) -> Catalog {
    let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
    let types = (0..n)
        .map(|i| {
            let cpus = (i + 1) as i64;
            let memory = 2 * cpus * GIB;
            let capacity = Resources::from_pairs([
                ("cpu", cpus * 1000),
                ("memory", memory),
                ("pods", 10 * cpus),
            ]);
            let overhead = Resources::from_pairs([("cpu", 100), ("memory", 10 * MIB)]);
            let price = 0.1 * cpus as f64 + 0.1 * memory as f64 / 1e9;
            let mut offerings = Vec::new();
            for (z, zone) in zones.iter().enumerate() {
                if z < 2 {
                    offerings.push(Offering {
                        reservation: None,
                        zone: zone.to_string(),
                        capacity_type: CapacityType::Spot,
                        price,
                        available: true,
                    });
                }
                offerings.push(Offering {
                    reservation: None,
                    zone: zone.to_string(),
                    capacity_type: CapacityType::OnDemand,
                    price,
                    available: true,
                });
            }
            let name = format!("fake-it-{i}");
            let labels = BTreeMap::from([
                (INSTANCE_TYPE_LABEL.to_string(), name.clone()),
                (ARCH_LABEL.to_string(), "amd64".to_string()),
                (OS_LABEL.to_string(), "linux".to_string()),
            ]);
            InstanceType {
                name,
                labels,
                allocatable: capacity.minus(&overhead),
                capacity,
                overhead,
                offerings,
            }
        })
        .collect();
    Catalog::new(types)
}

/// The benchmark's NodePool: no requirements, limits cpu 1e9 and memory 1e9Gi. Upstream uses 1e7
/// and 1e7Gi, which worst-case limit accounting (every planned claim counts its largest type,
/// 800Gi here) exhausts at 100,000 pods (20,000 anti-affinity nodes); the limits stay huge
/// relative to the workload at every size, as upstream intends.
pub fn node_pool() -> NodePool {
    let manifest = serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {"spec": {
                "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            }},
            "limits": {"cpu": "1000000000", "memory": "1000000000Gi"}
        }
    });
    serde_json::from_value(manifest).expect("the benchmark NodePool is valid")
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(key.to_string(), value.to_string())])),
        match_expressions: None,
    }
}

/// Which of the five pod kinds, with its drawn label values.
#[derive(Clone, Copy)]
enum Kind {
    Generic {
        label: &'static str,
    },
    Spread {
        key: &'static str,
        label: &'static str,
        selects: &'static str,
    },
    ZoneAffinity {
        label: &'static str,
    },
    HostnameAntiAffinity,
}

/// `makeDiversePods(count)`: `count/5` each of generic, zonal spread, hostname spread, zonal
/// self-affinity and hostname self-anti-affinity pods, the rest generic. CPU from
/// {100,250,500,1000,1500}m, memory from {100,256,512,1024,2048,4096}Mi, label values a-g.
///
/// The draws are made up front (a few bytes per pod); the Pod objects are built lazily, so a
/// caller can convert and drop them one at a time.
pub fn diverse_pods(count: usize) -> impl Iterator<Item = Pod> {
    let mut seq = Sequence(42);
    const VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
    let cpus = [100u32, 250, 500, 1000, 1500];
    let memories = [100u32, 256, 512, 1024, 2048, 4096];
    let per_kind = count / 5;
    let mut draws: Vec<(Kind, u32, u32)> = Vec::with_capacity(count);
    let mut draw = |seq: &mut Sequence, kind: Kind| {
        let cpu = *seq.pick(&cpus);
        let memory = *seq.pick(&memories);
        draws.push((kind, cpu, memory));
    };
    for _ in 0..per_kind {
        let label = *seq.pick(&VALUES);
        draw(&mut seq, Kind::Generic { label });
    }
    for key in [ZONE_LABEL, HOSTNAME_LABEL] {
        for _ in 0..per_kind {
            let label = *seq.pick(&VALUES);
            let selects = *seq.pick(&VALUES);
            draw(
                &mut seq,
                Kind::Spread {
                    key,
                    label,
                    selects,
                },
            );
        }
    }
    for _ in 0..per_kind {
        let label = *seq.pick(&VALUES);
        draw(&mut seq, Kind::ZoneAffinity { label });
    }
    for _ in 0..per_kind {
        draw(&mut seq, Kind::HostnameAntiAffinity);
    }
    for _ in 0..count - 5 * per_kind {
        let label = *seq.pick(&VALUES);
        draw(&mut seq, Kind::Generic { label });
    }
    draws
        .into_iter()
        .enumerate()
        .map(|(i, (kind, cpu, memory))| build_pod(i, kind, cpu, memory))
}

/// `makePreferencePods(count)` (upstream's `BenchmarkRespectPreferences` and
/// `BenchmarkIgnorePreferences`): every pod labelled `app=nginx`, preferring zone `test-zone-1`
/// (weight 1, satisfiable), zonal anti-affinity to its peers (weight 10, unsatisfiable past the
/// third pod) and hostname anti-affinity to them (weight 1, satisfiable); cpu and memory drawn as
/// in [`diverse_pods`]. Under `PreferencePolicy::Respect` the scheduler must relax the zonal term
/// for all but three pods; under `Ignore` the pods pack.
pub fn preference_pods(count: usize) -> impl Iterator<Item = Pod> {
    let mut seq = Sequence(42);
    let cpus = [100u32, 250, 500, 1000, 1500];
    let memories = [100u32, 256, 512, 1024, 2048, 4096];
    let draws: Vec<(u32, u32)> = (0..count)
        .map(|_| (*seq.pick(&cpus), *seq.pick(&memories)))
        .collect();
    draws.into_iter().enumerate().map(|(i, (cpu, memory))| {
        let peers = |weight: i32, key: &str| WeightedPodAffinityTerm {
            weight,
            pod_affinity_term: PodAffinityTerm {
                label_selector: Some(selector("app", "nginx")),
                topology_key: key.into(),
                ..Default::default()
            },
        };
        let affinity = Affinity {
            node_affinity: Some(NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    PreferredSchedulingTerm {
                        weight: 1,
                        preference: NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: ZONE_LABEL.into(),
                                operator: "In".into(),
                                values: Some(vec!["test-zone-1".into()]),
                            }]),
                            match_fields: None,
                        },
                    },
                ]),
                ..Default::default()
            }),
            pod_anti_affinity: Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    peers(10, ZONE_LABEL),
                    peers(1, HOSTNAME_LABEL),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let labels = BTreeMap::from([("app".to_string(), "nginx".to_string())]);
        pod(i, labels, Some(affinity), None, cpu, memory)
    })
}

fn build_pod(i: usize, kind: Kind, cpu: u32, memory: u32) -> Pod {
    let one = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    let (labels, affinity, spread) = match kind {
        Kind::Generic { label } => (one("my-label", label), None, None),
        Kind::Spread {
            key,
            label,
            selects,
        } => (
            one("my-label", label),
            None,
            Some(TopologySpreadConstraint {
                max_skew: 1,
                topology_key: key.to_string(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(selector("my-label", selects)),
                ..Default::default()
            }),
        ),
        Kind::ZoneAffinity { label } => (
            one("my-affininity", label),
            Some(Affinity {
                pod_affinity: Some(PodAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(selector("my-affininity", label)),
                            topology_key: ZONE_LABEL.into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            None,
        ),
        Kind::HostnameAntiAffinity => (
            one("app", "nginx"),
            Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![
                        PodAffinityTerm {
                            label_selector: Some(selector("app", "nginx")),
                            topology_key: HOSTNAME_LABEL.into(),
                            ..Default::default()
                        },
                    ]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            None,
        ),
    };
    pod(i, labels, affinity, spread, cpu, memory)
}

/// One benchmark pod: a single container requesting `cpu` millicores and `memory` MiB.
fn pod(
    i: usize,
    labels: BTreeMap<String, String>,
    affinity: Option<Affinity>,
    spread: Option<TopologySpreadConstraint>,
    cpu: u32,
    memory: u32,
) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i:06}")),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{i:06}")),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), K8sQuantity(format!("{cpu}m"))),
                        ("memory".to_string(), K8sQuantity(format!("{memory}Mi"))),
                    ])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            affinity,
            topology_spread_constraints: spread.map(|s| vec![s]),
            ..Default::default()
        }),
        status: None,
    }
}
