//! The scheduling engine, one constraint at a time: for every constraint a pod that fits and one
//! that must not, on small hand-made catalogs whose numbers can be checked by hand.
//!
//! The fixtures read like the manifests they stand for (`pod("web-0").cpu("500m")...`,
//! `pool("default").weight(10)...`); `scheduling_properties` reuses them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use karpenter_core::api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, OS_LABEL,
    ZONE_LABEL,
};
use karpenter_core::api::{NodePool, Operator, Requirement as ApiRequirement, Taint, TaintEffect};
use karpenter_core::catalog::{CapacityType, Catalog, InstanceType, NVIDIA_GPU, Offering};
use karpenter_core::resources::{Resources, parse_quantity};
use karpenter_core::scheduling::{
    ExistingNode, Input, MinValuesPolicy, Options, PlannedClaim, PodInfo, Requirements,
    ReservedOfferingMode, Results, solve,
};
use serde_json::{Value, json};

pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const MIB: i64 = 1 << 20;
const GIB: i64 = 1 << 30;

// ------------------------------------------------------------------------------------------------
// Instance types and catalogs
// ------------------------------------------------------------------------------------------------

/// An instance type being described: `itype("large", 8, 16).price(0.40, 0.16)`.
#[derive(Clone, Debug)]
pub struct TypeBuilder {
    name: String,
    cpu: i64,
    memory_gi: i64,
    pods: i64,
    arch: String,
    gpus: i64,
    on_demand: f64,
    spot: f64,
    zones: Vec<String>,
    unavailable: Vec<(String, CapacityType)>,
    labels: BTreeMap<String, String>,
    /// (zone, reservation id, instances left).
    reserved: Vec<(String, String, u32)>,
}

/// An amd64 Linux type with `cpu` cores and `memory_gi` GiB, offered spot and on-demand in every
/// zone. Overhead is 100m cpu and 256Mi, so allocatable is capacity minus that.
pub fn itype(name: &str, cpu: i64, memory_gi: i64) -> TypeBuilder {
    TypeBuilder {
        name: name.to_string(),
        cpu,
        memory_gi,
        pods: 110,
        arch: "amd64".to_string(),
        gpus: 0,
        on_demand: 0.05 * cpu as f64,
        spot: 0.02 * cpu as f64,
        zones: ZONES.iter().map(|z| z.to_string()).collect(),
        unavailable: Vec::new(),
        labels: BTreeMap::new(),
        reserved: Vec::new(),
    }
}

impl TypeBuilder {
    pub fn arch(mut self, arch: &str) -> Self {
        self.arch = arch.to_string();
        self
    }
    pub fn gpus(mut self, gpus: i64) -> Self {
        self.gpus = gpus;
        self
    }
    pub fn pods(mut self, pods: i64) -> Self {
        self.pods = pods;
        self
    }
    /// Hourly prices: on-demand, spot.
    pub fn price(mut self, on_demand: f64, spot: f64) -> Self {
        self.on_demand = on_demand;
        self.spot = spot;
        self
    }
    pub fn zones(mut self, zones: &[&str]) -> Self {
        self.zones = zones.iter().map(|z| z.to_string()).collect();
        self
    }
    /// A capacity reservation of this type in `zone` with `left` instances left, priced as
    /// upstream prices reserved offerings (on-demand / 10,000,000).
    pub fn reserved(mut self, zone: &str, id: &str, left: u32) -> Self {
        self.reserved.push((zone.to_string(), id.to_string(), left));
        self
    }
    /// Marks one offering as not available now (insufficient capacity).
    pub fn unavailable(mut self, zone: &str, capacity_type: CapacityType) -> Self {
        self.unavailable.push((zone.to_string(), capacity_type));
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn build(self) -> InstanceType {
        let mut capacity = Resources::from_pairs([
            ("cpu", self.cpu * 1000),
            ("memory", self.memory_gi * GIB),
            ("pods", self.pods),
        ]);
        if self.gpus > 0 {
            capacity.set(NVIDIA_GPU, self.gpus);
        }
        let overhead = Resources::from_pairs([("cpu", 100), ("memory", 256 * MIB)]);
        let mut offerings = Vec::new();
        for zone in &self.zones {
            for (capacity_type, price) in [
                (CapacityType::Spot, self.spot),
                (CapacityType::OnDemand, self.on_demand),
            ] {
                offerings.push(Offering {
                    reservation: None,
                    zone: zone.clone(),
                    capacity_type,
                    price,
                    available: !self
                        .unavailable
                        .iter()
                        .any(|(z, c)| z == zone && *c == capacity_type),
                });
            }
        }
        for (zone, id, left) in &self.reserved {
            offerings.push(Offering {
                zone: zone.clone(),
                capacity_type: CapacityType::Reserved,
                price: self.on_demand / karpenter_core::catalog::RESERVED_PRICE_DIVISOR,
                available: *left > 0,
                reservation: Some(karpenter_core::catalog::Reservation {
                    id: id.clone(),
                    kind: karpenter_core::api::ec2nodeclass::ReservationType::Default,
                    interruptible: false,
                    capacity: *left,
                }),
            });
        }
        let mut labels = self.labels;
        labels.insert(INSTANCE_TYPE_LABEL.to_string(), self.name.clone());
        labels.insert(ARCH_LABEL.to_string(), self.arch);
        labels.insert(OS_LABEL.to_string(), "linux".to_string());
        InstanceType {
            name: self.name,
            labels,
            allocatable: capacity.minus(&overhead),
            capacity,
            overhead,
            offerings,
        }
    }
}

/// The catalog most tests use (allocatable = capacity − 100m cpu − 256Mi):
///
/// | type       | arch  | cpu | memory | gpu | on-demand | spot |
/// |------------|-------|-----|--------|-----|-----------|------|
/// | small      | amd64 | 2   | 4Gi    |     | 0.10      | 0.04 |
/// | medium     | amd64 | 4   | 8Gi    |     | 0.20      | 0.08 |
/// | arm-medium | arm64 | 4   | 8Gi    |     | 0.16      | 0.06 |
/// | large      | amd64 | 8   | 16Gi   |     | 0.40      | 0.16 |
/// | gpu-xlarge | amd64 | 16  | 64Gi   | 1   | 1.50      | 0.60 |
pub fn standard_types() -> Vec<TypeBuilder> {
    vec![
        itype("small", 2, 4).price(0.10, 0.04),
        itype("medium", 4, 8).price(0.20, 0.08),
        itype("arm-medium", 4, 8).arch("arm64").price(0.16, 0.06),
        itype("large", 8, 16).price(0.40, 0.16),
        itype("gpu-xlarge", 16, 64).gpus(1).price(1.50, 0.60),
    ]
}

pub fn standard_catalog() -> Catalog {
    catalog(standard_types())
}

pub fn catalog(types: Vec<TypeBuilder>) -> Catalog {
    Catalog::new(types.into_iter().map(TypeBuilder::build).collect())
}

// ------------------------------------------------------------------------------------------------
// NodePools
// ------------------------------------------------------------------------------------------------

/// A NodePool being described: `pool("default").weight(10).requirement(...).taint(...)`.
#[derive(Clone, Debug)]
pub struct PoolBuilder {
    name: String,
    weight: Option<i32>,
    requirements: Vec<Value>,
    labels: BTreeMap<String, String>,
    taints: Vec<Value>,
    limits: BTreeMap<String, String>,
}

pub fn pool(name: &str) -> PoolBuilder {
    PoolBuilder {
        name: name.to_string(),
        weight: None,
        requirements: Vec::new(),
        labels: BTreeMap::new(),
        taints: Vec::new(),
        limits: BTreeMap::new(),
    }
}

impl PoolBuilder {
    pub fn weight(mut self, weight: i32) -> Self {
        self.weight = Some(weight);
        self
    }
    pub fn requirement(mut self, key: &str, operator: &str, values: &[&str]) -> Self {
        self.requirements
            .push(json!({"key": key, "operator": operator, "values": values}));
        self
    }
    pub fn requirement_with_min_values(
        mut self,
        key: &str,
        operator: &str,
        values: &[&str],
        min_values: i64,
    ) -> Self {
        self.requirements.push(
            json!({"key": key, "operator": operator, "values": values, "minValues": min_values}),
        );
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }
    /// A taint; `effect` is `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints
            .push(json!({"key": key, "value": value, "effect": effect}));
        self
    }
    pub fn limit(mut self, resource: &str, quantity: &str) -> Self {
        self.limits
            .insert(resource.to_string(), quantity.to_string());
        self
    }
    pub fn spot_only(self) -> Self {
        self.requirement(CAPACITY_TYPE_LABEL, "In", &["spot"])
    }
    pub fn on_demand_only(self) -> Self {
        self.requirement(CAPACITY_TYPE_LABEL, "In", &["on-demand"])
    }
    pub fn amd64(self) -> Self {
        self.requirement(ARCH_LABEL, "In", &["amd64"])
    }

    pub fn build(self) -> NodePool {
        let mut spec = json!({
            "template": {
                "metadata": {"labels": self.labels},
                "spec": {
                    "requirements": self.requirements,
                    "taints": self.taints,
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
                }
            }
        });
        if let Some(weight) = self.weight {
            spec["weight"] = json!(weight);
        }
        if !self.limits.is_empty() {
            spec["limits"] = json!(self.limits);
        }
        serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": self.name},
            "spec": spec
        }))
        .expect("the test NodePool deserializes")
    }
}

// ------------------------------------------------------------------------------------------------
// Pods
// ------------------------------------------------------------------------------------------------

/// A node selector expression: `expr(ZONE_LABEL, "In", &["zone-a"])`.
pub fn expr(key: &str, operator: &str, values: &[&str]) -> Value {
    if values.is_empty() {
        json!({"key": key, "operator": operator})
    } else {
        json!({"key": key, "operator": operator, "values": values})
    }
}

/// `"app=web,tier=front"` as a label selector (`matchLabels`).
pub fn selector(text: &str) -> Value {
    let labels: BTreeMap<&str, &str> = text
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').expect("selector parts are key=value"))
        .collect();
    json!({"matchLabels": labels})
}

/// A topology spread constraint being described: `Spread::zone(1, "app=web").min_domains(3)`.
#[derive(Clone, Debug)]
pub struct Spread(Value);

impl Spread {
    pub fn on(key: &str, max_skew: i32, selector_text: &str) -> Self {
        Spread(json!({
            "maxSkew": max_skew,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": selector(selector_text),
        }))
    }
    pub fn zone(max_skew: i32, selector_text: &str) -> Self {
        Self::on(ZONE_LABEL, max_skew, selector_text)
    }
    pub fn hostname(max_skew: i32, selector_text: &str) -> Self {
        Self::on(HOSTNAME_LABEL, max_skew, selector_text)
    }
    pub fn min_domains(mut self, n: i32) -> Self {
        self.0["minDomains"] = json!(n);
        self
    }
    pub fn schedule_anyway(mut self) -> Self {
        self.0["whenUnsatisfiable"] = json!("ScheduleAnyway");
        self
    }
    pub fn node_affinity_policy(mut self, policy: &str) -> Self {
        self.0["nodeAffinityPolicy"] = json!(policy);
        self
    }
    pub fn match_label_keys(mut self, keys: &[&str]) -> Self {
        self.0["matchLabelKeys"] = json!(keys);
        self
    }
    pub fn node_taints_policy(mut self, policy: &str) -> Self {
        self.0["nodeTaintsPolicy"] = json!(policy);
        self
    }
}

