//! What the controller learns about its cluster and region at start: the API server endpoint and
//! CA bundle nodes join with (settings first, then EKS `DescribeCluster`, then for the CA the
//! kube config's own), the Kubernetes version (the API server's `/version`), and the instance
//! catalog (EC2 and the Pricing API, retried a bounded number of times).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::apimachinery::pkg::version::Info;
use karpenter_aws::Aws;
use karpenter_core::catalog::Catalog;
use karpenter_core::catalog::live::LiveCatalog;
use karpenter_core::nodeclass::cluster::{ClusterInfo, ClusterInfoError};
use karpenter_core::seams::catalog::{
    CatalogError, CatalogSource, InstanceTypeInfo, SpotPrice, ZoneOffering,
};
use karpenter_core::seams::{Clock, Eks};

use super::{ControllerError, Settings};

/// Attempts at loading the instance catalog before the start fails (the AWS SDK retries each
/// call too).
pub const CATALOG_LOAD_ATTEMPTS_MAX: u32 = 5;
/// Wait between catalog attempts.
pub const CATALOG_LOAD_RETRY: Duration = Duration::from_secs(5);

/// The cluster as the controller's launches need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovered {
    pub endpoint: String,
    /// Base64 PEM.
    pub ca_bundle: String,
    /// `major.minor` of the API server (`1.33`).
    pub kubernetes_version: String,
    pub service_cidr: Option<String>,
    /// What launches put in user data (name, endpoint, CA, service CIDR and cluster DNS).
    /// `None` only when the service CIDR could not be found (EKS DescribeCluster failed and the
    /// endpoint came from the settings): every launch then fails with a condition saying so,
    /// rather than starting instances that could never join.
    pub cluster: Option<ClusterInfo>,
}

/// The kube config's CA (inline data or a file) as base64 PEM, if it has one.
pub fn kube_config_ca(config: &kube::Config) -> Option<String> {
    if let Some(certs) = &config.root_cert {
        let pem: String = certs
            .iter()
            .map(|der| {
                let body = STANDARD.encode(der);
                let lines: Vec<&str> = body
                    .as_bytes()
                    .chunks(64)
                    .map(|c| std::str::from_utf8(c).unwrap_or_default())
                    .collect();
                format!(
                    "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                    lines.join("\n")
                )
            })
            .collect();
        return Some(STANDARD.encode(pem));
    }
    let file = config.root_cert_file.as_ref()?;
    std::fs::read(file).ok().map(|pem| STANDARD.encode(pem))
}

/// `major.minor` from `/version` (`minor` may carry a `+` on managed control planes).
pub fn kubernetes_version(info: &Info) -> String {
    let minor: String = info
        .minor
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    format!("{}.{}", info.major.trim(), minor)
}

/// Endpoint and CA from the settings where given, else from EKS; the CA finally from the kube
/// config. An endpoint that cannot be found is an error: nodes could not join.
pub async fn discover(
    settings: &Settings,
    eks: &dyn Eks,
    kube_ca: Option<String>,
    version: &Info,
) -> Result<Discovered, ControllerError> {
    let mut endpoint = settings.cluster_endpoint.clone();
    let mut ca_bundle = settings.cluster_ca_bundle.clone();
    let mut service_cidr = None;
    match eks.describe_cluster(&settings.cluster_name).await {
        Ok(cluster) => {
            if endpoint.is_empty() {
                endpoint = cluster.endpoint;
            }
            if ca_bundle.is_empty() {
                ca_bundle = cluster.certificate_authority;
            }
            service_cidr = cluster.service_ipv4_cidr.or(cluster.service_ipv6_cidr);
        }
        Err(error) if endpoint.is_empty() => {
            return Err(ControllerError::Discovery(format!(
                "CLUSTER_ENDPOINT is empty and EKS DescribeCluster {} failed: {error}",
                settings.cluster_name
            )));
        }
        Err(error) => {
            tracing::warn!(%error, "EKS DescribeCluster failed; using the settings");
        }
    }
    if ca_bundle.is_empty() {
        ca_bundle = kube_ca.unwrap_or_default();
    }
    let cluster = match ClusterInfo::new(
        &settings.cluster_name,
        &endpoint,
        &ca_bundle,
        service_cidr.as_deref(),
        None,
    ) {
        Ok(cluster) => Some(cluster),
        Err(ClusterInfoError::NoNetwork) => {
            tracing::warn!(
                "the cluster's service CIDR is unknown (EKS DescribeCluster failed): nodes cannot \
                 be launched until it answers and the controller restarts"
            );
            None
        }
        Err(e) => return Err(ControllerError::Discovery(e.to_string())),
    };
    let discovered = Discovered {
        endpoint,
        ca_bundle,
        kubernetes_version: kubernetes_version(version),
        service_cidr,
        cluster,
    };
    tracing::info!(
        endpoint = discovered.endpoint,
        kubernetes_version = discovered.kubernetes_version,
        service_cidr = ?discovered.service_cidr,
        "discovered the cluster"
    );
    Ok(discovered)
}

/// The catalog source of an isolated VPC: no Pricing API calls (the built-in price table).
struct WithoutPricing<S>(S);

#[async_trait]
impl<S: CatalogSource> CatalogSource for WithoutPricing<S> {
    async fn instance_types(&self) -> Result<Vec<InstanceTypeInfo>, CatalogError> {
        self.0.instance_types().await
    }
    async fn zone_offerings(&self) -> Result<Vec<ZoneOffering>, CatalogError> {
        self.0.zone_offerings().await
    }
    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, CatalogError> {
        self.0.spot_prices().await
    }
    async fn zone_ids(&self) -> Result<BTreeMap<String, String>, CatalogError> {
        self.0.zone_ids().await
    }
    async fn on_demand_prices(&self) -> Result<BTreeMap<String, f64>, CatalogError> {
        Err(CatalogError::Unavailable(
            "ISOLATED_VPC: the Pricing API is not called".into(),
        ))
    }
}

/// The region's catalog, loaded at start, and the live catalog that loaded it (the operator's
/// catalog refresh loop keeps reading it: instance types and on-demand prices every 12 h, spot
/// prices hourly).
pub async fn load_catalog(
    aws: &Aws,
    isolated_vpc: bool,
    clock: Arc<dyn Clock>,
) -> Result<(Arc<Catalog>, LiveCatalog), ControllerError> {
    let source: Arc<dyn CatalogSource> = if isolated_vpc {
        Arc::new(WithoutPricing(aws.catalog()))
    } else {
        Arc::new(aws.catalog())
    };
    let mut live = LiveCatalog::new(source, clock, aws.region());
    let mut last_error = String::from("no instance types");
    for attempt in 1..=CATALOG_LOAD_ATTEMPTS_MAX {
        match live.refresh().await {
            Ok(_) => {
                if let Some(catalog) = live.catalog() {
                    tracing::info!(
                        instance_types = catalog.instance_types.len(),
                        prices = ?live.price_source(),
                        "loaded the instance catalog"
                    );
                    return Ok((catalog, live));
                }
            }
            Err(error) => {
                tracing::warn!(attempt, %error, "loading the instance catalog failed");
                last_error = error.to_string();
            }
        }
        if attempt < CATALOG_LOAD_ATTEMPTS_MAX {
            tokio::time::sleep(CATALOG_LOAD_RETRY).await;
        }
    }
    Err(ControllerError::Catalog(last_error))
}
