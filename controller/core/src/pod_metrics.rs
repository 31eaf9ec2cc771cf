//! Upstream's pod metric controller (`metrics.pod`): where every pod is, and how long pods take
//! to be bound and to start. Computed with the node and NodePool gauges
//! ([`crate::state_metrics`], every `STATE_METRICS_INTERVAL`) from the watch-fed pod and node
//! caches; series of pods that are gone are removed.
//!
//! - `karpenter_pods_state`: 1 per pod, labelled `name`, `namespace`, `owner` (the first owner
//!   reference as the self link upstream builds), `node`, `scheduled`, `phase`, `ready`, and from
//!   its node `zone`, `arch`, `capacity_type`, `instance_type`, `nodepool`, `managed`.
//! - `karpenter_pods_unbound_time_seconds{name, namespace}`: creation until now, of a Pending pod
//!   not yet `PodScheduled`; `karpenter_pods_unstarted_time_seconds{name, namespace}`: creation
//!   until now, of a Pending pod (and of one seen pending that is neither Ready nor finished).
//! - `karpenter_pods_bound_duration_seconds`: creation to `PodScheduled`, observed once per pod
//!   when it leaves Pending bound; `karpenter_pods_startup_duration_seconds`: creation to
//!   `Ready`, observed once per pod when it turns Ready.
//!
//! Deliberate differences: upstream reconciles on every pod event and observes only pods it saw
//! Pending; sampled every 10 s, a pod could be Pending and Ready between two passes, so here a
//! pod also counts if it was created after the first pass (it was pending while we watched).
//! `startup_duration_seconds` is a histogram with upstream's duration buckets, not a summary
//! (prometheus-client has no summary).
//!
//! The alpha `karpenter_pods_provisioning_*` series ([`compute_provisioning`]) are timed from
//! the provisioner's [`PodSchedulingTimes`] instead of the pod's creation.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube_core::ResourceExt;

use crate::api::labels::{CAPACITY_TYPE_LABEL, NODEPOOL_LABEL};
use crate::metrics::{Metrics, PodKeyLabels, PodStateLabels};

/// The labels of `karpenter_pods_state`, sorted (upstream's `labelNames`).
pub const POD_STATE_LABELS: [&str; 13] = [
    "arch",
    "capacity_type",
    "instance_type",
    "managed",
    "name",
    "namespace",
    "node",
    "nodepool",
    "owner",
    "phase",
    "ready",
    "scheduled",
    "zone",
];

/// What the pod series remember between passes (upstream's `pendingPods`/`unscheduledPods`).
#[derive(Debug, Default)]
pub struct PodTracker {
    /// The first pass: pods created after it were pending while we watched.
    first_pass: Option<Timestamp>,
    /// Pods seen Pending whose start is not observed yet, by `namespace/name`.
    pending: BTreeSet<String>,
    /// Pods seen Pending whose binding is not observed yet.
    unbound: BTreeSet<String>,
    /// Pods whose start, and whose binding, were observed (so never twice).
    started: BTreeSet<String>,
    bound: BTreeSet<String>,
}

/// One pass's pod series and observations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodSeries {
    pub state: BTreeSet<PodStateLabels>,
    /// (name, namespace) → seconds.
    pub unstarted: BTreeMap<(String, String), f64>,
    pub unbound: BTreeMap<(String, String), f64>,
    /// Startup and bound durations observed this pass, in seconds.
    pub started: Vec<f64>,
    pub bound: Vec<f64>,
}

/// The status condition `type_` of a pod: (is it True, its last transition).
fn condition(pod: &Pod, type_: &str) -> (bool, Option<Timestamp>) {
    let found = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_));
    (
        found.is_some_and(|c| c.status == "True"),
        found.and_then(|c| c.last_transition_time.as_ref().map(|t| t.0)),
    )
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The self link of the pod's first owner, as upstream builds it (`/apis/<apiVersion>/namespaces/
/// <namespace>/<kind, lower case>s/<name>`).
fn owner(pod: &Pod) -> String {
    pod.owner_references()
        .first()
        .map(|o| {
            format!(
                "/apis/{}/namespaces/{}/{}s/{}",
                o.api_version,
                pod.namespace().unwrap_or_default(),
                o.kind.to_lowercase(),
                o.name
            )
        })
        .unwrap_or_default()
}

/// `karpenter_pods_state`'s labels of `pod` on `node` (if it is bound to one we know).
fn state_labels(pod: &Pod, node: Option<&Node>) -> PodStateLabels {
    let node_name = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let label = |key: &str| {
        node.and_then(|n| n.labels().get(key).cloned())
            .unwrap_or_default()
    };
    let nodepool = label(NODEPOOL_LABEL);
    let mut labels = vec![
        ("arch".to_string(), label("kubernetes.io/arch")),
        ("capacity_type".into(), label(CAPACITY_TYPE_LABEL)),
        (
            "instance_type".into(),
            label("node.kubernetes.io/instance-type"),
        ),
        ("managed".into(), (!nodepool.is_empty()).to_string()),
        ("name".into(), pod.name_any()),
        ("namespace".into(), pod.namespace().unwrap_or_default()),
        ("scheduled".into(), (!node_name.is_empty()).to_string()),
        ("node".into(), node_name),
        ("nodepool".into(), nodepool),
        ("owner".into(), owner(pod)),
        ("phase".into(), phase(pod).to_string()),
        ("ready".into(), condition(pod, "Ready").0.to_string()),
        ("zone".into(), label("topology.kubernetes.io/zone")),
    ];
    labels.sort();
    PodStateLabels(labels)
}

