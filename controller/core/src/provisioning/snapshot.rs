//! The cluster as one provisioning pass sees it, read through the [`KubeApi`] seam.
//!
//! Nodes are read before pods (as upstream does) so a pod bound after the node list is seen as
//! pending at worst, never as running on a node the pass does not know.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube_core::ResourceExt;

use super::eligibility::{is_provisionable, is_reschedulable};
use crate::api::labels::{DISRUPTED_TAINT_KEY, INITIALIZED_LABEL, UNREGISTERED_TAINT_KEY};
use crate::api::{ConditionStatus, EC2NodeClass, NodeClaim, NodePool, Taint, TaintEffect};
use crate::catalog::Catalog;
use crate::disruption::candidates::do_not_disrupt_active;
use crate::disruption::pdb::FullyBlocking;
use crate::replacement;
use crate::resources::Resources;
use crate::scheduling::requirements::Requirements;
use crate::scheduling::volumes::Volumes;
use crate::scheduling::{DefaultSpreads, ExistingNode, PodInfo, SchedulerConfiguration};
use crate::seams::kube::{ListOptions, ResourceKind};
use crate::seams::{KubeApi, KubeApiExt, KubeError};
use crate::state::ClusterState;
use crate::validation::{validate_nodepool, validate_nodepool_shared};

/// Taints a node carries only until it is initialized (upstream's `KnownEphemeralTaints`): the
/// node lifecycle controller's not-ready and unreachable taints, an external cloud provider's
/// uninitialized taint, and Karpenter's unregistered taint. Matched by key and effect.
pub(crate) const EPHEMERAL_TAINTS: [(&str, TaintEffect); 4] = [
    ("node.kubernetes.io/not-ready", TaintEffect::NoSchedule),
    ("node.kubernetes.io/unreachable", TaintEffect::NoSchedule),
    (
        "node.cloudprovider.kubernetes.io/uninitialized",
        TaintEffect::NoSchedule,
    ),
    (UNREGISTERED_TAINT_KEY, TaintEffect::NoExecute),
];

/// The objects a snapshot is assembled from, by reference (from a list, from the caches, or
/// from files).
pub struct Objects<'a> {
    /// NodePools whose EC2NodeClass is usable (invalid or deleting ones are dropped here).
    pub pools: Vec<&'a NodePool>,
    pub nodes: Vec<&'a Node>,
    pub claims: Vec<&'a NodeClaim>,
    pub pods: Vec<&'a Pod>,
    pub daemonsets: Vec<&'a DaemonSet>,
    pub namespaces: Vec<&'a Namespace>,
    /// Read for the budgets that fully block eviction (their pods on deleting nodes get no
    /// replacement capacity; see [`crate::disruption::pdb::FullyBlocking`]).
    pub pdbs: Vec<&'a PodDisruptionBudget>,
    /// When the snapshot is taken: `do-not-disrupt` durations are judged against it.
    pub now: Timestamp,
    /// The cluster's PVCs, PVs and StorageClasses, for volume topology; `None` where they are
    /// not known (a disruption dry run over plain objects): then volumes constrain nothing.
    pub volumes: Option<Volumes>,
    /// The EC2NodeClasses, for the capacity each launches (`Snapshot::node_classes`).
    pub node_classes: Vec<&'a EC2NodeClass>,
    /// The cluster's default topology spread constraints with what their selectors are deduced
    /// from; `None`: no defaults (upstream's default).
    pub spread_defaults: Option<DefaultSpreads<'a>>,
}