/// A pod being described: `pod("web-0").cpu("500m").memory("1Gi").zone_spread(1, "app=web")`.
#[derive(Clone, Debug)]
pub struct PodBuilder {
    name: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    requests: BTreeMap<String, String>,
    init_containers: Vec<Value>,
    overhead: BTreeMap<String, String>,
    node_selector: BTreeMap<String, String>,
    required_terms: Vec<Value>,
    preferred_terms: Vec<Value>,
    tolerations: Vec<Value>,
    spread: Vec<Value>,
    affinity: Vec<Value>,
    anti_affinity: Vec<Value>,
    anti_preferences: Vec<Value>,
    ports: Vec<Value>,
    volume_terms: Vec<Requirements>,
    daemonset: bool,
}

pub fn pod(name: &str) -> PodBuilder {
    PodBuilder {
        name: name.to_string(),
        namespace: "default".to_string(),
        labels: BTreeMap::new(),
        requests: BTreeMap::new(),
        init_containers: Vec::new(),
        overhead: BTreeMap::new(),
        node_selector: BTreeMap::new(),
        required_terms: Vec::new(),
        preferred_terms: Vec::new(),
        tolerations: Vec::new(),
        spread: Vec::new(),
        affinity: Vec::new(),
        anti_affinity: Vec::new(),
        anti_preferences: Vec::new(),
        ports: Vec::new(),
        volume_terms: Vec::new(),
        daemonset: false,
    }
}

/// The template pod of a DaemonSet (its requests are overhead on every node it can run on).
pub fn daemonset(name: &str) -> PodBuilder {
    let mut builder = pod(name);
    builder.daemonset = true;
    builder
}

fn affinity_term(key: &str, selector_text: &str) -> Value {
    json!({"labelSelector": selector(selector_text), "topologyKey": key})
}

impl PodBuilder {
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = namespace.to_string();
        self
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }
    /// `app=web` shorthand.
    pub fn app(self, app: &str) -> Self {
        self.label("app", app)
    }
    pub fn request(mut self, resource: &str, quantity: &str) -> Self {
        self.requests
            .insert(resource.to_string(), quantity.to_string());
        self
    }
    pub fn cpu(self, quantity: &str) -> Self {
        self.request("cpu", quantity)
    }
    pub fn memory(self, quantity: &str) -> Self {
        self.request("memory", quantity)
    }
    pub fn gpu(self, count: &str) -> Self {
        self.request(NVIDIA_GPU, count)
    }
    /// A regular init container requesting `cpu` (runs to completion before the app starts).
    pub fn init_cpu(mut self, cpu: &str) -> Self {
        let n = self.init_containers.len();
        self.init_containers.push(json!({
            "name": format!("init-{n}"),
            "resources": {"requests": {"cpu": cpu}}
        }));
        self
    }
    /// A sidecar: an init container with `restartPolicy: Always`, running next to the app.
    pub fn sidecar_cpu(mut self, cpu: &str) -> Self {
        let n = self.init_containers.len();
        self.init_containers.push(json!({
            "name": format!("sidecar-{n}"),
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": cpu}}
        }));
        self
    }
    /// Pod overhead (RuntimeClass), added on top of the containers.
    pub fn overhead(mut self, resource: &str, quantity: &str) -> Self {
        self.overhead
            .insert(resource.to_string(), quantity.to_string());
        self
    }
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.node_selector
            .insert(key.to_string(), value.to_string());
        self
    }
    /// Required node affinity: a node must match one of `terms` (each a list of expressions).
    pub fn require_any(mut self, terms: Vec<Vec<Value>>) -> Self {
        self.required_terms = terms
            .into_iter()
            .map(|exprs| json!({"matchExpressions": exprs}))
            .collect();
        self
    }
    /// Preferred node affinity with `weight`.
    pub fn prefer(mut self, weight: i32, exprs: Vec<Value>) -> Self {
        self.preferred_terms
            .push(json!({"weight": weight, "preference": {"matchExpressions": exprs}}));
        self
    }
    /// Tolerates `key=value` with `effect` (operator Equal).
    pub fn tolerate(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.tolerations
            .push(json!({"key": key, "operator": "Equal", "value": value, "effect": effect}));
        self
    }
    /// Tolerates any taint with `key` (operator Exists, any effect).
    pub fn tolerate_key(mut self, key: &str) -> Self {
        self.tolerations
            .push(json!({"key": key, "operator": "Exists"}));
        self
    }
    pub fn spread(mut self, spread: Spread) -> Self {
        self.spread.push(spread.0);
        self
    }
    /// `DoNotSchedule` spread over zones.
    pub fn zone_spread(self, max_skew: i32, selector_text: &str) -> Self {
        self.spread(Spread::zone(max_skew, selector_text))
    }
    /// Required pod affinity to pods matching `selector_text` in the same `key` domain.
    pub fn affinity(mut self, key: &str, selector_text: &str) -> Self {
        self.affinity.push(affinity_term(key, selector_text));
        self
    }
    /// Required pod anti-affinity to pods matching `selector_text` in the same `key` domain.
    pub fn anti_affinity(mut self, key: &str, selector_text: &str) -> Self {
        self.anti_affinity.push(affinity_term(key, selector_text));
        self
    }
    /// Preferred pod anti-affinity (`weight`) to pods matching `selector_text` in the same
    /// `key` domain.
    pub fn anti_preference(mut self, weight: i32, key: &str, selector_text: &str) -> Self {
        self.anti_preferences
            .push(json!({"weight": weight, "podAffinityTerm": affinity_term(key, selector_text)}));
        self
    }
    pub fn host_port(mut self, port: i32) -> Self {
        self.ports
            .push(json!({"containerPort": port, "hostPort": port, "protocol": "TCP"}));
        self
    }
    /// A volume whose topology requires `zone` (a bound zonal PV, say).
    pub fn volume_zone(mut self, zone: &str) -> Self {
        self.volume_terms
            .push(Requirements::from_api(&[ApiRequirement::new(
                ZONE_LABEL,
                Operator::In,
                &[zone],
            )]));
        self
    }
    /// The Kubernetes object.
    pub fn pod(&self) -> Pod {
        let mut affinity = serde_json::Map::new();
        if !self.required_terms.is_empty() || !self.preferred_terms.is_empty() {
            let mut node = serde_json::Map::new();
            if !self.required_terms.is_empty() {
                node.insert(
                    "requiredDuringSchedulingIgnoredDuringExecution".into(),
                    json!({"nodeSelectorTerms": self.required_terms}),
                );
            }
            if !self.preferred_terms.is_empty() {
                node.insert(
                    "preferredDuringSchedulingIgnoredDuringExecution".into(),
                    json!(self.preferred_terms),
                );
            }
            affinity.insert("nodeAffinity".into(), Value::Object(node));
        }
        if !self.affinity.is_empty() {
            affinity.insert(
                "podAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": self.affinity}),
            );
        }
        if !self.anti_affinity.is_empty() || !self.anti_preferences.is_empty() {
            let mut anti = serde_json::Map::new();
            if !self.anti_affinity.is_empty() {
                anti.insert(
                    "requiredDuringSchedulingIgnoredDuringExecution".into(),
                    json!(self.anti_affinity),
                );
            }
            if !self.anti_preferences.is_empty() {
                anti.insert(
                    "preferredDuringSchedulingIgnoredDuringExecution".into(),
                    json!(self.anti_preferences),
                );
            }
            affinity.insert("podAntiAffinity".into(), Value::Object(anti));
        }
        let mut container = json!({"name": "app", "resources": {"requests": self.requests}});
        if !self.ports.is_empty() {
            container["ports"] = json!(self.ports);
        }
        let mut spec = json!({"containers": [container]});
        let optional = [
            ("initContainers", json!(self.init_containers)),
            ("overhead", json!(self.overhead)),
            ("nodeSelector", json!(self.node_selector)),
            ("tolerations", json!(self.tolerations)),
            ("topologySpreadConstraints", json!(self.spread)),
        ];
        for (field, value) in optional {
            let empty = match &value {
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                _ => false,
            };
            if !empty {
                spec[field] = value;
            }
        }
        if !affinity.is_empty() {
            spec["affinity"] = Value::Object(affinity);
        }
        let mut metadata = json!({
            "name": self.name,
            "namespace": self.namespace,
            "uid": format!("uid-{}", self.name),
            "labels": self.labels,
        });
        if self.daemonset {
            metadata["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "DaemonSet", "name": self.name, "uid": "ds"
            }]);
        }
        serde_json::from_value(json!({"metadata": metadata, "spec": spec}))
            .expect("the test pod deserializes")
    }

    /// The scheduler's view of the pod.
    pub fn build(&self) -> PodInfo {
        PodInfo::from_pod(&self.pod(), self.volume_terms.clone()).expect("the test pod is valid")
    }
}

// ------------------------------------------------------------------------------------------------
// Existing nodes
// ------------------------------------------------------------------------------------------------

/// A node already in the cluster: `node("n-1").zone("zone-a").cpu("4").pod(...)`.
#[derive(Clone, Debug)]
pub struct NodeBuilder {
    name: String,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    cpu: String,
    memory: String,
    pods: Vec<PodInfo>,
    initialized: bool,
    deleting: bool,
}

/// An initialized amd64 node in zone-a with 4 cpu / 8Gi allocatable, owned by no NodePool.
pub fn node(name: &str) -> NodeBuilder {
    NodeBuilder {
        name: name.to_string(),
        labels: BTreeMap::from([
            (HOSTNAME_LABEL.to_string(), name.to_string()),
            (ZONE_LABEL.to_string(), "zone-a".to_string()),
            (ARCH_LABEL.to_string(), "amd64".to_string()),
            (OS_LABEL.to_string(), "linux".to_string()),
        ]),
        taints: Vec::new(),
        cpu: "4".to_string(),
        memory: "8Gi".to_string(),
        pods: Vec::new(),
        initialized: true,
        deleting: false,
    }
}

