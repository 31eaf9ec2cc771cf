//! Upstream's operatorpkg status controllers as a metrics pass: the `operator_*` status-condition
//! and termination series ([`crate::metrics::status`]) of every NodeClaim, NodePool,
//! EC2NodeClass and Node, every [`STATUS_METRICS_INTERVAL`] from the watch-fed caches as the
//! controllers last synced them (no API call of its own).
//!
//! What upstream does on each reconcile of an object, done here for every object each pass:
//! - every condition is a `count` series (1) and a `current_status_seconds` series (since its
//!   `lastTransitionTime`); series the object no longer has (another status or reason, a
//!   condition gone, the object gone) are removed. As upstream's condition sets, a NodeClaim,
//!   NodePool or EC2NodeClass missing `Ready` or one of its dependents, and a Node missing
//!   `Ready`, shows it `Unknown` (`AwaitingReconciliation`) since the object's creation
//!   (upstream's in-memory recomputation of `Ready` from those defaults is not repeated).
//! - a condition whose status differs from the last pass counts one transition (labelled with
//!   the new status and reason) and observes how long it held the old status (the two
//!   `lastTransitionTime`s apart, labelled with the old status). A condition first seen counts
//!   a transition unless it is `Unknown`, as upstream (a restart counts them again).
//! - a terminating object has `termination_current_time_seconds`; when it is gone its time
//!   from the deletion timestamp is observed.
//!
//! Deliberate difference: upstream reconciles on every watch event, so it sees each status
//! change. Sampling every 10 s (upstream also requeues every 10 s), a condition could flip and
//! flip back between two passes; the pass therefore also compares `lastTransitionTime`, and a
//! condition with the same status but a newer transition time counts one transition (with no
//! duration: the intermediate status's is unknown). Upstream's `Finalized` and transition
//! events are not recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::api::common::{Condition, ConditionStatus};
use crate::api::conditions::{self, READY};
use crate::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::context::Context;
use crate::metrics::SecondsGauge;
use crate::metrics::status::{
    EC2_NODE_CLASS, LabelPairs, NODE, NODE_CLAIM, NODE_POOL, StatusConditionMetrics,
    StatusFamilies, StatusKind, prometheus_label,
};

/// How often the series are recomputed: upstream's status controller requeues every object
/// every 10 s.
pub const STATUS_METRICS_INTERVAL: Duration = Duration::from_secs(10);

/// The reason of a condition an object lacks (operatorpkg's `SetUnknown`).
pub const AWAITING_RECONCILIATION: &str = "AwaitingReconciliation";

/// One condition as the status controller reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedCondition {
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub reason: String,
    pub last_transition: Option<Timestamp>,
}

/// One object as the status controller reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub deleted: Option<Timestamp>,
    pub conditions: Vec<ObservedCondition>,
}

fn status_name(status: ConditionStatus) -> &'static str {
    match status {
        ConditionStatus::True => "True",
        ConditionStatus::False => "False",
        ConditionStatus::Unknown => "Unknown",
    }
}

impl Observed {
    /// An object of the v1 API whose condition set is `Ready` over `dependents` (upstream's
    /// `StatusConditions()`): those missing are `Unknown` since the object's creation.
    pub fn of_api(meta: &ObjectMeta, found: &[Condition], dependents: &[&str]) -> Self {
        let mut out: Vec<ObservedCondition> = found
            .iter()
            .map(|c| ObservedCondition {
                type_: c.type_.clone(),
                status: status_name(c.status).to_string(),
                reason: c.reason.clone(),
                last_transition: Some(c.last_transition_time.0),
            })
            .collect();
        let created = meta.creation_timestamp.as_ref().map(|t| t.0);
        for type_ in std::iter::once(READY).chain(dependents.iter().copied()) {
            if !out.iter().any(|c| c.type_ == type_) {
                out.push(ObservedCondition {
                    type_: type_.to_string(),
                    status: "Unknown".into(),
                    reason: AWAITING_RECONCILIATION.into(),
                    last_transition: created,
                });
            }
        }
        Self::new(meta, out)
    }