/// Inputs of one scheduling run.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Usable NodePools (not deleting, valid).
    pub pools: Vec<NodePool>,
    /// Nodes, and NodeClaims that are not nodes yet (in-flight capacity).
    pub nodes: Vec<ExistingNode>,
    pub daemonsets: Vec<PodInfo>,
    pub pending: Vec<PodInfo>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Pods in `pending` that are still bound to a node going away (replacement first), by
    /// `namespace/name`, with the NodeClaim of that node (`None` for a Node without one).
    pub displaced: BTreeMap<String, Option<String>>,
    /// NodeClaims not yet nodes (the in-flight entries of `nodes`), with the claims they already
    /// replace (their `karpenter.sh/replaces` annotation).
    pub in_flight: BTreeMap<String, BTreeSet<String>>,
    /// Registered nodes whose NodeClaim is not initialized yet (and not deleting), by node name:
    /// the claim's name and the claims it already replaces. Pods of an interrupted node planned
    /// onto one wait for it as for an in-flight claim (see `Provisioner::nominate_existing`).
    pub uninitialized: BTreeMap<String, (String, BTreeSet<String>)>,
    /// Deleting, interrupted NodeClaims no pass has planned replacement capacity for yet.
    pub unplanned_interrupted: BTreeSet<String>,
    /// Pending pods left out of the pass, with why (a PVC, PV or StorageClass they need does
    /// not exist): each gets a FailedScheduling event.
    pub ignored: Vec<Ignored>,
    /// The EC2NodeClass of each usable NodePool, by pool name (instance-type capacity depends on
    /// it: [`crate::catalog::nodeclass`]).
    pub node_classes: BTreeMap<String, EC2NodeClass>,
}

/// A pending pod the pass leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// `namespace/name`.
    pub pod: String,
    pub reason: String,
}

/// What [`nodes_going_away`] needs to know about a Node.
pub(crate) struct NodeFacts<'a> {
    pub name: &'a str,
    pub provider_id: Option<&'a str>,
    /// Being deleted or tainted `karpenter.sh/disrupted`.
    pub going: bool,
}

/// What [`nodes_going_away`] needs to know about a NodeClaim.
pub(crate) struct ClaimFacts<'a> {
    pub name: &'a str,
    pub provider_id: Option<&'a str>,
    pub deleting: bool,
}

impl<'a> NodeFacts<'a> {
    pub fn of(node: &'a Node) -> Self {
        NodeFacts {
            name: node.metadata.name.as_deref().unwrap_or_default(),
            provider_id: node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .filter(|p| !p.is_empty()),
            going: node.metadata.deletion_timestamp.is_some()
                || node
                    .spec
                    .as_ref()
                    .and_then(|s| s.taints.as_deref())
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.key == DISRUPTED_TAINT_KEY),
        }
    }
}

