//! What the scheduler needs to know about a pod, extracted once from the Kubernetes object:
//! resource requests (Kubernetes `PodRequests` semantics), node requirements, tolerations,
//! topology spread, pod (anti-)affinity, host ports and volume topology.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeSelectorTerm, Pod, PodAffinityTerm, PodSpec, Toleration,
    TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_core::{Selector, SelectorExt};

use super::requirements::{Requirement, Requirements};
use crate::api::labels::normalize_label;
use crate::api::{Operator, Taint, TaintEffect};
use crate::resources::{CPU, MEMORY, PODS, Resources, parse_quantity};

/// Whether an owner reference of `pod` is `apiVersion`/`kind` (upstream's `IsOwnedBy` compares
/// group, version and kind: an OpenKruise Advanced DaemonSet, `apps.kruise.io/v1alpha1`, is not a
/// DaemonSet to Karpenter, so its pods are provisioned for and drained like any other).
fn is_owned_by(pod: &Pod, api_version: &str, kind: &str) -> bool {
    pod.metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .any(|o| o.api_version == api_version && o.kind == kind)
}

/// Owned by an `apps/v1` DaemonSet.
pub fn is_owned_by_daemonset(pod: &Pod) -> bool {
    is_owned_by(pod, "apps/v1", "DaemonSet")
}

/// `namespace/name` of the `apps/v1` DaemonSet that owns `pod`, if one does.
pub fn daemonset_of(pod: &Pod) -> Option<String> {
    let owner = pod
        .metadata
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|o| o.api_version == "apps/v1" && o.kind == "DaemonSet")?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!("{namespace}/{}", owner.name))
}

/// Owned by a `v1` Node (a static pod's mirror).
pub fn is_owned_by_node(pod: &Pod) -> bool {
    is_owned_by(pod, "v1", "Node")
}

/// `namespace/name`, the pod's identity in outputs.
pub type PodKey = String;

/// How strongly a constraint binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strength {
    Required,
    /// Preferred with a weight; treated as required until relaxed.
    Preferred(i32),
}

/// A pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq)]
pub struct AffinityTerm {
    pub selector: Option<LabelSelector>,
    /// Namespaces whose pods count; empty with no selector means the pod's own namespace.
    pub namespaces: Vec<String>,
    pub namespace_selector: Option<LabelSelector>,
    pub topology_key: String,
    pub strength: Strength,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub selector: Option<LabelSelector>,
    pub min_domains: Option<i32>,
    /// `Honor` (default): only nodes matching the pod's node affinity count as domains.
    pub honor_node_affinity: bool,
    /// `Honor`: nodes with taints the pod does not tolerate are not domains (default `Ignore`).
    pub honor_node_taints: bool,
    /// `DoNotSchedule` is required; `ScheduleAnyway` is a preference, relaxed when it fails.
    pub strength: Strength,
}

/// A host port the pod binds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Whether two bindings collide (same port and protocol, overlapping addresses).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || wildcard(&self.ip) || wildcard(&other.ip))
    }
}

/// A scheduling-ready view of one pod.
#[derive(Clone, Debug, PartialEq)]
pub struct PodInfo {
    pub key: PodKey,
    pub namespace: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// `max(containers + sidecars, largest init phase) + overhead`, plus `pods: 1`.
    pub requests: Resources,
    /// nodeSelector as `In` requirements.
    pub node_selector: Requirements,
    /// Required node affinity: OR of terms (empty: none).
    pub required_terms: Vec<Requirements>,
    /// Preferred node affinity terms with weights.
    pub preferred_terms: Vec<(i32, Requirements)>,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub host_ports: Vec<HostPort>,
    /// Zonal alternatives from volumes (PV node affinity / StorageClass topology): the node must
    /// satisfy one of them. Empty: no volume constraint.
    pub volume_terms: Vec<Requirements>,
    pub priority: i32,
    /// RFC 3339 creation time, for queue order (empty sorts first).
    pub created: String,
    /// Owned by a DaemonSet (never provisioned for; counted as daemon overhead instead).
    pub daemonset_owned: bool,
    /// The DaemonSet (`namespace/name`) whose pod this is, or whose template it stands for:
    /// how a node's running daemon is matched to its DaemonSet (labels are not enough: real
    /// DaemonSet pods carry `controller-revision-hash` and `pod-template-generation`).
    pub daemonset: Option<String>,
    /// Its persistent volumes by CSI driver (`ebs.csi.aws.com` → volume ids): what it attaches
    /// to its node, against the node's CSI attach limits. Set with the volume terms.
    pub csi_volumes: BTreeMap<String, BTreeSet<String>>,
}

