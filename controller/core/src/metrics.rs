//! Prometheus metrics of the controllers, under upstream Karpenter's names where upstream has
//! the metric (so existing dashboards and alerts keep working), and under `karpenter_` names of
//! our own for what upstream only shows in logs (why a termination is waiting).
//!
//! One [`Metrics`] value lives in the controllers' [`Context`](crate::context::Context); the
//! composition root serves [`Metrics::encode`] on `/metrics`. Metrics are written, never read,
//! by controller logic: no decision may depend on them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

pub mod cloudprovider;
pub mod status;
pub use cloudprovider::{BuildInfo, CloudMethod};

/// A gauge of seconds (upstream's are floats).
pub type SecondsGauge = Gauge<f64, AtomicU64>;

/// `nodepool` label (upstream's `metrics.NodePoolLabel`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NodePoolLabels {
    pub nodepool: String,
}

/// `reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

/// `code` label: the HTTP status of an eviction request (`200`, `429`, ...).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: String,
}

/// `stage` label: which wait a terminating NodeClaim is in.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct StageLabels {
    pub stage: String,
}

/// `message_type` label: the interruption message kind (upstream's label values).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct MessageTypeLabels {
    pub message_type: String,
}

/// `category` label: the `DescribeInstanceStatus` category that found an instance unhealthy
/// (`InstanceStatus`, `SystemStatus`, `EventStatus`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CategoryLabels {
    pub category: String,
}

/// `action_type` label: what the interruption controller did.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ActionLabels {
    pub action_type: String,
}

/// `nodepool`, `capacity_type` (upstream's `nodeclaims_terminated_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NodePoolCapacityLabels {
    pub nodepool: String,
    pub capacity_type: String,
}

/// `reason`, `nodepool`, `capacity_type` (upstream's `nodeclaims_disrupted_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct DisruptedLabels {
    pub reason: String,
    pub nodepool: String,
    pub capacity_type: String,
}

/// `decision`, `reason`, `consolidation_type` (upstream's `voluntary_disruption_decisions_total`
/// and `…_queue_failures_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct DecisionLabels {
    /// `delete` or `replace`.
    pub decision: String,
    /// The lower-case method: `empty`, `underutilized`, `drifted`.
    pub reason: String,
    /// `empty`, `single`, `multi`, or empty for drift.
    pub consolidation_type: String,
}

/// `consolidation_type` alone (upstream's `voluntary_disruption_failed_validations_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ConsolidationTypeLabels {
    pub consolidation_type: String,
}

/// `reason`, `consolidation_type` (upstream's
/// `voluntary_disruption_decision_evaluation_duration_seconds`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct EvaluationLabels {
    /// The lower-case method: `empty`, `drifted`, `underutilized`.
    pub reason: String,
    /// `empty`, `single`, `multi`, or empty for drift.
    pub consolidation_type: String,
}

/// `nodepool`, `reason` (upstream's `nodepools_allowed_disruptions`; the reason as the budget
/// names it: `Empty`, `Drifted`, `Underutilized`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NodePoolReasonLabels {
    pub nodepool: String,
    pub reason: String,
}

/// `controller`, `scheduling_id` (upstream's `scheduler_queue_depth` and
/// `scheduler_unfinished_work_seconds`): one series per running simulation, removed when it ends.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct SchedulingLabels {
    pub controller: String,
    pub scheduling_id: String,
}

/// A node's labels in upstream's node metrics: `node_name`, `phase`, `managed`, one per
/// well-known label, and `resource_type` for the per-resource families, encoded sorted by name
/// (`crate::state_metrics`).
///
/// The node's part is shared: it is about 35 label pairs (some 3.5 KB), and each of a node's ~30
/// series held its own copy, in the registry, in the last pass's series and in the pass being
/// computed: about 300 KB a node, which the memory benchmark saw as the controller growing by
/// that much per joined node (1.1 GiB at 2,000 nodes).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeLabels {
    /// Every label but `resource_type`, sorted by name.
    pub node: Arc<[(String, String)]>,
    /// `resource_type`, for the per-resource families.
    pub resource_type: Option<String>,
}

impl NodeLabels {
    /// The name of the one label not in [`NodeLabels::node`].
    pub const RESOURCE_TYPE: &'static str = "resource_type";
}