impl NodeBuilder {
    pub fn zone(self, zone: &str) -> Self {
        self.label(ZONE_LABEL, zone)
    }
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }
    /// Owned by NodePool `name`.
    pub fn in_pool(self, name: &str) -> Self {
        self.label(NODEPOOL_LABEL, name)
    }
    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        self.taints.push(Taint {
            key: key.to_string(),
            value: Some(value.to_string()),
            effect,
            time_added: None,
        });
        self
    }
    /// Allocatable (and capacity) cpu and memory.
    pub fn size(mut self, cpu: &str, memory: &str) -> Self {
        self.cpu = cpu.to_string();
        self.memory = memory.to_string();
        self
    }
    /// A pod already bound to the node.
    pub fn running(mut self, pod: PodBuilder) -> Self {
        self.pods.push(pod.build());
        self
    }
    pub fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }
    pub fn build(self) -> ExistingNode {
        let resources = Resources::from_pairs([
            (
                "cpu",
                parse_quantity("cpu", &self.cpu).expect("cpu quantity"),
            ),
            (
                "memory",
                parse_quantity("memory", &self.memory).expect("memory quantity"),
            ),
            ("pods", 110),
        ]);
        ExistingNode {
            name: self.name,
            labels: self.labels,
            taints: self.taints,
            capacity: resources.clone(),
            allocatable: resources,
            pods: self.pods,
            initialized: self.initialized,
            deleting: self.deleting,
            volume_limits: Default::default(),
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Scenarios and outcomes
// ------------------------------------------------------------------------------------------------

/// Everything one run sees.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub pools: Vec<NodePool>,
    pub catalog: Catalog,
    pub nodes: Vec<ExistingNode>,
    pub daemonsets: Vec<PodInfo>,
    pub pods: Vec<PodInfo>,
    pub options: Options,
}

/// The standard catalog and one unconstrained NodePool called `default`.
pub fn scenario() -> Scenario {
    Scenario {
        pools: vec![pool("default").build()],
        catalog: standard_catalog(),
        nodes: Vec::new(),
        daemonsets: Vec::new(),
        pods: Vec::new(),
        options: Options::default(),
    }
}

impl Scenario {
    /// Replaces the NodePools.
    pub fn pools(mut self, pools: Vec<PoolBuilder>) -> Self {
        self.pools = pools.into_iter().map(PoolBuilder::build).collect();
        self
    }
    pub fn catalog(mut self, catalog: Catalog) -> Self {
        self.catalog = catalog;
        self
    }
    pub fn node(mut self, node: NodeBuilder) -> Self {
        self.nodes.push(node.build());
        self
    }
    pub fn daemonset(mut self, ds: PodBuilder) -> Self {
        self.daemonsets.push(ds.build());
        self
    }
    pub fn pod(mut self, pod: PodBuilder) -> Self {
        self.pods.push(pod.build());
        self
    }
    pub fn pods(mut self, pods: impl IntoIterator<Item = PodBuilder>) -> Self {
        self.pods.extend(pods.into_iter().map(|p| p.build()));
        self
    }
    pub fn reserved_offering_mode(mut self, mode: ReservedOfferingMode) -> Self {
        self.options.reserved_offering_mode = mode;
        self
    }
    pub fn min_values_policy(mut self, policy: MinValuesPolicy) -> Self {
        self.options.min_values_policy = policy;
        self
    }

    pub fn solve(&self) -> Outcome {
        let namespaces = BTreeMap::new();
        let results = solve(Input {
            node_pools: &self.pools,
            catalog: &self.catalog,
            pool_catalogs: &karpenter_core::scheduling::NO_POOL_CATALOGS,
            nodes: &self.nodes,
            daemonsets: &self.daemonsets,
            pods: &self.pods,
            namespaces: &namespaces,
            options: self.options,
        });
        Outcome {
            results,
            nodes: self.nodes.clone(),
        }
    }
}

/// Where one pod ended up.
#[derive(Clone, Debug, PartialEq)]
pub enum Placement {
    /// On an existing node.
    Node(String),
    /// On planned NodeClaim number `i` (index into `new_claims`).
    Claim(usize),
    Unschedulable(String),
    /// Not mentioned at all (always a bug).
    Missing,
}

/// The results of a run, with questions tests ask of them.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub results: Results,
    nodes: Vec<ExistingNode>,
}

impl Outcome {
    pub fn claims(&self) -> &[PlannedClaim] {
        &self.results.new_claims
    }

    pub fn placement(&self, pod: &str) -> Placement {
        let key = qualify(pod);
        for placement in &self.results.existing_nodes {
            if placement.pods.contains(&key) {
                return Placement::Node(placement.node.clone());
            }
        }
        for (i, claim) in self.results.new_claims.iter().enumerate() {
            if claim.pods.contains(&key) {
                return Placement::Claim(i);
            }
        }
        for u in &self.results.unschedulable {
            if u.pod == key {
                return Placement::Unschedulable(u.reason.clone());
            }
        }
        Placement::Missing
    }

    /// The claim `pod` is on (panics with the placement otherwise).
    pub fn claim_of(&self, pod: &str) -> &PlannedClaim {
        match self.placement(pod) {
            Placement::Claim(i) => &self.results.new_claims[i],
            other => panic!("{pod} is not on a new NodeClaim: {other:?}\n{self:#?}"),
        }
    }

    pub fn is_placed(&self, pod: &str) -> bool {
        matches!(
            self.placement(pod),
            Placement::Node(_) | Placement::Claim(_)
        )
    }

    /// The reason `pod` is unschedulable (panics if it was placed).
    pub fn reason(&self, pod: &str) -> String {
        match self.placement(pod) {
            Placement::Unschedulable(reason) => reason,
            other => panic!("{pod} should be unschedulable but is {other:?}\n{self:#?}"),
        }
    }

    pub fn assert_placed(&self, pod: &str) {
        assert!(
            self.is_placed(pod),
            "{pod} should be placed but is {:?}\n{self:#?}",
            self.placement(pod)
        );
    }

    pub fn assert_all_placed(&self) {
        assert!(
            self.results.unschedulable.is_empty(),
            "every pod should be placed: {:#?}",
            self.results
        );
    }

    /// The zone `pod` lands in: its node's label, or its claim's single zone requirement.
    /// `None` when placed on a claim that may still launch in several zones.
    pub fn zone_of(&self, pod: &str) -> Option<String> {
        match self.placement(pod) {
            Placement::Node(name) => self
                .nodes
                .iter()
                .find(|n| n.name == name)
                .and_then(|n| n.labels.get(ZONE_LABEL).cloned()),
            Placement::Claim(i) => claim_single_value(&self.results.new_claims[i], ZONE_LABEL),
            other => panic!("{pod} is not placed: {other:?}\n{self:#?}"),
        }
    }

    /// Pods per zone, over every placed pod in `pods`.
    pub fn zone_counts(&self, pods: &[String]) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for p in pods {
            let zone = self
                .zone_of(p)
                .unwrap_or_else(|| panic!("{p} has no single zone\n{self:#?}"));
            *counts.entry(zone).or_insert(0) += 1;
        }
        counts
    }
}

fn qualify(pod: &str) -> String {
    if pod.contains('/') {
        pod.to_string()
    } else {
        format!("default/{pod}")
    }
}

/// The one value a claim's requirement on `key` allows, if it allows exactly one.
pub fn claim_single_value(claim: &PlannedClaim, key: &str) -> Option<String> {
    let r = claim.requirements.iter().find(|r| r.key == key)?;
    (r.operator == Operator::In && r.values.len() == 1).then(|| r.values[0].clone())
}

/// The values a claim's `In` requirement on `key` allows (`None` when unconstrained or not `In`).
pub fn claim_values(claim: &PlannedClaim, key: &str) -> Option<BTreeSet<String>> {
    let r = claim.requirements.iter().find(|r| r.key == key)?;
    (r.operator == Operator::In).then(|| r.values.iter().cloned().collect())
}

pub fn type_names(claim: &PlannedClaim) -> Vec<String> {
    claim.instance_types.iter().map(|t| t.to_string()).collect()
}

pub fn type_set(claim: &PlannedClaim) -> BTreeSet<String> {
    claim.instance_types.iter().map(|t| t.to_string()).collect()
}

pub fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

// ================================================================================================
// Resource requests
// ================================================================================================

#[test]
fn a_pod_gets_a_claim_of_types_its_requests_fit_and_a_pod_larger_than_every_type_is_unschedulable()
{
    let out = scenario()
        .pod(pod("fits").cpu("3").memory("1Gi"))
        .pod(pod("too-big").cpu("32"))
        .solve();
    let claim = out.claim_of("fits");
    assert_eq!(
        type_set(claim),
        set(&["arm-medium", "gpu-xlarge", "large", "medium"])
    );
    assert_eq!(claim.requests.get("cpu"), 3000);
    assert_eq!(claim.requests.get("memory"), GIB);
    let reason = out.reason("too-big");
    assert!(reason.contains("default"), "{reason}");
    assert!(
        reason.contains("resources") || reason.contains("requests"),
        "{reason}"
    );
}

#[test]
fn a_memory_request_counts_as_much_as_cpu() {
    // 1 cpu fits small, but 10Gi of memory only fits large and gpu-xlarge.
    let out = scenario()
        .pods([
            pod("memory-hungry").cpu("1").memory("10Gi"),
            pod("memory-glutton").cpu("1").memory("100Gi"),
        ])
        .solve();
    assert_eq!(
        type_set(out.claim_of("memory-hungry")),
        set(&["large", "gpu-xlarge"])
    );
    out.reason("memory-glutton");
}

#[test]
fn init_containers_need_the_larger_of_their_peak_and_the_app_not_the_sum() {
    // max(1 cpu app, 7 cpu init) = 7 cpu: large (7.9 allocatable) or bigger; and max(7, 7) = 7,
    // not 14 summed. Each pod runs alone so they do not share a claim.
    for p in [
        pod("init-heavy").cpu("1").init_cpu("7"),
        pod("init-and-app").cpu("7").init_cpu("7"),
    ] {
        let key = p.name.clone();
        let out = scenario().pod(p).solve();
        assert_eq!(
            type_set(out.claim_of(&key)),
            set(&["large", "gpu-xlarge"]),
            "{key}"
        );
    }
    // 17 cpu of init container fits nothing, although the app alone would fit small.
    let out = scenario()
        .pod(pod("init-too-big").cpu("1").init_cpu("17"))
        .solve();
    out.reason("init-too-big");
}

#[test]
fn sidecar_init_containers_run_alongside_the_app_and_later_init_containers() {
    // app 4 + sidecar 3.5 = 7.5 cpu: only large and gpu-xlarge (a plain init of 3.5 would fit
    // medium).
    let out = scenario()
        .pods([
            pod("with-sidecar").cpu("4").sidecar_cpu("3500m"),
            // app 8 + sidecar 8 = 16 > 15.9: nothing fits (as plain init, max(8, 8) would).
            pod("sidecar-too-big").cpu("8").sidecar_cpu("8"),
            // sidecar 3 keeps running while the init of 13 runs: 16 > 15.9.
            pod("init-after-sidecar")
                .cpu("1")
                .sidecar_cpu("3")
                .init_cpu("13"),
        ])
        .solve();
    assert_eq!(
        type_set(out.claim_of("with-sidecar")),
        set(&["large", "gpu-xlarge"])
    );
    assert_eq!(out.claim_of("with-sidecar").requests.get("cpu"), 7500);
    out.reason("sidecar-too-big");
    out.reason("init-after-sidecar");
}

#[test]
fn pod_overhead_is_added_to_the_containers_requests() {
    let out = scenario()
        .pods([
            // 15 + 0.5 = 15.5 ≤ 15.9 on gpu-xlarge.
            pod("small-overhead").cpu("15").overhead("cpu", "500m"),
            // 15 + 1 = 16 > 15.9: nothing fits.
            pod("large-overhead").cpu("15").overhead("cpu", "1"),
        ])
        .solve();
    assert_eq!(
        type_names(out.claim_of("small-overhead")),
        vec!["gpu-xlarge"]
    );
    out.reason("large-overhead");
}

#[test]
fn an_extended_resource_request_needs_a_type_that_offers_it() {
    let out = scenario()
        .pods([
            pod("one-gpu").cpu("1").gpu("1"),
            pod("two-gpus").cpu("1").gpu("2"),
        ])
        .solve();
    assert_eq!(type_names(out.claim_of("one-gpu")), vec!["gpu-xlarge"]);
    let reason = out.reason("two-gpus");
    assert!(reason.contains("nvidia.com/gpu"), "{reason}");
}

#[test]
fn security_group_pods_and_neuron_pods_get_the_builtin_types_that_advertise_their_resources() {
    let out = scenario()
        .catalog(Catalog::builtin())
        .pods([
            // The VPC resource controller injects this request into security-groups-for-pods pods.
            pod("sgp")
                .cpu("1")
                .request("vpc.amazonaws.com/pod-eni", "1"),
            pod("inference")
                .cpu("1")
                .request("aws.amazon.com/neuroncore", "2"),
        ])
        .solve();
    let sgp = type_names(out.claim_of("sgp"));
    assert!(!sgp.is_empty());
    assert!(
        sgp.iter()
            .all(|t| !t.starts_with("t3") && !t.starts_with("t4g") && t != "p3.2xlarge"),
        "only trunking-compatible types: {sgp:?}"
    );
    assert_eq!(
        type_names(out.claim_of("inference")),
        vec!["inf2.xlarge", "trn1.2xlarge"]
    );
}

