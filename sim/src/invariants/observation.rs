//! [`Observation`]: what the world and the invariants look at after a step, read once per step
//! through the observer's own watch-fed cache of the API server ([`ObserverCache`]) and from
//! fakecloud.

use std::collections::{BTreeMap, BTreeSet};

use fakecloud::FakeCloud;
use jiff::Timestamp;
use karpenter_core::api::conditions;
use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::ec2::{Instance, InstanceState};
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{KubeApi, KubeError};
use karpenter_core::state::Reflector;
use serde_json::Value;

/// What the invariants look at, read once per step.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    pub pods_total: usize,
    pub pods_running: usize,
    pub pods_pending: usize,
    pub pending_names: Vec<String>,
    pub running_names: Vec<String>,
    pub claims: usize,
    pub nodes: usize,
    pub instances_alive: usize,
    /// Live instances by id: (instance type, capacity type).
    pub instances: BTreeMap<String, (String, CapacityType)>,
    /// NodeClaims being deleted.
    pub deleting_claims: usize,
    /// Instances of other owners ([`is_foreign`]: a managed node group's, another cluster's
    /// Karpenter's), in any state, in fakecloud's order. Not counted in `instances`/`instances_alive`/`live`.
    pub(super) foreign: Vec<Instance>,
    /// Live instances (not shutting down or terminated), in fakecloud's order.
    pub(super) live: Vec<Instance>,
    /// Instance ids in claims' `status.providerID`.
    pub(super) known_instances: BTreeSet<String>,
    /// Names of claims that record no instance yet (their launch's status write may be pending).
    pub(super) unlaunched_claims: BTreeSet<String>,
    /// Claims neither registered nor deleting, with their creation time.
    pub(super) unregistered: Vec<(String, Option<Timestamp>)>,
}

/// The observer's watch-fed view of the API server (the same reflector the controller uses), so
/// a step that changed little costs little to observe.
pub struct ObserverCache {
    pods: Reflector<Value>,
    nodes: Reflector<Value>,
    claims: Reflector<NodeClaim>,
    pools: Reflector<NodePool>,
    summary: Option<ApiSummary>,
    /// Bumped by every sync that changed the cache: checkers that look only at the API objects
    /// recompute only when it moved.
    generation: u64,
}

impl Default for ObserverCache {
    fn default() -> Self {
        Self {
            pods: Reflector::new(ResourceKind::POD),
            nodes: Reflector::new(ResourceKind::NODE),
            claims: Reflector::new(ResourceKind::NODE_CLAIM),
            pools: Reflector::new(ResourceKind::NODE_POOL),
            summary: None,
            generation: 0,
        }
    }
}

impl ObserverCache {
    /// Pods as of the last read.
    pub(super) fn pods(&self) -> impl Iterator<Item = &Value> {
        self.pods.iter().map(|p| &**p)
    }

    /// Nodes as of the last read.
    pub(super) fn nodes(&self) -> impl Iterator<Item = &Value> {
        self.nodes.iter().map(|n| &**n)
    }

    /// NodeClaims as of the last read.
    pub(super) fn claims(&self) -> impl Iterator<Item = &NodeClaim> {
        self.claims.iter().map(|c| &**c)
    }

    /// NodePools as of the last read.
    pub(super) fn pools(&self) -> impl Iterator<Item = &NodePool> {
        self.pools.iter().map(|p| &**p)
    }

    /// Changes with every read that found the API server changed.
    pub(super) fn generation(&self) -> u64 {
        self.generation
    }
}

/// What the observer derives from the API server alone; recomputed only when a cache changed.
#[derive(Clone, Debug, Default)]
struct ApiSummary {
    pods_total: usize,
    pods_running: usize,
    pods_pending: usize,
    pending_names: Vec<String>,
    running_names: Vec<String>,
    claims: usize,
    nodes: usize,
    deleting_claims: usize,
    known_instances: BTreeSet<String>,
    unlaunched_claims: BTreeSet<String>,
    unregistered: Vec<(String, Option<Timestamp>)>,
}