impl EncodeLabelSet for NodeLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeLabel;
        let mut resource = self
            .resource_type
            .as_deref()
            .map(|value| (Self::RESOURCE_TYPE, value));
        for (name, value) in self.node.iter() {
            if let Some(label) = resource.filter(|(key, _)| *key < name.as_str()) {
                label.encode(encoder.encode_label())?;
                resource = None;
            }
            (name.as_str(), value.as_str()).encode(encoder.encode_label())?;
        }
        if let Some(label) = resource {
            label.encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The labels of `karpenter_pods_state` (`crate::pod_metrics::POD_STATE_LABELS`), sorted by
/// name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodStateLabels(pub Vec<(String, String)>);

impl EncodeLabelSet for PodStateLabels {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// `name`, `namespace`: one pod (upstream's per-pod time gauges).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PodKeyLabels {
    pub name: String,
    pub namespace: String,
}

/// Upstream's alpha `karpenter_pods_provisioning_*` series.
#[derive(Clone, Debug)]
pub struct PodProvisioningMetrics {
    /// `..._bound_duration_seconds`: first placed to bound.
    pub bound_duration: Histogram,
    /// `..._unbound_time_seconds{name, namespace}`.
    pub unbound_time: Family<PodKeyLabels, SecondsGauge>,
    /// `..._startup_duration_seconds`: first placed to Ready.
    pub startup_duration: Histogram,
    /// `..._unstarted_time_seconds{name, namespace}`.
    pub unstarted_time: Family<PodKeyLabels, SecondsGauge>,
    /// `..._scheduling_undecided_time_seconds{name, namespace}`: first seen, no decision yet.
    pub undecided_time: Family<PodKeyLabels, SecondsGauge>,
}

impl Default for PodProvisioningMetrics {
    fn default() -> Self {
        Self {
            bound_duration: upstream_duration_histogram(),
            unbound_time: Family::default(),
            startup_duration: upstream_duration_histogram(),
            unstarted_time: Family::default(),
            undecided_time: Family::default(),
        }
    }
}

/// `resource_type` (upstream's `cluster_utilization_percent`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ResourceTypeLabels {
    pub resource_type: String,
}

/// `nodepool`, `resource_type` (upstream's `nodepools_limit` and `nodepools_usage`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct NodePoolResourceLabels {
    pub nodepool: String,
    pub resource_type: String,
}

/// `reason`, `nodepool`, `min_values_relaxed` (upstream's `nodeclaims_created_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CreatedLabels {
    pub reason: String,
    pub nodepool: String,
    pub min_values_relaxed: String,
}

/// `controller` label: which controller ran a scheduling simulation (`provisioner`,
/// `disruption`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 1 s .. ~4.5 h: a drain can take from seconds to a long terminationGracePeriod.
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

fn claim_termination_histogram() -> Histogram {
    // Upstream's buckets: 1 s .. 2048 s.
    Histogram::new(exponential_buckets(1.0, 2.0, 12))
}

fn lifetime_histogram() -> Histogram {
    // Upstream's buckets, in seconds: 15 min .. 30 days.
    const MIN: f64 = 60.0;
    const HOUR: f64 = 3600.0;
    const DAY: f64 = 24.0 * HOUR;
    Histogram::new([
        15.0 * MIN,
        30.0 * MIN,
        45.0 * MIN,
        HOUR,
        2.0 * HOUR,
        4.0 * HOUR,
        6.0 * HOUR,
        8.0 * HOUR,
        10.0 * HOUR,
        12.0 * HOUR,
        16.0 * HOUR,
        20.0 * HOUR,
        DAY,
        2.0 * DAY,
        3.0 * DAY,
        5.0 * DAY,
        10.0 * DAY,
        15.0 * DAY,
        20.0 * DAY,
        25.0 * DAY,
        30.0 * DAY,
    ])
}

/// Upstream's `metrics.DurationBuckets()` (controller-runtime's, extended to 600 s).
fn upstream_duration_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
        15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
    ])
}

fn instance_termination_histogram() -> Histogram {
    // Upstream's buckets: 1 s .. 1024 s.
    Histogram::new(exponential_buckets(1.0, 2.0, 11))
}

