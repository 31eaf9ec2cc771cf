//! The cluster as the decision engine sees it ([`ClusterView`]): the scheduling view the
//! provisioner uses (pools, nodes with their pods, DaemonSets, pending pods, namespaces) plus,
//! per Karpenter-managed node, the facts disruption decides on ([`NodeFacts`], [`PodFacts`]) and
//! the PodDisruptionBudgets ([`PdbFacts`]).
//!
//! Built from plain Kubernetes objects by [`ClusterView::build`], so the controller (from its
//! watch-fed caches) and `karpenter plan --disrupt` (from YAML files) hand the engine the same
//! thing.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube_core::ResourceExt;

use super::pdb::PdbFacts;
use crate::api::common::parse_duration;
use crate::api::conditions::nodeclaim as claim_conditions;
use crate::api::labels::{
    CAPACITY_TYPE_LABEL, DISRUPTED_TAINT_KEY, DO_NOT_DISRUPT_ANNOTATION, INITIALIZED_LABEL,
    INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, ZONE_LABEL,
};
use crate::api::{ConditionStatus, NodeClaim, NodePool};
use crate::provisioning::is_reschedulable;
use crate::scheduling::{ExistingNode, PodInfo};

/// What disruption knows about one pod bound to a managed node.
#[derive(Clone, Debug, PartialEq)]
pub struct PodFacts {
    /// `namespace/name`.
    pub key: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    /// The `karpenter.sh/do-not-disrupt` annotation's value, if any.
    pub do_not_disrupt: Option<String>,
    pub created: Option<Timestamp>,
    /// Upstream's eviction cost: `1 + deletionCost/2^27 + priority/2^25`, clamped to [-10, 10].
    pub eviction_cost: f64,
    /// Needs a new home if the node goes (upstream `IsReschedulable`).
    pub reschedulable: bool,
}

/// What disruption knows about one Karpenter-managed node (a Node with the
/// `karpenter.sh/nodepool` label).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFacts {
    pub node: String,
    /// Its NodeClaim (matched by provider id or `status.nodeName`), if one exists.
    pub claim: Option<String>,
    pub pool: String,
    pub instance_type: Option<String>,
    pub capacity_type: Option<String>,
    pub zone: Option<String>,
    /// Ready and labelled `karpenter.sh/initialized` (or its claim `Initialized`).
    pub initialized: bool,
    pub ready: bool,
    /// The Node or its NodeClaim carries a deletionTimestamp.
    pub deleting: bool,
    /// Tainted `karpenter.sh/disrupted` or marked by a disruption command.
    pub disrupting: bool,
    /// The node's (or its claim's) `karpenter.sh/do-not-disrupt` value.
    pub do_not_disrupt: Option<String>,
    /// When the claim (else the node) was created.
    pub created: Option<Timestamp>,
    /// The claim's `expireAfter` (`None`: `Never` or unknown).
    pub expire_after: Option<Duration>,
    /// Since when the node has been quiet: the claim's `status.lastPodEventTime`, else when it
    /// initialized, else when it was created (`None`: unknown, taken as long ago).
    pub quiet_since: Option<Timestamp>,
    /// The claim's `terminationGracePeriod` is set (drift then ignores pod-level blockers).
    pub has_termination_grace_period: bool,
    /// When its claim was created, if it was launched as a replacement (it carries
    /// `karpenter.sh/replaces`): consolidation leaves it alone for a while (anti-churn).
    pub replacement_since: Option<Timestamp>,
    /// Why the node drifted, if it did (`Drifted=True`, or labels its pool no longer allows).
    pub drift: Option<String>,
    pub pods: Vec<PodFacts>,
}

impl NodeFacts {
    /// No pod would need a new home.
    pub fn is_empty(&self) -> bool {
        !self.pods.iter().any(|p| p.reschedulable)
    }
}