#[test]
fn zone_id_selectors_and_spreads_are_met_through_the_offerings_zones() {
    let out = scenario()
        .catalog(Catalog::builtin())
        .pods([
            pod("pinned")
                .cpu("1")
                .node_selector("topology.k8s.aws/zone-id", "usw2-az2"),
            pod("nowhere")
                .cpu("1")
                .node_selector("topology.k8s.aws/zone-id", "use1-az9"),
            pod("s1").cpu("1").label("app", "s").spread(Spread::on(
                "topology.k8s.aws/zone-id",
                1,
                "app=s",
            )),
            pod("s2").cpu("1").label("app", "s").spread(Spread::on(
                "topology.k8s.aws/zone-id",
                1,
                "app=s",
            )),
            pod("s3").cpu("1").label("app", "s").spread(Spread::on(
                "topology.k8s.aws/zone-id",
                1,
                "app=s",
            )),
        ])
        .solve();
    let pinned = out.claim_of("pinned");
    assert_eq!(
        claim_single_value(pinned, "topology.k8s.aws/zone-id").as_deref(),
        Some("usw2-az2")
    );
    let reason = out.reason("nowhere");
    assert!(reason.contains("zone-id"), "{reason}");
    let ids: BTreeSet<String> = ["s1", "s2", "s3"]
        .iter()
        .map(|p| {
            claim_single_value(out.claim_of(p), "topology.k8s.aws/zone-id")
                .unwrap_or_else(|| panic!("{p} has one zone id"))
        })
        .collect();
    assert_eq!(ids.len(), 3, "spread over the three zone ids: {ids:?}");
}

// ================================================================================================
// DaemonSet overhead
// ================================================================================================

#[test]
fn a_daemonset_s_requests_make_a_small_type_no_longer_fit() {
    let amd64 = || scenario().pools(vec![pool("default").amd64()]);
    // Without daemons, 1.5 cpu fits small (1.9 allocatable).
    let bare = amd64().pod(pod("app").cpu("1500m")).solve();
    assert_eq!(type_names(bare.claim_of("app"))[0], "small");
    // A 1-cpu daemon leaves small 0.9: the cheapest type is now medium, and the claim requests
    // the daemon's share too.
    let with_daemon = amd64()
        .daemonset(daemonset("logging").cpu("1"))
        .pods([pod("app").cpu("1500m"), pod("huge").cpu("15")])
        .solve();
    let claim = with_daemon.claim_of("app");
    assert!(!type_names(claim).contains(&"small".to_string()));
    assert_eq!(type_names(claim)[0], "medium");
    assert_eq!(claim.requests.get("cpu"), 2500);
    // 15 cpu fits gpu-xlarge alone (15.9) but not next to the daemon (14.9).
    with_daemon.reason("huge");
}

#[test]
fn a_daemonset_that_cannot_run_on_a_node_adds_no_overhead_to_it() {
    // The daemon selects arm64 nodes: amd64 small keeps its full 1.9 cpu.
    let out = scenario()
        .pools(vec![pool("default").amd64()])
        .daemonset(
            daemonset("arm-agent")
                .cpu("1")
                .node_selector(ARCH_LABEL, "arm64"),
        )
        .pod(pod("app").cpu("1500m"))
        .solve();
    let claim = out.claim_of("app");
    assert_eq!(type_names(claim)[0], "small");
    assert_eq!(claim.requests.get("cpu"), 1500);

    // The daemon does not tolerate the pool's taint, so it never runs there: small fits.
    let tainted = || {
        pool("default")
            .amd64()
            .taint("dedicated", "db", "NoSchedule")
    };
    let app = || {
        pod("app")
            .cpu("1500m")
            .tolerate("dedicated", "db", "NoSchedule")
    };
    let out = scenario()
        .pools(vec![tainted()])
        .daemonset(daemonset("untolerating").cpu("1"))
        .pod(app())
        .solve();
    let claim = out.claim_of("app");
    assert_eq!(type_names(claim)[0], "small");
    assert_eq!(claim.requests.get("cpu"), 1500);

    // Control: the same daemon tolerating the taint does count.
    let out = scenario()
        .pools(vec![tainted()])
        .daemonset(daemonset("tolerating").cpu("1").tolerate_key("dedicated"))
        .pod(app())
        .solve();
    let claim = out.claim_of("app");
    assert_eq!(type_names(claim)[0], "medium");
    assert_eq!(claim.requests.get("cpu"), 2500);
}

// ================================================================================================
// Node selection: nodeSelector, required and preferred node affinity
// ================================================================================================

#[test]
fn a_node_selector_on_a_well_known_label_narrows_the_types_and_an_impossible_one_fails() {
    let out = scenario()
        .pods([
            pod("arm").cpu("1").node_selector(ARCH_LABEL, "arm64"),
            pod("s390x").cpu("1").node_selector(ARCH_LABEL, "s390x"),
        ])
        .solve();
    assert_eq!(type_names(out.claim_of("arm")), vec!["arm-medium"]);
    let reason = out.reason("s390x");
    assert!(reason.contains(ARCH_LABEL), "{reason}");
}

#[test]
fn a_node_selector_on_a_custom_label_needs_a_pool_that_sets_it() {
    let selecting = || pod("blue-app").cpu("1").node_selector("team", "blue");
    let without = scenario().pod(selecting()).solve();
    let reason = without.reason("blue-app");
    assert!(reason.contains("team"), "{reason}");

    // "default" is tried first (same weight, name order) and cannot set the label.
    let with = scenario()
        .pools(vec![pool("default"), pool("zz-blue").label("team", "blue")])
        .pod(selecting())
        .solve();
    assert_eq!(with.claim_of("blue-app").node_pool, "zz-blue");
}

#[test]
fn required_node_affinity_uses_the_second_term_when_the_first_cannot_be_met() {
    let out = scenario()
        .pods([
            pod("or-terms").cpu("1").require_any(vec![
                vec![expr(ZONE_LABEL, "In", &["zone-x"])],
                vec![expr(ARCH_LABEL, "In", &["arm64"])],
            ]),
            pod("no-term-works").cpu("1").require_any(vec![
                vec![expr(ZONE_LABEL, "In", &["zone-x"])],
                vec![expr(ARCH_LABEL, "In", &["s390x"])],
            ]),
        ])
        .solve();
    assert_eq!(type_names(out.claim_of("or-terms")), vec!["arm-medium"]);
    out.reason("no-term-works");
}

#[test]
fn required_node_affinity_expressions_in_one_term_must_all_hold() {
    let out = scenario()
        .pods([
            pod("both").cpu("1").require_any(vec![vec![
                expr(ZONE_LABEL, "In", &["zone-b"]),
                expr(INSTANCE_TYPE_LABEL, "NotIn", &["small", "arm-medium"]),
            ]]),
            pod("contradiction").cpu("1").require_any(vec![vec![
                expr(ARCH_LABEL, "In", &["arm64"]),
                expr(INSTANCE_TYPE_LABEL, "In", &["large"]),
            ]]),
        ])
        .solve();
    let claim = out.claim_of("both");
    assert_eq!(out.zone_of("both").as_deref(), Some("zone-b"));
    assert_eq!(type_names(claim)[0], "medium");
    assert!(!type_names(claim).contains(&"small".to_string()));
    out.reason("contradiction");
}

#[test]
fn preferred_node_affinity_is_honoured_when_possible_and_relaxed_when_not() {
    let out = scenario()
        .pods([
            pod("likes-zone-b")
                .cpu("1")
                .prefer(10, vec![expr(ZONE_LABEL, "In", &["zone-b"])]),
            pod("likes-nowhere")
                .cpu("1")
                .prefer(10, vec![expr(ZONE_LABEL, "In", &["zone-x"])]),
        ])
        .solve();
    assert_eq!(out.zone_of("likes-zone-b").as_deref(), Some("zone-b"));
    out.assert_placed("likes-nowhere");
    if let Some(zone) = out.zone_of("likes-nowhere") {
        assert_ne!(zone, "zone-x");
    }
}

#[test]
fn the_heaviest_preferred_node_affinity_term_wins() {
    let out = scenario()
        .pod(
            pod("torn")
                .cpu("1")
                .prefer(1, vec![expr(ZONE_LABEL, "In", &["zone-a"])])
                .prefer(50, vec![expr(ZONE_LABEL, "In", &["zone-c"])]),
        )
        .solve();
    assert_eq!(out.zone_of("torn").as_deref(), Some("zone-c"));
}

// ================================================================================================
// Pod affinity and anti-affinity
// ================================================================================================

/// An existing node in `zone` with no room left, running one pod labelled `app=<app>`.
fn full_node(name: &str, zone: &str, app: &str) -> NodeBuilder {
    node(name)
        .zone(zone)
        .size("1", "2Gi")
        .running(pod(&format!("{name}-{app}")).app(app).cpu("1"))
}

#[test]
fn zonal_pod_affinity_puts_the_pod_in_the_zone_of_the_pods_it_follows() {
    let out = scenario()
        .node(full_node("db-node", "zone-b", "db"))
        .pods([
            pod("follows-db")
                .app("web")
                .cpu("1")
                .affinity(ZONE_LABEL, "app=db"),
            pod("follows-nothing")
                .app("web")
                .cpu("1")
                .affinity(ZONE_LABEL, "app=cache"),
        ])
        .solve();
    assert_eq!(out.zone_of("follows-db").as_deref(), Some("zone-b"));
    // No pod is app=cache and the pod is not one itself: nowhere satisfies the term.
    out.reason("follows-nothing");
}

#[test]
fn self_affinity_with_no_peer_yet_picks_one_zone_for_all_of_them() {
    let out = scenario()
        .pods((0..4).map(|i| {
            pod(&format!("flock-{i}"))
                .app("flock")
                .cpu("3")
                .affinity(ZONE_LABEL, "app=flock")
        }))
        .solve();
    out.assert_all_placed();
    let counts = out.zone_counts(&names("flock", 4));
    assert_eq!(counts.len(), 1, "{counts:?}");
}

#[test]
fn hostname_pod_affinity_shares_a_node_and_fails_when_that_node_is_full() {
    // "aaa-empty" comes first in node order and has room: only the affinity sends the pod on.
    let with_room = scenario()
        .node(node("aaa-empty").size("4", "8Gi"))
        .node(
            node("db-node")
                .size("4", "8Gi")
                .running(pod("db").app("db").cpu("1")),
        )
        .pod(pod("sidekick").cpu("1").affinity(HOSTNAME_LABEL, "app=db"))
        .solve();
    assert_eq!(
        with_room.placement("sidekick"),
        Placement::Node("db-node".to_string())
    );

    let full = scenario()
        .node(full_node("db-node", "zone-a", "db"))
        .pod(pod("sidekick").cpu("1").affinity(HOSTNAME_LABEL, "app=db"))
        .solve();
    // A new node cannot hold the db pod, so the term cannot be met anywhere.
    full.reason("sidekick");
}

#[test]
fn hostname_anti_affinity_puts_one_pod_per_node() {
    let out = scenario()
        .pods((0..3).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("100m")
                .anti_affinity(HOSTNAME_LABEL, "app=web")
        }))
        .solve();
    out.assert_all_placed();
    assert_eq!(out.claims().len(), 3);
    assert!(out.claims().iter().all(|c| c.pods.len() == 1));
}