/// Why a pod cannot be considered at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    #[error("invalid resource quantity: {0}")]
    Quantity(String),
    #[error("node affinity matchFields are not supported")]
    MatchFields,
}

fn quantities(list: &BTreeMap<String, Quantity>) -> Result<Resources, PodError> {
    let mut out = Resources::new();
    for (name, quantity) in list {
        let amount =
            parse_quantity(name, &quantity.0).map_err(|e| PodError::Quantity(e.to_string()))?;
        out.add_one(name, amount);
    }
    Ok(out)
}

fn container_requests(container: &Container) -> Result<Resources, PodError> {
    let mut out = Resources::new();
    let Some(resources) = &container.resources else {
        return Ok(out);
    };
    // Kubernetes defaults a missing request to the limit.
    let mut merged = resources.limits.clone().unwrap_or_default();
    merged.extend(resources.requests.clone().unwrap_or_default());
    for (name, quantity) in &merged {
        let amount =
            parse_quantity(name, &quantity.0).map_err(|e| PodError::Quantity(e.to_string()))?;
        out.add_one(name, amount);
    }
    Ok(out)
}

/// Resources a pod may request at pod level (`spec.resources`, PodLevelResources: beta and on by
/// default since Kubernetes 1.34): Kubernetes' `IsSupportedPodLevelResource`.
fn is_pod_level_resource(name: &str) -> bool {
    name == CPU || name == MEMORY || name.starts_with("hugepages-")
}

/// Kubernetes `PodRequests` (as upstream Karpenter calls it, with status resources):
/// - regular containers plus sidecars (init containers with `restartPolicy: Always`) run
///   together; each regular init container runs alone alongside the sidecars started before it;
///   the pod needs the larger of the two;
/// - a regular container resized in place needs the larger of its spec and what the kubelet has
///   allocated to it (`status.containerStatuses[].allocatedResources`);
/// - pod-level requests (`spec.resources`, limits standing in for missing requests) replace the
///   containers' sum for CPU, memory and hugepages;
/// - plus the pod's overhead.
pub fn pod_requests(pod: &Pod) -> Result<Resources, PodError> {
    let spec = pod.spec.as_ref();
    let allocated: BTreeMap<&str, &BTreeMap<String, Quantity>> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|cs| Some((cs.name.as_str(), cs.allocated_resources.as_ref()?)))
        .collect();
    let mut running = Resources::new();
    for container in spec.map(|s| s.containers.as_slice()).unwrap_or_default() {
        let mut requests = container_requests(container)?;
        if let Some(list) = allocated.get(container.name.as_str()) {
            requests = requests.max(&quantities(list)?);
        }
        running = running.plus(&requests);
    }
    let mut sidecars = Resources::new();
    let mut init_peak = Resources::new();
    for init in spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default()
    {
        let requests = container_requests(init)?;
        if init.restart_policy.as_deref() == Some("Always") {
            sidecars = sidecars.plus(&requests);
            init_peak = init_peak.max(&sidecars);
        } else {
            init_peak = init_peak.max(&sidecars.plus(&requests));
        }
    }
    let mut total = running.plus(&sidecars).max(&init_peak);
    if let Some(pod_level) = spec.and_then(|s| s.resources.as_ref()) {
        let mut merged = pod_level.limits.clone().unwrap_or_default();
        merged.extend(pod_level.requests.clone().unwrap_or_default());
        merged.retain(|name, _| is_pod_level_resource(name));
        for (name, amount) in quantities(&merged)?.iter() {
            total.set(name, amount);
        }
    }
    if let Some(overhead) = spec.and_then(|s| s.overhead.as_ref()) {
        for (name, quantity) in overhead {
            let amount =
                parse_quantity(name, &quantity.0).map_err(|e| PodError::Quantity(e.to_string()))?;
            total.add_one(name, amount);
        }
    }
    total.set(PODS, 1);
    Ok(total)
}

fn term_requirements(term: &NodeSelectorTerm) -> Result<Requirements, PodError> {
    if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
        return Err(PodError::MatchFields);
    }
    let mut out = Requirements::new();
    for expr in term.match_expressions.as_deref().unwrap_or_default() {
        let operator = match expr.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            "Gt" => Operator::Gt,
            "Lt" => Operator::Lt,
            "Gte" => Operator::Gte,
            "Lte" => Operator::Lte,
            // Unknown operators match nothing (kube-scheduler rejects them at admission).
            _ => Operator::DoesNotExist,
        };
        out.add(
            normalize_label(&expr.key),
            Requirement::new(operator, expr.values.as_deref().unwrap_or_default()),
        );
    }
    Ok(out)
}

