//! EKS as the controller sees it: the clusters of the account, answering `DescribeCluster` with
//! the endpoint, CA bundle, service CIDR and version nodes need to join.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use jiff::Timestamp;
use karpenter_core::seams::eks::{Cluster, Eks, EksError};

/// A PEM certificate in base64, as `certificateAuthority.data` carries it. It is not a valid
/// certificate (nothing here verifies TLS); only its shape matters.
const FAKE_CA_PEM: &str =
    "-----BEGIN CERTIFICATE-----\nZmFrZWNsb3VkIGNsdXN0ZXIgQ0E=\n-----END CERTIFICATE-----\n";

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

    /// Adds an `ACTIVE` IPv4 cluster with EKS's default service CIDR (`10.100.0.0/16`), an
    /// endpoint derived from its name, and Kubernetes `version`.
    pub fn add_cluster(&self, name: &str, version: &str, created: Timestamp) -> Cluster {
        let hash = |text: &str| karpenter_core::catalog::builtin::fnv1a64(text.as_bytes());
        let host = format!(
            "{:016X}{:016X}",
            hash(name),
            hash(&format!("{name}/endpoint"))
        );
        let cluster = Cluster {
            name: name.to_string(),
            arn: format!(
                "arn:aws:eks:{}:{}:cluster/{name}",
                self.region, self.account_id
            ),
            endpoint: format!("https://{host}.gr7.{}.eks.amazonaws.com", self.region),
            certificate_authority: base64_encode(FAKE_CA_PEM.as_bytes()),
            version: version.to_string(),
            status: "ACTIVE".into(),
            ip_family: "ipv4".into(),
            service_ipv4_cidr: Some("10.100.0.0/16".into()),
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

/// Standard base64 with padding (the CA bundle's encoding); small enough not to need a crate in
/// the simulation's dependency graph.
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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
