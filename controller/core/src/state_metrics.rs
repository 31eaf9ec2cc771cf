//! Upstream's node and NodePool metric controllers (`metrics.node`, `metrics.nodepool`): gauges
//! of what every Node offers and carries and of what every NodePool is limited to and uses,
//! the series Karpenter's dashboards are built on. Read every [`STATE_METRICS_INTERVAL`] from
//! the watch-fed caches as the controllers last synced them (no API call of its own); series
//! of nodes and pools that are gone are removed.
//!
//! - `karpenter_nodes_{allocatable, total_pod_requests, total_pod_limits,
//!   total_daemon_requests, total_daemon_limits, system_overhead}`: per node and resource;
//!   `karpenter_nodes_current_lifetime_seconds` per node. Labelled, as upstream, with
//!   `node_name`, `phase`, `managed` and one label per well-known label (its name after the
//!   `/`, lower case, `-` as `_`: `nodepool`, `instance_type`, `zone`, `capacity_type`, ...),
//!   empty when the node does not carry it; cpu in cores, other resources in their units.
//! - `karpenter_cluster_utilization_percent{resource_type}`: pod requests over allocatable,
//!   over all nodes.
//! - `karpenter_nodepools_limit{nodepool, resource_type}` and `karpenter_nodepools_usage`;
//!   `karpenter_nodepools_cost_total{nodepool}`, the catalog prices of its NodeClaims' offerings
//!   summed (dollars per hour).
//! - the pod series of [`crate::pod_metrics`], from the same caches in the same pass.
//! - upstream's AWS instance-type gauges (`karpenter_cloudprovider_instance_type_*`) from the
//!   catalog and the unavailable-offerings cache ([`crate::metrics::Metrics::record_catalog`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube_core::ResourceExt;

use crate::api::labels::{
    AWS_WELL_KNOWN_LABELS, CAPACITY_RESERVATION_ID_LABEL, CAPACITY_TYPE_LABEL, NODEPOOL_LABEL,
    WELL_KNOWN_LABELS,
};
use crate::api::{NodeClaim, NodePool};
use crate::catalog::{CapacityType, Catalog};
use crate::context::Context;
use crate::metrics::{Metrics, NodeLabels};
use crate::pod_metrics::{
    PodSeries, PodTracker, ProvisioningSeries, ProvisioningTracker, apply_pods, apply_provisioning,
    compute_pods, compute_provisioning,
};
use crate::resources::{CPU, PODS, Resources, parse_quantity};
use crate::scheduling::pod::{is_owned_by_daemonset, pod_requests};
use crate::seams::KubeError;

/// How often the gauges are recomputed (upstream: every 5 s for nodes; 10 s here, halving the
/// work on large clusters for a dashboard that samples at 15-30 s anyway).
pub const STATE_METRICS_INTERVAL: Duration = Duration::from_secs(10);

/// The label a well-known node label becomes (upstream's `getWellKnownLabels`).
fn metric_label(label: &str) -> Option<String> {
    let (_, name) = label.split_once('/')?;
    Some(name.to_ascii_lowercase().replace('-', "_"))
}

