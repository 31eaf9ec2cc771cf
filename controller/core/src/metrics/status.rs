//! operatorpkg's status-condition and termination series (`operator_*`), as upstream Karpenter
//! registers its status controllers: for NodeClaims, NodePools and (its AWS provider)
//! EC2NodeClasses with the deprecated kind-agnostic series too, and for Nodes through the
//! generic-object controller without them. [`crate::status_metrics`] computes them.
//!
//! Per kind (`<kind>` its lower-case name):
//! - `operator_<kind>_status_condition_count{namespace, name, type, status, reason, ...}`: 1
//!   per object and condition; `..._current_status_seconds` the time since the condition's
//!   `lastTransitionTime`.
//! - `operator_<kind>_status_condition_transitions_total{type, status, reason, ...}`: status
//!   changes seen, labelled with the new status; `..._transition_seconds{type, status, ...}`:
//!   how long the condition held its old status, labelled with the old status.
//! - `operator_<kind>_termination_current_time_seconds{namespace, name, ...}`: time since the
//!   deletion timestamp of a terminating object; `..._termination_duration_seconds{...}`: from
//!   the deletion timestamp until the object was gone.
//!
//! `...` are the object's labels upstream configures (`WithLabels`), named as Prometheus labels
//! (`karpenter.sh/nodepool` as `karpenter_sh_nodepool`), empty when the object lacks them. The
//! deprecated `operator_status_condition_*` and `operator_termination_*` series carry `group`
//! and `kind` instead. They live in a registry of their own: they have no `karpenter_` prefix.

use std::collections::BTreeMap;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::{HistogramFamily, SecondsGauge};
use crate::api::labels::{EC2NODECLASS_LABEL, INITIALIZED_LABEL, NODEPOOL_LABEL};

/// Label pairs in the order they were built (upstream's label order: the fixed labels, then the
/// object's).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct LabelPairs(pub Vec<(String, String)>);

impl EncodeLabelSet for LabelPairs {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

impl LabelPairs {
    /// Pairs from `(name, value)`s.
    pub fn of(pairs: &[(&str, &str)]) -> Self {
        Self(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// These pairs followed by `more`.
    pub fn with(&self, more: &[(String, String)]) -> Self {
        let mut out = self.0.clone();
        out.extend(more.iter().cloned());
        Self(out)
    }
}

/// `prometheus.ExponentialBuckets(0.5, 2, 15)`: 0.5 s .. 8192 s, which upstream passes for
/// NodeClaims, NodePools and Nodes.
fn transition_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 15))
}

/// `prometheus.DefBuckets`: operatorpkg's default (EC2NodeClasses and the deprecated series).
fn default_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// One kind as upstream registers its status controller.
#[derive(Clone, Copy, Debug)]
pub struct StatusKind {
    /// The Kubernetes kind (`NodeClaim`): the deprecated series' `kind` label; lower case, the
    /// per-kind series' name.
    pub kind: &'static str,
    /// The API group: the deprecated series' `group` label.
    pub group: &'static str,
    /// The object labels upstream adds as metric labels (`status.WithLabels`).
    pub labels: &'static [&'static str],
    /// Whether upstream passes `status.EmitDeprecatedMetrics`.
    pub deprecated: bool,
    /// The histograms' buckets.
    pub buckets: fn() -> Histogram,
}

impl StatusKind {
    /// The per-kind series' infix: the kind in lower case.
    pub fn name(&self) -> String {
        self.kind.to_ascii_lowercase()
    }
}

pub const NODE_CLAIM: StatusKind = StatusKind {
    kind: "NodeClaim",
    group: "karpenter.sh",
    labels: &[EC2NODECLASS_LABEL, NODEPOOL_LABEL],
    deprecated: true,
    buckets: transition_histogram,
};
pub const NODE_POOL: StatusKind = StatusKind {
    kind: "NodePool",
    group: "karpenter.sh",
    labels: &[],
    deprecated: true,
    buckets: transition_histogram,
};
pub const EC2_NODE_CLASS: StatusKind = StatusKind {
    kind: "EC2NodeClass",
    group: "karpenter.k8s.aws",
    labels: &[],
    deprecated: true,
    buckets: default_histogram,
};
pub const NODE: StatusKind = StatusKind {
    kind: "Node",
    group: "",
    labels: &[EC2NODECLASS_LABEL, NODEPOOL_LABEL, INITIALIZED_LABEL],
    deprecated: false,
    buckets: transition_histogram,
};

/// Every kind with a status controller.
pub const STATUS_KINDS: [StatusKind; 4] = [NODE_CLAIM, NODE_POOL, EC2_NODE_CLASS, NODE];

/// An object label as a metric label (operatorpkg's `toPrometheusLabel`: `/`, `.`, `-` as `_`).
pub fn prometheus_label(label: &str) -> String {
    label.replace(['/', '.', '-'], "_")
}