impl<'a> ClaimFacts<'a> {
    pub fn of(claim: &'a NodeClaim) -> Self {
        ClaimFacts {
            name: claim.metadata.name.as_deref().unwrap_or_default(),
            provider_id: claim
                .status
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .filter(|p| !p.is_empty()),
            deleting: claim.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// Nodes whose pods need new capacity (being deleted, tainted disrupted, or whose NodeClaim is
/// being deleted, as upstream includes pods of deleting nodes in its scheduling simulation),
/// each with its NodeClaim's name if it has one.
pub(crate) fn nodes_going_away<'a>(
    nodes: impl IntoIterator<Item = NodeFacts<'a>>,
    claims: impl IntoIterator<Item = ClaimFacts<'a>>,
) -> BTreeMap<String, Option<String>> {
    let claims: Vec<ClaimFacts<'a>> = claims.into_iter().collect();
    let mut out = BTreeMap::new();
    for node in nodes {
        let claim = node
            .provider_id
            .filter(|p| !p.is_empty())
            .and_then(|p| claims.iter().find(|c| c.provider_id == Some(p)));
        if node.going || claim.is_some_and(|c| c.deleting) {
            out.insert(node.name.to_string(), claim.map(|c| c.name.to_string()));
        }
    }
    out
}

fn resources(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Resources {
    let mut out = Resources::new();
    for (name, quantity) in list.into_iter().flatten() {
        if let Ok(amount) = crate::resources::parse_quantity(name, &quantity.0) {
            out.add_one(name, amount);
        }
    }
    out
}

/// What the snapshot takes from the NodeClaim of a registered node while that node boots.
struct Booting<'c> {
    startup_taints: &'c [Taint],
    /// The claim's `status.allocatable`: what its instance type offers once every device plugin
    /// has registered.
    allocatable: Resources,
}

/// Registered nodes whose claim is not initialized and not deleting (see
/// [`Snapshot::uninitialized`]).
fn uninitialized(
    claims: &[&NodeClaim],
    by_name: &BTreeMap<String, usize>,
) -> BTreeMap<String, (String, BTreeSet<String>)> {
    claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| {
            !c.status.as_ref().is_some_and(|s| {
                crate::api::conditions::is_true(
                    &s.conditions,
                    crate::api::conditions::nodeclaim::INITIALIZED,
                )
            })
        })
        .filter_map(|c| {
            let node = c.status.as_ref()?.node_name.clone()?;
            by_name.contains_key(&node).then(|| {
                let name = c.metadata.name.clone().unwrap_or_default();
                (node, (name, replacement::replaces(c)))
            })
        })
        .collect()
}

/// The allocatable of a node that is not initialized yet: the kubelet's figure, and for every
/// resource it reports as missing or zero the claim's expected figure (upstream's
/// `StateNode.Allocatable()`). A GPU node advertises `nvidia.com/gpu: 0` until its device plugin
/// starts (minutes with driver installs); judged by that, the GPU pods it was launched for do not
/// fit it and every provisioning retry buys another GPU node.
fn expected_allocatable(mut reported: Resources, expected: &Resources) -> Resources {
    for (name, amount) in expected.iter() {
        if reported.get(name) == 0 {
            reported.set(name, amount);
        }
    }
    reported
}

/// The taints of a NodeClaim's node that is not initialized yet, without those expected to go:
/// the claim's startup taints and the [`EPHEMERAL_TAINTS`] (upstream's `StateNode.Taints()`).
/// Judged by its raw taints, a node that registered a few seconds before it initializes fits
/// none of the pods it was launched for, and the pass would launch another NodeClaim for them.
fn lasting_taints(taints: Vec<Taint>, startup: &[Taint]) -> Vec<Taint> {
    let expected_to_go = |t: &Taint| {
        startup
            .iter()
            .any(|s| s.key == t.key && s.effect == t.effect)
            || EPHEMERAL_TAINTS
                .iter()
                .any(|(key, effect)| *key == t.key && *effect == t.effect)
    };
    taints.into_iter().filter(|t| !expected_to_go(t)).collect()
}

fn taint(t: &k8s_openapi::api::core::v1::Taint) -> Option<Taint> {
    let effect = match t.effect.as_str() {
        "NoSchedule" => TaintEffect::NoSchedule,
        "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
        "NoExecute" => TaintEffect::NoExecute,
        _ => return None,
    };
    Some(Taint {
        key: t.key.clone(),
        value: t.value.clone(),
        effect,
        time_added: None,
    })
}

/// The NodePools whose `nodeClassRef` names an EC2NodeClass that exists and is `Ready=True`.
/// Upstream skips a NodePool whose NodeClass is not ready (NodePool `NodeClassReady`), so pods
/// fall through to the next NodePool by weight instead of getting NodeClaims that can never
/// launch. A class the status controller has not looked at yet (no `Ready` condition) is not
/// ready either: a claim for it would race the resolution and be deleted as `NodeClassNotReady`.
fn with_ready_node_class<'a>(
    pools: impl Iterator<Item = &'a NodePool>,
    classes: impl Iterator<Item = &'a EC2NodeClass>,
) -> Vec<&'a NodePool> {
    let ready: BTreeSet<&str> = classes
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter(|c| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|cond| cond.type_ == "Ready" && cond.status == ConditionStatus::True)
            })
        })
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    pools
        .filter(|p| {
            let class = &p.spec.template.spec.node_class_ref;
            class.kind == "EC2NodeClass" && ready.contains(class.name.as_str())
        })
        .collect()
}