impl ApiSummary {
    fn of(cache: &ObserverCache) -> Self {
        let claims: Vec<&NodeClaim> = cache.claims().collect();
        let mut o = ApiSummary {
            claims: claims.len(),
            nodes: cache.nodes().count(),
            ..Default::default()
        };
        for pod in cache.pods() {
            if pod["metadata"]["deletionTimestamp"].is_string() {
                continue;
            }
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            o.pods_total += 1;
            match pod["status"]["phase"].as_str() {
                Some("Running") => {
                    o.pods_running += 1;
                    o.running_names.push(name);
                }
                Some("Succeeded") | Some("Failed") => {}
                _ => {
                    o.pods_pending += 1;
                    o.pending_names.push(name);
                }
            }
        }
        o.known_instances = claims
            .iter()
            .filter_map(|c| {
                c.status
                    .as_ref()?
                    .provider_id
                    .as_ref()?
                    .rsplit('/')
                    .next()
                    .map(str::to_string)
            })
            .collect();
        o.unlaunched_claims = claims
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_ref())
                    .is_none()
            })
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        o.deleting_claims = claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count();
        for claim in &claims {
            let registered = claim
                .status
                .as_ref()
                .is_some_and(|s| conditions::is_true(&s.conditions, "Registered"));
            if !registered && claim.metadata.deletion_timestamp.is_none() {
                o.unregistered.push((
                    claim.metadata.name.clone().unwrap_or_default(),
                    claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
                ));
            }
        }
        o
    }
}

/// Whether another owner runs `instance`: a managed node group (EKS tags its instances
/// `eks:nodegroup-name`, [`is_node_group`]) or another cluster's Karpenter (tagged
/// `eks:eks-cluster-name` for a cluster other than the world's).
pub fn is_foreign(instance: &Instance) -> bool {
    is_node_group(instance)
        || instance
            .tags
            .get(CLUSTER_NAME_TAG)
            .is_some_and(|c| c != crate::world::CLUSTER)
}

/// Whether a managed node group runs `instance`.
pub fn is_node_group(instance: &Instance) -> bool {
    instance.tags.contains_key(FOREIGN_OWNER_TAG)
}

/// The tag EKS puts on a managed node group's instances.
pub const FOREIGN_OWNER_TAG: &str = "eks:nodegroup-name";

/// The tag EKS and Karpenter put on a cluster's instances, naming the cluster.
const CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

impl Observation {
    /// What Karpenter's live instances (tagged `karpenter.sh/nodeclaim`) cost per hour, at the
    /// catalog's price of each one's offering.
    pub fn hourly_cost(&self, catalog: &karpenter_core::catalog::Catalog) -> f64 {
        self.live
            .iter()
            .filter(|i| {
                i.tags
                    .contains_key(karpenter_core::api::labels::NODECLAIM_TAG)
            })
            .filter_map(|i| {
                catalog
                    .get(&i.instance_type)?
                    .offerings
                    .iter()
                    .find(|o| o.zone == i.zone && o.capacity_type == i.capacity_type)
                    .map(|o| o.price)
            })
            .fold(0.0, |total, price| total + price)
    }

    /// Syncs the observer's cache with the API server (recomputing what it derives only if
    /// something changed) and reads fakecloud's instances.
    pub async fn read(
        cache: &mut ObserverCache,
        kube: &dyn KubeApi,
        cloud: &FakeCloud,
    ) -> Result<Self, KubeError> {
        let mut changed = cache.pods.sync(kube).await?;
        changed |= cache.nodes.sync(kube).await?;
        changed |= cache.claims.sync(kube).await?;
        changed |= cache.pools.sync(kube).await?;
        if changed {
            cache.generation += 1;
        }
        if changed || cache.summary.is_none() {
            cache.summary = Some(ApiSummary::of(cache));
        }
        let summary = cache.summary.clone().unwrap_or_default();
        let mut o = Observation {
            pods_total: summary.pods_total,
            pods_running: summary.pods_running,
            pods_pending: summary.pods_pending,
            pending_names: summary.pending_names,
            running_names: summary.running_names,
            claims: summary.claims,
            nodes: summary.nodes,
            deleting_claims: summary.deleting_claims,
            known_instances: summary.known_instances,
            unlaunched_claims: summary.unlaunched_claims,
            unregistered: summary.unregistered,
            ..Default::default()
        };
        for instance in cloud.instances() {
            if is_foreign(&instance) {
                o.foreign.push(instance);
                continue;
            }
            if matches!(
                instance.state,
                InstanceState::ShuttingDown | InstanceState::Terminated
            ) {
                continue;
            }
            o.instances_alive += 1;
            o.instances.insert(
                instance.instance_id.clone(),
                (instance.instance_type.clone(), instance.capacity_type),
            );
            o.live.push(instance);
        }
        Ok(o)
    }
}
