//! The cluster as the controller knows it: watch-fed caches of the kinds its passes read.
//!
//! Passes read from here instead of listing through the seam, so an idle pass costs nothing and a
//! busy one decodes only what changed. The cache is eventually consistent like any informer: a
//! pass sees the writes of earlier passes once the watch has delivered them (the in-memory API
//! server delivers synchronously, so in the simulation that is the next sync).

pub mod reflector;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
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
}

/// One cache shared by the controllers of an operator. An async mutex: a pass holds it only while
/// it syncs and copies what it needs, never across its writes.
pub type SharedState = std::sync::Arc<futures::lock::Mutex<ClusterState>>;
