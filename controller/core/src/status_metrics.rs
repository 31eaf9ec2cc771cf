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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::api::common::{Condition, ConditionStatus};
use crate::api::conditions::{self, READY};
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

/// What the pass remembers of one object from the last pass.
#[derive(Debug)]
struct Seen {
    conditions: BTreeMap<String, ObservedCondition>,
    /// Its object labels as metric labels.
    extra: Vec<(String, String)>,
    deleted: Option<Timestamp>,
}

/// What the pass remembers of one kind: its objects and the gauge series it set.
#[derive(Debug, Default)]
pub struct KindTracker {
    seen: BTreeMap<(String, String), Seen>,
    gauges: BTreeSet<LabelPairs>,
    deprecated_gauges: BTreeSet<LabelPairs>,
    terminating: BTreeSet<LabelPairs>,
    deprecated_terminating: BTreeSet<LabelPairs>,
}

/// The gauge series one pass sets for one kind: labels → seconds.
#[derive(Default)]
struct Gauges {
    conditions: BTreeMap<LabelPairs, f64>,
    deprecated_conditions: BTreeMap<LabelPairs, f64>,
    terminating: BTreeMap<LabelPairs, f64>,
    deprecated_terminating: BTreeMap<LabelPairs, f64>,
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

impl KindTracker {
    /// One pass over every object of `kind`: sets its series, counts transitions since the last
    /// pass, and removes the series of what is gone.
    pub fn observe(
        &mut self,
        kind: &StatusKind,
        objects: &[Observed],
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
        let mut gauges = Gauges::default();
        let mut present = BTreeSet::new();
        for object in objects {
            let key = (object.namespace.clone(), object.name.clone());
            present.insert(key.clone());
            let extra: Vec<(String, String)> = kind
                .labels
                .iter()
                .map(|l| {
                    let value = object.labels.get(*l).cloned().unwrap_or_default();
                    (prometheus_label(l), value)
                })
                .collect();
            let group_kind = target.deprecated.as_ref().map(|(_, gk)| gk.as_slice());
            condition_gauges(object, &extra, group_kind, now, &mut gauges);
            let previous = self.seen.remove(&key);
            transitions(object, previous.as_ref(), &extra, &target);
            self.seen.insert(
                key,
                Seen {
                    conditions: object
                        .conditions
                        .iter()
                        .map(|c| (c.type_.clone(), c.clone()))
                        .collect(),
                    extra,
                    deleted: object.deleted,
                },
            );
        }
        let gone: Vec<_> = self
            .seen
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            let Some(seen) = self.seen.remove(&key) else {
                continue;
            };
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
        self.apply(&target, gauges);
    }

    /// Sets this pass's gauges and removes those of the last pass it no longer has.
    fn apply(&mut self, target: &Target, gauges: Gauges) {
        let f = target.families;
        set_gauges(
            &mut self.gauges,
            &gauges.conditions,
            &[&f.condition_current_status],
            Some(&f.condition_count),
        );
        set_gauges(
            &mut self.terminating,
            &gauges.terminating,
            &[&f.termination_current_time],
            None,
        );
        if let Some((d, _)) = &target.deprecated {
            set_gauges(
                &mut self.deprecated_gauges,
                &gauges.deprecated_conditions,
                &[&d.condition_current_status],
                Some(&d.condition_count),
            );
            set_gauges(
                &mut self.deprecated_terminating,
                &gauges.deprecated_terminating,
                &[&d.termination_current_time],
                None,
            );
        }
    }
}

/// Sets `now`'s series in `seconds` (and 1 in `count`), removes those only in `before`, and
/// remembers `now`'s.
fn set_gauges(
    before: &mut BTreeSet<LabelPairs>,
    now: &BTreeMap<LabelPairs, f64>,
    seconds: &[&Family<LabelPairs, SecondsGauge>],
    count: Option<&Family<LabelPairs, Gauge>>,
) {
    for (labels, v) in now {
        for family in seconds {
            family.get_or_create(labels).set(*v);
        }
        if let Some(count) = count {
            count.get_or_create(labels).set(1);
        }
    }
    for labels in before.iter().filter(|l| !now.contains_key(*l)) {
        for family in seconds {
            family.remove(labels);
        }
        if let Some(count) = count {
            count.remove(labels);
        }
    }
    *before = now.keys().cloned().collect();
}

/// The condition and termination gauges of one object.
fn condition_gauges(
    object: &Observed,
    extra: &[(String, String)],
    group_kind: Option<&[(String, String)]>,
    now: Timestamp,
    gauges: &mut Gauges,
) {
    let name = [
        ("namespace", object.namespace.as_str()),
        ("name", object.name.as_str()),
    ];
    for c in &object.conditions {
        let labels = LabelPairs::of(&[
            name[0],
            name[1],
            ("type", &c.type_),
            ("status", &c.status),
            ("reason", &c.reason),
        ]);
        let v = seconds(c.last_transition, now);
        gauges.conditions.insert(labels.with(extra), v);
        if let Some(group_kind) = group_kind {
            gauges
                .deprecated_conditions
                .insert(labels.with(group_kind), v);
        }
    }
    if let Some(deleted) = object.deleted {
        let labels = LabelPairs::of(&name);
        let v = seconds(Some(deleted), now);
        gauges.terminating.insert(labels.with(extra), v);
        if let Some(group_kind) = group_kind {
            gauges
                .deprecated_terminating
                .insert(labels.with(group_kind), v);
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
        let before = previous.and_then(|p| p.conditions.get(&c.type_));
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
        let observed: [(StatusKind, Vec<Observed>); 4] = {
            let state = self.ctx.state.lock().await;
            let claims = state
                .claims
                .iter()
                .map(|c| {
                    let found = c.status.as_ref().map_or(&[][..], |s| &s.conditions);
                    let dependents = conditions::nodeclaim::READY_DEPENDENTS;
                    Observed::of_api(&c.metadata, found, &dependents)
                })
                .collect();
            let pools = state
                .pools
                .iter()
                .map(|p| {
                    let found = p.status.as_ref().map_or(&[][..], |s| &s.conditions);
                    let dependents = conditions::nodepool::READY_DEPENDENTS;
                    Observed::of_api(&p.metadata, found, &dependents)
                })
                .collect();
            let classes = state
                .node_classes
                .iter()
                .map(|n| {
                    let found = n.status.as_ref().map_or(&[][..], |s| &s.conditions);
                    let dependents = conditions::ec2nodeclass::READY_DEPENDENTS;
                    Observed::of_api(&n.metadata, found, &dependents)
                })
                .collect();
            let nodes = state.nodes.iter().map(|n| Observed::of_node(n)).collect();
            [
                (NODE_CLAIM, claims),
                (NODE_POOL, pools),
                (EC2_NODE_CLASS, classes),
                (NODE, nodes),
            ]
        };
        let mut trackers = self.trackers.lock().unwrap_or_else(|p| p.into_inner());
        for (kind, objects) in &observed {
            trackers.entry(kind.kind).or_default().observe(
                kind,
                objects,
                &self.ctx.metrics.status,
                now,
            );
        }
    }
}