impl Snapshot {
    /// Reads everything a pass needs by listing through the seam (one-off passes such as a dry
    /// run). Fails only when a list call fails (retry the pass).
    pub async fn read(
        kube: &dyn KubeApi,
        catalog: &Catalog,
        now: Timestamp,
    ) -> Result<Self, KubeError> {
        let all = ListOptions::default();
        let pools: Vec<NodePool> = kube.list_decodable(&ResourceKind::NODE_POOL, &all).await?;
        let classes: Vec<EC2NodeClass> = kube
            .list_decodable(&ResourceKind::EC2_NODE_CLASS, &all)
            .await?;
        let pools = with_ready_node_class(pools.iter(), classes.iter());
        let nodes: Vec<Node> = kube.list_decodable(&ResourceKind::NODE, &all).await?;
        let claims: Vec<NodeClaim> = kube.list_decodable(&ResourceKind::NODE_CLAIM, &all).await?;
        let pods: Vec<Pod> = kube.list_decodable(&ResourceKind::POD, &all).await?;
        let daemonsets: Vec<DaemonSet> =
            kube.list_decodable(&ResourceKind::DAEMON_SET, &all).await?;
        let namespaces: Vec<Namespace> =
            kube.list_decodable(&ResourceKind::NAMESPACE, &all).await?;
        let pdbs: Vec<PodDisruptionBudget> = kube
            .list_decodable(&ResourceKind::POD_DISRUPTION_BUDGET, &all)
            .await?;
        let pvcs: Vec<PersistentVolumeClaim> = kube
            .list_decodable(&ResourceKind::PERSISTENT_VOLUME_CLAIM, &all)
            .await?;
        let volumes: Vec<PersistentVolume> = kube
            .list_decodable(&ResourceKind::PERSISTENT_VOLUME, &all)
            .await?;
        let storage_classes: Vec<StorageClass> = kube
            .list_decodable(&ResourceKind::STORAGE_CLASS, &all)
            .await?;
        let csi_nodes: Vec<CSINode> = kube.list_decodable(&ResourceKind::CSI_NODE, &all).await?;
        Ok(Self::assemble(
            Objects {
                pools,
                nodes: nodes.iter().collect(),
                claims: claims.iter().collect(),
                pods: pods.iter().collect(),
                daemonsets: daemonsets.iter().collect(),
                namespaces: namespaces.iter().collect(),
                pdbs: pdbs.iter().collect(),
                now,
                volumes: Some(
                    Volumes::from_objects(&pvcs, &volumes, &storage_classes)
                        .with_csi_nodes(&csi_nodes),
                ),
                node_classes: classes.iter().collect(),
                spread_defaults: None,
            },
            catalog,
        ))
    }

    /// What a pass needs, from the controller's watch-fed caches; `config`'s default topology
    /// spread constraints apply to the pods that declare none.
    pub fn from_state(
        state: &ClusterState,
        catalog: &Catalog,
        now: Timestamp,
        config: Option<&SchedulerConfiguration>,
    ) -> Self {
        Self::assemble_checked(
            Objects {
                // Validated here, by object identity (see `validate_nodepool_shared`).
                pools: with_ready_node_class(
                    state
                        .pools
                        .iter()
                        .filter(|p| validate_nodepool_shared(p).is_ok())
                        .map(|o| &**o),
                    state.node_classes.iter().map(|o| &**o),
                ),
                nodes: state.nodes.iter().map(|o| &**o).collect(),
                claims: state.claims.iter().map(|o| &**o).collect(),
                pods: state.pods.iter().map(|o| &**o).collect(),
                daemonsets: state.daemonsets.iter().map(|o| &**o).collect(),
                namespaces: state.namespaces.iter().map(|o| &**o).collect(),
                pdbs: state.pdbs.iter().map(|o| &**o).collect(),
                now,
                volumes: Some(
                    Volumes::from_objects(
                        state.volume_claims.iter().map(|o| &**o),
                        state.volumes.iter().map(|o| &**o),
                        state.storage_classes.iter().map(|o| &**o),
                    )
                    .with_csi_nodes(state.csi_nodes.iter().map(|o| &**o)),
                ),
                node_classes: state.node_classes.iter().map(|o| &**o).collect(),
                spread_defaults: config.and_then(|config| {
                    DefaultSpreads::new(config, state.selector_sources.sources())
                }),
            },
            catalog,
            true,
        )
    }

    /// What a pass needs, from objects at hand (a test, a dry run over files).
    pub fn from_objects(objects: Objects<'_>, catalog: &Catalog) -> Self {
        Self::assemble(objects, catalog)
    }

