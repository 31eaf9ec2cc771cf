//! The catalog seam: what EC2 and the Pricing API say about instance types in a region, from
//! which [`crate::catalog::live`] computes the [`Catalog`](crate::catalog::Catalog) the solver
//! uses.
//!
//! Shapes follow `DescribeInstanceTypes`, `DescribeInstanceTypeOfferings`,
//! `DescribeSpotPriceHistory` and the price list, trimmed to the fields Karpenter reads.

use std::collections::BTreeMap;

use async_trait::async_trait;
use jiff::Timestamp;

use super::Retryable;

/// One GPU model of an instance type (`GpuInfo.Gpus[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gpu {
    /// As EC2 spells it (`T4`, `A10G`); labels lower-case it.
    pub name: String,
    /// `NVIDIA`, `AMD`, `Habana`.
    pub manufacturer: String,
    pub count: i64,
    /// Memory of one GPU.
    pub memory_mib: i64,
}

/// One Neuron device model of an instance type (`NeuronInfo.NeuronDevices[]`: Inferentia,
/// Trainium).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeuronDevice {
    /// As EC2 spells it (`Inferentia2`, `Trainium`); labels lower-case it.
    pub name: String,
    pub count: i64,
    /// `CoreInfo.Count`: NeuronCores of one device.
    pub cores_per_device: i64,
}

/// One instance type as `DescribeInstanceTypes` describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceTypeInfo {
    pub instance_type: String,
    /// `ProcessorInfo.SupportedArchitectures`: `x86_64`, `arm64` (`i386`, `x86_64_mac` exist).
    pub architectures: Vec<String>,
    /// `ProcessorInfo.Manufacturer`: `Intel`, `AMD`, `AWS`, `Apple`.
    pub cpu_manufacturer: Option<String>,
    /// `VCpuInfo.DefaultVCpus`.
    pub vcpus: i64,
    /// `MemoryInfo.SizeInMiB`: what EC2 sells, before the hypervisor's share.
    pub memory_mib: i64,
    /// `NetworkInfo.MaximumNetworkInterfaces`.
    pub max_network_interfaces: i64,
    /// `NetworkInfo.Ipv4AddressesPerInterface`.
    pub ipv4_addresses_per_interface: i64,
    /// `NetworkInfo.NetworkCards[0].BaselineBandwidthInGbps`, in Mbps.
    pub network_baseline_mbps: Option<i64>,
    /// `NetworkInfo.EncryptionInTransitSupported`.
    pub encryption_in_transit: bool,
    /// `EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps`.
    pub ebs_max_bandwidth_mbps: Option<i64>,
    /// `Hypervisor`: `nitro` or `xen`; `None` on bare metal.
    pub hypervisor: Option<String>,
    pub bare_metal: bool,
    /// `InstanceStorageInfo.TotalSizeInGB` when the local disks are NVMe.
    pub local_nvme_gb: Option<i64>,
    /// `GpuInfo.Gpus`.
    pub gpus: Vec<Gpu>,
    /// `NeuronInfo.NeuronDevices`.
    pub neuron_devices: Vec<NeuronDevice>,
    /// `NetworkInfo.EfaInfo.MaximumEfaInterfaces` (0 without EFA support).
    pub efa_interfaces: i64,
    /// `SupportedUsageClasses`: `on-demand`, `spot`, `capacity-block`.
    pub usage_classes: Vec<String>,
}

/// `DescribeInstanceTypeOfferings` with `LocationType=availability-zone`: where a type is sold.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ZoneOffering {
    pub instance_type: String,
    pub zone: String,
}

/// One entry of `DescribeSpotPriceHistory` (product `Linux/UNIX`).
#[derive(Clone, Debug, PartialEq)]
pub struct SpotPrice {
    pub instance_type: String,
    pub zone: String,
    /// US dollars per hour.
    pub price: f64,
    pub timestamp: Timestamp,
}

/// Errors of the catalog seam.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// `RequestLimitExceeded`, `ThrottlingException`.
    #[error("throttled: {0}")]
    Throttled(String),
    /// `InvalidParameterValue`, a bad filter, an unparsable price list entry.
    #[error("invalid request ({code}): {message}")]
    InvalidRequest { code: String, message: String },
    /// `UnauthorizedOperation`, `AccessDeniedException`.
    #[error("unauthorized ({code}): {message}")]
    Unauthorized { code: String, message: String },
    /// 5xx, timeouts, connection errors; for the Pricing API also "not reachable from here"
    /// (isolated VPCs), which makes the caller fall back to the built-in price table.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl Retryable for CatalogError {
    fn is_retryable(&self) -> bool {
        matches!(
            self,
            CatalogError::Throttled(_) | CatalogError::Unavailable(_)
        )
    }
}

/// Where instance types, their zones and their prices come from.
///
/// Contract shared by every implementation:
/// - every call returns the whole answer (implementations follow every page) sorted by instance
///   type, then zone;
/// - `instance_types` returns only types launchable as HVM on `x86_64` or `arm64` (the filter
///   upstream applies);
/// - `spot_prices` returns the latest price per (type, zone) only;
/// - `on_demand_prices` is Linux, shared tenancy, no pre-installed software, in this region; a
///   type missing from it has no on-demand offering.
#[async_trait]
pub trait CatalogSource: Send + Sync {
    async fn instance_types(&self) -> Result<Vec<InstanceTypeInfo>, CatalogError>;

    async fn zone_offerings(&self) -> Result<Vec<ZoneOffering>, CatalogError>;

    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, CatalogError>;

    /// US dollars per hour by instance type.
    async fn on_demand_prices(&self) -> Result<BTreeMap<String, f64>, CatalogError>;

    /// `DescribeAvailabilityZones`: zone name → zone id (`us-west-2a` → `usw2-az1`). Names map
    /// to physical zones differently in every account; ids do not, which is why users select on
    /// `topology.k8s.aws/zone-id`.
    async fn zone_ids(&self) -> Result<BTreeMap<String, String>, CatalogError>;
}