#[test]
fn hostname_anti_affinity_keeps_a_pod_off_an_existing_node_with_a_matching_pod() {
    let out = scenario()
        .node(
            node("web-node")
                .size("4", "8Gi")
                .running(pod("web-old").app("web").cpu("100m")),
        )
        .pods([
            pod("web-new")
                .app("web")
                .cpu("100m")
                .anti_affinity(HOSTNAME_LABEL, "app=web"),
            pod("api").app("api").cpu("100m"),
        ])
        .solve();
    assert!(matches!(out.placement("web-new"), Placement::Claim(_)));
    // Control: an unconstrained pod does use the node's room.
    assert_eq!(
        out.placement("api"),
        Placement::Node("web-node".to_string())
    );
}

#[test]
fn anti_affinity_only_counts_pods_in_the_pod_s_own_namespace_by_default() {
    let run = |namespace: &str| {
        scenario()
            .node(
                node("shared")
                    .size("4", "8Gi")
                    .running(pod("web-old").namespace(namespace).app("web").cpu("100m")),
            )
            .pod(
                pod("web-new")
                    .app("web")
                    .cpu("100m")
                    .anti_affinity(HOSTNAME_LABEL, "app=web"),
            )
            .solve()
    };
    // A web pod in another namespace does not repel it: the node's room is used.
    assert_eq!(
        run("other").placement("web-new"),
        Placement::Node("shared".to_string())
    );
    // The same pod in its own namespace does.
    assert!(matches!(
        run("default").placement("web-new"),
        Placement::Claim(_)
    ));
}

/// Upstream's `makePreferencePods`: the heaviest preferred anti-affinity term (zonal, weight 10)
/// is relaxed first and the hostname term (weight 1) kept, so each pod gets its own node.
#[test]
fn preferred_anti_affinity_relaxes_the_heaviest_term_first_and_keeps_the_satisfiable_one() {
    let out = scenario()
        .pods((0..5).map(|i| {
            pod(&format!("pref-{i}"))
                .app("nginx")
                .cpu("100m")
                .prefer(1, vec![expr(ZONE_LABEL, "In", &["zone-a"])])
                .anti_preference(10, ZONE_LABEL, "app=nginx")
                .anti_preference(1, HOSTNAME_LABEL, "app=nginx")
        }))
        .solve();
    assert!(out.results.unschedulable.is_empty(), "{:#?}", out.results);
    assert_eq!(out.results.new_claims.len(), 5, "{:#?}", out.results);
}

#[test]
fn zonal_anti_affinity_allows_one_pod_per_zone() {
    let out = scenario()
        .pods((0..4).map(|i| {
            pod(&format!("zonal-{i}"))
                .app("zonal")
                .cpu("100m")
                .anti_affinity(ZONE_LABEL, "app=zonal")
        }))
        .solve();
    let placed: Vec<String> = names("zonal", 4)
        .into_iter()
        .filter(|p| out.is_placed(p))
        .collect();
    assert_eq!(placed.len(), 3, "{:#?}", out.results);
    let zones = out.zone_counts(&placed);
    assert_eq!(zones.len(), 3, "{zones:?}");
    assert_eq!(out.results.unschedulable.len(), 1);
}

#[test]
fn an_existing_pod_s_anti_affinity_keeps_a_matching_new_pod_off_its_node() {
    let guarded = || {
        node("guarded").size("4", "8Gi").running(
            pod("loner")
                .app("loner")
                .cpu("100m")
                .anti_affinity(HOSTNAME_LABEL, "app=web"),
        )
    };
    let out = scenario()
        .node(guarded())
        .pods([
            pod("web").app("web").cpu("100m"),
            pod("api").app("api").cpu("100m"),
        ])
        .solve();
    assert!(
        matches!(out.placement("web"), Placement::Claim(_)),
        "{:?}",
        out.placement("web")
    );
    assert_eq!(out.placement("api"), Placement::Node("guarded".to_string()));
}

#[test]
fn an_existing_pod_s_zonal_anti_affinity_keeps_matching_new_pods_out_of_its_zone() {
    let out = scenario()
        .node(
            node("guarded").zone("zone-b").size("1", "2Gi").running(
                pod("loner")
                    .app("loner")
                    .cpu("1")
                    .anti_affinity(ZONE_LABEL, "app=web"),
            ),
        )
        .pods((0..6).map(|i| pod(&format!("web-{i}")).app("web").cpu("3")))
        .solve();
    out.assert_all_placed();
    for p in names("web", 6) {
        let zone = out.zone_of(&p);
        assert_ne!(
            zone.as_deref(),
            Some("zone-b"),
            "{p} landed in zone-b\n{:#?}",
            out.results
        );
        // The claim must not be able to launch in zone-b either.
        if let Placement::Claim(i) = out.placement(&p) {
            let claim = &out.claims()[i];
            let zones = claim_values(claim, ZONE_LABEL);
            let excluded = claim.requirements.iter().any(|r| {
                r.key == ZONE_LABEL
                    && r.operator == Operator::NotIn
                    && r.values.contains(&"zone-b".to_string())
            });
            assert!(
                excluded || zones.is_some_and(|z| !z.contains("zone-b")),
                "{p}'s claim may launch in zone-b: {claim:?}"
            );
        }
    }
}

// ================================================================================================
// Topology spread
// ================================================================================================

#[test]
fn zonal_spread_with_max_skew_one_puts_two_of_six_pods_in_each_of_three_zones() {
    let out = scenario()
        .pods((0..6).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("1")
                .zone_spread(1, "app=web")
        }))
        .solve();
    out.assert_all_placed();
    let counts = out.zone_counts(&names("web", 6));
    assert_eq!(
        counts,
        BTreeMap::from([
            ("zone-a".to_string(), 2),
            ("zone-b".to_string(), 2),
            ("zone-c".to_string(), 2)
        ])
    );
}

/// Each new claim's zone is chosen among every zone its types offer (the scan for them stops
/// only once all the permitted ones are found): a loose spread still puts the next pod in the
/// emptiest zone, not in the first zone the types list.
#[test]
fn a_loose_zonal_spread_still_puts_each_new_node_in_the_emptiest_zone() {
    let out = scenario()
        .pods((0..3).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("1")
                .zone_spread(3, "app=web")
                .anti_affinity(HOSTNAME_LABEL, "app=web")
        }))
        .solve();
    out.assert_all_placed();
    let counts = out.zone_counts(&names("web", 3));
    assert_eq!(
        counts,
        BTreeMap::from([
            ("zone-a".to_string(), 1),
            ("zone-b".to_string(), 1),
            ("zone-c".to_string(), 1)
        ])
    );
}

#[test]
fn zonal_spread_fails_when_the_only_launchable_zone_already_has_too_many() {
    // zone-a already has one web pod, zones b and c none (their nodes are full), and the pool
    // can only launch in zone-a: one more there gives skew 2.
    let base = |max_skew: i32| {
        scenario()
            .pools(vec![pool("default").requirement(
                ZONE_LABEL,
                "In",
                &["zone-a"],
            )])
            .node(full_node("node-a", "zone-a", "web"))
            .node(full_node("node-b", "zone-b", "filler"))
            .node(full_node("node-c", "zone-c", "filler"))
            .pod(
                pod("web-new")
                    .app("web")
                    .cpu("1")
                    .zone_spread(max_skew, "app=web"),
            )
    };
    let reason = base(1).solve().reason("web-new");
    assert!(
        reason.contains(ZONE_LABEL) || reason.contains("spread"),
        "{reason}"
    );
    let relaxed = base(2).solve();
    assert_eq!(relaxed.zone_of("web-new").as_deref(), Some("zone-a"));
}

#[test]
fn hostname_spread_with_max_skew_one_spreads_over_nodes() {
    let out = scenario()
        .pods((0..4).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("100m")
                .spread(Spread::hostname(1, "app=web"))
        }))
        .solve();
    out.assert_all_placed();
    assert_eq!(out.claims().len(), 4, "{:#?}", out.results);
}

#[test]
fn zonal_spread_counts_every_zone_any_required_node_affinity_term_allows() {
    // zone-a already runs one web pod on a full node; the pool launches only in zone-c. The pods
    // may run in zone-a OR zone-c, so (nodeAffinityPolicy Honor) both zones are domains: zone-c
    // may reach 2 (skew 1 against zone-a's 1), and the third pod cannot be placed.
    let run = |terms: Vec<Vec<Value>>| {
        scenario()
            .pools(vec![pool("default").requirement(
                ZONE_LABEL,
                "In",
                &["zone-c"],
            )])
            .node(full_node("node-a", "zone-a", "web"))
            .pods((0..3).map(|i| {
                pod(&format!("web-{i}"))
                    .app("web")
                    .cpu("1")
                    .require_any(terms.clone())
                    .zone_spread(1, "app=web")
            }))
            .solve()
    };
    let placed = |out: &Outcome| names("web", 3).iter().filter(|p| out.is_placed(p)).count();
    // One term allowing both zones.
    let one_term = run(vec![vec![expr(ZONE_LABEL, "In", &["zone-a", "zone-c"])]]);
    assert_eq!(placed(&one_term), 2, "{:#?}", one_term.results);
    // The same zones as two OR terms: kube-scheduler counts both zones just the same.
    let two_terms = run(vec![
        vec![expr(ZONE_LABEL, "In", &["zone-a"])],
        vec![expr(ZONE_LABEL, "In", &["zone-c"])],
    ]);
    assert_eq!(placed(&two_terms), 2, "{:#?}", two_terms.results);
}

#[test]
fn zonal_spread_ignores_pods_on_nodes_the_pod_could_not_use() {
    // nodeAffinityPolicy Honor (the default): a web pod on an arm64 node does not count for
    // amd64-only web pods. zone-b holds an eligible (amd64, full) node with no web pod, so its
    // count is 0, and two new web pods must not both go to zone-a.
    let out = scenario()
        .pools(vec![pool("default").requirement(
            ZONE_LABEL,
            "In",
            &["zone-a", "zone-b"],
        )])
        .node(full_node("arm-b", "zone-b", "web").label(ARCH_LABEL, "arm64"))
        .node(full_node("amd-b", "zone-b", "filler"))
        .pods((0..2).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("1")
                .node_selector(ARCH_LABEL, "amd64")
                .zone_spread(1, "app=web")
        }))
        .solve();
    out.assert_all_placed();
    assert_eq!(
        out.zone_counts(&names("web", 2)),
        BTreeMap::from([("zone-a".to_string(), 1), ("zone-b".to_string(), 1)]),
        "{:#?}",
        out.results
    );
}

#[test]
fn min_domains_counts_missing_domains_as_empty() {
    // The pool launches only in zone-a. With minDomains 3 and one eligible domain the global
    // minimum is 0, so zone-a may hold maxSkew = 1 pod; without it both fit in zone-a.
    let run = |spread: Spread| {
        scenario()
            .pools(vec![pool("default").requirement(
                ZONE_LABEL,
                "In",
                &["zone-a"],
            )])
            .pods((0..2).map(|i| {
                pod(&format!("web-{i}"))
                    .app("web")
                    .cpu("3")
                    .spread(spread.clone())
            }))
            .solve()
    };
    let plain = run(Spread::zone(1, "app=web"));
    plain.assert_all_placed();

    let min_domains = run(Spread::zone(1, "app=web").min_domains(3));
    let placed = names("web", 2)
        .iter()
        .filter(|p| min_domains.is_placed(p))
        .count();
    assert_eq!(placed, 1, "{:#?}", min_domains.results);
}