    fn assemble(objects: Objects<'_>, catalog: &Catalog) -> Self {
        Self::assemble_checked(objects, catalog, false)
    }

    /// [`Snapshot::assemble`]; `validated`: the caller already dropped invalid pools.
    fn assemble_checked(objects: Objects<'_>, catalog: &Catalog, validated: bool) -> Self {
        let Objects {
            pools,
            nodes,
            claims,
            pods,
            daemonsets,
            namespaces,
            pdbs,
            now,
            volumes,
            node_classes,
            mut spread_defaults,
        } = objects;
        let mut snapshot = Snapshot {
            pools: pools
                .into_iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && (validated || validate_nodepool(p).is_ok())
                })
                .cloned()
                .collect(),
            namespaces: namespaces
                .iter()
                .filter_map(|ns| Some((ns.metadata.name.clone()?, ns.labels().clone())))
                .collect(),
            unplanned_interrupted: claims
                .iter()
                .filter(|c| {
                    c.metadata.deletion_timestamp.is_some()
                        && replacement::is_interrupted(c)
                        && !replacement::is_replacement_planned(c)
                })
                .filter_map(|c| c.metadata.name.clone())
                .collect(),
            daemonsets: {
                let live = daemon_pods(&pods);
                daemonsets
                    .iter()
                    .filter_map(|ds| daemon_pod(ds, &live))
                    .collect()
            },
            ..Default::default()
        };
        snapshot.node_classes = snapshot
            .pools
            .iter()
            .filter_map(|pool| {
                let class = &pool.spec.template.spec.node_class_ref;
                let found = node_classes
                    .iter()
                    .find(|c| c.metadata.name.as_deref() == Some(class.name.as_str()))?;
                Some((pool.name_any(), (*found).clone()))
            })
            .collect();
        let going_away = nodes_going_away(
            nodes.iter().map(|n| NodeFacts::of(n)),
            claims.iter().map(|c| ClaimFacts::of(c)),
        );
        let booting: BTreeMap<&str, Booting<'_>> = claims
            .iter()
            .filter_map(|c| {
                let status = c.status.as_ref()?;
                let node = status.node_name.as_deref()?;
                let expected = Resources::from_list(&status.allocatable).unwrap_or_default();
                Some((
                    node,
                    Booting {
                        startup_taints: c.spec.startup_taints.as_slice(),
                        allocatable: expected,
                    },
                ))
            })
            .collect();
        let by_name = snapshot.add_nodes(&nodes, &booting, &going_away);
        if let Some(volumes) = &volumes {
            for node in &mut snapshot.nodes {
                if let Some(limits) = volumes.attach_limits.get(&node.name) {
                    node.volume_limits = limits.clone();
                }
            }
        }
        snapshot.add_in_flight(&claims, &by_name, &node_classes, catalog);
        snapshot.uninitialized = uninitialized(&claims, &by_name);
        let rescheduled = Rescheduled::new(now, pdbs, &claims);
        snapshot.add_pods(
            &pods,
            &by_name,
            &going_away,
            &rescheduled,
            volumes.as_ref(),
            spread_defaults.as_mut(),
        );
        snapshot.pending.sort_by(|a, b| a.key.cmp(&b.key));
        snapshot
    }

    /// Adds every NodeClaim not yet a registered node (and not deleting) as in-flight
    /// capacity, judged with its EC2NodeClass's capacity.
    fn add_in_flight(
        &mut self,
        claims: &[&NodeClaim],
        by_name: &BTreeMap<String, usize>,
        node_classes: &[&EC2NodeClass],
        catalog: &Catalog,
    ) {
        for claim in claims {
            let registered = claim
                .status
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some_and(|n| by_name.contains_key(n));
            if registered || claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let class = node_classes
                .iter()
                .find(|c| {
                    c.metadata.name.as_deref() == Some(claim.spec.node_class_ref.name.as_str())
                })
                .copied()
                .filter(|c| crate::catalog::nodeclass::changes_capacity(c));
            self.nodes.push(in_flight(claim, catalog, class));
            if let Some(name) = &claim.metadata.name {
                self.in_flight
                    .insert(name.clone(), replacement::replaces(claim));
            }
        }
    }

    /// Adds every Node as capacity; returns each one's index in `nodes` by name. A node of a
    /// NodeClaim (`booting`, by node name) that is not initialized yet is judged as it will be
    /// once initialized: without the taints expected to go (see [`lasting_taints`]) and with the
    /// allocatable its claim expects wherever the kubelet reports none yet (see
    /// [`expected_allocatable`]).
    fn add_nodes(
        &mut self,
        nodes: &[&Node],
        booting: &BTreeMap<&str, Booting<'_>>,
        going_away: &BTreeMap<String, Option<String>>,
    ) -> BTreeMap<String, usize> {
        let mut by_name = BTreeMap::new();
        for node in nodes {
            let name = node.name_any();
            let spec = node.spec.clone().unwrap_or_default();
            let status = node.status.clone().unwrap_or_default();
            let taints: Vec<Taint> = spec
                .taints
                .as_deref()
                .unwrap_or_default()
                .iter()
                .filter_map(taint)
                .collect();
            let labels = node.labels().clone();
            let ready = status
                .conditions
                .as_deref()
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let initialized = ready && labels.get(INITIALIZED_LABEL).is_some_and(|v| v == "true");
            let mut allocatable = resources(status.allocatable.as_ref());
            let taints = match booting.get(name.as_str()) {
                Some(claim) if !initialized => {
                    allocatable = expected_allocatable(allocatable, &claim.allocatable);
                    lasting_taints(taints, claim.startup_taints)
                }
                _ => taints,
            };
            by_name.insert(name.clone(), self.nodes.len());
            self.nodes.push(ExistingNode {
                initialized,
                deleting: going_away.contains_key(&name),
                volume_limits: Default::default(),
                name,
                capacity: resources(status.capacity.as_ref()),
                allocatable,
                labels,
                taints,
                pods: Vec::new(),
            });
        }
        by_name
    }

    /// Sorts pods: bound ones onto their nodes (and, on a node going away, into `pending` as
    /// displaced), unbound provisionable ones into `pending`.
    ///
    /// The cluster's default spread constraints (`spread_defaults`) go onto every pod's
    /// scheduling view here, bound pods included: upstream applies them to the pods its
    /// provisioner and disruption simulations schedule, and a bound pod is one of those when
    /// disruption moves it. A bound pod that stays put is unaffected: the simulation reads only
    /// the spread constraints of the pods it places.
    fn add_pods(
        &mut self,
        pods: &[&Pod],
        by_name: &BTreeMap<String, usize>,
        going_away: &BTreeMap<String, Option<String>>,
        rescheduled: &Rescheduled,
        volumes: Option<&Volumes>,
        mut spread_defaults: Option<&mut DefaultSpreads<'_>>,
    ) {
        let no_templates = BTreeMap::new();
        // The pod's volume topology; `Err` with why when a claim, volume or class is missing.
        let terms = |pod: &Pod| match volumes {
            Some(volumes) if Volumes::uses_claims(pod) => volumes.terms(pod, &no_templates),
            _ => Ok(Vec::new()),
        };
        // What the pod attaches to its node, for CSI attach limits.
        let mut with_volumes = |mut info: PodInfo, pod: &Pod| {
            if let Some(volumes) = volumes.filter(|_| Volumes::uses_claims(pod)) {
                info.csi_volumes = volumes.csi_volumes(pod, &no_templates);
            }
            if let Some(defaults) = spread_defaults.as_deref_mut() {
                defaults.apply(&mut info, pod);
            }
            info
        };
        for pod in pods {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let bound = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            if let Some(node) = bound.as_ref().filter(|node| by_name.contains_key(*node)) {
                // A running pod's volumes exist; if one is gone the pod still uses the node, and
                // wherever it moves it is unconstrained by what is gone.
                let terms = terms(pod).unwrap_or_default();
                let Some(info) = PodInfo::from_pod(pod, terms.clone())
                    .ok()
                    .or_else(|| bound_pod_info(pod, terms))
                else {
                    continue;
                };
                let info = with_volumes(info, pod);
                // Replacement first: a pod on a node going away is scheduled again now, so its
                // new capacity is ready before it is evicted.
                if let Some(claim) = going_away.get(node)
                    && is_reschedulable(pod)
                    && rescheduled.currently(pod, claim.as_deref())
                {
                    self.displaced.insert(info.key.clone(), claim.clone());
                    self.pending.push(info.clone());
                }
                self.nodes[by_name[node]].pods.push(info);
            } else if is_provisionable(pod) && !refuses_karpenter_nodes(pod) {
                match terms(pod)
                    .and_then(|terms| PodInfo::from_pod(pod, terms).map_err(|err| err.to_string()))
                {
                    Ok(info) => self.pending.push(with_volumes(info, pod)),
                    // Upstream ignores the pod until its volumes exist (or a spec it cannot
                    // schedule, such as `matchFields`, changes), and says why.
                    Err(reason) => self.ignored.push(Ignored {
                        pod: format!(
                            "{}/{}",
                            pod.namespace().unwrap_or_else(|| "default".into()),
                            pod.name_any()
                        ),
                        reason,
                    }),
                }
            }
        }
    }
}

