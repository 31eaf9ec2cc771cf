//! One read of everything a `Then` step may ask about: pods, nodes, NodeClaims and NodePools
//! from the API server, live instances and current prices from fakecloud, recorded events.
//!
//! It reads through the inspection side of both fakes (no seam calls), so observing never
//! consumes injected faults or random draws: a scenario's outcome does not depend on how often
//! its steps look.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use fakecloud::FakeCloud;
use fakekube::{ApiServer, RecordedEvent};
use karpenter_core::catalog::CapacityType;
use karpenter_core::resources::{Resources, parse_quantity};
use karpenter_core::seams::ec2::{Instance, InstanceState};
use karpenter_core::seams::kube::ResourceKind;
use serde_json::Value;

/// A pod as the steps see it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub node: Option<String>,
    pub phase: String,
    pub deleting: bool,
    /// Requests of one pod: the larger of its containers' sum and its largest init container.
    pub requests: Resources,
    pub raw: Value,
}

impl PodView {
    pub fn running(&self) -> bool {
        self.phase == "Running" && !self.deleting
    }

    /// Whether the pod belongs to the Deployment `name` (its pods are named `<name>-<n>`).
    pub fn of_deployment(&self, name: &str) -> bool {
        self.name
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }
}

/// A node as the steps see it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `(key, value, effect)`.
    pub taints: Vec<(String, String, String)>,
    pub ready: bool,
    pub deleting: bool,
    pub allocatable: Resources,
    /// The instance id of its `aws:///zone/id` provider id.
    pub instance_id: Option<String>,
}

impl NodeView {
    pub fn label(&self, key: &str) -> &str {
        self.labels.get(key).map(String::as_str).unwrap_or("")
    }
}

/// A live (not shutting down or terminated) instance with its current hourly price.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceView {
    pub instance: Instance,
    pub price: f64,
    pub vcpus: i64,
    pub memory_mib: i64,
}

/// A NodeClaim as the steps see it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimView {
    pub name: String,
    pub nodepool: String,
    pub labels: BTreeMap<String, String>,
    /// Condition type → status (`True`, `False`, `Unknown`).
    pub conditions: BTreeMap<String, String>,
    pub deleting: bool,
    pub node_name: Option<String>,
    pub capacity: Resources,
    pub raw: Value,
}

impl ClaimView {
    pub fn condition(&self, type_: &str) -> &str {
        self.conditions
            .get(type_)
            .map(String::as_str)
            .unwrap_or("absent")
    }
}

/// Everything at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Pods outside `kube-system` (the world's system pods are the node group's business).
    pub pods: Vec<PodView>,
    /// Nodes other than the managed node group's.
    pub nodes: Vec<NodeView>,
    pub claims: Vec<ClaimView>,
    pub nodepools: Vec<Value>,
    /// Live instances other than the managed node group's.
    pub instances: Vec<InstanceView>,
    pub events: Vec<RecordedEvent>,
    /// The managed node group's Nodes, and its instances and the neighbour cluster's Karpenter's
    /// (in any state, [`karpenter_sim::invariants::is_foreign`]), which Karpenter must leave
    /// alone.
    pub foreign_nodes: Vec<NodeView>,
    pub foreign_instances: Vec<karpenter_core::seams::ec2::Instance>,
    /// When it was read (the cloud's clock).
    pub now: jiff::Timestamp,
}

/// The label EKS puts on a managed node group's Nodes.
pub const NODE_GROUP_LABEL: &str = "eks.amazonaws.com/nodegroup";

fn labels(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// A resource list (`{"cpu": "500m", ...}`) as [`Resources`]; unreadable entries are skipped.
pub fn resources(list: &Value) -> Resources {
    let mut out = Resources::new();
    for (name, quantity) in list.as_object().into_iter().flatten() {
        let text = quantity
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| quantity.to_string());
        if let Ok(amount) = parse_quantity(name, &text) {
            out.add_one(name, amount);
        }
    }
    out
}

