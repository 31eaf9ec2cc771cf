//! What one CreateFleet asks for, and what its answer means (upstream's `instance` provider):
//!
//! - **composition**: exotic types (GPUs, accelerators, bare metal) only when the claim asks for
//!   their resources (unless nothing else fits); spot types dearer than the cheapest on-demand
//!   option dropped; the rest ordered by price, one architecture (the cheapest type's), and at
//!   most [`FLEET_INSTANCE_TYPES_MAX`] of them;
//! - **errors**: capacity codes mark their offering unavailable (the next pass plans elsewhere);
//!   any other code is a configuration error (bad profile, AMI, parameters, permissions) that a
//!   relaunch will not fix, reported on the claim with its reason and not retried in a tight loop.

use std::cmp::Ordering;

use crate::api::labels::{ARCH_LABEL, INSTANCE_GPU_COUNT_LABEL, INSTANCE_SIZE_LABEL};
use crate::catalog::{CapacityType, InstanceType};
use crate::resources::Resources;
use crate::seams::ec2::FleetError;

/// Most instance types offered to one CreateFleet (upstream's `maxInstanceTypes`).
pub const FLEET_INSTANCE_TYPES_MAX: usize = 60;

/// EC2 error codes that mean "no capacity for this offering" (upstream's list).
pub const INSUFFICIENT_CAPACITY_CODES: [&str; 8] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    // A capacity reservation is full: the reservation is marked unavailable.
    RESERVATION_CAPACITY_EXCEEDED,
];

/// The error of a launch into a full capacity reservation.
pub const RESERVATION_CAPACITY_EXCEEDED: &str = "ReservationCapacityExceeded";

/// The label counting an instance type's accelerators (Inferentia, Trainium, ...).
const ACCELERATOR_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-accelerator-count";

/// Extended resources that only exotic types offer: asking for one allows them.
const EXOTIC_RESOURCE_PREFIXES: [&str; 5] = [
    "nvidia.com/",
    "amd.com/",
    "aws.amazon.com/neuron",
    "habana.ai/",
    "vpc.amazonaws.com/efa",
];

/// What a failed CreateFleet override means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetErrorClass {
    /// The offering has no capacity now: cache it unavailable and try elsewhere.
    Capacity,
    /// The request itself is wrong (profile, AMI, parameters, permissions): a relaunch fails the
    /// same way until someone fixes the configuration.
    Configuration,
}

/// Classifies an EC2 error code as upstream does.
pub fn classify(code: &str) -> FleetErrorClass {
    if INSUFFICIENT_CAPACITY_CODES.contains(&code) {
        FleetErrorClass::Capacity
    } else {
        FleetErrorClass::Configuration
    }
}

/// The first configuration error of a fleet that launched nothing, if any (it, not capacity, is
/// why the launch failed).
pub fn configuration_error(errors: &[FleetError]) -> Option<&FleetError> {
    errors
        .iter()
        .find(|e| classify(&e.code) == FleetErrorClass::Configuration)
}

/// Whether `instance_type` is exotic: GPUs, accelerators or bare metal.
pub fn is_exotic(instance_type: &InstanceType) -> bool {
    let count = |label: &str| {
        instance_type
            .labels
            .get(label)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    count(INSTANCE_GPU_COUNT_LABEL) > 0
        || count(ACCELERATOR_COUNT_LABEL) > 0
        || instance_type
            .labels
            .get(INSTANCE_SIZE_LABEL)
            .is_some_and(|s| s.contains("metal"))
}

/// Whether the claim's requests name a resource only exotic types have.
pub fn wants_exotic(requests: &Resources) -> bool {
    requests
        .to_list()
        .iter()
        .any(|(name, q)| EXOTIC_RESOURCE_PREFIXES.iter().any(|p| name.starts_with(p)) && q.0 != "0")
}

/// The instance types of one CreateFleet for `capacity_type`, cheapest first. `price` gives a
/// type's cheapest available offering of a capacity type in the allowed zones (`None`: none).
pub fn compose<'c>(
    types: &[&'c InstanceType],
    capacity_type: CapacityType,
    requests: &Resources,
    price: impl Fn(&InstanceType, CapacityType) -> Option<f64>,
) -> Vec<&'c InstanceType> {
    let mut priced: Vec<(&InstanceType, f64)> = types
        .iter()
        .filter_map(|t| price(t, capacity_type).map(|p| (*t, p)))
        .collect();
    if !wants_exotic(requests) && priced.iter().any(|(t, _)| !is_exotic(t)) {
        priced.retain(|(t, _)| !is_exotic(t));
    }
    if capacity_type == CapacityType::Spot {
        let cheapest_on_demand = types
            .iter()
            .filter_map(|t| price(t, CapacityType::OnDemand))
            .min_by(f64::total_cmp);
        if let Some(od) = cheapest_on_demand
            && priced.iter().any(|(_, p)| *p <= od)
        {
            priced.retain(|(_, p)| *p <= od);
        }
    }
    priced.sort_by(|(a, pa), (b, pb)| {
        pa.partial_cmp(pb)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.name.cmp(&b.name))
    });
    let arch = |t: &InstanceType| t.labels.get(ARCH_LABEL).cloned().unwrap_or_default();
    let Some(first_arch) = priced.first().map(|(t, _)| arch(t)) else {
        return Vec::new();
    };
    priced
        .into_iter()
        .filter(|(t, _)| arch(t) == first_arch)
        .map(|(t, _)| t)
        .take(FLEET_INSTANCE_TYPES_MAX)
        .collect()
}
