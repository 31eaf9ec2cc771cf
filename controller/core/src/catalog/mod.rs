//! The instance-type catalog: what can be launched, its resources, labels and priced offerings.
//!
//! The built-in catalog ([`Catalog::builtin`]) is a realistic table of current EC2 instance types
//! in `us-west-2`; it is the production fallback price table, what `fakecloud` serves, and what
//! `karpenter plan` uses unless `--catalog FILE` names another ([`Catalog::from_text`]).

pub mod builtin;
pub mod file;
pub mod live;
pub mod nodeclass;
pub mod overhead;
pub mod reservations;
pub mod shared;
pub mod trunking;
pub mod unavailable;

use std::collections::BTreeMap;

use crate::resources::Resources;

pub use file::{CatalogError, Problem};
pub use overhead::{
    VM_MEMORY_OVERHEAD_PERCENT, compute_allocatable, compute_overhead, eni_limited_pods,
    eviction_threshold, kube_reserved, memory_capacity,
};
pub use reservations::{RESERVED_PRICE_DIVISOR, Reservation, ReservationAvailability};
pub use shared::SharedCatalog;
pub use unavailable::{UNAVAILABLE_TTL, UnavailableOfferings};

/// The extended resource NVIDIA's device plugin advertises, one per GPU.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
/// AMD's device plugin: one per GPU.
pub const AMD_GPU: &str = "amd.com/gpu";
/// The Neuron device plugin: one per Inferentia/Trainium device ...
pub const AWS_NEURON: &str = "aws.amazon.com/neuron";
/// ... and one per NeuronCore.
pub const AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// Habana's device plugin: one per Gaudi accelerator.
pub const HABANA_GAUDI: &str = "habana.ai/gaudi";
/// The EFA device plugin: one per EFA interface the type supports.
pub const EFA: &str = "vpc.amazonaws.com/efa";
/// The VPC resource controller (security groups for pods): one per branch network interface.
pub const POD_ENI: &str = "vpc.amazonaws.com/pod-eni";
/// The VPC resource controller on Windows nodes: one per secondary IPv4 address of the primary
/// network interface (each Windows pod takes one; EKS's admission webhook adds the request).
pub const PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";

/// Capacity type of an offering (the `karpenter.sh/capacity-type` label value).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum CapacityType {
    #[serde(rename = "reserved")]
    Reserved,
    #[serde(rename = "spot")]
    Spot,
    #[serde(rename = "on-demand")]
    OnDemand,
}

impl CapacityType {
    /// The `karpenter.sh/capacity-type` label value.
    pub fn label(self) -> &'static str {
        match self {
            CapacityType::Reserved => "reserved",
            CapacityType::Spot => "spot",
            CapacityType::OnDemand => "on-demand",
        }
    }

    pub fn from_label(label: &str) -> Option<Self> {
        match label {
            "reserved" => Some(CapacityType::Reserved),
            "spot" => Some(CapacityType::Spot),
            "on-demand" => Some(CapacityType::OnDemand),
            _ => None,
        }
    }
}

/// Where and how an instance type can be bought, at what hourly price.
#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    pub capacity_type: CapacityType,
    /// US dollars per hour.
    pub price: f64,
    /// False when EC2 does not offer it now (or the unavailable-offerings cache says so).
    pub available: bool,
    /// The capacity reservation a `reserved` offering launches into (`None` for spot and
    /// on-demand). Each reservation is its own offering: two reservations of one type in one
    /// zone are two offerings.
    pub reservation: Option<Reservation>,
}

impl Offering {
    /// A spot or on-demand offering.
    pub fn new(zone: &str, capacity_type: CapacityType, price: f64, available: bool) -> Self {
        Self {
            zone: zone.to_string(),
            capacity_type,
            price,
            available,
            reservation: None,
        }
    }

    /// The reservation id, for `reserved` offerings.
    pub fn reservation_id(&self) -> Option<&str> {
        self.reservation.as_ref().map(|r| r.id.as_str())
    }
}

/// One launchable instance type.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    pub name: String,
    /// Single-valued labels a node of this type gets: `node.kubernetes.io/instance-type`,
    /// `kubernetes.io/arch`, `kubernetes.io/os`, `karpenter.k8s.aws/instance-*`, ...
    pub labels: BTreeMap<String, String>,
    /// What the node reports as capacity (memory already net of VM overhead).
    pub capacity: Resources,
    /// kube-reserved + system-reserved + eviction threshold.
    pub overhead: Resources,
    /// `capacity - overhead`: what pods can request.
    pub allocatable: Resources,
    /// Sorted by (zone, capacity type, reservation id).
    pub offerings: Vec<Offering>,
}

/// A set of instance types, sorted by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Catalog {
    pub instance_types: Vec<InstanceType>,
    /// Zone name → zone id of the region (`DescribeAvailabilityZones`): the
    /// `topology.k8s.aws/zone-id` of each offering's zone. A zone missing here has no zone id,
    /// and a requirement on zone ids excludes its offerings.
    pub zone_ids: BTreeMap<String, String>,
    /// IPv4 addresses per network interface by type (`DescribeInstanceTypes`'
    /// `Ipv4AddressesPerInterface`). A Windows node uses its primary interface only, so EKS's VPC
    /// resource controller advertises one `vpc.amazonaws.com/PrivateIPv4Address` per secondary
    /// address of it ([`nodeclass`] adds it for Windows classes). A type missing here has none.
    pub ipv4_per_interface: BTreeMap<String, i64>,
}

impl Catalog {
    /// A catalog of the given types (sorted by name; offerings sorted too).
    pub fn new(mut instance_types: Vec<InstanceType>) -> Self {
        for it in &mut instance_types {
            it.offerings.sort_by(|a, b| {
                (&a.zone, a.capacity_type, a.reservation_id()).cmp(&(
                    &b.zone,
                    b.capacity_type,
                    b.reservation_id(),
                ))
            });
        }
        instance_types.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            instance_types,
            zone_ids: BTreeMap::new(),
            ipv4_per_interface: BTreeMap::new(),
        }
    }

    /// The same types with these IPv4 addresses per interface (by type name).
    pub fn with_ipv4_per_interface(mut self, ipv4_per_interface: BTreeMap<String, i64>) -> Self {
        self.ipv4_per_interface = ipv4_per_interface;
        self
    }

    /// The same types in a region whose zones have these ids.
    pub fn with_zone_ids(mut self, zone_ids: BTreeMap<String, String>) -> Self {
        self.zone_ids = zone_ids;
        self
    }

    /// The id of `zone`, if the catalog knows it.
    pub fn zone_id(&self, zone: &str) -> Option<&str> {
        self.zone_ids.get(zone).map(String::as_str)
    }

    /// The built-in `us-west-2` catalog (see [`builtin`]), as an owned copy for callers that
    /// adjust it (mark offerings unavailable, drop types). Built once per process; read-only
    /// callers should use [`Catalog::builtin_ref`] and skip the clone.
    pub fn builtin() -> Catalog {
        builtin::catalog().clone()
    }

    /// The built-in catalog, shared: built on first use and kept for the life of the process.
    pub fn builtin_ref() -> &'static Catalog {
        builtin::catalog()
    }

    /// Reads a catalog file (YAML or JSON; format in [`file`]).
    pub fn from_text(text: &str) -> Result<Catalog, CatalogError> {
        file::parse(text)
    }

    /// The instance type called `name`, if the catalog has it.
    pub fn get(&self, name: &str) -> Option<&InstanceType> {
        self.instance_types
            .binary_search_by(|it| it.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.instance_types[i])
    }
}