    /// A Node: its `status.conditions`, with `Ready` as the root (upstream's generic-object
    /// adapter).
    pub fn of_node(node: &Node) -> Self {
        let mut out: Vec<ObservedCondition> = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .map(|c| ObservedCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                last_transition: c.last_transition_time.as_ref().map(|t| t.0),
            })
            .collect();
        if !out.iter().any(|c| c.type_ == READY) {
            out.push(ObservedCondition {
                type_: READY.into(),
                status: "Unknown".into(),
                reason: AWAITING_RECONCILIATION.into(),
                last_transition: node.metadata.creation_timestamp.as_ref().map(|t| t.0),
            });
        }
        Self::new(&node.metadata, out)
    }

    fn new(meta: &ObjectMeta, conditions: Vec<ObservedCondition>) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            deleted: meta.deletion_timestamp.as_ref().map(|t| t.0),
            conditions,
        }
    }
}

/// The gauge series of one condition (or of the termination) of one object, with handles on
/// the family entries, so a pass whose labels did not change only stores new values: looking
/// every series up by its label set each pass was the largest cost of a simulated step. The
/// tracker is the only writer of its kind's gauge series, so a handle stays the family's entry
/// until the tracker removes it.
#[derive(Debug)]
struct Series {
    labels: LabelPairs,
    seconds: SecondsGauge,
    /// The deprecated kind-agnostic series, when the kind has them.
    deprecated: Option<(LabelPairs, SecondsGauge)>,
}

/// One gauge family pair: the seconds and, for conditions, the count.
#[derive(Clone, Copy)]
struct GaugeFamilies<'a> {
    seconds: &'a Family<LabelPairs, SecondsGauge>,
    count: Option<&'a Family<LabelPairs, Gauge>>,
}

impl GaugeFamilies<'_> {
    /// The seconds series of `labels`, with its count (always 1) set.
    fn create(&self, labels: &LabelPairs) -> SecondsGauge {
        if let Some(count) = self.count {
            count.get_or_create(labels).set(1);
        }
        self.seconds.get_or_create(labels).clone()
    }

    fn remove(&self, labels: &LabelPairs) {
        self.seconds.remove(labels);
        if let Some(count) = self.count {
            count.remove(labels);
        }
    }
}

/// Where one object's series of one sort (conditions or termination) go.
struct SeriesTarget<'a> {
    families: GaugeFamilies<'a>,
    deprecated: Option<(GaugeFamilies<'a>, &'a [(String, String)])>,
}

impl SeriesTarget<'_> {
    /// The series `labels` (the object's own labels follow them), created in the families.
    fn create(&self, labels: &LabelPairs, extra: &[(String, String)]) -> Series {
        let labels_with = labels.with(extra);
        let seconds = self.families.create(&labels_with);
        let deprecated = self.deprecated.map(|(families, group_kind)| {
            let labels = labels.with(group_kind);
            let seconds = families.create(&labels);
            (labels, seconds)
        });
        Series {
            labels: labels_with,
            seconds,
            deprecated,
        }
    }

    fn remove(&self, series: &Series) {
        self.families.remove(&series.labels);
        if let (Some((families, _)), Some((labels, _))) = (&self.deprecated, &series.deprecated) {
            families.remove(labels);
        }
    }
}

impl Series {
    fn set(&self, v: f64) {
        self.seconds.set(v);
        if let Some((_, seconds)) = &self.deprecated {
            seconds.set(v);
        }
    }
}

/// One condition as the last pass saw it, with its series.
#[derive(Debug)]
struct SeenCondition {
    observed: ObservedCondition,
    series: Series,
}

/// What the pass remembers of one object from the last pass.
#[derive(Debug)]
struct Seen {
    /// By condition type.
    conditions: BTreeMap<String, SeenCondition>,
    /// Its object labels as metric labels.
    extra: Vec<(String, String)>,
    deleted: Option<Timestamp>,
    terminating: Option<Series>,
    /// The object's `resourceVersion` when it was read: the same version is the same object,
    /// so a later pass only moves its gauges' values on ([`Seen::refresh`]).
    version: Option<String>,
    /// The pass that last found the object ([`KindTracker::pass`]).
    pass: u64,
}