fn scheduling_histogram() -> Histogram {
    // 5 ms .. ~80 s: one simulation over a few pods up to a 20,000-pod burst.
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Every metric the controllers write, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    /// `karpenter_nodes_terminated_total{nodepool}`: Node finalizers removed.
    pub nodes_terminated: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodeclaims_terminated_total{nodepool, capacity_type}`: NodeClaim finalizers
    /// removed.
    pub nodeclaims_terminated: Family<NodePoolCapacityLabels, Counter>,
    /// `karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`: NodeClaims
    /// created (`reason`: `provisioning` or a disruption method).
    pub nodeclaims_created: Family<CreatedLabels, Counter>,
    /// `karpenter_nodeclaims_disrupted_total{reason,nodepool,capacity_type}`: claims deleted for
    /// a reason of their own (interruption kinds, instance status; disruption methods later).
    pub nodeclaims_disrupted: Family<DisruptedLabels, Counter>,
    /// `karpenter_voluntary_disruption_decisions_total{decision,reason,consolidation_type}`:
    /// commands started.
    pub disruption_decisions: Family<DecisionLabels, Counter>,
    /// `karpenter_voluntary_disruption_failed_validations_total{consolidation_type}`: decisions
    /// dropped on their re-check.
    pub disruption_failed_validations: Family<ConsolidationTypeLabels, Counter>,
    /// `karpenter_voluntary_disruption_queue_failures_total{decision,reason,consolidation_type}`:
    /// commands abandoned after they started.
    pub disruption_queue_failures: Family<DecisionLabels, Counter>,
    /// `karpenter_nodeclaims_termination_duration_seconds{nodepool}`: deletion request to the
    /// claim's finalizer removal.
    pub nodeclaims_termination_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_nodes_created_total{nodepool}`: nodes registered to a NodeClaim.
    pub nodes_created: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodes_lifetime_duration_seconds{nodepool}`: node creation to its finalizer's
    /// removal.
    pub nodes_lifetime_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_scheduler_scheduling_duration_seconds{controller}`: one scheduling simulation.
    pub scheduling_duration: HistogramFamily<ControllerLabels>,
    /// `karpenter_scheduler_unschedulable_pods_count{controller}`: pods the last provisioning
    /// pass could not place.
    pub unschedulable_pods: Family<ControllerLabels, Gauge>,
    /// `karpenter_scheduler_ignored_pods_count`: pending pods the last pass left out (a
    /// missing volume, an unschedulable spec).
    pub ignored_pods: Gauge,
    /// `karpenter_cluster_state_node_count`: nodes in the watch-fed cluster state.
    pub cluster_state_node_count: Gauge,
    /// `karpenter_cluster_state_synced`: 1 once the cluster state has synced with the API server.
    pub cluster_state_synced: Gauge,
    /// `karpenter_nodes_drained_total{nodepool}`: nodes whose drain completed.
    pub nodes_drained: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodes_termination_duration_seconds{nodepool}`: deletion request to finalizer
    /// removal (upstream: a summary; a histogram here, which aggregates across replicas).
    pub nodes_termination_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_pods_drained_total{reason}`: pods evicted or deleted by a drain.
    pub pods_drained: Family<ReasonLabels, Counter>,
    /// `karpenter_nodes_eviction_requests_total{code}`: Eviction API calls by response code.
    pub eviction_requests: Family<CodeLabels, Counter>,
    /// `karpenter_nodes_eviction_queue_depth`: pods waiting for a successful eviction.
    pub eviction_queue_depth: Gauge,
    /// `karpenter_nodeclaims_termination_waiting{stage}` (ours): terminating NodeClaims by the
    /// wait they are in (`awaiting_replacement`, `draining`, `drain_blocked`,
    /// `awaiting_volume_detachment`, `instance_terminating`).
    pub termination_waiting: Family<StageLabels, Gauge>,
    /// `karpenter_pods_termination_blocked{reason}` (ours): pods on terminating nodes that
    /// eviction cannot move (`do_not_disrupt`, `pod_disruption_budget`).
    pub pods_termination_blocked: Family<ReasonLabels, Gauge>,
    /// `karpenter_interruption_received_messages_total{message_type}`.
    pub interruption_received: Family<MessageTypeLabels, Counter>,
    /// `karpenter_interruption_deleted_messages_total`.
    pub interruption_deleted: Counter,
    /// `karpenter_interruption_instance_status_unhealthy_total{category}`: each (instance,
    /// category) counted once while it stays unhealthy.
    pub instance_status_unhealthy: Family<CategoryLabels, Counter>,
    /// `karpenter_interruption_malformed_messages_total` (ours): bodies that did not parse.
    pub interruption_malformed: Counter,
    /// `karpenter_interruption_actions_performed_total{action_type}`.
    pub interruption_actions: Family<ActionLabels, Counter>,
    /// `karpenter_interruption_message_queue_duration_seconds`: event time to message deletion.
    pub interruption_queue_duration: Histogram,
    /// `karpenter_nodeclaims_instance_termination_duration_seconds{nodepool}`: from
    /// `InstanceTerminating` to EC2 reporting the instance gone.
    pub nodeclaims_instance_termination_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_voluntary_disruption_decision_evaluation_duration_seconds{reason,
    /// consolidation_type}`: one disruption method's evaluation.
    pub disruption_evaluation_duration: HistogramFamily<EvaluationLabels>,
    /// `karpenter_voluntary_disruption_eligible_nodes{reason}`: candidates of the last
    /// evaluation of each method.
    pub disruption_eligible_nodes: Family<ReasonLabels, Gauge>,
    /// `karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type}`: always
    /// 0 (consolidation here has no timeout, README deliberate difference 15); exported so
    /// dashboards and alerts written for upstream find it.
    pub consolidation_timeouts: Family<ConsolidationTypeLabels, Counter>,
    /// `karpenter_nodepools_allowed_disruptions{nodepool, reason}`: what each pool's budgets
    /// allow for each reason (before nodes already disrupting are subtracted).
    pub nodepools_allowed_disruptions: Family<NodePoolReasonLabels, Gauge>,
    /// `karpenter_scheduler_queue_depth{controller, scheduling_id}`: pods a running simulation
    /// has still to place.
    pub scheduler_queue_depth: Family<SchedulingLabels, Gauge>,
    /// `karpenter_scheduler_unfinished_work_seconds{controller, scheduling_id}`: how long a
    /// running simulation has run.
    pub scheduler_unfinished_work: Family<SchedulingLabels, SecondsGauge>,
    /// `karpenter_cluster_state_unsynced_time_seconds`: how long the cluster state has failed
    /// to sync (0 while synced).
    pub cluster_state_unsynced_time: SecondsGauge,
    /// `karpenter_pods_scheduling_decision_duration_seconds`: from a pod first seen pending to
    /// the first provisioning decision about it (a node, a NodeClaim or an error).
    pub pods_scheduling_decision_duration: Histogram,
    /// `karpenter_nodes_*` gauges of `crate::state_metrics`, by family name (`allocatable`,
    /// `total_pod_requests`, ..., `current_lifetime_seconds`).
    pub node_gauges: BTreeMap<&'static str, Family<NodeLabels, SecondsGauge>>,
    /// `karpenter_cluster_utilization_percent{resource_type}`.
    pub cluster_utilization: Family<ResourceTypeLabels, SecondsGauge>,
    /// `karpenter_nodepools_limit{nodepool, resource_type}`.
    pub nodepools_limit: Family<NodePoolResourceLabels, SecondsGauge>,
    /// `karpenter_nodepools_usage{nodepool, resource_type}`.
    pub nodepools_usage: Family<NodePoolResourceLabels, SecondsGauge>,
    /// `karpenter_nodepools_cost_total{nodepool}`: dollars per hour (`crate::state_metrics`).
    pub nodepools_cost: Family<NodePoolLabels, SecondsGauge>,
    /// `karpenter_pods_state`: 1 per pod (`crate::pod_metrics`).
    pub pods_state: Family<PodStateLabels, Gauge>,
    /// `karpenter_pods_startup_duration_seconds`: creation to Ready.
    pub pods_startup_duration: Histogram,
    /// `karpenter_pods_bound_duration_seconds`: creation to bound.
    pub pods_bound_duration: Histogram,
    /// `karpenter_pods_unstarted_time_seconds{name, namespace}`.
    pub pods_unstarted_time: Family<PodKeyLabels, SecondsGauge>,
    /// `karpenter_pods_unbound_time_seconds{name, namespace}`.
    pub pods_unbound_time: Family<PodKeyLabels, SecondsGauge>,
    /// Upstream's alpha `karpenter_pods_provisioning_*` series: timed from when the provisioner
    /// first placed the pod (or, for the undecided time, first saw it) rather than from its
    /// creation (`crate::pod_metrics`).
    pub pods_provisioning: PodProvisioningMetrics,
    /// Upstream's cloud-provider, instance-type, batcher and build-info series
    /// ([`cloudprovider`]).
    pub cloud: cloudprovider::CloudProviderMetrics,
    /// operatorpkg's `operator_*` status-condition and termination series ([`status`]), in a
    /// registry without the `karpenter_` prefix.
    pub status: status::StatusConditionMetrics,
}

/// Upstream's node gauges (`karpenter_nodes_<name>`) and their help texts.
pub const NODE_GAUGES: [(&str, &str); 7] = [
    (
        "allocatable",
        "Node allocatable are the resources allocatable by nodes.",
    ),
    (
        "total_pod_requests",
        "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.",
    ),
    (
        "total_pod_limits",
        "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
    ),
    (
        "total_daemon_requests",
        "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
    ),
    (
        "total_daemon_limits",
        "Node total daemon limits are the resources specified by DaemonSet pod limits.",
    ),
    (
        "system_overhead",
        "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.",
    ),
    ("current_lifetime_seconds", "Node age in seconds."),
];

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut metrics = Self {
            registry: Registry::with_prefix("karpenter"),
            nodes_terminated: Family::default(),
            nodeclaims_terminated: Family::default(),
            nodeclaims_created: Family::default(),
            nodeclaims_disrupted: Family::default(),
            disruption_decisions: Family::default(),
            disruption_failed_validations: Family::default(),
            disruption_queue_failures: Family::default(),
            nodeclaims_termination_duration: Family::new_with_constructor(
                claim_termination_histogram,
            ),
            nodes_created: Family::default(),
            nodes_lifetime_duration: Family::new_with_constructor(lifetime_histogram),
            scheduling_duration: Family::new_with_constructor(scheduling_histogram),
            unschedulable_pods: Family::default(),
            ignored_pods: Gauge::default(),
            cluster_state_node_count: Gauge::default(),
            cluster_state_synced: Gauge::default(),
            nodes_drained: Family::default(),
            nodes_termination_duration: Family::new_with_constructor(duration_histogram),
            pods_drained: Family::default(),
            eviction_requests: Family::default(),
            eviction_queue_depth: Gauge::default(),
            termination_waiting: Family::default(),
            pods_termination_blocked: Family::default(),
            interruption_received: Family::default(),
            interruption_deleted: Counter::default(),
            instance_status_unhealthy: Family::default(),
            interruption_malformed: Counter::default(),
            interruption_actions: Family::default(),
            interruption_queue_duration: Histogram::new(exponential_buckets(0.5, 2.0, 12)),
            nodeclaims_instance_termination_duration: Family::new_with_constructor(
                instance_termination_histogram,
            ),
            disruption_evaluation_duration: Family::new_with_constructor(
                upstream_duration_histogram,
            ),
            disruption_eligible_nodes: Family::default(),
            consolidation_timeouts: Family::default(),
            nodepools_allowed_disruptions: Family::default(),
            scheduler_queue_depth: Family::default(),
            scheduler_unfinished_work: Family::default(),
            cluster_state_unsynced_time: SecondsGauge::default(),
            pods_scheduling_decision_duration: upstream_duration_histogram(),
            node_gauges: NODE_GAUGES
                .iter()
                .map(|(name, _)| (*name, Family::default()))
                .collect(),
            cluster_utilization: Family::default(),
            nodepools_limit: Family::default(),
            nodepools_usage: Family::default(),
            nodepools_cost: Family::default(),
            pods_state: Family::default(),
            pods_startup_duration: upstream_duration_histogram(),
            pods_bound_duration: upstream_duration_histogram(),
            pods_unstarted_time: Family::default(),
            pods_unbound_time: Family::default(),
            pods_provisioning: PodProvisioningMetrics::default(),
            cloud: Default::default(),
            status: Default::default(),
        };
        // Consolidation never times out here: both series exist at 0 from the start.
        for consolidation_type in ["single", "multi"] {
            let _ = metrics
                .consolidation_timeouts
                .get_or_create(&ConsolidationTypeLabels {
                    consolidation_type: consolidation_type.into(),
                });
        }
        metrics.register_state();
        metrics.register_pod_provisioning();
        metrics.register_lifecycle();
        metrics.register_termination();
        metrics.register_interruption();
        metrics.register_cloudprovider();
        // The core's version until the binary says which build it is.
        metrics.set_build_info(&BuildInfo::new(env!("CARGO_PKG_VERSION"), ""));
        metrics
    }

    /// Registers the series of NodeClaim creation, node registration, scheduling and the cluster state (the registry holds clones: metrics are shared
    /// handles).
    fn register_lifecycle(&mut self) {
        let r = &mut self.registry;
        r.register(
            "nodeclaims_created",
            "Number of nodeclaims created in total by Karpenter, by reason, nodepool and whether minValues was relaxed.",
            self.nodeclaims_created.clone(),
        );
        r.register(
            "voluntary_disruption_decisions",
            "Number of disruption decisions performed, by decision, reason and consolidation type.",
            self.disruption_decisions.clone(),
        );
        r.register(
            "voluntary_disruption_failed_validations",
            "Number of candidates that failed validation before disruption, by consolidation type.",
            self.disruption_failed_validations.clone(),
        );
        r.register(
            "voluntary_disruption_queue_failures",
            "Number of disruption commands that failed after they started, by decision, reason and consolidation type.",
            self.disruption_queue_failures.clone(),
        );
        r.register(
            "nodeclaims_disrupted",
            "Number of nodeclaims disrupted in total by Karpenter, by reason, nodepool and capacity type.",
            self.nodeclaims_disrupted.clone(),
        );
        r.register(
            "nodes_created",
            "Number of nodes created in total by Karpenter, by nodepool.",
            self.nodes_created.clone(),
        );
        r.register(
            "scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
            self.scheduling_duration.clone(),
        );
        r.register(
            "scheduler_unschedulable_pods_count",
            "The number of unschedulable Pods.",
            self.unschedulable_pods.clone(),
        );
        r.register(
            "scheduler_ignored_pods_count",
            "Number of pods ignored during scheduling by Karpenter.",
            self.ignored_pods.clone(),
        );
        r.register(
            "cluster_state_node_count",
            "Current count of nodes in cluster state.",
            self.cluster_state_node_count.clone(),
        );
        r.register(
            "cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise.",
            self.cluster_state_synced.clone(),
        );
        r.register(
            "cluster_state_unsynced_time_seconds",
            "The time for which cluster state is not synced.",
            self.cluster_state_unsynced_time.clone(),
        );
        r.register(
            "pods_scheduling_decision_duration_seconds",
            "The time it takes for Karpenter to first try to schedule a pod after it's been seen.",
            self.pods_scheduling_decision_duration.clone(),
        );
        r.register(
            "scheduler_queue_depth",
            "The number of pods currently waiting to be scheduled.",
            self.scheduler_queue_depth.clone(),
        );
        r.register(
            "scheduler_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been considered in the scheduling duration.",
            self.scheduler_unfinished_work.clone(),
        );
        r.register(
            "voluntary_disruption_decision_evaluation_duration_seconds",
            "Duration of the disruption decision evaluation process in seconds, by method and consolidation type.",
            self.disruption_evaluation_duration.clone(),
        );
        r.register(
            "voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter, by disruption reason.",
            self.disruption_eligible_nodes.clone(),
        );
        r.register(
            "voluntary_disruption_consolidation_timeouts",
            "Number of times the consolidation algorithm has reached a timeout, by consolidation type.",
            self.consolidation_timeouts.clone(),
        );
        r.register(
            "nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time, by NodePool and reason.",
            self.nodepools_allowed_disruptions.clone(),
        );
    }

    /// Registers upstream's alpha `pods_provisioning_*` series.
    fn register_pod_provisioning(&mut self) {
        let r = &mut self.registry;
        let p = &self.pods_provisioning;
        const FROM: &str =
            "Note: this calculated from a point in memory, not by the pod creation timestamp.";
        r.register(
            "pods_provisioning_bound_duration_seconds",
            format!("The time from when Karpenter first thinks the pod can schedule until it binds. {FROM}"),
            p.bound_duration.clone(),
        );
        r.register(
            "pods_provisioning_unbound_time_seconds",
            format!("The time from when Karpenter first thinks the pod can schedule until it binds. {FROM}"),
            p.unbound_time.clone(),
        );
        r.register(
            "pods_provisioning_startup_duration_seconds",
            format!("The time from when Karpenter first thinks the pod can schedule until the pod is running. {FROM}"),
            p.startup_duration.clone(),
        );
        r.register(
            "pods_provisioning_unstarted_time_seconds",
            format!("The time from when Karpenter first thinks the pod can schedule until the pod is running. {FROM}"),
            p.unstarted_time.clone(),
        );
        r.register(
            "pods_provisioning_scheduling_undecided_time_seconds",
            format!("The time from when Karpenter has seen a pod without making a scheduling decision for the pod. {FROM}"),
            p.undecided_time.clone(),
        );
    }

    /// Registers the node and NodePool gauges of `crate::state_metrics`.
    fn register_state(&mut self) {
        let r = &mut self.registry;
        for (name, help) in NODE_GAUGES {
            if let Some(family) = self.node_gauges.get(name) {
                r.register(format!("nodes_{name}"), help, family.clone());
            }
        }
        r.register(
            "cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests.",
            self.cluster_utilization.clone(),
        );
        r.register(
            "nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned, by nodepool and resource type.",
            self.nodepools_limit.clone(),
        );
        r.register(
            "nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool, by nodepool and resource type.",
            self.nodepools_usage.clone(),
        );
        r.register(
            "nodepools_cost_total",
            "Total cost of the nodepool from Karpenter's perspective, in US dollars per hour: the catalog prices of its NodeClaims' offerings. Not an authoritative source for billing.",
            self.nodepools_cost.clone(),
        );
        r.register(
            "pods_state",
            "Pod state is the current state of pods, labelled by pod name, namespace, owner, node, nodepool, zone, architecture, capacity type, instance type, phase and readiness.",
            self.pods_state.clone(),
        );
        r.register(
            "pods_startup_duration_seconds",
            "The time from pod creation until the pod is running.",
            self.pods_startup_duration.clone(),
        );
        r.register(
            "pods_unstarted_time_seconds",
            "The time from pod creation until the pod is running.",
            self.pods_unstarted_time.clone(),
        );
        r.register(
            "pods_bound_duration_seconds",
            "The time from pod creation until the pod is bound.",
            self.pods_bound_duration.clone(),
        );
        r.register(
            "pods_unbound_time_seconds",
            "The time from pod creation until the pod is bound.",
            self.pods_unbound_time.clone(),
        );
    }

    /// The `karpenter_nodes_<family>` gauge family (`family` one of [`NODE_GAUGES`]).
    pub fn node_gauge(&self, family: &str) -> &Family<NodeLabels, SecondsGauge> {
        assert!(
            self.node_gauges.contains_key(family),
            "{family} is not a node gauge"
        );
        &self.node_gauges[family]
    }

    /// Registers the series of node and NodeClaim termination: drains, evictions, finalizers (the registry holds clones: metrics are shared
    /// handles).
    fn register_termination(&mut self) {
        let r = &mut self.registry;
        r.register(
            "nodes_terminated",
            "Number of nodes terminated in total by Karpenter.",
            self.nodes_terminated.clone(),
        );
        r.register(
            "nodeclaims_terminated",
            "Number of nodeclaims terminated in total by Karpenter.",
            self.nodeclaims_terminated.clone(),
        );
        r.register(
            "nodeclaims_termination_duration_seconds",
            "Duration of NodeClaim termination in seconds.",
            self.nodeclaims_termination_duration.clone(),
        );
        r.register(
            "nodeclaims_instance_termination_duration_seconds",
            "Duration of CloudProvider Instance termination in seconds.",
            self.nodeclaims_instance_termination_duration.clone(),
        );
        r.register(
            "nodes_lifetime_duration_seconds",
            "The lifetime duration of the nodes since creation.",
            self.nodes_lifetime_duration.clone(),
        );
        r.register(
            "nodes_drained",
            "The total number of nodes drained by Karpenter.",
            self.nodes_drained.clone(),
        );
        r.register(
            "nodes_termination_duration_seconds",
            "The time taken between a node's deletion request and the removal of its finalizer.",
            self.nodes_termination_duration.clone(),
        );
        r.register(
            "pods_drained",
            "Number of pods drained during node termination, by reason.",
            self.pods_drained.clone(),
        );
        r.register(
            "nodes_eviction_requests",
            "The number of pod eviction requests, by response code.",
            self.eviction_requests.clone(),
        );
        r.register(
            "nodes_eviction_queue_depth",
            "The number of pods currently waiting for a successful eviction.",
            self.eviction_queue_depth.clone(),
        );
        r.register(
            "nodeclaims_termination_waiting",
            "Terminating NodeClaims by the stage they are waiting in.",
            self.termination_waiting.clone(),
        );
        r.register(
            "pods_termination_blocked",
            "Pods on terminating nodes that eviction cannot move, by reason.",
            self.pods_termination_blocked.clone(),
        );
    }

    /// Registers the series of the interruption queue (the registry holds clones: metrics are shared
    /// handles).
    fn register_interruption(&mut self) {
        let r = &mut self.registry;
        r.register(
            "interruption_received_messages",
            "Count of messages received from the SQS queue, by message type.",
            self.interruption_received.clone(),
        );
        r.register(
            "interruption_deleted_messages",
            "Count of messages deleted from the SQS queue.",
            self.interruption_deleted.clone(),
        );
        r.register(
            "interruption_instance_status_unhealthy",
            "Count of unique unhealthy instance statuses detected from EC2 DescribeInstanceStatus, by status check category.",
            self.instance_status_unhealthy.clone(),
        );
        r.register(
            "interruption_malformed_messages",
            "Count of queue messages that were not interruption events (logged and deleted).",
            self.interruption_malformed.clone(),
        );
        r.register(
            "interruption_actions_performed",
            "Number of interruption actions performed, by action.",
            self.interruption_actions.clone(),
        );
        r.register(
            "interruption_message_queue_duration_seconds",
            "Time between an interruption event and the deletion of its message from the queue.",
            self.interruption_queue_duration.clone(),
        );
    }

    /// The metrics in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut out, &self.registry);
        let _ = encode_registry(&mut out, &self.status.registry);
        let _ = encode_eof(&mut out);
        out
    }

    /// [`Self::touch_all`] for the families of the evaluation, scheduler-progress, state and
    /// node/NodePool gauges.
    fn touch_recent(&self) {
        let pool = Self::nodepool("default");
        let _ = self
            .nodeclaims_instance_termination_duration
            .get_or_create(&pool);
        let _ = self
            .disruption_evaluation_duration
            .get_or_create(&EvaluationLabels {
                reason: "empty".into(),
                consolidation_type: "empty".into(),
            });
        let _ = self.disruption_eligible_nodes.get_or_create(&ReasonLabels {
            reason: "empty".into(),
        });
        let _ = self
            .nodepools_allowed_disruptions
            .get_or_create(&NodePoolReasonLabels {
                nodepool: "default".into(),
                reason: "Empty".into(),
            });
        let scheduling = SchedulingLabels {
            controller: "provisioner".into(),
            scheduling_id: "1".into(),
        };
        let _ = self.scheduler_queue_depth.get_or_create(&scheduling);
        let _ = self.scheduler_unfinished_work.get_or_create(&scheduling);
        let node = NodeLabels {
            node: crate::state_metrics::node_label_names()
                .into_iter()
                .map(|n| (n, String::new()))
                .collect(),
            resource_type: None,
        };
        for (name, family) in &self.node_gauges {
            let labels = if *name == "current_lifetime_seconds" {
                node.clone()
            } else {
                NodeLabels {
                    resource_type: Some("cpu".into()),
                    ..node.clone()
                }
            };
            let _ = family.get_or_create(&labels);
        }
        let _ = self.cluster_utilization.get_or_create(&ResourceTypeLabels {
            resource_type: "cpu".into(),
        });
        let pool_resource = NodePoolResourceLabels {
            nodepool: "default".into(),
            resource_type: "cpu".into(),
        };
        let _ = self.nodepools_limit.get_or_create(&pool_resource);
        let _ = self.nodepools_usage.get_or_create(&pool_resource);
        let _ = self
            .nodepools_cost
            .get_or_create(&Self::nodepool("default"));
        let _ = self.pods_state.get_or_create(&PodStateLabels(
            crate::pod_metrics::POD_STATE_LABELS
                .iter()
                .map(|l| (l.to_string(), String::new()))
                .collect(),
        ));
        let pod = PodKeyLabels {
            name: "web-0".into(),
            namespace: "default".into(),
        };
        let _ = self.pods_unstarted_time.get_or_create(&pod);
        let _ = self.pods_unbound_time.get_or_create(&pod);
        let _ = self.pods_provisioning.unstarted_time.get_or_create(&pod);
        let _ = self.pods_provisioning.unbound_time.get_or_create(&pod);
        let _ = self.pods_provisioning.undecided_time.get_or_create(&pod);
    }

    /// One series of every family, with placeholder labels: what `/metrics` shows once every
    /// controller has recorded something. The comparison with upstream's table
    /// (`docs/metrics.md`) reads names and label sets from this encoding, so a family missing
    /// here fails that test.
    pub fn touch_all(&self) {
        self.touch_recent();
        self.touch_cloudprovider();
        self.status.touch();
        let pool = Self::nodepool("default");
        let controller = ControllerLabels {
            controller: "provisioner".into(),
        };
        let _ = self.nodes_terminated.get_or_create(&pool);
        let _ = self
            .nodeclaims_terminated
            .get_or_create(&NodePoolCapacityLabels {
                nodepool: "default".into(),
                capacity_type: "spot".into(),
            });
        let decision = DecisionLabels {
            decision: "delete".into(),
            reason: "empty".into(),
            consolidation_type: "empty".into(),
        };
        let _ = self.disruption_decisions.get_or_create(&decision);
        let _ = self.disruption_queue_failures.get_or_create(&decision);
        let _ = self
            .disruption_failed_validations
            .get_or_create(&ConsolidationTypeLabels {
                consolidation_type: "single".into(),
            });
        let _ = self.nodeclaims_disrupted.get_or_create(&DisruptedLabels {
            reason: "spot_interrupted".into(),
            nodepool: "default".into(),
            capacity_type: "spot".into(),
        });
        let _ = self.nodeclaims_created.get_or_create(&CreatedLabels {
            reason: "provisioning".into(),
            nodepool: "default".into(),
            min_values_relaxed: "false".into(),
        });
        let _ = self.nodeclaims_termination_duration.get_or_create(&pool);
        let _ = self.nodes_created.get_or_create(&pool);
        let _ = self.nodes_lifetime_duration.get_or_create(&pool);
        let _ = self.scheduling_duration.get_or_create(&controller);
        let _ = self.unschedulable_pods.get_or_create(&controller);
        let _ = self.nodes_drained.get_or_create(&pool);
        let _ = self.nodes_termination_duration.get_or_create(&pool);
        let _ = self.pods_drained.get_or_create(&Self::reason("eviction"));
        let _ = self
            .eviction_requests
            .get_or_create(&CodeLabels { code: "200".into() });
        let _ = self.termination_waiting.get_or_create(&StageLabels {
            stage: "draining".into(),
        });
        let _ = self
            .pods_termination_blocked
            .get_or_create(&Self::reason("do_not_disrupt"));
        let _ = self
            .interruption_received
            .get_or_create(&MessageTypeLabels {
                message_type: "spot_interrupted".into(),
            });
        let _ = self.interruption_actions.get_or_create(&ActionLabels {
            action_type: "CordonAndDrain".into(),
        });
        let _ = self
            .instance_status_unhealthy
            .get_or_create(&CategoryLabels {
                category: "InstanceStatus".into(),
            });
    }

    /// Counts one created NodeClaim (`created`: the object as stored) for `reason`
    /// (`provisioning`, or the lower-case disruption method).
    pub fn record_created(&self, reason: &str, created: &serde_json::Value) {
        let nodepool = created["metadata"]["labels"][crate::api::labels::NODEPOOL_LABEL]
            .as_str()
            .unwrap_or_default();
        let relaxed = created["metadata"]["annotations"]
            [crate::api::labels::MIN_VALUES_RELAXED_ANNOTATION]
            == "true";
        self.nodeclaims_created
            .get_or_create(&CreatedLabels {
                reason: reason.to_string(),
                nodepool: nodepool.to_string(),
                min_values_relaxed: relaxed.to_string(),
            })
            .inc();
    }

    /// Shorthand for a `nodepool` label set.
    pub fn nodepool(name: &str) -> NodePoolLabels {
        NodePoolLabels {
            nodepool: name.to_string(),
        }
    }

    /// Shorthand for a `reason` label set.
    pub fn reason(reason: &str) -> ReasonLabels {
        ReasonLabels {
            reason: reason.to_string(),
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}