fn seconds(from: Timestamp, to: Timestamp) -> f64 {
    to.duration_since(from).as_secs_f64().max(0.0)
}

/// One pass over every pod (`nodes` by name), updating `tracker`.
pub fn compute_pods(
    pods: &[&Pod],
    nodes: &BTreeMap<String, &Node>,
    tracker: &mut PodTracker,
    now: Timestamp,
) -> PodSeries {
    let first_pass = *tracker.first_pass.get_or_insert(now);
    let mut series = PodSeries::default();
    let mut present = BTreeSet::new();
    for pod in pods {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        present.insert(key.clone());
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .and_then(|n| nodes.get(n).copied());
        series.state.insert(state_labels(pod, node));
        let created = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(now, |t| t.0);
        let watched = created > first_pass;
        let id = (pod.name_any(), pod.namespace().unwrap_or_default());
        let pending = phase(pod) == "Pending";
        let terminal = matches!(phase(pod), "Succeeded" | "Failed");
        // Startup: creation to Ready.
        let (ready, ready_at) = condition(pod, "Ready");
        if pending {
            tracker.pending.insert(key.clone());
        }
        let tracked =
            tracker.pending.contains(&key) || (watched && !tracker.started.contains(&key));
        if ready && tracked && !tracker.started.contains(&key) {
            series
                .started
                .push(seconds(created, ready_at.unwrap_or(now)));
            tracker.started.insert(key.clone());
            tracker.pending.remove(&key);
        } else if terminal {
            tracker.pending.remove(&key);
        } else if pending || tracker.pending.contains(&key) {
            series.unstarted.insert(id.clone(), seconds(created, now));
        }
        // Binding: creation to PodScheduled.
        let (scheduled, scheduled_at) = condition(pod, "PodScheduled");
        if pending {
            if !scheduled {
                series.unbound.insert(id, seconds(created, now));
            }
            tracker.unbound.insert(key.clone());
        } else if scheduled
            && !tracker.bound.contains(&key)
            && (tracker.unbound.contains(&key) || watched)
        {
            series
                .bound
                .push(seconds(created, scheduled_at.unwrap_or(now)));
            tracker.bound.insert(key.clone());
            tracker.unbound.remove(&key);
        }
    }
    for set in [
        &mut tracker.pending,
        &mut tracker.unbound,
        &mut tracker.started,
        &mut tracker.bound,
    ] {
        set.retain(|k| present.contains(k));
    }
    series
}

/// Sets this pass's pod series, removes those of the last pass it no longer has, and records
/// its observations.
pub fn apply_pods(metrics: &Metrics, previous: &PodSeries, series: &PodSeries) {
    for labels in &series.state {
        metrics.pods_state.get_or_create(labels).set(1);
    }
    for labels in previous.state.difference(&series.state) {
        metrics.pods_state.remove(labels);
    }
    let families = [
        (
            &metrics.pods_unstarted_time,
            &previous.unstarted,
            &series.unstarted,
        ),
        (
            &metrics.pods_unbound_time,
            &previous.unbound,
            &series.unbound,
        ),
    ];
    for (family, before, now) in families {
        set_pod_gauges(family, before, now);
    }
    for v in &series.started {
        metrics.pods_startup_duration.observe(*v);
    }
    for v in &series.bound {
        metrics.pods_bound_duration.observe(*v);
    }
}

/// When the provisioner first saw, first decided on and first placed each pending pod, by
/// `namespace/name` (upstream's cluster-state pod scheduling mappings): the provisioner writes
/// them, the pod series read them, and they are dropped once a pod started, finished or is
/// gone.
#[derive(Debug, Default)]
pub struct PodSchedulingTimes {
    inner: std::sync::Mutex<BTreeMap<String, SchedulingTimes>>,
}

/// One pod's [`PodSchedulingTimes`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulingTimes {
    /// First seen pending by the provisioner.
    pub acked: Option<Timestamp>,
    /// First pass that placed it or said why not.
    pub decided: Option<Timestamp>,
    /// First pass that placed it (upstream's `PodSchedulingSuccessTime`).
    pub schedulable: Option<Timestamp>,
}