/// Everything the decision engine reads. Owned, sorted, deterministic.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub now: Timestamp,
    /// Usable NodePools (valid, not deleting), sorted by name.
    pub pools: Vec<NodePool>,
    /// The scheduling view of every node and in-flight NodeClaim, with the pods bound to it.
    pub nodes: Vec<ExistingNode>,
    /// Managed nodes by node name.
    pub facts: BTreeMap<String, NodeFacts>,
    pub pdbs: Vec<PdbFacts>,
    pub daemonsets: Vec<PodInfo>,
    /// Pods waiting for a node (including pods of nodes going away).
    pub pending: Vec<PodInfo>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// By NodePool: the catalog its EC2NodeClass launches (Windows, kubelet, root volume,
    /// reservations), for pools whose class changes it; replacements are planned from these as
    /// the provisioner plans new claims. Empty from [`ClusterView::build`]: its caller fills it.
    pub pool_catalogs: BTreeMap<String, crate::catalog::Catalog>,
    /// The pools' compatible types against the catalog this view is decided on and
    /// `pool_catalogs`, when its caller worked them out (from a memo kept across passes); a
    /// simulation works them out itself otherwise. `None` from [`ClusterView::build`].
    pub prepared: Option<crate::scheduling::PreparedPools>,
}

/// The plain objects a view is built from, besides the scheduling view.
#[derive(Clone, Copy, Debug)]
pub struct Objects<'a> {
    pub nodes: &'a [&'a Node],
    pub claims: &'a [&'a NodeClaim],
    pub pods: &'a [&'a Pod],
    pub pdbs: &'a [&'a PodDisruptionBudget],
}

/// The scheduling half of a view (what `provisioning::Snapshot` and `plan::Cluster` hold).
#[derive(Clone, Debug, Default)]
pub struct Scheduling {
    pub pools: Vec<NodePool>,
    pub nodes: Vec<ExistingNode>,
    pub daemonsets: Vec<PodInfo>,
    pub pending: Vec<PodInfo>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

/// A cluster as owned objects (a test's, or a dry run's).
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    pub pools: Vec<NodePool>,
    pub nodes: Vec<Node>,
    pub claims: Vec<NodeClaim>,
    pub pods: Vec<Pod>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub daemonsets: Vec<k8s_openapi::api::apps::v1::DaemonSet>,
    pub namespaces: Vec<k8s_openapi::api::core::v1::Namespace>,
    /// The cluster's default topology spread constraints (`--scheduler-config`), applied to the
    /// pods the simulation moves when they declare none.
    pub scheduler_config: Option<crate::scheduling::SchedulerConfiguration>,
    /// What those constraints' selectors are deduced from.
    pub services: Vec<k8s_openapi::api::core::v1::Service>,
    pub replica_sets: Vec<k8s_openapi::api::apps::v1::ReplicaSet>,
    pub stateful_sets: Vec<k8s_openapi::api::apps::v1::StatefulSet>,
    pub replication_controllers: Vec<k8s_openapi::api::core::v1::ReplicationController>,
    /// The EC2NodeClasses the pools name, for the capacity each launches.
    pub node_classes: Vec<crate::api::EC2NodeClass>,
}

