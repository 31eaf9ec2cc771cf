//! The cluster as the controller knows it: watch-fed caches of the kinds its passes read.
//!
//! Passes read from here instead of listing through the seam, so an idle pass costs nothing and a
//! busy one decodes only what changed. The cache is eventually consistent like any informer: a
//! pass sees the writes of earlier passes once the watch has delivered them (the in-memory API
//! server delivers synchronously, so in the simulation that is the next sync).

pub mod reflector;

use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

pub use reflector::Reflector;

use crate::api::{EC2NodeClass, NodeClaim, NodePool};
use crate::seams::kube::ResourceKind;
use crate::seams::{KubeApi, KubeError};

/// Watch-fed caches of every kind the controllers read.
#[derive(Debug)]
pub struct ClusterState {
    pub pools: Reflector<NodePool>,
    pub node_classes: Reflector<EC2NodeClass>,
    pub claims: Reflector<NodeClaim>,
    pub nodes: Reflector<Node>,
    pub pods: Reflector<Pod>,
    pub daemonsets: Reflector<DaemonSet>,
    pub namespaces: Reflector<Namespace>,
    /// Read by provisioning (fully blocking budgets) and disruption.
    pub pdbs: Reflector<PodDisruptionBudget>,
    /// Volume topology of pending pods (provisioning) and of pods moved by disruption.
    pub volume_claims: Reflector<PersistentVolumeClaim>,
    pub volumes: Reflector<PersistentVolume>,
    pub storage_classes: Reflector<StorageClass>,
    /// How many volumes each node's CSI drivers may attach (CSI attach limits).
    pub csi_nodes: Reflector<CSINode>,
    /// What kube-scheduler deduces default spread selectors from; synced (and watched) only with
    /// default topology spread constraints configured, as upstream's lazily started informers
    /// are: without them nothing reads these kinds.
    pub selector_sources: SelectorSourceCaches,
}

/// The caches of [`crate::scheduling::SelectorSources`].
#[derive(Debug)]
pub struct SelectorSourceCaches {
    pub services: Reflector<Service>,
    pub replica_sets: Reflector<ReplicaSet>,
    pub stateful_sets: Reflector<StatefulSet>,
    pub replication_controllers: Reflector<ReplicationController>,
}

impl SelectorSourceCaches {
    fn new() -> Self {
        Self {
            services: Reflector::new(ResourceKind::SERVICE),
            replica_sets: Reflector::new(ResourceKind::REPLICA_SET),
            stateful_sets: Reflector::new(ResourceKind::STATEFUL_SET),
            replication_controllers: Reflector::new(ResourceKind::REPLICATION_CONTROLLER),
        }
    }

    /// Brings the four caches up to date (see [`Reflector::sync`]).
    pub async fn sync(&mut self, kube: &dyn KubeApi) -> Result<bool, KubeError> {
        let mut changed = self.services.sync(kube).await?;
        changed |= self.replica_sets.sync(kube).await?;
        changed |= self.stateful_sets.sync(kube).await?;
        changed |= self.replication_controllers.sync(kube).await?;
        Ok(changed)
    }

    /// The cached objects, by reference.
    pub fn sources(&self) -> crate::scheduling::SelectorSources<'_> {
        crate::scheduling::SelectorSources {
            services: self.services.iter().map(|o| &**o).collect(),
            replica_sets: self.replica_sets.iter().map(|o| &**o).collect(),
            stateful_sets: self.stateful_sets.iter().map(|o| &**o).collect(),
            replication_controllers: self.replication_controllers.iter().map(|o| &**o).collect(),
        }
    }
}

impl Default for ClusterState {
    fn default() -> Self {
        Self::new()
    }
}

impl ClusterState {
    pub fn new() -> Self {
        Self {
            pools: Reflector::new(ResourceKind::NODE_POOL),
            node_classes: Reflector::new(ResourceKind::EC2_NODE_CLASS),
            claims: Reflector::new(ResourceKind::NODE_CLAIM),
            nodes: Reflector::new(ResourceKind::NODE),
            pods: Reflector::new(ResourceKind::POD),
            daemonsets: Reflector::new(ResourceKind::DAEMON_SET),
            namespaces: Reflector::new(ResourceKind::NAMESPACE),
            pdbs: Reflector::new(ResourceKind::POD_DISRUPTION_BUDGET),
            volume_claims: Reflector::new(ResourceKind::PERSISTENT_VOLUME_CLAIM),
            volumes: Reflector::new(ResourceKind::PERSISTENT_VOLUME),
            storage_classes: Reflector::new(ResourceKind::STORAGE_CLASS),
            csi_nodes: Reflector::new(ResourceKind::CSI_NODE),
            selector_sources: SelectorSourceCaches::new(),
        }
    }

    /// Syncs every cache (nodes before pods, as upstream reads them, so a pod bound after the
    /// node sync is seen as pending at worst). Returns whether anything changed.
    pub async fn sync(&mut self, kube: &dyn KubeApi) -> Result<bool, KubeError> {
        let mut changed = false;
        changed |= self.pools.sync(kube).await?;
        changed |= self.node_classes.sync(kube).await?;
        changed |= self.nodes.sync(kube).await?;
        changed |= self.claims.sync(kube).await?;
        changed |= self.pods.sync(kube).await?;
        changed |= self.daemonsets.sync(kube).await?;
        changed |= self.namespaces.sync(kube).await?;
        changed |= self.pdbs.sync(kube).await?;
        changed |= self.volume_claims.sync(kube).await?;
        changed |= self.volumes.sync(kube).await?;
        changed |= self.storage_classes.sync(kube).await?;
        changed |= self.csi_nodes.sync(kube).await?;
        Ok(changed)
    }

    /// [`Self::sync`], plus the selector sources when `config` has default constraints.
    /// A revision of everything disruption decides from: it changes whenever one of those
    /// caches changes (upstream marks its cluster state "unconsolidated" on such changes).
    pub fn disruption_revision(&self) -> Vec<u64> {
        [
            self.pools.changes(),
            self.node_classes.changes(),
            self.claims.changes(),
            self.nodes.changes(),
            self.pods.changes(),
            self.daemonsets.changes(),
            self.namespaces.changes(),
            self.pdbs.changes(),
            self.volume_claims.changes(),
            self.volumes.changes(),
            self.storage_classes.changes(),
            self.csi_nodes.changes(),
            self.selector_sources.services.changes(),
            self.selector_sources.replica_sets.changes(),
            self.selector_sources.stateful_sets.changes(),
            self.selector_sources.replication_controllers.changes(),
        ]
        .to_vec()
    }

    pub async fn sync_for(
        &mut self,
        kube: &dyn KubeApi,
        config: Option<&crate::scheduling::SchedulerConfiguration>,
    ) -> Result<bool, KubeError> {
        let mut changed = self.sync(kube).await?;
        if config.is_some_and(|c| c.has_default_constraints()) {
            changed |= self.selector_sources.sync(kube).await?;
        }
        Ok(changed)
    }
}

/// One cache shared by the controllers of an operator. An async mutex: a pass holds it only while
/// it syncs and copies what it needs, never across its writes.
pub type SharedState = std::sync::Arc<futures::lock::Mutex<ClusterState>>;
