//! EKS as the controller sees it: the clusters of the account, answering `DescribeCluster` with
//! the endpoint, CA bundle, service CIDR and version nodes need to join.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use jiff::Timestamp;
use karpenter_core::seams::eks::{Cluster, Eks, EksError};

#[derive(Clone, Debug)]
struct ClusterRecord {
    cluster: Cluster,
    created: Timestamp,
}

/// The fake EKS of one account and region.
pub struct FakeEks {
    region: String,
    account_id: String,
    clusters: Mutex<BTreeMap<String, ClusterRecord>>,
}

impl FakeEks {
    pub fn new(region: &str, account_id: &str) -> Self {
        Self {
            region: region.to_string(),
            account_id: account_id.to_string(),
            clusters: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, ClusterRecord>> {
        self.clusters
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds an `ACTIVE` IPv4 cluster of Kubernetes `version`, the one `identity` names (the endpoint, CA bundle and service CIDR a node's user
    /// data must carry to join, `Config::cluster_identity`): `DescribeCluster` answers what
    /// fakecloud's bootstrap check expects, so a controller that discovers its cluster through
    /// EKS (the real binary against `serve`) launches nodes that join.
    pub fn add_cluster(
        &self,
        identity: &crate::bootstrap::ClusterIdentity,
        version: &str,
        created: Timestamp,
    ) -> Cluster {
        let name = identity.name.as_str();
        let cluster = Cluster {
            name: name.to_string(),
            arn: format!(
                "arn:aws:eks:{}:{}:cluster/{name}",
                self.region, self.account_id
            ),
            endpoint: identity.endpoint.clone(),
            certificate_authority: identity.ca_bundle.clone(),
            version: version.to_string(),
            status: "ACTIVE".into(),
            ip_family: "ipv4".into(),
            service_ipv4_cidr: Some(identity.cidr.clone()),
            service_ipv6_cidr: None,
        };
        self.lock().insert(
            name.to_string(),
            ClusterRecord {
                cluster: cluster.clone(),
                created,
            },
        );
        cluster
    }

    /// When a cluster was created (`createdAt`).
    pub fn created(&self, name: &str) -> Option<Timestamp> {
        self.lock().get(name).map(|r| r.created)
    }
}

#[async_trait]
impl Eks for FakeEks {
    async fn describe_cluster(&self, name: &str) -> Result<Cluster, EksError> {
        self.lock()
            .get(name)
            .map(|r| r.cluster.clone())
            .ok_or_else(|| EksError::NotFound {
                code: "ResourceNotFoundException".into(),
                message: format!("No cluster found for name: {name}."),
            })
    }
}
