//! The knobs fixed when a fake cloud is built. [`FakeCloud::reset`](crate::FakeCloud::reset)
//! returns to exactly this configuration; [`FakeCloud::configure`](crate::FakeCloud::configure)
//! changes it during a run.
//!
//! Defaults are realistic (EC2's typical timings, Karpenter's queue settings), so a simulation
//! that sets nothing still sees an eventually consistent, asynchronous cloud.

use std::collections::BTreeMap;

use karpenter_core::seams::ec2::{SecurityGroup, Subnet};

use crate::boot::BootModel;
use crate::faults::{FaultRates, Operation};
use crate::latency::LatencyProfile;

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Seeds every random draw (ids, faults, boots, spot interruptions, SQS delivery).
    pub seed: u64,
    pub region: String,
    pub account_id: String,
    /// Value of the `karpenter.sh/discovery` tag on the default subnets and security group.
    pub cluster_name: String,
    /// The cluster name a node's user data must name, when it is not `cluster_name` (a world
    /// whose discovery tag differs from its cluster's name).
    pub cluster_join_name: Option<String>,
    /// The API server's endpoint a node's user data must name to join (TLS to any other fails).
    pub cluster_endpoint: String,
    /// Base64 of the cluster's CA bundle (PEM) a node's user data must carry to join.
    pub cluster_ca_bundle: String,
    /// The IAM roles with an access entry (EKS access entries or `aws-auth`) for nodes: a launched
    /// instance whose profile holds another role runs and never joins. `None`: the account's
    /// node role ([`crate::node_role_name`] of the cluster), as the getting-started stack makes.
    pub cluster_access_roles: Option<Vec<String>>,
    /// The cluster's service CIDR (nodeadm requires it in a `NodeConfig`).
    pub cluster_service_cidr: String,
    /// Kubernetes minor version the published AMIs and SSM parameters are for (`1.33`).
    pub kubernetes_version: String,
    /// Release published at start for `al2023@latest` (`vYYYYMMDD`).
    pub ami_release_al2023: String,
    /// Release published at start for `al2@latest` (`vYYYYMMDD`).
    pub ami_release_al2: String,
    /// Release published at start for `bottlerocket@latest` (`X.Y.Z`).
    pub ami_release_bottlerocket: String,
    /// Release published at start for the Windows aliases (`YYYY.MM.DD`): Windows Server 2019
    /// and 2022, and 2025 from Kubernetes 1.35 (EKS publishes none for older versions).
    pub ami_release_windows: String,
    /// Subnets of the world; empty means one per zone of the catalog, tagged for discovery.
    pub subnets: Vec<Subnet>,
    /// Security groups of the world; empty means one, tagged for discovery.
    pub security_groups: Vec<SecurityGroup>,
    /// Free IPs of each default subnet (a /20 less AWS's five reserved addresses).
    pub subnet_free_ips_default: u32,
    /// Instances each (instance type, zone, capacity type) pool can launch before it runs dry
    /// (offerings the catalog marks unavailable start at zero).
    pub pool_capacity_default: u32,
    /// `price-capacity-optimized` considers only pools with at least this fraction of the
    /// deepest candidate pool's free capacity, then takes the cheapest of them.
    pub price_capacity_depth_fraction: f64,
    /// How long a launched instance stays invisible to `DescribeInstances` and `CreateTags`.
    pub eventual_consistency_lag_ms: u64,
    /// `pending` → `running`.
    pub pending_duration_ms: u64,
    /// `shutting-down` → `terminated`.
    pub shutting_down_duration_ms: u64,
    /// `stopping` → `stopped`.
    pub stopping_duration_ms: u64,
    /// How long a terminated instance stays visible before EC2 forgets it.
    pub terminated_retention_s: u64,
    /// When launched instances are ready to join the cluster.
    pub boot: BootModel,
    /// Poisson rate of spot interruptions per running spot instance (0 = only scripted ones).
    pub spot_interruption_rate_per_hour: f64,
    /// When > 0, each random spot interruption is preceded by a rebalance recommendation this
    /// much earlier.
    pub rebalance_recommendation_lead_ms: u64,
    /// EventBridge → SQS delivery delay.
    pub event_delivery_lag_ms: u64,
    /// How long a received message stays invisible unless deleted.
    pub visibility_timeout_s: u64,
    /// Messages older than this are dropped (Karpenter's interruption queue keeps 300 s).
    pub message_retention_s: u64,
    /// Messages beyond this depth are dropped (and counted), keeping long runs bounded.
    pub queue_depth_max: usize,
    /// Probability that a received message is also delivered again later (at-least-once).
    pub duplicate_delivery_rate: f64,
    /// Probability that one receive returns its messages in a shuffled order.
    pub reorder_rate: f64,
    /// API fault rates by operation (absent: none).
    pub faults: BTreeMap<Operation, FaultRates>,
    /// How long each action takes when nothing is wrong (default: instant; the simulation
    /// draws a realistic profile per seed).
    pub latency: LatencyProfile,
    /// Calls kept in the call log, and messages in the sent-message log (oldest dropped first).
    pub call_log_len_max: usize,
}