impl Seen {
    /// The pass over an object unchanged since the last: every series stays, only the seconds
    /// since each transition (and since the deletion) move on — what [`object_series`] does for
    /// it, without reading the object again.
    fn refresh(&self, now: Timestamp) {
        for c in self.conditions.values() {
            c.series.set(seconds(c.observed.last_transition, now));
        }
        if let Some(t) = &self.terminating {
            t.set(seconds(self.deleted, now));
        }
    }
}

/// An object the status pass reads: its metadata (name, `resourceVersion`) and its conditions
/// as the status controller sees them.
pub trait StatusObject {
    fn meta(&self) -> &ObjectMeta;
    /// Read only when the object changed since the last pass.
    fn observed(&self) -> Observed;
}

impl StatusObject for Node {
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn observed(&self) -> Observed {
        Observed::of_node(self)
    }
}

/// A v1 API object whose condition set is `Ready` over `$dependents`.
macro_rules! api_status_object {
    ($kind:ty, $dependents:expr) => {
        impl StatusObject for $kind {
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn observed(&self) -> Observed {
                let found = self.status.as_ref().map_or(&[][..], |s| &s.conditions);
                Observed::of_api(&self.metadata, found, &$dependents)
            }
        }
    };
}

api_status_object!(NodeClaim, conditions::nodeclaim::READY_DEPENDENTS);
api_status_object!(NodePool, conditions::nodepool::READY_DEPENDENTS);
api_status_object!(EC2NodeClass, conditions::ec2nodeclass::READY_DEPENDENTS);

/// What the pass remembers of one kind: its objects and their gauge series.
#[derive(Debug, Default)]
pub struct KindTracker {
    /// By namespace, then name (two levels, so a pass looks an object up without allocating).
    seen: BTreeMap<String, BTreeMap<String, Seen>>,
    /// Passes so far: an object whose [`Seen::pass`] is behind after a pass is gone.
    pass: u64,
}

fn seconds(from: Option<Timestamp>, to: Timestamp) -> f64 {
    from.map_or(0.0, |f| to.duration_since(f).as_secs_f64().max(0.0))
}

fn pairs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    LabelPairs::of(pairs).0
}

/// One kind's families and what the deprecated series add (`group`, `kind`) when upstream
/// emits them.
struct Target<'a> {
    families: &'a StatusFamilies,
    deprecated: Option<(&'a StatusFamilies, Vec<(String, String)>)>,
}

impl<'a> Target<'a> {
    fn conditions(&'a self) -> SeriesTarget<'a> {
        let of = |f: &'a StatusFamilies| GaugeFamilies {
            seconds: &f.condition_current_status,
            count: Some(&f.condition_count),
        };
        SeriesTarget {
            families: of(self.families),
            deprecated: self
                .deprecated
                .as_ref()
                .map(|(d, gk)| (of(d), gk.as_slice())),
        }
    }

    fn terminating(&'a self) -> SeriesTarget<'a> {
        let of = |f: &'a StatusFamilies| GaugeFamilies {
            seconds: &f.termination_current_time,
            count: None,
        };
        SeriesTarget {
            families: of(self.families),
            deprecated: self
                .deprecated
                .as_ref()
                .map(|(d, gk)| (of(d), gk.as_slice())),
        }
    }
}