/// Every well-known label and the metric label it becomes, sorted by metric label.
fn well_known() -> Vec<(&'static str, String)> {
    let mut out: Vec<(&'static str, String)> = WELL_KNOWN_LABELS
        .iter()
        .chain(AWS_WELL_KNOWN_LABELS.iter())
        .filter_map(|l| metric_label(l).map(|m| (*l, m)))
        .collect();
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out.dedup_by(|a, b| a.1 == b.1);
    out
}

/// The names of a node's metric labels (without `resource_type`): what the metrics table lists.
pub fn node_label_names() -> Vec<String> {
    let mut names: Vec<String> = well_known().into_iter().map(|(_, m)| m).collect();
    names.extend(["managed", "node_name", "phase"].map(String::from));
    names.sort();
    names
}

/// A resource name as upstream labels it: lower case, `-` as `_` (`ephemeral_storage`).
pub fn resource_label(name: &str) -> String {
    name.to_ascii_lowercase().replace('-', "_")
}

/// An amount as upstream reports it: cpu in cores, the rest as they are.
fn value(name: &str, amount: i64) -> f64 {
    if name == CPU {
        amount as f64 / 1000.0
    } else {
        amount as f64
    }
}

fn list(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Resources {
    let mut out = Resources::new();
    for (name, q) in map.into_iter().flatten() {
        if let Ok(amount) = parse_quantity(name, &q.0) {
            out.set(name, amount);
        }
    }
    out
}

/// A resource list of the v1 API (NodePool limits and usage).
fn api_list(map: Option<&crate::api::common::ResourceList>) -> Resources {
    let mut out = Resources::new();
    for (name, q) in map.into_iter().flatten() {
        if let Ok(amount) = parse_quantity(name, q.as_str()) {
            out.set(name, amount);
        }
    }
    out
}

fn container_limits(c: &Container) -> Resources {
    list(c.resources.as_ref().and_then(|r| r.limits.as_ref()))
}

/// A pod's limits: its containers' (with sidecars), or its largest init container's if more.
fn pod_limits(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::new();
    };
    let mut total = Resources::new();
    for c in &spec.containers {
        total = total.plus(&container_limits(c));
    }
    for init in spec.init_containers.iter().flatten() {
        total = total.max(&container_limits(init));
    }
    total
}

/// A pod's requests without the `pods` count (upstream sums resource requests only).
fn requests(pod: &Pod) -> Resources {
    let mut r = pod_requests(pod).unwrap_or_default();
    r.set(PODS, 0);
    r
}

fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// What one pass computed: series by family and label set.
#[derive(Default)]
struct Series {
    nodes: BTreeMap<(&'static str, NodeLabels), f64>,
    utilization: BTreeMap<String, f64>,
    pools: BTreeMap<(&'static str, String, String), f64>,
    /// NodePool → dollars per hour (`karpenter_nodepools_cost_total`).
    costs: BTreeMap<String, f64>,
}

/// The node and NodePool metric controllers over one context.
pub struct StateMetrics {
    ctx: Arc<Context>,
    /// The series the last pass set, so those of deleted nodes and pools can be removed.
    previous: Mutex<Series>,
    /// The pod series' memory and last pass (`crate::pod_metrics`).
    pods: Mutex<(PodTracker, PodSeries)>,
    /// The alpha provisioning series' memory and last pass.
    provisioning: Mutex<(ProvisioningTracker, ProvisioningSeries)>,
}

impl StateMetrics {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            previous: Mutex::new(Series::default()),
            pods: Mutex::new((PodTracker::default(), PodSeries::default())),
            provisioning: Mutex::default(),
        }
    }

    /// One pass: recomputes every series from the caches.
    pub async fn reconcile(&self) -> Result<(), KubeError> {
        let now = self.ctx.now();
        let series = {
            let state = self.ctx.state.lock().await;
            let nodes: Vec<&Node> = state.nodes.iter().map(|n| &**n).collect();
            let pods: Vec<&Pod> = state.pods.iter().map(|p| &**p).collect();
            let pools: Vec<&NodePool> = state.pools.iter().map(|p| &**p).collect();
            let by_name: BTreeMap<String, &Node> =
                nodes.iter().map(|n| (n.name_any(), *n)).collect();
            // No await while the tracker is held.
            let mut tracked = self.pods.lock().unwrap_or_else(|p| p.into_inner());
            let pod_series = compute_pods(&pods, &by_name, &mut tracked.0, now);
            apply_pods(&self.ctx.metrics, &tracked.1, &pod_series);
            tracked.1 = pod_series;
            let mut provisioning = self.provisioning.lock().unwrap_or_else(|p| p.into_inner());
            let times = &self.ctx.pod_times;
            let alpha = compute_provisioning(&pods, times, &mut provisioning.0, now);
            apply_provisioning(&self.ctx.metrics, &provisioning.1, &alpha);
            provisioning.1 = alpha;
            let claims: Vec<&NodeClaim> = state.claims.iter().map(|c| &**c).collect();
            let mut series = compute(&nodes, &pods, &pools, now);
            series.costs = pool_costs(&pools, &claims, &self.ctx.catalog.current());
            series
        };
        // Upstream's instance-type gauges (its AWS provider's metrics controller, every minute).
        let ctx = &self.ctx;
        ctx.metrics
            .record_catalog(&ctx.catalog.current(), &ctx.unavailable, now);
        let mut previous = self.previous.lock().unwrap_or_else(|p| p.into_inner());
        apply(&self.ctx.metrics, &previous, &series);
        *previous = series;
        Ok(())
    }
}

fn node_labels(node: &Node, managed: bool) -> NodeLabels {
    let labels = node.labels();
    let mut out: Vec<(String, String)> = well_known()
        .into_iter()
        .map(|(label, name)| (name, labels.get(label).cloned().unwrap_or_default()))
        .collect();
    out.push(("managed".into(), managed.to_string()));
    out.push(("node_name".into(), node.name_any()));
    out.push((
        "phase".into(),
        node.status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default(),
    ));
    out.sort();
    NodeLabels {
        node: out.into(),
        resource_type: None,
    }
}

fn compute(nodes: &[&Node], pods: &[&Pod], pools: &[&NodePool], now: jiff::Timestamp) -> Series {
    let mut series = Series::default();
    let mut by_node: BTreeMap<&str, (Resources, Resources, Resources, Resources)> = BTreeMap::new();
    for pod in pods.iter().filter(|p| !is_terminal(p)) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            continue;
        };
        let entry = by_node.entry(node).or_default();
        let (req, lim) = (requests(pod), pod_limits(pod));
        entry.0 = entry.0.plus(&req);
        entry.1 = entry.1.plus(&lim);
        if is_owned_by_daemonset(pod) {
            entry.2 = entry.2.plus(&req);
            entry.3 = entry.3.plus(&lim);
        }
    }
    let mut allocatable_total = Resources::new();
    let mut requested_total = Resources::new();
    for node in nodes {
        let managed = node.labels().contains_key(NODEPOOL_LABEL);
        let base = node_labels(node, managed);
        let status = node.status.as_ref();
        let capacity = list(status.and_then(|s| s.capacity.as_ref()));
        let allocatable = list(status.and_then(|s| s.allocatable.as_ref()));
        let empty = Default::default();
        let (req, lim, dreq, dlim) = by_node.get(node.name_any().as_str()).unwrap_or(&empty);
        allocatable_total = allocatable_total.plus(&allocatable);
        requested_total = requested_total.plus(req);
        let families: [(&'static str, Resources); 6] = [
            ("allocatable", allocatable.clone()),
            ("system_overhead", capacity.minus(&allocatable)),
            ("total_pod_requests", req.clone()),
            ("total_pod_limits", lim.clone()),
            ("total_daemon_requests", dreq.clone()),
            ("total_daemon_limits", dlim.clone()),
        ];
        for (family, resources) in families {
            for (name, amount) in resources.iter() {
                if family != "allocatable" && family != "system_overhead" && amount == 0 {
                    continue;
                }
                let labels = NodeLabels {
                    node: base.node.clone(),
                    resource_type: Some(resource_label(name)),
                };
                series.nodes.insert((family, labels), value(name, amount));
            }
        }
        let created = node
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        series.nodes.insert(
            ("current_lifetime_seconds", base),
            now.duration_since(created).as_secs_f64().max(0.0),
        );
    }
    for (name, allocatable) in allocatable_total.iter() {
        if allocatable == 0 {
            continue;
        }
        let used = requested_total.get(name);
        series.utilization.insert(
            resource_label(name),
            100.0 * used as f64 / allocatable as f64,
        );
    }
    for pool in pools {
        let name = pool.name_any();
        let limits = api_list(pool.spec.limits.as_ref());
        for (resource, amount) in limits.iter() {
            series.pools.insert(
                ("limit", name.clone(), resource_label(resource)),
                value(resource, amount),
            );
        }
        let usage = api_list(pool.status.as_ref().map(|s| &s.resources));
        for (resource, amount) in usage.iter() {
            series.pools.insert(
                ("usage", name.clone(), resource_label(resource)),
                value(resource, amount),
            );
        }
    }
    series
}