#[test]
fn schedule_anyway_spread_is_honoured_when_possible_and_relaxed_when_not() {
    let honoured = scenario()
        .pods((0..3).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("3")
                .spread(Spread::zone(1, "app=web").schedule_anyway())
        }))
        .solve();
    honoured.assert_all_placed();
    assert_eq!(honoured.zone_counts(&names("web", 3)).len(), 3);

    let relaxed = scenario()
        .pools(vec![pool("default").requirement(
            ZONE_LABEL,
            "In",
            &["zone-a"],
        )])
        .pods((0..2).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("3")
                .spread(Spread::zone(1, "app=web").min_domains(3).schedule_anyway())
        }))
        .solve();
    relaxed.assert_all_placed();
}

#[test]
fn node_affinity_policy_honor_spreads_only_over_zones_the_pod_may_use() {
    let run = |policy: &str| {
        scenario()
            .pods((0..3).map(|i| {
                pod(&format!("web-{i}"))
                    .app("web")
                    .cpu("1")
                    .node_selector(ZONE_LABEL, "zone-a")
                    .spread(Spread::zone(1, "app=web").node_affinity_policy(policy))
            }))
            .solve()
    };
    let honor = run("Honor");
    honor.assert_all_placed();
    assert_eq!(
        honor.zone_counts(&names("web", 3)),
        BTreeMap::from([("zone-a".to_string(), 3)])
    );
    // Ignore: zones b and c count (empty) although the pods cannot go there, so zone-a may
    // take one pod only.
    let ignore = run("Ignore");
    let placed = names("web", 3)
        .iter()
        .filter(|p| ignore.is_placed(p))
        .count();
    assert_eq!(placed, 1, "{:#?}", ignore.results);
}

/// Review B3: with nodeTaintsPolicy Honor, a zone only a tainted NodePool offers is no domain
/// for pods that do not tolerate the taint. Counted as an empty domain, it capped the skew and
/// left the third of three zone-spread pods unschedulable.
#[test]
fn node_taints_policy_honor_ignores_zones_only_an_untolerated_pool_offers() {
    let run = |policy: &str| {
        scenario()
            .pools(vec![
                pool("general").requirement(ZONE_LABEL, "In", &["zone-a", "zone-b"]),
                pool("gpu")
                    .requirement(ZONE_LABEL, "In", &["zone-c"])
                    .taint("nvidia.com/gpu", "true", "NoSchedule"),
            ])
            .pods((0..3).map(|i| {
                pod(&format!("web-{i}"))
                    .app("web")
                    .cpu("1")
                    .spread(Spread::zone(1, "app=web").node_taints_policy(policy))
            }))
            .solve()
    };
    let honor = run("Honor");
    honor.assert_all_placed();
    let counts = honor.zone_counts(&names("web", 3));
    assert_eq!(counts.values().sum::<usize>(), 3);
    assert!(!counts.contains_key("zone-c"), "{counts:?}");
    // Ignore (the default): zone-c counts as an empty domain the pods can never reach.
    let ignore = run("Ignore");
    let placed = names("web", 3)
        .iter()
        .filter(|p| ignore.is_placed(p))
        .count();
    assert_eq!(placed, 2, "{:#?}", ignore.results);
}

#[test]
fn match_label_keys_spreads_each_revision_on_its_own() {
    // zone-a already runs two v1 pods on a full node. Three v2 pods spread with
    // matchLabelKeys [version] only count v2 pods, so one of them lands in zone-a; spreading
    // over every app=web pod would keep them all out of zone-a.
    let run = |keys: &[&str]| {
        let mut spread = Spread::zone(1, "app=web");
        if !keys.is_empty() {
            spread = spread.match_label_keys(keys);
        }
        scenario()
            .node(
                node("old")
                    .zone("zone-a")
                    .size("2", "4Gi")
                    .running(pod("v1-a").app("web").label("version", "v1").cpu("1"))
                    .running(pod("v1-b").app("web").label("version", "v1").cpu("1")),
            )
            .pods((0..3).map(|i| {
                pod(&format!("v2-{i}"))
                    .app("web")
                    .label("version", "v2")
                    .cpu("1")
                    .spread(spread.clone())
            }))
            .solve()
    };
    let per_revision = run(&["version"]);
    per_revision.assert_all_placed();
    let counts = per_revision.zone_counts(&names("v2", 3));
    assert_eq!(counts.len(), 3, "{counts:?}");

    let all_revisions = run(&[]);
    all_revisions.assert_all_placed();
    let counts = all_revisions.zone_counts(&names("v2", 3));
    assert!(!counts.contains_key("zone-a"), "{counts:?}");
}

// ================================================================================================
// Taints and tolerations
// ================================================================================================

#[test]
fn a_pool_taint_admits_pods_that_tolerate_it_and_names_itself_to_pods_that_do_not() {
    let out = scenario()
        .pools(vec![pool("gpu").taint(
            "nvidia.com/gpu",
            "true",
            "NoSchedule",
        )])
        .pods([
            pod("tolerant")
                .cpu("1")
                .tolerate("nvidia.com/gpu", "true", "NoSchedule"),
            pod("tolerates-any-value")
                .cpu("1")
                .tolerate_key("nvidia.com/gpu"),
            pod("intolerant").cpu("1"),
            pod("wrong-value")
                .cpu("1")
                .tolerate("nvidia.com/gpu", "false", "NoSchedule"),
        ])
        .solve();
    out.assert_placed("tolerant");
    out.assert_placed("tolerates-any-value");
    for p in ["intolerant", "wrong-value"] {
        let reason = out.reason(p);
        assert!(reason.contains("\"gpu\""), "{reason}");
        assert!(
            reason.contains("nvidia.com/gpu=true:NoSchedule"),
            "{reason}"
        );
    }
}

#[test]
fn a_prefer_no_schedule_taint_does_not_block_a_pod() {
    let out = scenario()
        .pools(vec![pool("soft").taint(
            "spot-ish",
            "true",
            "PreferNoSchedule",
        )])
        .pod(pod("anyone").cpu("1"))
        .solve();
    out.assert_placed("anyone");
}

#[test]
fn an_existing_node_s_taint_keeps_intolerant_pods_off_it() {
    let out = scenario()
        .node(
            node("tainted")
                .size("4", "8Gi")
                .taint("dedicated", "db", TaintEffect::NoSchedule),
        )
        .pods([
            pod("db").cpu("1").tolerate("dedicated", "db", "NoSchedule"),
            pod("web").cpu("1"),
        ])
        .solve();
    assert_eq!(out.placement("db"), Placement::Node("tainted".to_string()));
    assert!(matches!(out.placement("web"), Placement::Claim(_)));
}

/// Review B4: upstream treats `PreferNoSchedule` taints as hard until its last relaxation step,
/// so they steer pods to an untainted NodePool (even a lighter one) and away from tainted
/// nodes; only when nothing else can take a pod does it land on the tainted capacity. Before,
/// such taints were ignored and the heavier tainted pool took every pod.
#[test]
fn prefer_no_schedule_taints_steer_pods_to_untainted_capacity_and_give_way_last() {
    let tainted = || {
        pool("spot-first")
            .weight(100)
            .taint("example.com/avoid", "yes", "PreferNoSchedule")
    };
    let out = scenario()
        .pools(vec![tainted(), pool("plain").weight(1)])
        .pod(pod("web").cpu("1"))
        .solve();
    assert_eq!(out.claim_of("web").node_pool, "plain");

    // Nothing untainted can take it: the last step tolerates the taint.
    let out = scenario()
        .pools(vec![tainted()])
        .pod(pod("web").cpu("1"))
        .solve();
    assert_eq!(out.claim_of("web").node_pool, "spot-first");

    // A tainted existing node is passed over while a NodePool can take the pod untainted.
    let out = scenario()
        .pools(vec![tainted(), pool("plain").weight(1)])
        .node(node("avoided").size("4", "8Gi").taint(
            "example.com/avoid",
            "yes",
            TaintEffect::PreferNoSchedule,
        ))
        .pod(pod("web").cpu("1"))
        .solve();
    assert_eq!(out.claim_of("web").node_pool, "plain");
}

// ================================================================================================
// Host ports
// ================================================================================================

#[test]
fn two_pods_with_the_same_host_port_need_two_nodes() {
    let same = scenario()
        .pods([
            pod("proxy-0").cpu("100m").host_port(8080),
            pod("proxy-1").cpu("100m").host_port(8080),
        ])
        .solve();
    same.assert_all_placed();
    assert_eq!(same.claims().len(), 2, "{:#?}", same.results);

    let different = scenario()
        .pods([
            pod("proxy-0").cpu("100m").host_port(8080),
            pod("proxy-1").cpu("100m").host_port(9090),
        ])
        .solve();
    different.assert_all_placed();
    assert_eq!(different.claims().len(), 1, "{:#?}", different.results);
}

#[test]
fn a_host_port_taken_on_an_existing_node_sends_the_pod_elsewhere() {
    let out = scenario()
        .node(
            node("busy")
                .size("4", "8Gi")
                .running(pod("old-proxy").cpu("100m").host_port(8080)),
        )
        .pods([
            pod("new-proxy").cpu("100m").host_port(8080),
            pod("other").cpu("100m").host_port(9090),
        ])
        .solve();
    assert!(matches!(out.placement("new-proxy"), Placement::Claim(_)));
    assert_eq!(out.placement("other"), Placement::Node("busy".to_string()));
}

// ================================================================================================
// Volume topology
// ================================================================================================

#[test]
fn a_pod_with_a_zonal_volume_lands_in_that_zone_and_fails_when_it_must_be_elsewhere() {
    let out = scenario()
        .pods([
            pod("with-volume").cpu("1").volume_zone("zone-c"),
            pod("conflicted")
                .cpu("1")
                .volume_zone("zone-c")
                .node_selector(ZONE_LABEL, "zone-a"),
        ])
        .solve();
    assert_eq!(out.zone_of("with-volume").as_deref(), Some("zone-c"));
    out.reason("conflicted");
}

#[test]
fn a_pod_with_volume_alternatives_uses_one_that_can_be_met() {
    // A StorageClass allowing zone-x (not offered) or zone-b.
    let mut builder = pod("alternatives").cpu("1");
    builder.volume_terms = vec![
        Requirements::from_api(&[ApiRequirement::new(ZONE_LABEL, Operator::In, &["zone-x"])]),
        Requirements::from_api(&[ApiRequirement::new(ZONE_LABEL, Operator::In, &["zone-b"])]),
    ];
    let out = scenario().pod(builder).solve();
    assert_eq!(out.zone_of("alternatives").as_deref(), Some("zone-b"));
}

// ================================================================================================
// Placement order
// ================================================================================================

#[test]
fn an_existing_node_is_used_first_then_a_planned_claim_then_a_new_claim() {
    let out = scenario()
        .node(node("existing").size("2", "4Gi"))
        .pods([
            // Queue order is cpu descending: first (1.5 cpu) takes the existing node, then
            // second (1 cpu) does not fit there and opens a claim, which third (1 cpu) joins.
            pod("first").cpu("1500m"),
            pod("second").cpu("1"),
            pod("third").cpu("1"),
        ])
        .solve();
    assert_eq!(
        out.placement("first"),
        Placement::Node("existing".to_string())
    );
    assert_eq!(out.placement("second"), Placement::Claim(0));
    assert_eq!(out.placement("third"), Placement::Claim(0));
    assert_eq!(out.claims().len(), 1);
}