impl KindTracker {
    /// One pass over every object of `kind`: sets its series, counts transitions since the last
    /// pass, and removes the series of what is gone. An object whose `resourceVersion` is the
    /// one the last pass read is not read again (at 2,000 nodes, reading and dropping every
    /// object's labels each pass was most of a simulated fleet's idle step).
    pub fn observe<'o, T: StatusObject + 'o>(
        &mut self,
        kind: &StatusKind,
        objects: impl IntoIterator<Item = &'o T>,
        metrics: &StatusConditionMetrics,
        now: Timestamp,
    ) {
        let target = Target {
            families: metrics.of(kind),
            deprecated: kind.deprecated.then(|| {
                let group_kind = pairs(&[("group", kind.group), ("kind", kind.kind)]);
                (&metrics.deprecated, group_kind)
            }),
        };
        self.pass += 1;
        let pass = self.pass;
        for object in objects {
            let meta = object.meta();
            let namespace = meta.namespace.as_deref().unwrap_or_default();
            let name = meta.name.as_deref().unwrap_or_default();
            let version = meta.resource_version.as_deref();
            let names = self.seen.entry(namespace.to_string()).or_default();
            if let Some(seen) = names.get_mut(name)
                && version.is_some()
                && seen.version.as_deref() == version
                && seen.pass != pass
            {
                seen.pass = pass;
                seen.refresh(now);
                continue;
            }
            let observed = object.observed();
            let previous = names.remove(name);
            let extra = extra_labels(kind, &observed);
            transitions(&observed, previous.as_ref(), &extra, &target);
            let mut seen = object_series(&observed, extra, previous, &target, now);
            seen.version = version.map(str::to_string);
            seen.pass = pass;
            names.insert(name.to_string(), seen);
        }
        let mut gone_ones = Vec::new();
        for names in self.seen.values_mut() {
            let stale: Vec<String> = names
                .iter()
                .filter(|(_, seen)| seen.pass != pass)
                .map(|(name, _)| name.clone())
                .collect();
            gone_ones.extend(stale.into_iter().filter_map(|name| names.remove(&name)));
        }
        self.seen.retain(|_, names| !names.is_empty());
        for seen in gone_ones {
            gone(seen, &target, now);
        }
    }
}

/// The labels of `object`'s own labels `kind` puts on its series.
fn extra_labels(kind: &StatusKind, object: &Observed) -> Vec<(String, String)> {
    kind.labels
        .iter()
        .map(|l| {
            let value = object.labels.get(*l).cloned().unwrap_or_default();
            (prometheus_label(l), value)
        })
        .collect()
}

/// Sets the condition and termination series of one object, reusing the last pass's series
/// whose labels are unchanged and removing those it no longer has.
fn object_series(
    object: &Observed,
    extra: Vec<(String, String)>,
    previous: Option<Seen>,
    target: &Target,
    now: Timestamp,
) -> Seen {
    let (mut old_conditions, mut old_terminating) = match previous {
        // Other object labels: every series moves.
        Some(p) if p.extra == extra => (p.conditions, p.terminating),
        Some(p) => {
            for c in p.conditions.values() {
                target.conditions().remove(&c.series);
            }
            if let Some(t) = &p.terminating {
                target.terminating().remove(t);
            }
            (BTreeMap::new(), None)
        }
        None => (BTreeMap::new(), None),
    };
    let name = [
        ("namespace", object.namespace.as_str()),
        ("name", object.name.as_str()),
    ];
    let mut conditions = BTreeMap::new();
    for c in &object.conditions {
        let series = match old_conditions.remove(&c.type_) {
            Some(old) if old.observed.status == c.status && old.observed.reason == c.reason => {
                old.series
            }
            old => {
                if let Some(old) = old {
                    target.conditions().remove(&old.series);
                }
                let labels = LabelPairs::of(&[
                    name[0],
                    name[1],
                    ("type", &c.type_),
                    ("status", &c.status),
                    ("reason", &c.reason),
                ]);
                target.conditions().create(&labels, &extra)
            }
        };
        series.set(seconds(c.last_transition, now));
        let seen = SeenCondition {
            observed: c.clone(),
            series,
        };
        conditions.insert(c.type_.clone(), seen);
    }
    for old in old_conditions.values() {
        target.conditions().remove(&old.series);
    }
    let terminating = object.deleted.map(|deleted| {
        let series = old_terminating
            .take()
            .unwrap_or_else(|| target.terminating().create(&LabelPairs::of(&name), &extra));
        series.set(seconds(Some(deleted), now));
        series
    });
    if let Some(old) = &old_terminating {
        target.terminating().remove(old);
    }
    Seen {
        conditions,
        extra,
        deleted: object.deleted,
        terminating,
        version: None,
        pass: 0,
    }
}