/// What a NodeClaim costs per hour from Karpenter's view (upstream's cluster cost): the
/// catalog's price of the offering its labels name (instance type, zone, capacity type, and
/// for a reserved claim its reservation); 0 when the catalog does not know it (not launched yet).
fn claim_price(catalog: &Catalog, claim: &NodeClaim) -> f64 {
    let labels = claim.labels();
    let Some(instance_type) = labels
        .get("node.kubernetes.io/instance-type")
        .and_then(|t| catalog.get(t))
    else {
        return 0.0;
    };
    let zone = labels.get("topology.kubernetes.io/zone");
    let capacity_type = labels
        .get(CAPACITY_TYPE_LABEL)
        .and_then(|c| CapacityType::from_label(c));
    let reservation = labels
        .get(CAPACITY_RESERVATION_ID_LABEL)
        .map(String::as_str);
    instance_type
        .offerings
        .iter()
        .filter(|o| Some(&o.zone) == zone && Some(o.capacity_type) == capacity_type)
        .find(|o| reservation.is_none() || o.reservation_id() == reservation)
        .map_or(0.0, |o| o.price)
}

/// Every NodePool's cost: the prices of its NodeClaims, summed (`karpenter_nodepools_cost_total`;
/// an estimate, not billing).
fn pool_costs(
    pools: &[&NodePool],
    claims: &[&NodeClaim],
    catalog: &Catalog,
) -> BTreeMap<String, f64> {
    let mut costs: BTreeMap<String, f64> = pools.iter().map(|p| (p.name_any(), 0.0)).collect();
    for claim in claims {
        let Some(pool) = claim.labels().get(NODEPOOL_LABEL) else {
            continue;
        };
        if let Some(cost) = costs.get_mut(pool) {
            *cost += claim_price(catalog, claim);
        }
    }
    costs
}