#[test]
fn a_deleting_node_takes_no_new_pods() {
    let out = scenario()
        .node(node("leaving").size("4", "8Gi").deleting())
        .pod(pod("app").cpu("1"))
        .solve();
    assert!(matches!(out.placement("app"), Placement::Claim(_)));
}

#[test]
fn the_highest_weight_pool_is_tried_first_even_when_another_is_cheaper() {
    let pools = || {
        vec![
            pool("cheap").spot_only(),
            pool("preferred")
                .weight(50)
                .on_demand_only()
                .taint("team", "a", "NoSchedule"),
        ]
    };
    // Each pod alone: with both in one run, the second would join the first one's claim
    // (planned claims come before new ones).
    let out = scenario()
        .pools(pools())
        .pod(pod("team-a").cpu("1").tolerate("team", "a", "NoSchedule"))
        .solve();
    assert_eq!(out.claim_of("team-a").node_pool, "preferred");
    assert_eq!(
        claim_values(out.claim_of("team-a"), CAPACITY_TYPE_LABEL),
        Some(set(&["on-demand"]))
    );
    // A pod that does not tolerate the preferred pool's taint falls back to the other one.
    let out = scenario()
        .pools(pools())
        .pod(pod("anyone").cpu("1"))
        .solve();
    assert_eq!(out.claim_of("anyone").node_pool, "cheap");
}

#[test]
fn equal_weight_pools_are_tried_in_an_order_that_does_not_depend_on_input_order() {
    let run = |pools: Vec<PoolBuilder>| {
        scenario()
            .pools(pools)
            .pod(pod("app").cpu("1"))
            .solve()
            .claim_of("app")
            .node_pool
            .clone()
    };
    let forward = run(vec![pool("a-pool").weight(10), pool("b-pool").weight(10)]);
    let backward = run(vec![pool("b-pool").weight(10), pool("a-pool").weight(10)]);
    assert_eq!(forward, backward);
    // A higher weight still beats the name order either way.
    let heavier = run(vec![pool("a-pool").weight(10), pool("b-pool").weight(11)]);
    assert_eq!(heavier, "b-pool");
    let heavier = run(vec![pool("a-pool").weight(11), pool("b-pool").weight(10)]);
    assert_eq!(heavier, "a-pool");
}

#[test]
fn a_cpu_limit_caps_the_capacity_of_the_nodes_a_pool_launches() {
    // Five 3-cpu pods: two per large node (8 cpu capacity). A 16-cpu limit allows two large
    // nodes; the fifth pod would need a third.
    let out = scenario()
        .pools(vec![
            pool("default")
                .amd64()
                .requirement(INSTANCE_TYPE_LABEL, "NotIn", &["gpu-xlarge"])
                .limit("cpu", "16"),
        ])
        .pods((0..5).map(|i| pod(&format!("app-{i}")).cpu("3")))
        .solve();
    assert_eq!(out.results.unschedulable.len(), 1, "{:#?}", out.results);
    let reason = &out.results.unschedulable[0].reason;
    assert!(reason.contains("limit"), "{reason}");
    let catalog = standard_catalog();
    let worst: i64 = out
        .claims()
        .iter()
        .map(|c| {
            c.instance_types
                .iter()
                .map(|t| catalog.get(t).expect("known type").capacity.get("cpu"))
                .max()
                .unwrap_or(0)
        })
        .sum();
    assert!(worst <= 16_000, "claims may launch {worst}m cpu");
}

#[test]
fn a_limit_counts_the_capacity_of_existing_nodes_in_the_pool() {
    let out = scenario()
        .pools(vec![pool("default").amd64().limit("cpu", "10")])
        .node(
            node("owned")
                .in_pool("default")
                .size("8", "16Gi")
                .running(pod("resident").cpu("8")),
        )
        .pods([pod("small-app").cpu("1"), pod("big-app").cpu("3")])
        .solve();
    // 8 cpu are in use by the pool's node: a small (2 cpu) node fits under 10, a medium does not.
    assert_eq!(type_names(out.claim_of("small-app")), vec!["small"]);
    out.reason("big-app");
}

#[test]
fn a_nodes_limit_caps_how_many_nodes_a_pool_launches() {
    let out = scenario()
        .pools(vec![pool("default").limit("nodes", "2")])
        .pods((0..3).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu("100m")
                .anti_affinity(HOSTNAME_LABEL, "app=web")
        }))
        .solve();
    assert_eq!(out.claims().len(), 2);
    assert_eq!(out.results.unschedulable.len(), 1);
    let reason = &out.results.unschedulable[0].reason;
    assert!(reason.contains("nodes"), "{reason}");
}

// ================================================================================================
// minValues
// ================================================================================================

#[test]
fn strict_min_values_fails_a_pod_when_too_few_types_fit_it() {
    let pools = || {
        vec![pool("flexible").requirement_with_min_values(INSTANCE_TYPE_LABEL, "Exists", &[], 2)]
    };
    // Alone (a planned claim it could join is the next test's business).
    let out = scenario()
        .pools(pools())
        .pod(pod("flexible").cpu("3"))
        .solve();
    assert!(type_names(out.claim_of("flexible")).len() >= 2);
    let out = scenario()
        .pools(pools())
        .pod(pod("only-gpu-fits").cpu("12"))
        .solve();
    let reason = out.reason("only-gpu-fits");
    assert!(reason.contains("minValues"), "{reason}");

    let best_effort = scenario()
        .pools(pools())
        .min_values_policy(MinValuesPolicy::BestEffort)
        .pod(pod("only-gpu-fits").cpu("12"))
        .solve();
    assert_eq!(
        type_names(best_effort.claim_of("only-gpu-fits")),
        vec!["gpu-xlarge"]
    );
}

#[test]
fn min_values_keeps_a_claim_from_narrowing_below_the_minimum() {
    // Two 3-cpu pods could share a large node, but only large and gpu-xlarge could hold both,
    // and minValues 3 needs three types: the second pod gets its own node.
    let out = scenario()
        .pools(vec![pool("flexible").requirement_with_min_values(
            INSTANCE_TYPE_LABEL,
            "Exists",
            &[],
            3,
        )])
        .pods([pod("a").cpu("3"), pod("b").cpu("3")])
        .solve();
    out.assert_all_placed();
    for claim in out.claims() {
        assert!(type_names(claim).len() >= 3, "{claim:?}");
    }
}

// ================================================================================================
// Capacity types and offerings
// ================================================================================================

/// The run prices alike claims once: claims of one pool with the same instance types but
/// different capacity-type requirements must still each get their own offerings' price.
#[test]
fn claims_alike_but_for_their_capacity_type_are_each_priced_by_their_own_offerings() {
    let out = scenario()
        .pod(
            pod("spot-app")
                .cpu("1")
                .node_selector(CAPACITY_TYPE_LABEL, "spot"),
        )
        .pod(
            pod("od-app")
                .cpu("1")
                .node_selector(CAPACITY_TYPE_LABEL, "on-demand"),
        )
        .solve();
    out.assert_all_placed();
    let (spot, on_demand) = (out.claim_of("spot-app"), out.claim_of("od-app"));
    assert_eq!(type_names(spot), type_names(on_demand));
    assert_eq!(
        claim_values(spot, CAPACITY_TYPE_LABEL),
        Some(set(&["spot"]))
    );
    assert_eq!(
        claim_values(on_demand, CAPACITY_TYPE_LABEL),
        Some(set(&["on-demand"]))
    );
    assert!((spot.price - 0.04).abs() < 1e-9, "{}", spot.price);
    assert!((on_demand.price - 0.10).abs() < 1e-9, "{}", on_demand.price);
}

#[test]
fn a_spot_only_pool_launches_spot_at_the_spot_price() {
    let out = scenario()
        .pools(vec![pool("spot").spot_only().amd64()])
        .pod(pod("app").cpu("1"))
        .solve();
    let claim = out.claim_of("app");
    assert_eq!(
        claim_values(claim, CAPACITY_TYPE_LABEL),
        Some(BTreeSet::from(["spot".to_string()]))
    );
    assert_eq!(type_names(claim)[0], "small");
    assert!((claim.price - 0.04).abs() < 1e-9, "{}", claim.price);

    let on_demand = scenario()
        .pools(vec![pool("od").on_demand_only().amd64()])
        .pod(pod("app").cpu("1"))
        .solve();
    assert!((on_demand.claim_of("app").price - 0.10).abs() < 1e-9);
}

#[test]
fn unavailable_offerings_are_not_used() {
    let mut types = standard_types();
    for zone in ZONES {
        types[0] = types[0].clone().unavailable(zone, CapacityType::Spot);
    }
    let out = scenario()
        .catalog(catalog(types))
        .pools(vec![pool("spot").spot_only().amd64()])
        .pod(pod("app").cpu("1"))
        .solve();
    let types = type_names(out.claim_of("app"));
    assert!(!types.contains(&"small".to_string()), "{types:?}");
    assert_eq!(types[0], "medium");

    // Nothing offers spot in zone-a: a spot-only pod pinned there cannot be placed.
    let none_in_zone_a: Vec<TypeBuilder> = standard_types()
        .into_iter()
        .map(|t| t.unavailable("zone-a", CapacityType::Spot))
        .collect();
    let out = scenario()
        .catalog(catalog(none_in_zone_a))
        .pools(vec![pool("spot").spot_only()])
        .pods([
            pod("zone-a-app")
                .cpu("1")
                .node_selector(ZONE_LABEL, "zone-a"),
            pod("zone-b-app")
                .cpu("1")
                .node_selector(ZONE_LABEL, "zone-b"),
        ])
        .solve();
    out.reason("zone-a-app");
    out.assert_placed("zone-b-app");
}

// ================================================================================================
// Price ordering
// ================================================================================================

/// The cheapest available offering of `it` the claim's zone and capacity-type requirements allow.
fn offering_price(claim: &PlannedClaim, it: &InstanceType) -> Option<f64> {
    let zones = claim_values(claim, ZONE_LABEL);
    let capacity_types = claim_values(claim, CAPACITY_TYPE_LABEL);
    it.offerings
        .iter()
        .filter(|o| o.available)
        .filter(|o| zones.as_ref().is_none_or(|z| z.contains(&o.zone)))
        .filter(|o| {
            capacity_types
                .as_ref()
                .is_none_or(|c| c.contains(o.capacity_type.label()))
        })
        .map(|o| o.price)
        .min_by(f64::total_cmp)
}

#[test]
fn a_claim_lists_instance_types_cheapest_first_starting_with_the_cheapest_that_fits_all_its_pods() {
    let catalog = standard_catalog();
    let out = scenario()
        .pools(vec![pool("default").amd64()])
        .pods([pod("a").cpu("1500m"), pod("b").cpu("1500m")])
        .solve();
    // Both pods share one claim; small (1.9 cpu) cannot hold 3 cpu, so medium comes first.
    assert_eq!(out.claims().len(), 1, "{:#?}", out.results);
    let claim = &out.claims()[0];
    let types = type_names(claim);
    assert_eq!(types[0], "medium");
    assert!(!types.contains(&"small".to_string()));
    let prices: Vec<f64> = types
        .iter()
        .map(|t| offering_price(claim, catalog.get(t).expect("known type")).expect("offered"))
        .collect();
    assert!(
        prices.windows(2).all(|w| w[0] <= w[1]),
        "{types:?} {prices:?}"
    );
    assert!((claim.price - prices[0]).abs() < 1e-9);

    let single = scenario()
        .pools(vec![pool("default").amd64()])
        .pod(pod("a").cpu("1500m"))
        .solve();
    assert_eq!(type_names(single.claim_of("a"))[0], "small");
}