/// An object the pass no longer finds: its series go, and a terminating one's time from its
/// deletion is observed.
fn gone(seen: Seen, target: &Target, now: Timestamp) {
    for c in seen.conditions.values() {
        target.conditions().remove(&c.series);
    }
    if let Some(t) = &seen.terminating {
        target.terminating().remove(t);
    }
    if seen.deleted.is_some() {
        let took = seconds(seen.deleted, now);
        let labels = LabelPairs(seen.extra);
        target
            .families
            .termination_duration
            .get_or_create(&labels)
            .observe(took);
        if let Some((deprecated, group_kind)) = &target.deprecated {
            let labels = LabelPairs(group_kind.clone());
            deprecated
                .termination_duration
                .get_or_create(&labels)
                .observe(took);
        }
    }
}

/// Counts and times the condition transitions of `object` since `previous` (the last pass).
fn transitions(
    object: &Observed,
    previous: Option<&Seen>,
    extra: &[(String, String)],
    target: &Target,
) {
    for c in &object.conditions {
        let before = previous
            .and_then(|p| p.conditions.get(&c.type_))
            .map(|b| &b.observed);
        let changed = match before {
            // Upstream reads a condition it never saw as Unknown.
            None => c.status != "Unknown",
            Some(b) => b.status != c.status || b.last_transition != c.last_transition,
        };
        if !changed {
            continue;
        }
        let counted = LabelPairs::of(&[
            ("type", &c.type_),
            ("status", &c.status),
            ("reason", &c.reason),
        ]);
        target
            .families
            .condition_transitions
            .get_or_create(&counted.with(extra))
            .inc();
        if let Some((d, group_kind)) = &target.deprecated {
            d.condition_transitions
                .get_or_create(&counted.with(group_kind))
                .inc();
        }
        let Some(b) = before.filter(|b| b.status != c.status) else {
            continue;
        };
        let held = match (b.last_transition, c.last_transition) {
            (Some(from), Some(to)) => to.duration_since(from).as_secs_f64().max(0.0),
            _ => 0.0,
        };
        let timed = LabelPairs::of(&[("type", &c.type_), ("status", &b.status)]);
        target
            .families
            .condition_transition_seconds
            .get_or_create(&timed.with(extra))
            .observe(held);
        if let Some((d, group_kind)) = &target.deprecated {
            d.condition_transition_seconds
                .get_or_create(&timed.with(group_kind))
                .observe(held);
        }
    }
}

/// The status-condition metrics controllers over one context.
pub struct StatusMetrics {
    ctx: Arc<Context>,
    /// By kind (`StatusKind::kind`).
    trackers: Mutex<BTreeMap<&'static str, KindTracker>>,
}

impl StatusMetrics {
    pub fn new(ctx: Arc<Context>) -> Self {
        Self {
            ctx,
            trackers: Mutex::new(BTreeMap::new()),
        }
    }

    /// One pass over the cached NodeClaims, NodePools, EC2NodeClasses and Nodes (it reads
    /// only caches and writes only metrics, so it cannot fail).
    pub async fn reconcile(&self) {
        let now = self.ctx.now();
        let state = self.ctx.state.lock().await;
        let mut trackers = self.trackers.lock().unwrap_or_else(|p| p.into_inner());
        let metrics = &self.ctx.metrics.status;
        trackers.entry(NODE_CLAIM.kind).or_default().observe(
            &NODE_CLAIM,
            state.claims.iter().map(|c| &**c),
            metrics,
            now,
        );
        trackers.entry(NODE_POOL.kind).or_default().observe(
            &NODE_POOL,
            state.pools.iter().map(|p| &**p),
            metrics,
            now,
        );
        trackers.entry(EC2_NODE_CLASS.kind).or_default().observe(
            &EC2_NODE_CLASS,
            state.node_classes.iter().map(|n| &**n),
            metrics,
            now,
        );
        trackers.entry(NODE.kind).or_default().observe(
            &NODE,
            state.nodes.iter().map(|n| &**n),
            metrics,
            now,
        );
    }
}