impl ClusterView {
    /// The view of `cluster` at `now`, its scheduling half assembled as the provisioner's
    /// snapshot is.
    pub fn from_cluster(
        now: Timestamp,
        cluster: &Cluster,
        catalog: &crate::catalog::Catalog,
    ) -> Self {
        let nodes: Vec<&Node> = cluster.nodes.iter().collect();
        let claims: Vec<&NodeClaim> = cluster.claims.iter().collect();
        let pods: Vec<&Pod> = cluster.pods.iter().collect();
        let pdbs: Vec<&PodDisruptionBudget> = cluster.pdbs.iter().collect();
        let snapshot = crate::provisioning::Snapshot::from_objects(
            crate::provisioning::SnapshotObjects {
                pools: cluster.pools.iter().collect(),
                nodes: nodes.clone(),
                claims: claims.clone(),
                pods: pods.clone(),
                daemonsets: cluster.daemonsets.iter().collect(),
                namespaces: cluster.namespaces.iter().collect(),
                pdbs: pdbs.clone(),
                now,
                volumes: None,
                node_classes: cluster.node_classes.iter().collect(),
                spread_defaults: cluster.scheduler_config.as_ref().and_then(|config| {
                    crate::scheduling::DefaultSpreads::new(
                        config,
                        crate::scheduling::SelectorSources {
                            services: cluster.services.iter().collect(),
                            replica_sets: cluster.replica_sets.iter().collect(),
                            stateful_sets: cluster.stateful_sets.iter().collect(),
                            replication_controllers: cluster
                                .replication_controllers
                                .iter()
                                .collect(),
                        },
                    )
                }),
            },
            catalog,
        );
        let pool_catalogs = snapshot
            .node_classes
            .iter()
            .filter_map(|(pool, class)| {
                let types = crate::catalog::nodeclass::pool_catalog(catalog, class, None)?;
                Some((pool.clone(), types))
            })
            .collect();
        let mut view = Self::build(
            now,
            Scheduling {
                pools: snapshot.pools,
                nodes: snapshot.nodes,
                daemonsets: snapshot.daemonsets,
                pending: snapshot.pending,
                namespaces: snapshot.namespaces,
            },
            Objects {
                nodes: &nodes,
                claims: &claims,
                pods: &pods,
                pdbs: &pdbs,
            },
        );
        view.pool_catalogs = pool_catalogs;
        view
    }

    /// The view at `now` over a scheduling view and the objects it was made from.
    pub fn build(now: Timestamp, scheduling: Scheduling, objects: Objects<'_>) -> Self {
        let mut pools = scheduling.pools;
        pools.sort_by_key(|p| p.name_any());
        let mut pods_by_node: BTreeMap<&str, Vec<PodFacts>> = BTreeMap::new();
        let mut all_pods = Vec::new();
        for pod in objects.pods {
            let facts = pod_facts(pod);
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
                pods_by_node.entry(node).or_default().push(facts.clone());
            }
            all_pods.push((*pod, facts));
        }
        let mut facts = BTreeMap::new();
        for node in objects.nodes {
            let name = node.name_any();
            let Some(pool) = node.labels().get(NODEPOOL_LABEL).cloned() else {
                continue;
            };
            let claim = claim_of(node, objects.claims);
            let pool_object = pools.iter().find(|p| p.name_any() == pool);
            let mut node_facts = node_facts(node, claim, pool_object, pool);
            node_facts.pods = pods_by_node.remove(name.as_str()).unwrap_or_default();
            node_facts.pods.sort_by(|a, b| a.key.cmp(&b.key));
            facts.insert(name, node_facts);
        }
        let pdbs = objects
            .pdbs
            .iter()
            .filter_map(|pdb| PdbFacts::of(pdb, &all_pods))
            .collect();
        Self {
            now,
            pools,
            nodes: scheduling.nodes,
            facts,
            pdbs,
            daemonsets: scheduling.daemonsets,
            pending: scheduling.pending,
            namespaces: scheduling.namespaces,
            pool_catalogs: BTreeMap::new(),
            prepared: None,
        }
    }

    /// The NodePool called `name`.
    pub fn pool(&self, name: &str) -> Option<&NodePool> {
        self.pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
    }
}

fn pod_facts(pod: &Pod) -> PodFacts {
    let annotations = pod.annotations();
    let deletion_cost = annotations
        .get("controller.kubernetes.io/pod-deletion-cost")
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(0);
    let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
    let cost = 1.0 + f64::from(deletion_cost) / 2f64.powi(27) + f64::from(priority) / 2f64.powi(25);
    PodFacts {
        key: format!(
            "{}/{}",
            pod.namespace().unwrap_or_else(|| "default".into()),
            pod.name_any()
        ),
        namespace: pod.namespace().unwrap_or_else(|| "default".into()),
        labels: pod.labels().clone(),
        do_not_disrupt: annotations.get(DO_NOT_DISRUPT_ANNOTATION).cloned(),
        created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        eviction_cost: cost.clamp(-10.0, 10.0),
        reschedulable: is_reschedulable(pod),
    }
}