/// A bound pod whose node affinity the scheduler cannot read (a DaemonSet pod's `matchFields` on
/// its node's name): it is placed already, so it counts on its node without that affinity;
/// dropping it would leave its requests and host ports out of the node's usage.
fn bound_pod_info(pod: &Pod, volume_terms: Vec<Requirements>) -> Option<PodInfo> {
    let mut pod = pod.clone();
    if let Some(affinity) = pod.spec.as_mut().and_then(|s| s.affinity.as_mut()) {
        affinity.node_affinity = None;
    }
    PodInfo::from_pod(&pod, volume_terms).ok()
}

/// A pod whose every required node-affinity term asks for `karpenter.sh/nodepool DoesNotExist`
/// (Karpenter's own controller pods, pods meant for a managed node group): it can never run on a
/// node Karpenter launches, so upstream leaves it out without an event.
fn refuses_karpenter_nodes(pod: &Pod) -> bool {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default();
    !terms.is_empty()
        && terms.iter().all(|term| {
            term.match_expressions.iter().flatten().any(|e| {
                e.key == crate::api::labels::NODEPOOL_LABEL && e.operator == "DoesNotExist"
            })
        })
}

/// Which pods of a deleting node are scheduled again now (upstream's
/// `IsCurrentlyReschedulable`): not those an active `karpenter.sh/do-not-disrupt` or a fully
/// blocking PodDisruptionBudget keeps on the node, since replacement capacity for them would sit
/// empty until the node's terminationGracePeriod (if any) forces them off.
///
/// Except on an interrupted node (spot warning, scheduled maintenance, stopping instance): its
/// instance goes whatever protects the pods, so they all get replacement capacity first (our
/// replacement-first handling, deliberate difference 11; upstream drains such a node at once).
struct Rescheduled {
    now: Timestamp,
    blocking: FullyBlocking,
    /// Interrupted NodeClaims, by name.
    interrupted: BTreeSet<String>,
}