fn affinity_term(term: &PodAffinityTerm, strength: Strength) -> AffinityTerm {
    AffinityTerm {
        selector: term.label_selector.clone(),
        namespaces: term.namespaces.clone().unwrap_or_default(),
        namespace_selector: term.namespace_selector.clone(),
        topology_key: term.topology_key.clone(),
        strength,
    }
}

fn spread_constraint(
    tsc: &TopologySpreadConstraint,
    labels: &BTreeMap<String, String>,
) -> SpreadConstraint {
    let mut selector = tsc.label_selector.clone();
    // matchLabelKeys: the pod's own values for those keys join the selector.
    if let (Some(keys), Some(sel)) = (&tsc.match_label_keys, selector.as_mut()) {
        let match_labels = sel.match_labels.get_or_insert_with(Default::default);
        for key in keys {
            if let Some(value) = labels.get(key) {
                match_labels.insert(key.clone(), value.clone());
            }
        }
    }
    SpreadConstraint {
        max_skew: tsc.max_skew.max(1),
        topology_key: tsc.topology_key.clone(),
        selector,
        min_domains: tsc.min_domains,
        honor_node_affinity: tsc.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: tsc.node_taints_policy.as_deref() == Some("Honor"),
        strength: if tsc.when_unsatisfiable == "ScheduleAnyway" {
            Strength::Preferred(1)
        } else {
            Strength::Required
        },
    }
}

/// Required terms, then preferred ones with their weights.
fn affinity_terms(
    required: Option<&[PodAffinityTerm]>,
    preferred: Option<&[WeightedPodAffinityTerm]>,
) -> Vec<AffinityTerm> {
    let required = required
        .unwrap_or_default()
        .iter()
        .map(|term| affinity_term(term, Strength::Required));
    let preferred = preferred
        .unwrap_or_default()
        .iter()
        .map(|w| affinity_term(&w.pod_affinity_term, Strength::Preferred(w.weight)));
    required.chain(preferred).collect()
}

/// The host ports the pod's containers (init containers too) bind, sorted, once each.
fn host_ports(spec: &PodSpec) -> Vec<HostPort> {
    let mut ports = Vec::new();
    for container in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        for port in container.ports.as_deref().unwrap_or_default() {
            if let Some(host_port) = port.host_port.filter(|p| *p > 0) {
                ports.push(HostPort {
                    ip: port.host_ip.clone().unwrap_or_default(),
                    protocol: port.protocol.clone().unwrap_or_else(|| "TCP".to_string()),
                    port: host_port,
                });
            }
        }
    }
    ports.sort();
    ports.dedup();
    ports
}

impl PodInfo {
    /// Replaces the pod's topology spread constraints (the cluster's default constraints, for a
    /// pod that declares none: [`super::defaults::DefaultSpreads`]).
    pub fn set_spread(&mut self, constraints: &[TopologySpreadConstraint]) {
        self.spread = constraints
            .iter()
            .map(|t| spread_constraint(t, &self.labels))
            .collect();
    }