/// The NodeClaim of `node`: same provider id, else `status.nodeName`.
fn claim_of<'c>(node: &Node, claims: &[&'c NodeClaim]) -> Option<&'c NodeClaim> {
    let provider = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty());
    let name = node.name_any();
    claims.iter().copied().find(|c| {
        let status = c.status.as_ref();
        (provider.is_some() && status.and_then(|s| s.provider_id.as_deref()) == provider)
            || status.and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
    })
}

fn node_facts(
    node: &Node,
    claim: Option<&NodeClaim>,
    pool: Option<&NodePool>,
    pool_name: String,
) -> NodeFacts {
    let labels = node.labels();
    let label = |key: &str| labels.get(key).cloned();
    let node_conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref());
    // A hand-written Node (a dry run's) has no conditions: taken as ready, as `plan` does.
    let handwritten = node_conditions.is_none_or(|c| c.is_empty());
    let ready = handwritten
        || node_conditions
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
    let claim_conditions = claim
        .and_then(|c| c.status.as_ref())
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let initialized_at =
        crate::api::conditions::get(claim_conditions, claim_conditions::INITIALIZED)
            .filter(|c| c.status == ConditionStatus::True)
            .map(|c| c.last_transition_time.0);
    let initialized = ready
        && (labels.get(INITIALIZED_LABEL).is_some_and(|v| v == "true")
            || initialized_at.is_some()
            || (claim.is_none() && handwritten));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == DISRUPTED_TAINT_KEY);
    let created = claim
        .and_then(|c| c.metadata.creation_timestamp.as_ref())
        .or(node.metadata.creation_timestamp.as_ref())
        .map(|t| t.0);
    let last_pod_event = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.last_pod_event_time.as_ref())
        .map(|t| t.0);
    let do_not_disrupt = node
        .annotations()
        .get(DO_NOT_DISRUPT_ANNOTATION)
        .or_else(|| claim.and_then(|c| c.annotations().get(DO_NOT_DISRUPT_ANNOTATION)))
        .cloned();
    NodeFacts {
        node: node.name_any(),
        claim: claim.map(|c| c.name_any()),
        pool: pool_name,
        instance_type: label(INSTANCE_TYPE_LABEL),
        capacity_type: label(CAPACITY_TYPE_LABEL),
        zone: label(ZONE_LABEL),
        initialized,
        ready,
        deleting: node.metadata.deletion_timestamp.is_some()
            || claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some()),
        disrupting: tainted || claim.is_some_and(super::orchestration::is_commanded),
        do_not_disrupt,
        created,
        expire_after: claim.and_then(|c| parse_duration(&c.spec.expire_after).ok()),
        quiet_since: last_pod_event.or(initialized_at).or(created),
        has_termination_grace_period: claim
            .is_some_and(|c| c.spec.termination_grace_period.is_some()),
        replacement_since: claim
            .filter(|c| !crate::replacement::replaces(c).is_empty())
            .and_then(|c| c.metadata.creation_timestamp.as_ref())
            .map(|t| t.0),
        drift: drift(claim_conditions, labels, pool),
        pods: Vec::new(),
    }
}

/// Why a node drifted: its claim says `Drifted=True`, or a label its pool's requirements now
/// forbid (only labels the node carries are compared: a requirement on a label the node lacks is
/// not evidence of drift, since not every attribute label is copied onto nodes).
fn drift(
    conditions: &[crate::api::Condition],
    labels: &BTreeMap<String, String>,
    pool: Option<&NodePool>,
) -> Option<String> {
    if let Some(c) = crate::api::conditions::get(conditions, claim_conditions::DRIFTED)
        .filter(|c| c.status == ConditionStatus::True)
    {
        return Some(if c.reason.is_empty() {
            "Drifted".to_string()
        } else {
            c.reason.clone()
        });
    }
    let why = crate::nodeclaim::drift::requirements_drift(labels, pool?)?;
    Some(format!("RequirementsDrifted: {why}"))
}