impl PodSchedulingTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, SchedulingTimes>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The provisioner saw `pod` pending at `now` (kept from the first time).
    pub fn ack(&self, pod: &str, now: Timestamp) {
        let mut inner = self.lock();
        let times = inner.entry(pod.to_string()).or_default();
        times.acked.get_or_insert(now);
    }

    /// A provisioning pass decided on `pod` at `now`, placing it if `placed`.
    pub fn decided(&self, pod: &str, now: Timestamp, placed: bool) {
        let mut inner = self.lock();
        let times = inner.entry(pod.to_string()).or_default();
        times.decided.get_or_insert(now);
        if placed {
            times.schedulable.get_or_insert(now);
        }
    }

    pub fn get(&self, pod: &str) -> SchedulingTimes {
        self.lock().get(pod).copied().unwrap_or_default()
    }

    fn clear(&self, pod: &str) {
        self.lock().remove(pod);
    }

    fn retain(&self, present: &BTreeSet<String>) {
        self.lock().retain(|k, _| present.contains(k));
    }
}

/// One pass's alpha `pods_provisioning_*` series and observations.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProvisioningSeries {
    /// (name, namespace) → seconds.
    pub unstarted: BTreeMap<(String, String), f64>,
    pub unbound: BTreeMap<(String, String), f64>,
    pub undecided: BTreeMap<(String, String), f64>,
    /// Durations from first placed to Ready and to bound, observed this pass.
    pub started: Vec<f64>,
    pub bound: Vec<f64>,
}

/// What the provisioning series remember between passes: pods seen pending with a schedulable
/// time whose start, or binding, is not observed yet.
#[derive(Debug, Default)]
pub struct ProvisioningTracker {
    pending: BTreeSet<String>,
    unbound: BTreeSet<String>,
}

/// Upstream's alpha pod series: the time since the provisioner first placed a pod (until it is
/// bound and until it runs) and since it first saw a pod it has not decided on yet; durations
/// observed once as the pod binds and turns Ready. A pod's times are forgotten once it started
/// or finished, as upstream clears its scheduling mappings.
pub fn compute_provisioning(
    pods: &[&Pod],
    times: &PodSchedulingTimes,
    tracker: &mut ProvisioningTracker,
    now: Timestamp,
) -> ProvisioningSeries {
    let mut series = ProvisioningSeries::default();
    let mut present = BTreeSet::new();
    for pod in pods {
        let key = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        present.insert(key.clone());
        let id = (pod.name_any(), pod.namespace().unwrap_or_default());
        let t = times.get(&key);
        let pending = phase(pod) == "Pending";
        let terminal = matches!(phase(pod), "Succeeded" | "Failed");
        let (scheduled, scheduled_at) = condition(pod, "PodScheduled");
        let (ready, ready_at) = condition(pod, "Ready");
        let bound = scheduled || pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        if let (Some(acked), None) = (t.acked, t.decided)
            && !bound
            && !terminal
        {
            series.undecided.insert(id.clone(), seconds(acked, now));
        }
        let Some(schedulable) = t.schedulable else {
            continue;
        };
        if pending {
            tracker.pending.insert(key.clone());
            series
                .unstarted
                .insert(id.clone(), seconds(schedulable, now));
            if !scheduled {
                tracker.unbound.insert(key.clone());
                series.unbound.insert(id.clone(), seconds(schedulable, now));
            }
        }
        if scheduled && tracker.unbound.remove(&key) {
            series
                .bound
                .push(seconds(schedulable, scheduled_at.unwrap_or(now)));
        }
        if pending || !tracker.pending.contains(&key) {
            continue;
        }
        if ready {
            series
                .started
                .push(seconds(schedulable, ready_at.unwrap_or(now)));
        }
        if ready || terminal {
            tracker.pending.remove(&key);
            times.clear(&key);
        } else {
            series.unstarted.insert(id, seconds(schedulable, now));
        }
    }
    tracker.pending.retain(|k| present.contains(k));
    tracker.unbound.retain(|k| present.contains(k));
    times.retain(&present);
    series
}

/// Sets this pass's provisioning series, removes the last pass's it no longer has, records its
/// observations.
pub fn apply_provisioning(
    metrics: &Metrics,
    previous: &ProvisioningSeries,
    series: &ProvisioningSeries,
) {
    let p = &metrics.pods_provisioning;
    let families = [
        (&p.unstarted_time, &previous.unstarted, &series.unstarted),
        (&p.unbound_time, &previous.unbound, &series.unbound),
        (&p.undecided_time, &previous.undecided, &series.undecided),
    ];
    for (family, before, now) in families {
        set_pod_gauges(family, before, now);
    }
    for v in &series.started {
        p.startup_duration.observe(*v);
    }
    for v in &series.bound {
        p.bound_duration.observe(*v);
    }
}

/// Sets a per-pod gauge family to `now` and removes the pods only `before` had.
fn set_pod_gauges(
    family: &prometheus_client::metrics::family::Family<PodKeyLabels, crate::metrics::SecondsGauge>,
    before: &BTreeMap<(String, String), f64>,
    now: &BTreeMap<(String, String), f64>,
) {
    let labels = |(name, namespace): &(String, String)| PodKeyLabels {
        name: name.clone(),
        namespace: namespace.clone(),
    };
    for (key, v) in now {
        family.get_or_create(&labels(key)).set(*v);
    }
    for key in before.keys().filter(|k| !now.contains_key(*k)) {
        family.remove(&labels(key));
    }
}