/// The endpoint of the world's cluster unless configured otherwise (EKS's form).
pub const DEFAULT_CLUSTER_ENDPOINT: &str =
    "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com";

/// Base64 of a PEM bundle: the world's cluster CA unless configured otherwise.
pub const DEFAULT_CLUSTER_CA_BUNDLE: &str =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUZha2VjbG91ZENBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";

impl Config {
    /// The roles whose instances the cluster lets join (see `cluster_access_roles`).
    pub fn access_roles(&self) -> Vec<String> {
        self.cluster_access_roles
            .clone()
            .unwrap_or_else(|| vec![crate::node_role_name(&self.cluster_name)])
    }

    /// The cluster a node's user data must name to join.
    pub fn cluster_identity(&self) -> crate::bootstrap::ClusterIdentity {
        crate::bootstrap::ClusterIdentity {
            name: self
                .cluster_join_name
                .clone()
                .unwrap_or_else(|| self.cluster_name.clone()),
            endpoint: self.cluster_endpoint.clone(),
            ca_bundle: self.cluster_ca_bundle.clone(),
            cidr: self.cluster_service_cidr.clone(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            seed: 0,
            region: "us-west-2".into(),
            account_id: "123456789012".into(),
            cluster_name: "sim".into(),
            cluster_join_name: None,
            cluster_access_roles: None,
            cluster_endpoint: DEFAULT_CLUSTER_ENDPOINT.into(),
            cluster_ca_bundle: DEFAULT_CLUSTER_CA_BUNDLE.into(),
            cluster_service_cidr: "10.100.0.0/16".into(),
            kubernetes_version: "1.33".into(),
            ami_release_al2023: "v20250601".into(),
            ami_release_al2: "v20250601".into(),
            ami_release_bottlerocket: "1.40.0".into(),
            ami_release_windows: "2025.06.11".into(),
            subnets: Vec::new(),
            security_groups: Vec::new(),
            subnet_free_ips_default: 4091,
            pool_capacity_default: 1000,
            price_capacity_depth_fraction: 0.5,
            eventual_consistency_lag_ms: 1_000,
            pending_duration_ms: 10_000,
            shutting_down_duration_ms: 30_000,
            stopping_duration_ms: 30_000,
            terminated_retention_s: 3_600,
            boot: BootModel::default(),
            spot_interruption_rate_per_hour: 0.0,
            rebalance_recommendation_lead_ms: 0,
            event_delivery_lag_ms: 0,
            visibility_timeout_s: 30,
            message_retention_s: 300,
            queue_depth_max: 10_000,
            duplicate_delivery_rate: 0.0,
            reorder_rate: 0.0,
            faults: BTreeMap::new(),
            latency: LatencyProfile::none(),
            call_log_len_max: 100_000,
        }
    }
}