impl Rescheduled {
    fn new(now: Timestamp, pdbs: Vec<&PodDisruptionBudget>, claims: &[&NodeClaim]) -> Self {
        Self {
            now,
            blocking: FullyBlocking::new(pdbs),
            interrupted: claims
                .iter()
                .filter(|c| replacement::is_interrupted(c))
                .filter_map(|c| c.metadata.name.clone())
                .collect(),
        }
    }

    /// Whether `pod`, on a node going away whose NodeClaim is `claim`, is scheduled again now.
    fn currently(&self, pod: &Pod, claim: Option<&str>) -> bool {
        if claim.is_some_and(|c| self.interrupted.contains(c)) {
            return true;
        }
        let do_not_disrupt = pod
            .annotations()
            .get(crate::api::labels::DO_NOT_DISRUPT_ANNOTATION)
            .is_some_and(|value| {
                let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
                do_not_disrupt_active(value, created, self.now)
            });
        !do_not_disrupt && !self.blocking.covers(pod)
    }
}

/// The pod a DaemonSet runs on every node it fits, as the scheduler sees it: its newest live pod
/// (so requests a LimitRange, VPA or webhook set count, as upstream counts them) with the
/// template's node affinity (a live pod's names its node), else its template.
fn daemon_pod(ds: &DaemonSet, live: &BTreeMap<String, Vec<&Pod>>) -> Option<PodInfo> {
    let namespace = ds.namespace().unwrap_or_else(|| "default".into());
    let key = format!("{namespace}/{}", ds.name_any());
    let template = ds.spec.clone().map(|s| s.template).unwrap_or_default();
    let newest = live.get(&key).and_then(|pods| {
        pods.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .max_by(|a, b| {
                let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
                created(a)
                    .cmp(&created(b))
                    .then_with(|| a.name_any().cmp(&b.name_any()))
            })
    });
    let pod = match newest {
        Some(live) => {
            let mut pod = (*live).clone();
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = None;
                let template_affinity = template
                    .spec
                    .as_ref()
                    .and_then(|s| s.affinity.as_ref())
                    .and_then(|a| a.node_affinity.clone());
                spec.affinity
                    .get_or_insert_with(Default::default)
                    .node_affinity = template_affinity;
            }
            pod
        }
        None => Pod {
            metadata: template.metadata.unwrap_or_default(),
            spec: template.spec,
            status: None,
        },
    };
    let mut info = PodInfo::from_pod(&pod, Vec::new()).ok()?;
    info.daemonset = Some(key);
    Some(info)
}