/// The six families of one kind (or the deprecated kind-agnostic ones).
#[derive(Clone)]
pub struct StatusFamilies {
    pub condition_count: Family<LabelPairs, Gauge>,
    pub condition_current_status: Family<LabelPairs, SecondsGauge>,
    pub condition_transitions: Family<LabelPairs, Counter>,
    pub condition_transition_seconds: HistogramFamily<LabelPairs>,
    pub termination_current_time: Family<LabelPairs, SecondsGauge>,
    pub termination_duration: HistogramFamily<LabelPairs>,
}

impl StatusFamilies {
    fn new(buckets: fn() -> Histogram) -> Self {
        Self {
            condition_count: Family::default(),
            condition_current_status: Family::default(),
            condition_transitions: Family::default(),
            condition_transition_seconds: Family::new_with_constructor(buckets),
            termination_current_time: Family::default(),
            termination_duration: Family::new_with_constructor(buckets),
        }
    }

    /// Registers the families as `operator_<infix>status_condition_*` and
    /// `operator_<infix>termination_*`; `what` names the objects in the help texts.
    fn register(&self, r: &mut Registry, infix: &str, what: &str) {
        let condition = format!("operator_{infix}status_condition");
        let termination = format!("operator_{infix}termination");
        r.register(
            format!("{condition}_count"),
            format!("1 for each status condition of {what}, by type, status and reason"),
            self.condition_count.clone(),
        );
        r.register(
            format!("{condition}_current_status_seconds"),
            format!("Seconds since a status condition of {what} took its current status"),
            self.condition_current_status.clone(),
        );
        r.register(
            format!("{condition}_transitions"),
            format!("Status changes of the conditions of {what}, by type, new status and reason"),
            self.condition_transitions.clone(),
        );
        r.register(
            format!("{condition}_transition_seconds"),
            format!("How long a condition of {what} held a status before it changed"),
            self.condition_transition_seconds.clone(),
        );
        r.register(
            format!("{termination}_current_time_seconds"),
            format!("Seconds since the deletion of {what} that is still terminating"),
            self.termination_current_time.clone(),
        );
        r.register(
            format!("{termination}_duration_seconds"),
            format!("Seconds from the deletion of {what} until it was gone"),
            self.termination_duration.clone(),
        );
    }
}

/// The `operator_*` families and their (unprefixed) registry.
pub struct StatusConditionMetrics {
    pub(super) registry: Registry,
    /// By kind (`StatusKind::kind`).
    pub kinds: BTreeMap<&'static str, StatusFamilies>,
    /// The deprecated kind-agnostic series (`operator_status_condition_*`,
    /// `operator_termination_*`), labelled `group` and `kind`.
    pub deprecated: StatusFamilies,
}

impl Default for StatusConditionMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let mut kinds = BTreeMap::new();
        for kind in STATUS_KINDS {
            let families = StatusFamilies::new(kind.buckets);
            let what = format!("a {}", kind.kind);
            families.register(&mut registry, &format!("{}_", kind.name()), &what);
            kinds.insert(kind.kind, families);
        }
        let deprecated = StatusFamilies::new(default_histogram);
        deprecated.register(
            &mut registry,
            "",
            "an object (deprecated: see the per-kind series)",
        );
        Self {
            registry,
            kinds,
            deprecated,
        }
    }
}

impl StatusConditionMetrics {
    /// The families of `kind`.
    pub fn of(&self, kind: &StatusKind) -> &StatusFamilies {
        &self.kinds[kind.kind]
    }

    /// One series of every family with placeholder values (`Metrics::touch_all`).
    pub(super) fn touch(&self) {
        for kind in STATUS_KINDS {
            let extra: Vec<(String, String)> = kind
                .labels
                .iter()
                .map(|l| (prometheus_label(l), String::new()))
                .collect();
            touch_families(self.of(&kind), &extra);
        }
        let group_kind = [
            ("group".to_string(), "karpenter.sh".to_string()),
            ("kind".to_string(), "NodeClaim".to_string()),
        ];
        touch_families(&self.deprecated, &group_kind);
    }
}

fn touch_families(f: &StatusFamilies, extra: &[(String, String)]) {
    let object = LabelPairs::of(&[("namespace", ""), ("name", "default")]);
    let condition = [("type", "Ready"), ("status", "True"), ("reason", "Ready")];
    let gauge = object.with(&LabelPairs::of(&condition).0).with(extra);
    let _ = f.condition_count.get_or_create(&gauge);
    let _ = f.condition_current_status.get_or_create(&gauge);
    let _ = f
        .condition_transitions
        .get_or_create(&LabelPairs::of(&condition).with(extra));
    let _ = f
        .condition_transition_seconds
        .get_or_create(&LabelPairs::of(&condition[..2]).with(extra));
    let _ = f
        .termination_current_time
        .get_or_create(&object.with(extra));
    let _ = f
        .termination_duration
        .get_or_create(&LabelPairs(extra.to_vec()));
}
