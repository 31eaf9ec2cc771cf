//! [`Observation`]: what the world and the invariants look at after a step, read once per step
//! through the observer's own watch-fed cache of the API server ([`ObserverCache`]) and from
//! fakecloud.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fakecloud::FakeCloud;
use jiff::Timestamp;
use karpenter_core::api::conditions;
use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::catalog::CapacityType;
use karpenter_core::resources::Resources;
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
    /// Shared with the observer's summary (a fleet's 20,000 names, copied every step, were a
    /// tenth of an idle step).
    pub pending_names: Arc<Vec<String>>,
    pub running_names: Arc<Vec<String>>,
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
    pub(super) known_instances: Arc<BTreeSet<String>>,
    /// Names of claims that record no instance yet (their launch's status write may be pending).
    pub(super) unlaunched_claims: Arc<BTreeSet<String>>,
    /// Claims neither registered nor deleting, with their creation time.
    pub(super) unregistered: Arc<Vec<(String, Option<Timestamp>)>>,
}

/// The observer's watch-fed view of the API server (the same reflector the controller uses), so
/// a step that changed little costs little to observe.
pub struct ObserverCache {
    pods: Reflector<Value>,
    nodes: Reflector<Value>,
    claims: Reflector<NodeClaim>,
    pools: Reflector<NodePool>,
    summary: Option<Arc<ApiSummary>>,
    /// Each cached pod's requests ([`super::pod_facts::requests`]) by the address of its shared
    /// object, which the entry holds (so the address is not reused while it is here): parsed
    /// once per pod object, not once per pod, checker and step.
    requests: BTreeMap<usize, (Arc<Value>, Resources)>,
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
            requests: BTreeMap::new(),
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

    /// `pod`'s requests: remembered for a pod of the cache, worked out otherwise.
    pub(super) fn requests(&self, pod: &Value) -> std::borrow::Cow<'_, Resources> {
        let address = std::ptr::from_ref(pod) as usize;
        match self.requests.get(&address) {
            Some((_, requests)) => std::borrow::Cow::Borrowed(requests),
            None => std::borrow::Cow::Owned(super::pod_facts::requests(pod)),
        }
    }

    /// Remembers the requests of the pods now cached, keeping those of unchanged objects.
    fn note_requests(&mut self) {
        let mut before = std::mem::take(&mut self.requests);
        for pod in self.pods.iter() {
            let address = Arc::as_ptr(pod) as usize;
            let entry = before
                .remove(&address)
                .unwrap_or_else(|| (Arc::clone(pod), super::pod_facts::requests(pod)));
            self.requests.insert(address, entry);
        }
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
    pending_names: Arc<Vec<String>>,
    running_names: Arc<Vec<String>>,
    claims: usize,
    nodes: usize,
    deleting_claims: usize,
    known_instances: Arc<BTreeSet<String>>,
    unlaunched_claims: Arc<BTreeSet<String>>,
    unregistered: Arc<Vec<(String, Option<Timestamp>)>>,
}

impl ApiSummary {
    fn of(cache: &ObserverCache) -> Self {
        let claims: Vec<&NodeClaim> = cache.claims().collect();
        let mut o = ApiSummary {
            claims: claims.len(),
            nodes: cache.nodes().count(),
            ..Default::default()
        };
        let (mut running, mut pending) = (Vec::new(), Vec::new());
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
                    running.push(name);
                }
                Some("Succeeded") | Some("Failed") => {}
                _ => {
                    o.pods_pending += 1;
                    pending.push(name);
                }
            }
        }
        o.running_names = Arc::new(running);
        o.pending_names = Arc::new(pending);
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
            .collect::<BTreeSet<_>>()
            .into();
        o.unlaunched_claims = claims
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_ref())
                    .is_none()
            })
            .filter_map(|c| c.metadata.name.clone())
            .collect::<BTreeSet<_>>()
            .into();
        o.deleting_claims = claims
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count();
        let mut unregistered = Vec::new();
        for claim in &claims {
            let registered = claim
                .status
                .as_ref()
                .is_some_and(|s| conditions::is_true(&s.conditions, "Registered"));
            if !registered && claim.metadata.deletion_timestamp.is_none() {
                unregistered.push((
                    claim.metadata.name.clone().unwrap_or_default(),
                    claim.metadata.creation_timestamp.as_ref().map(|t| t.0),
                ));
            }
        }
        o.unregistered = Arc::new(unregistered);
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
            cache.note_requests();
        }
        if changed || cache.summary.is_none() {
            cache.summary = Some(Arc::new(ApiSummary::of(cache)));
        }
        let summary = cache.summary.clone().unwrap_or_default();
        let mut o = Observation {
            pods_total: summary.pods_total,
            pods_running: summary.pods_running,
            pods_pending: summary.pods_pending,
            pending_names: summary.pending_names.clone(),
            running_names: summary.running_names.clone(),
            claims: summary.claims,
            nodes: summary.nodes,
            deleting_claims: summary.deleting_claims,
            known_instances: summary.known_instances.clone(),
            unlaunched_claims: summary.unlaunched_claims.clone(),
            unregistered: summary.unregistered.clone(),
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