/// What one pod asks of a node (without pod overhead, which the scenarios do not use).
pub fn pod_requests(spec: &Value) -> Resources {
    let sum = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .fold(Resources::new(), |acc, c| {
            acc.plus(&resources(&c["resources"]["requests"]))
        });
    let init = spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .fold(Resources::new(), |acc, c| {
            acc.max(&resources(&c["resources"]["requests"]))
        });
    sum.max(&init)
}

impl PodView {
    fn of(p: Value) -> Self {
        PodView {
            namespace: text(&p["metadata"]["namespace"]),
            name: text(&p["metadata"]["name"]),
            labels: labels(&p["metadata"]["labels"]),
            node: p["spec"]["nodeName"].as_str().map(str::to_string),
            phase: text(&p["status"]["phase"]),
            deleting: p["metadata"]["deletionTimestamp"].is_string(),
            requests: pod_requests(&p["spec"]),
            raw: p,
        }
    }
}

impl NodeView {
    fn of(n: &Value) -> Self {
        NodeView {
            name: text(&n["metadata"]["name"]),
            labels: labels(&n["metadata"]["labels"]),
            taints: n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| (text(&t["key"]), text(&t["value"]), text(&t["effect"])))
                .collect(),
            ready: n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True"),
            deleting: n["metadata"]["deletionTimestamp"].is_string(),
            allocatable: resources(&n["status"]["allocatable"]),
            instance_id: n["spec"]["providerID"]
                .as_str()
                .and_then(|p| p.rsplit('/').next())
                .map(str::to_string),
        }
    }
}

impl ClaimView {
    fn of(c: Value) -> Self {
        let labels = labels(&c["metadata"]["labels"]);
        ClaimView {
            name: text(&c["metadata"]["name"]),
            nodepool: labels
                .get("karpenter.sh/nodepool")
                .cloned()
                .unwrap_or_default(),
            labels,
            conditions: c["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| (text(&c["type"]), text(&c["status"])))
                .collect(),
            deleting: c["metadata"]["deletionTimestamp"].is_string(),
            node_name: c["status"]["nodeName"].as_str().map(str::to_string),
            capacity: resources(&c["status"]["capacity"]),
            raw: c,
        }
    }
}

/// The live instances, with what the catalog says of their type and price now.
fn instances(cloud: &FakeCloud) -> Vec<InstanceView> {
    let catalog = cloud.instance_types();
    cloud
        .instances()
        .into_iter()
        .filter(|i| !karpenter_sim::invariants::is_foreign(i))
        .filter(|i| {
            !matches!(
                i.state,
                InstanceState::ShuttingDown | InstanceState::Terminated
            )
        })
        .map(|instance| {
            let it = catalog.get(&instance.instance_type);
            let price = it
                .and_then(|it| {
                    it.offerings.iter().find(|o| {
                        o.zone == instance.zone && o.capacity_type == instance.capacity_type
                    })
                })
                .map_or(0.0, |o| o.price);
            InstanceView {
                vcpus: it.map_or(0, |it| it.capacity.get("cpu") / 1000),
                memory_mib: it.map_or(0, |it| it.capacity.get("memory") / (1024 * 1024)),
                price,
                instance,
            }
        })
        .collect()
}

impl Snapshot {
    pub fn read(api: &ApiServer, cloud: &FakeCloud) -> Self {
        let objects = |kind: &ResourceKind| api.objects(kind).into_iter();
        let (foreign_nodes, nodes): (Vec<NodeView>, Vec<NodeView>) = objects(&ResourceKind::NODE)
            .map(|n| NodeView::of(&n))
            .partition(|n| n.labels.contains_key(NODE_GROUP_LABEL));
        Snapshot {
            pods: objects(&ResourceKind::POD)
                .filter(|p| p["metadata"]["namespace"] != "kube-system")
                .map(|p| PodView::of(Arc::unwrap_or_clone(p)))
                .collect(),
            nodes,
            foreign_nodes,
            now: cloud.now(),
            foreign_instances: cloud
                .instances()
                .into_iter()
                .filter(karpenter_sim::invariants::is_foreign)
                .collect(),
            claims: objects(&ResourceKind::NODE_CLAIM)
                .map(|c| ClaimView::of(Arc::unwrap_or_clone(c)))
                .collect(),
            nodepools: objects(&ResourceKind::NODE_POOL)
                .map(Arc::unwrap_or_clone)
                .collect(),
            instances: instances(cloud),
            events: api.events(),
        }
    }