/// Live pods by the DaemonSet (`namespace/name`) that owns them.
fn daemon_pods<'p>(pods: &[&'p Pod]) -> BTreeMap<String, Vec<&'p Pod>> {
    let mut out: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        if let Some(owner) = crate::scheduling::pod::daemonset_of(pod) {
            out.entry(owner).or_default().push(pod);
        }
    }
    out
}

/// A NodeClaim without a node yet, as capacity the scheduler can place pods on: its labels and
/// single-valued requirements, its taints, and its allocatable (from status once launched, else
/// the smallest allocatable among its instance-type options: a safe under-estimate).
fn in_flight(claim: &NodeClaim, catalog: &Catalog, class: Option<&EC2NodeClass>) -> ExistingNode {
    let mut labels = claim.labels().clone();
    for r in &claim.spec.requirements {
        if r.operator == crate::api::Operator::In && r.values.len() == 1 {
            labels
                .entry(r.key.clone())
                .or_insert_with(|| r.values[0].clone());
        }
    }
    let status_alloc = claim
        .status
        .as_ref()
        .map(|s| Resources::from_list(&s.allocatable).unwrap_or_default());
    let allocatable = match status_alloc.filter(|a| !a.is_empty()) {
        Some(a) => a,
        None => {
            let options: Vec<&str> = claim
                .spec
                .requirements
                .iter()
                .find(|r| {
                    r.key == crate::api::labels::INSTANCE_TYPE_LABEL
                        && r.operator == crate::api::Operator::In
                })
                .map(|r| r.values.iter().map(String::as_str).collect())
                .unwrap_or_default();
            options
                .iter()
                .filter_map(|name| catalog.get(name))
                .filter_map(|it| match class {
                    // As the claim's EC2NodeClass launches it (root volume, kubelet settings,
                    // a Windows family's resources).
                    Some(class) => crate::catalog::nodeclass::instance_type_for(catalog, it, class)
                        .map(|t| t.allocatable),
                    None => Some(it.allocatable.clone()),
                })
                .reduce(|a, b| {
                    let mut min = a.clone();
                    for (name, amount) in a.iter() {
                        min.set(name, amount.min(b.get(name)));
                    }
                    min
                })
                .unwrap_or_default()
        }
    };
    ExistingNode {
        name: claim.name_any(),
        labels,
        taints: claim.spec.taints.clone(),
        capacity: allocatable.clone(),
        allocatable,
        pods: Vec::new(),
        initialized: false,
        deleting: false,
        volume_limits: Default::default(),
    }
}