/// Sets this pass's series and removes those of the last pass it no longer has.
fn apply(metrics: &Metrics, previous: &Series, series: &Series) {
    for (pool, cost) in &series.costs {
        metrics
            .nodepools_cost
            .get_or_create(&Metrics::nodepool(pool))
            .set(*cost);
    }
    for pool in previous
        .costs
        .keys()
        .filter(|k| !series.costs.contains_key(*k))
    {
        metrics.nodepools_cost.remove(&Metrics::nodepool(pool));
    }
    for ((family, labels), v) in &series.nodes {
        metrics.node_gauge(family).get_or_create(labels).set(*v);
    }
    let gone: BTreeSet<_> = previous
        .nodes
        .keys()
        .filter(|k| !series.nodes.contains_key(*k))
        .collect();
    for (family, labels) in gone {
        metrics.node_gauge(family).remove(labels);
    }
    for (resource, v) in &series.utilization {
        metrics
            .cluster_utilization
            .get_or_create(&crate::metrics::ResourceTypeLabels {
                resource_type: resource.clone(),
            })
            .set(*v);
    }
    for resource in previous
        .utilization
        .keys()
        .filter(|k| !series.utilization.contains_key(*k))
    {
        metrics
            .cluster_utilization
            .remove(&crate::metrics::ResourceTypeLabels {
                resource_type: resource.clone(),
            });
    }
    let pool_family = |family: &str| match family {
        "limit" => &metrics.nodepools_limit,
        _ => &metrics.nodepools_usage,
    };
    for ((family, pool, resource), v) in &series.pools {
        pool_family(family)
            .get_or_create(&crate::metrics::NodePoolResourceLabels {
                nodepool: pool.clone(),
                resource_type: resource.clone(),
            })
            .set(*v);
    }
    for (family, pool, resource) in previous
        .pools
        .keys()
        .filter(|k| !series.pools.contains_key(*k))
    {
        pool_family(family).remove(&crate::metrics::NodePoolResourceLabels {
            nodepool: pool.clone(),
            resource_type: resource.clone(),
        });
    }
}
