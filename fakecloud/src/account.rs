//! An AWS account ready for a cluster: what `fakecloud serve --cluster NAME` starts with, and
//! what a test of the whole AWS side needs in one value.
//!
//! For a cluster named NAME: subnets in the catalog's zones and a security group tagged
//! `karpenter.sh/discovery: NAME` (from [`FakeCloud`]'s network), the EKS AMIs with their public
//! SSM parameters, the node role `KarpenterNodeRole-NAME`, the interruption queue `NAME`, and the
//! EKS cluster `NAME`.

use std::sync::Arc;

use karpenter_core::catalog::Catalog;
use karpenter_core::seams::Clock;

use crate::{Config, FakeCloud, FakeEks, FakeIam};

/// The node role's name for a cluster, as upstream's getting-started CloudFormation names it.
pub fn node_role_name(cluster: &str) -> String {
    format!("KarpenterNodeRole-{cluster}")
}

/// One account: EC2 and SQS, IAM and EKS, set up for one cluster.
pub struct Account {
    pub cloud: Arc<FakeCloud>,
    pub iam: Arc<FakeIam>,
    pub eks: Arc<FakeEks>,
    /// The cluster (and interruption queue) name.
    pub cluster_name: String,
}

impl Account {
    /// The account of `config` (its seed, region, account id and cluster name) with `catalog`.
    pub fn new(clock: Arc<dyn Clock>, catalog: Catalog, config: Config) -> Self {
        let now = clock.now();
        let iam = FakeIam::new(clock.clone(), &config.account_id, config.seed);
        iam.add_role(&node_role_name(&config.cluster_name), "/");
        let eks = FakeEks::new(&config.region, &config.account_id);
        eks.add_cluster(&config.cluster_identity(), &config.kubernetes_version, now);
        let cluster_name = config.cluster_name.clone();
        let iam = Arc::new(iam);
        let cloud = Arc::new(FakeCloud::new(clock, catalog, config));
        cloud.attach_iam(iam.clone());
        Self {
            cloud,
            iam,
            eks: Arc::new(eks),
            cluster_name,
        }
    }

    /// The account for cluster `name` with seed `seed`, the built-in catalog and otherwise
    /// default settings.
    pub fn for_cluster(clock: Arc<dyn Clock>, name: &str, seed: u64) -> Self {
        let config = Config {
            seed,
            cluster_name: name.to_string(),
            ..Config::default()
        };
        Self::new(clock, Catalog::builtin(), config)
    }

    /// The interruption queue's name (the cluster's, as upstream's CloudFormation names it).
    pub fn queue_name(&self) -> &str {
        &self.cluster_name
    }

    pub fn region(&self) -> String {
        self.cloud.region()
    }

    pub fn account_id(&self) -> String {
        self.cloud.account_id()
    }
}

/// The account's fixed facts (what a wire server puts in ARNs, URLs and answers).
impl FakeCloud {
    pub fn region(&self) -> String {
        self.initial.region.clone()
    }

    pub fn account_id(&self) -> String {
        self.initial.account_id.clone()
    }

    pub fn cluster_name(&self) -> String {
        self.initial.cluster_name.clone()
    }

    pub fn kubernetes_version(&self) -> String {
        self.initial.kubernetes_version.clone()
    }

    /// What a node's user data must name to join (startup discovery finds the same through
    /// EKS `DescribeCluster`).
    pub fn cluster_identity(&self) -> crate::bootstrap::ClusterIdentity {
        self.initial.cluster_identity()
    }
}