#[test]
fn a_claim_lists_the_instance_types_of_its_own_nodepool() {
    // Two pools whose compatible-type lists differ; each pod's claim ends up with the cheapest
    // (first) type of its own pool. The types listed must come from that pool.
    let out = scenario()
        .pools(vec![
            pool("amd").requirement(ARCH_LABEL, "In", &["amd64"]),
            pool("arm").requirement(ARCH_LABEL, "In", &["arm64"]),
        ])
        .pods([
            pod("amd-app")
                .cpu("1")
                .node_selector(INSTANCE_TYPE_LABEL, "small"),
            pod("arm-app").cpu("1").node_selector(ARCH_LABEL, "arm64"),
        ])
        .solve();
    assert_eq!(out.claim_of("amd-app").node_pool, "amd");
    assert_eq!(type_names(out.claim_of("amd-app")), vec!["small"]);
    assert_eq!(out.claim_of("arm-app").node_pool, "arm");
    assert_eq!(
        type_names(out.claim_of("arm-app")),
        vec!["arm-medium"],
        "{:#?}",
        out.results
    );
}

#[test]
fn a_claim_lists_at_most_instance_types_max_types() {
    let mut s = scenario().pod(pod("app").cpu("100m"));
    s.options.instance_types_max = 2;
    let out = s.solve();
    assert_eq!(
        type_names(out.claim_of("app")),
        vec!["small".to_string(), "arm-medium".to_string()]
    );
}

// ================================================================================================
// Reasons
// ================================================================================================

#[test]
fn an_unschedulable_pod_gets_a_readable_reason_for_every_nodepool() {
    let out = scenario()
        .pools(vec![
            pool("tainted").taint("dedicated", "db", "NoSchedule"),
            pool("arm").requirement(ARCH_LABEL, "In", &["arm64"]),
        ])
        .pods([
            pod("amd-app").cpu("1").node_selector(ARCH_LABEL, "amd64"),
            pod("gigantic")
                .cpu("64")
                .tolerate("dedicated", "db", "NoSchedule"),
        ])
        .solve();
    let reason = out.reason("amd-app");
    assert!(reason.contains("NodePool \"tainted\""), "{reason}");
    assert!(reason.contains("dedicated=db:NoSchedule"), "{reason}");
    assert!(reason.contains("NodePool \"arm\""), "{reason}");
    assert!(reason.contains(ARCH_LABEL), "{reason}");

    let reason = out.reason("gigantic");
    assert!(reason.contains("NodePool \"tainted\""), "{reason}");
    assert!(reason.contains("NodePool \"arm\""), "{reason}");
    assert!(reason.contains("cpu"), "{reason}");
}

#[test]
fn a_run_with_no_nodepools_says_so() {
    let mut s = scenario().pod(pod("app").cpu("1"));
    s.pools.clear();
    let reason = s.solve().reason("app");
    assert!(reason.to_lowercase().contains("nodepool"), "{reason}");
}

// ================================================================================================
// Determinism
// ================================================================================================

#[test]
fn the_same_input_gives_the_same_plan() {
    let s = scenario()
        .node(full_node("db-node", "zone-b", "db"))
        .pods((0..12).map(|i| {
            pod(&format!("web-{i}"))
                .app("web")
                .cpu(if i % 2 == 0 { "700m" } else { "1300m" })
                .zone_spread(1, "app=web")
        }))
        .pods((0..4).map(|i| {
            pod(&format!("cache-{i}"))
                .app("cache")
                .cpu("500m")
                .anti_affinity(HOSTNAME_LABEL, "app=cache")
        }));
    assert_eq!(s.solve().results, s.solve().results);
}

/// The value a NodeClaim carries for a custom requirement that does not pin one (review C1):
/// an `In` set's first value, else the smallest integer the requirement allows — chosen, not
/// drawn, so a replayed run labels the same claim the same way.
#[test]
fn a_requirement_picks_the_smallest_value_it_allows_for_a_label() {
    use karpenter_core::scheduling::Requirement;
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let any = |op: Operator, values: &[&str]| Requirement::new(op, &strings(values)).any();
    assert_eq!(any(Operator::In, &["b", "a"]), Some("a".into()));
    assert_eq!(any(Operator::Exists, &[]), Some("0".into()));
    assert_eq!(any(Operator::NotIn, &["0", "1", "3"]), Some("2".into()));
    assert_eq!(any(Operator::Gt, &["5"]), Some("6".into()));
    let between = Requirement::new(Operator::Gt, &strings(&["5"]))
        .intersection(&Requirement::new(Operator::Lt, &strings(&["8"])))
        .intersection(&Requirement::new(Operator::NotIn, &strings(&["6"])));
    assert_eq!(between.any(), Some("7".into()));
    let empty = Requirement::new(Operator::Gt, &strings(&["5"]))
        .intersection(&Requirement::new(Operator::Lt, &strings(&["6"])));
    assert_eq!(empty.any(), None);
    assert_eq!(any(Operator::DoesNotExist, &[]), None);
}

/// Review B5: a pod that declares only pod-level requests (`spec.resources`, on by default from
/// Kubernetes 1.34) needs them; a pod resized in place needs what the kubelet allocated when
/// that is more than its spec says. Before, both were sized by their containers' spec alone.
#[test]
fn pod_level_requests_and_resized_allocations_count_as_the_pods_requests() {
    use karpenter_core::scheduling::pod::pod_requests;
    let mut pod_level: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resources": {"requests": {"cpu": "3"}, "limits": {"memory": "4Gi", "nvidia.com/gpu": "1"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                           {"name": "b"}],
            "overhead": {"cpu": "250m"}
        }
    }))
    .expect("pod");
    let requests = pod_requests(&pod_level).expect("requests");
    assert_eq!(requests.get("cpu"), 3250, "pod-level CPU plus overhead");
    assert_eq!(
        requests.get("memory"),
        4 * 1024 * 1024 * 1024,
        "the pod-level limit stands in for its request"
    );
    assert_eq!(
        requests.get("nvidia.com/gpu"),
        0,
        "not a pod-level resource"
    );
    pod_level.spec.as_mut().unwrap().resources = None;
    let resized: Pod = serde_json::from_value(json!({
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
        "status": {"containerStatuses": [{
            "name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": "2", "memory": "512Mi"}
        }]}
    }))
    .expect("pod");
    let requests = pod_requests(&resized).expect("requests");
    assert_eq!(requests.get("cpu"), 2000);
    assert_eq!(requests.get("memory"), 1024 * 1024 * 1024);
    assert_eq!(pod_requests(&pod_level).expect("requests").get("cpu"), 1250);
}

// --- capacity reservations (issue 15, review G) ---

/// One 4-core type with a reservation of `left` instances in us-west-2a, and a larger type.
fn reserved_catalog(left: u32) -> Catalog {
    catalog(vec![
        itype("r.xlarge", 4, 16).reserved("us-west-2a", "cr-0aaa", left),
        itype("r.2xlarge", 8, 32),
    ])
}

/// Pods that each need a node of their own.
fn lonely_pods(n: usize) -> impl Iterator<Item = PodBuilder> {
    (0..n).map(|i| {
        pod(&format!("db-{i}"))
            .app("db")
            .cpu("1")
            .anti_affinity(HOSTNAME_LABEL, "app=db")
    })
}

#[test]
fn a_pod_that_fits_a_reserved_offering_gets_a_claim_pinned_to_the_reservation() {
    let out = scenario()
        .catalog(reserved_catalog(5))
        .pod(pod("a").cpu("1"))
        .solve();
    out.assert_all_placed();
    let claim = out.claim_of("a");
    assert_eq!(
        claim_values(claim, CAPACITY_TYPE_LABEL),
        Some(set(&["reserved"]))
    );
    assert_eq!(
        claim_values(claim, "karpenter.k8s.aws/capacity-reservation-id"),
        Some(set(&["cr-0aaa"]))
    );
    assert_eq!(type_names(claim), ["r.xlarge"], "only the reserved type");
}

#[test]
fn a_reservation_with_two_instances_left_gets_two_claims_and_the_third_pod_waits_for_the_next_pass()
{
    let out = scenario()
        .catalog(reserved_catalog(2))
        .pods(lonely_pods(3))
        .solve();
    let reserved = out
        .claims()
        .iter()
        .filter(|c| claim_values(c, CAPACITY_TYPE_LABEL) == Some(set(&["reserved"])))
        .count();
    assert_eq!(reserved, 2, "{:#?}", out.claims());
    assert_eq!(
        out.claims().len(),
        2,
        "no on-demand fallback in strict mode"
    );
    let waiting: Vec<_> = out
        .results
        .unschedulable
        .iter()
        .filter(|u| u.awaiting_reservation)
        .collect();
    assert_eq!(waiting.len(), 1, "{:#?}", out.results.unschedulable);
}

#[test]
fn in_fallback_mode_the_pod_beyond_the_reservation_gets_an_unreserved_claim() {
    let out = scenario()
        .catalog(reserved_catalog(2))
        .reserved_offering_mode(ReservedOfferingMode::Fallback)
        .pods(lonely_pods(3))
        .solve();
    out.assert_all_placed();
    let capacity_types: Vec<_> = out
        .claims()
        .iter()
        .map(|c| claim_values(c, CAPACITY_TYPE_LABEL).unwrap())
        .collect();
    assert_eq!(capacity_types.len(), 3);
    assert_eq!(
        capacity_types
            .iter()
            .filter(|c| **c == set(&["reserved"]))
            .count(),
        2
    );
    let fallback = capacity_types
        .iter()
        .find(|c| !c.contains("reserved"))
        .expect("one unreserved claim");
    assert!(fallback.contains("on-demand"), "{fallback:?}");
}

#[test]
fn a_pod_that_cannot_use_reserved_capacity_is_not_held_back_by_a_full_reservation() {
    let out = scenario()
        .catalog(reserved_catalog(0))
        .pods(lonely_pods(2))
        .solve();
    out.assert_all_placed();
    assert!(out.claims().iter().all(|c| {
        !claim_values(c, CAPACITY_TYPE_LABEL)
            .unwrap()
            .contains("reserved")
    }));
}

#[test]
fn a_pool_limited_to_on_demand_and_spot_never_plans_reserved_capacity() {
    let out = scenario()
        .catalog(reserved_catalog(5))
        .pools(vec![pool("default").requirement(
            CAPACITY_TYPE_LABEL,
            "In",
            &["on-demand", "spot"],
        )])
        .pod(pod("a").cpu("1"))
        .solve();
    out.assert_all_placed();
    let claim = out.claim_of("a");
    assert!(
        !claim_values(claim, CAPACITY_TYPE_LABEL)
            .unwrap()
            .contains("reserved")
    );
    assert_eq!(
        claim_values(claim, "karpenter.k8s.aws/capacity-reservation-id"),
        None
    );
}

#[test]
fn a_pod_waiting_for_a_reservation_does_not_fall_through_to_a_lower_weight_pool() {
    let out = scenario()
        .catalog(reserved_catalog(1))
        .pools(vec![
            pool("reserved").weight(10),
            pool("fallback").weight(1),
        ])
        .pods(lonely_pods(2))
        .solve();
    assert_eq!(out.claims().len(), 1, "{:#?}", out.claims());
    assert_eq!(out.claims()[0].node_pool, "reserved");
    assert!(out.results.unschedulable[0].awaiting_reservation);
}