    /// Pods not being deleted.
    pub fn live_pods(&self) -> impl Iterator<Item = &PodView> {
        self.pods.iter().filter(|p| !p.deleting)
    }

    /// The live pods of the Deployment `name`.
    pub fn pods_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a PodView> + 'a {
        self.live_pods().filter(move |p| p.of_deployment(name))
    }

    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The nodes the pods of `deployment` run on, each once, in name order.
    pub fn nodes_of(&self, deployment: &str) -> Vec<&NodeView> {
        let mut names: Vec<&str> = self
            .pods_of(deployment)
            .filter_map(|p| p.node.as_deref())
            .collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().filter_map(|n| self.node(n)).collect()
    }

    /// Instances of capacity type `ct`.
    pub fn instances_of(&self, ct: CapacityType) -> usize {
        self.instances
            .iter()
            .filter(|i| i.instance.capacity_type == ct)
            .count()
    }

    /// What the live instances cost per hour at current prices.
    pub fn hourly_cost(&self) -> f64 {
        self.instances.iter().map(|i| i.price).sum()
    }

    /// Events whose reason is `reason`, oldest first.
    pub fn events_with_reason<'a>(
        &'a self,
        reason: &'a str,
    ) -> impl Iterator<Item = &'a RecordedEvent> + 'a {
        self.events.iter().filter(move |e| e.event.reason == reason)
    }
}

impl fmt::Display for Snapshot {
    /// A few lines that say where the world stands: printed with every failure.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let live: Vec<&PodView> = self.live_pods().collect();
        let running = live.iter().filter(|p| p.running()).count();
        writeln!(
            f,
            "pods: {} live, {running} running, {} pending",
            live.len(),
            live.iter().filter(|p| p.phase == "Pending").count()
        )?;
        for node in &self.nodes {
            let pods = live
                .iter()
                .filter(|p| p.node.as_deref() == Some(&node.name))
                .count();
            writeln!(
                f,
                "node {}: {} {} {} ready={} pods={pods}{}",
                node.name,
                node.label("node.kubernetes.io/instance-type"),
                node.label("topology.kubernetes.io/zone"),
                node.label("karpenter.sh/capacity-type"),
                node.ready,
                if node.deleting { " (deleting)" } else { "" }
            )?;
        }
        for claim in &self.claims {
            writeln!(
                f,
                "nodeclaim {} (nodepool {}): Launched={} Registered={} Initialized={}{}",
                claim.name,
                claim.nodepool,
                claim.condition("Launched"),
                claim.condition("Registered"),
                claim.condition("Initialized"),
                if claim.deleting { " (deleting)" } else { "" }
            )?;
        }
        write!(
            f,
            "instances: {} live, ${:.4}/hour",
            self.instances.len(),
            self.hourly_cost()
        )?;
        let warnings: Vec<String> = self
            .events
            .iter()
            .filter(|e| e.event.type_ == "Warning")
            .rev()
            .take(3)
            .map(|e| {
                format!(
                    "{} {}: {}",
                    e.event.reason, e.event.key.name, e.event.message
                )
            })
            .collect();
        for warning in warnings {
            write!(f, "\nrecent warning: {warning}")?;
        }
        Ok(())
    }
}