    /// Extracts the scheduling view of `pod`. `volume_terms` come from the caller, which resolves
    /// PVCs to PVs and StorageClasses.
    pub fn from_pod(pod: &Pod, volume_terms: Vec<Requirements>) -> Result<Self, PodError> {
        let meta = &pod.metadata;
        let namespace = meta
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = meta.name.clone().unwrap_or_default();
        let labels: BTreeMap<String, String> = meta.labels.clone().unwrap_or_default();
        // Borrowed, not cloned: copying every pod's whole spec was a few percent of a pass.
        let no_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&no_spec);
        let mut info = PodInfo {
            key: format!("{namespace}/{name}"),
            namespace,
            uid: meta.uid.clone().unwrap_or_else(|| name.clone()),
            requests: pod_requests(pod)?,
            node_selector: spec
                .node_selector
                .as_ref()
                .map(Requirements::from_labels)
                .unwrap_or_default(),
            required_terms: Vec::new(),
            preferred_terms: Vec::new(),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            spread: spec
                .topology_spread_constraints
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|t| spread_constraint(t, &labels))
                .collect(),
            affinity: Vec::new(),
            anti_affinity: Vec::new(),
            host_ports: Vec::new(),
            volume_terms,
            priority: spec.priority.unwrap_or(0),
            created: meta
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
            daemonset_owned: is_owned_by_daemonset(pod),
            daemonset: daemonset_of(pod),
            csi_volumes: BTreeMap::new(),
            labels,
        };
        if let Some(affinity) = &spec.affinity {
            info.add_affinity(affinity)?;
        }
        info.host_ports = host_ports(spec);
        Ok(info)
    }

    /// Node affinity (required terms, preferred terms heaviest first), pod affinity and pod
    /// anti-affinity.
    fn add_affinity(&mut self, affinity: &Affinity) -> Result<(), PodError> {
        if let Some(node) = &affinity.node_affinity {
            if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
                for term in &required.node_selector_terms {
                    self.required_terms.push(term_requirements(term)?);
                }
            }
            for preferred in node
                .preferred_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default()
            {
                self.preferred_terms
                    .push((preferred.weight, term_requirements(&preferred.preference)?));
            }
            self.preferred_terms.sort_by_key(|t| std::cmp::Reverse(t.0));
        }
        if let Some(pod_affinity) = &affinity.pod_affinity {
            self.affinity = affinity_terms(
                pod_affinity
                    .required_during_scheduling_ignored_during_execution
                    .as_deref(),
                pod_affinity
                    .preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
            );
        }
        if let Some(anti) = &affinity.pod_anti_affinity {
            self.anti_affinity = affinity_terms(
                anti.required_during_scheduling_ignored_during_execution
                    .as_deref(),
                anti.preferred_during_scheduling_ignored_during_execution
                    .as_deref(),
            );
        }
        Ok(())
    }

    /// Whether the pod tolerates every taint in `taints`, `PreferNoSchedule` ones included
    /// unless `prefer_no_schedule_relaxed`: upstream's scheduler treats them as hard, so they
    /// steer pods to untainted NodePools and nodes, and tolerates them only in its last
    /// relaxation step (see the solver's `Relaxation`).
    pub fn tolerates(
        &self,
        taints: &[Taint],
        prefer_no_schedule_relaxed: bool,
    ) -> Result<(), Taint> {
        for taint in taints {
            if taint.effect == TaintEffect::PreferNoSchedule && prefer_no_schedule_relaxed {
                continue;
            }
            if !self
                .tolerations
                .iter()
                .any(|t| toleration_matches(t, taint))
            {
                return Err(taint.clone());
            }
        }
        Ok(())
    }
}

/// Whether `toleration` tolerates `taint`.
pub fn toleration_matches(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_ok = match toleration.effect.as_deref() {
        None | Some("") => true,
        Some(effect) => effect == effect_name(taint.effect),
    };
    let key_ok = match toleration.key.as_deref() {
        None | Some("") => toleration.operator.as_deref() == Some("Exists"),
        Some(key) => key == taint.key,
    };
    let value_ok = match toleration.operator.as_deref() {
        Some("Exists") => true,
        _ => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
    };
    effect_ok && key_ok && value_ok
}

/// The first `NoSchedule`/`NoExecute` taint none of `tolerations` tolerates (what the DaemonSet
/// controller checks: a daemon runs on a node whatever its `PreferNoSchedule` taints).
pub fn tolerates(tolerations: &[Toleration], taints: &[Taint]) -> Result<(), Taint> {
    for taint in taints {
        if taint.effect == TaintEffect::PreferNoSchedule {
            continue;
        }
        if !tolerations.iter().any(|t| toleration_matches(t, taint)) {
            return Err(taint.clone());
        }
    }
    Ok(())
}

pub fn effect_name(effect: TaintEffect) -> &'static str {
    match effect {
        TaintEffect::NoSchedule => "NoSchedule",
        TaintEffect::PreferNoSchedule => "PreferNoSchedule",
        TaintEffect::NoExecute => "NoExecute",
    }
}

/// A metav1 `LabelSelector` parsed once into kube-core's [`Selector`] for matching. Kubernetes'
/// rules for pod (anti-)affinity and topology spread hold: a missing selector selects nothing, an
/// empty one everything. `In`/`NotIn` without values select as with an empty list (never /
/// always), and a selector with an unknown operator selects nothing (the API server rejects
/// both; a pod read from a file may still carry them).
#[derive(Clone, Debug, PartialEq)]
pub struct LabelMatcher(Option<Selector>);

impl LabelMatcher {
    pub fn new(selector: Option<&LabelSelector>) -> Self {
        let parsed = selector.and_then(|selector| {
            let mut selector = selector.clone();
            for expr in selector.match_expressions.iter_mut().flatten() {
                expr.values.get_or_insert_with(Vec::new);
            }
            Selector::try_from(selector).ok()
        });
        Self(parsed)
    }

    /// Whether the selector selects an object with `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// Whether `selector` selects a pod with `labels` (a missing selector selects nothing, an empty
/// one everything). Parses the selector: hot paths keep a [`LabelMatcher`].
pub fn selector_matches(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
) -> bool {
    LabelMatcher::new(selector).matches(labels)
}
