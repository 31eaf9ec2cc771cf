//! The EKS seam: what the controller learns about its cluster when settings leave it out.
//!
//! Nodes can only join with the API server's endpoint and CA bundle and (AL2023) the service
//! CIDR in their user data; upstream reads them from `DescribeCluster` unless `CLUSTER_ENDPOINT`
//! and `CLUSTER_CA_BUNDLE` are set.

use async_trait::async_trait;

use super::Retryable;

/// The parts of `DescribeCluster` Karpenter reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    pub arn: String,
    /// `https://…eks.amazonaws.com`; empty while the cluster is `CREATING`.
    pub endpoint: String,
    /// Base64 PEM of the cluster CA (`certificateAuthority.data`).
    pub certificate_authority: String,
    /// Kubernetes minor version (`1.33`).
    pub version: String,
    /// `CREATING`, `ACTIVE`, `DELETING`, `FAILED`, `UPDATING`, `PENDING`.
    pub status: String,
    /// `ipv4` or `ipv6` (`kubernetesNetworkConfig.ipFamily`).
    pub ip_family: String,
    /// `kubernetesNetworkConfig.serviceIpv4Cidr` (IPv4 clusters).
    pub service_ipv4_cidr: Option<String>,
    /// `kubernetesNetworkConfig.serviceIpv6Cidr` (IPv6 clusters).
    pub service_ipv6_cidr: Option<String>,
}

/// Errors of the EKS seam.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EksError {
    /// `ResourceNotFoundException`: no cluster by that name in this region and account.
    #[error("not found ({code}): {message}")]
    NotFound { code: String, message: String },
    /// `ThrottlingException`, `TooManyRequestsException`.
    #[error("throttled: {0}")]
    Throttled(String),
    /// `InvalidParameterException`, `InvalidRequestException`.
    #[error("invalid request ({code}): {message}")]
    InvalidRequest { code: String, message: String },
    /// `AccessDeniedException`, bad credentials.
    #[error("unauthorized ({code}): {message}")]
    Unauthorized { code: String, message: String },
    /// `ServerException`, `ServiceUnavailableException`, timeouts, connection errors.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl Retryable for EksError {
    fn is_retryable(&self) -> bool {
        matches!(self, EksError::Throttled(_) | EksError::Unavailable(_))
    }
}

/// The EKS call the controller makes.
///
/// Contract: a missing cluster is [`EksError::NotFound`] (the controller's settings are wrong:
/// surfaced, not retried in a loop); a cluster that exists but is not `ACTIVE` is returned as is,
/// and the caller decides whether its endpoint is usable yet.
#[async_trait]
pub trait Eks: Send + Sync {
    async fn describe_cluster(&self, name: &str) -> Result<Cluster, EksError>;
}
