//! Prometheus metrics of the controllers, under upstream Karpenter's names where upstream has
//! the metric (so existing dashboards and alerts keep working), and under `karpenter_` names of
//! our own for what upstream only shows in logs (why a termination is waiting).
//!
//! One [`Metrics`] value lives in the controllers' [`Context`](crate::context::Context); the
//! composition root serves [`Metrics::encode`] on `/metrics`. Metrics are written, never read,
//! by controller logic: no decision may depend on them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

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

/// `action_type` label: what the interruption controller did.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct ActionLabels {
    pub action_type: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Registers `metric` under `name` and returns it (the registry holds a clone: metrics are
/// shared handles).
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

fn duration_histogram() -> Histogram {
    // 1 s .. ~4.5 h: a drain can take from seconds to a long terminationGracePeriod.
    Histogram::new(exponential_buckets(1.0, 2.0, 15))
}

/// Every metric the controllers write, and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    /// `karpenter_nodes_terminated_total{nodepool}`: Node finalizers removed.
    pub nodes_terminated: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodeclaims_terminated_total{nodepool}`: NodeClaim finalizers removed.
    pub nodeclaims_terminated: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodes_drained_total{nodepool}`: nodes whose drain completed.
    pub nodes_drained: Family<NodePoolLabels, Counter>,
    /// `karpenter_nodes_termination_duration_seconds{nodepool}`: deletion request to finalizer
    /// removal (upstream: a summary; a histogram here, which aggregates across replicas).
    pub nodes_termination_duration: HistogramFamily<NodePoolLabels>,
    /// `karpenter_pods_drained_total{reason}`: pods evicted or deleted by a drain.
    pub pods_drained: Family<ReasonLabels, Counter>,
    /// `karpenter_pods_eviction_requests_total{code}`: Eviction API calls by response code.
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
    /// `karpenter_interruption_malformed_messages_total` (ours): bodies that did not parse.
    pub interruption_malformed: Counter,
    /// `karpenter_interruption_actions_performed_total{action_type}`.
    pub interruption_actions: Family<ActionLabels, Counter>,
    /// `karpenter_interruption_message_queue_duration_seconds`: event time to message deletion.
    pub interruption_queue_duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("karpenter");
        let r = &mut registry;
        Self {
            nodes_terminated: registered(
                r,
                "nodes_terminated",
                "Number of nodes terminated in total by Karpenter.",
                Family::default(),
            ),
            nodeclaims_terminated: registered(
                r,
                "nodeclaims_terminated",
                "Number of nodeclaims terminated in total by Karpenter.",
                Family::default(),
            ),
            nodes_drained: registered(
                r,
                "nodes_drained",
                "The total number of nodes drained by Karpenter.",
                Family::default(),
            ),
            nodes_termination_duration: registered(
                r,
                "nodes_termination_duration_seconds",
                "The time taken between a node's deletion request and the removal of its finalizer.",
                Family::new_with_constructor(duration_histogram),
            ),
            pods_drained: registered(
                r,
                "pods_drained",
                "Number of pods drained during node termination, by reason.",
                Family::default(),
            ),
            eviction_requests: registered(
                r,
                "pods_eviction_requests",
                "The number of pod eviction requests, by response code.",
                Family::default(),
            ),
            eviction_queue_depth: registered(
                r,
                "nodes_eviction_queue_depth",
                "The number of pods currently waiting for a successful eviction.",
                Gauge::default(),
            ),
            termination_waiting: registered(
                r,
                "nodeclaims_termination_waiting",
                "Terminating NodeClaims by the stage they are waiting in.",
                Family::default(),
            ),
            pods_termination_blocked: registered(
                r,
                "pods_termination_blocked",
                "Pods on terminating nodes that eviction cannot move, by reason.",
                Family::default(),
            ),
            interruption_received: registered(
                r,
                "interruption_received_messages",
                "Count of messages received from the SQS queue, by message type.",
                Family::default(),
            ),
            interruption_deleted: registered(
                r,
                "interruption_deleted_messages",
                "Count of messages deleted from the SQS queue.",
                Counter::default(),
            ),
            interruption_malformed: registered(
                r,
                "interruption_malformed_messages",
                "Count of queue messages that were not interruption events (logged and deleted).",
                Counter::default(),
            ),
            interruption_actions: registered(
                r,
                "interruption_actions_performed",
                "Number of interruption actions performed, by action.",
                Family::default(),
            ),
            interruption_queue_duration: registered(
                r,
                "interruption_message_queue_duration_seconds",
                "Time between an interruption event and the deletion of its message from the queue.",
                Histogram::new(exponential_buckets(0.5, 2.0, 12)),
            ),
            registry,
        }
    }

    /// The metrics in the Prometheus/OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
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
