//! Instance types as one EC2NodeClass launches them (review B6). The same type offers different
//! capacity under different classes: the root volume sets the node's ephemeral storage, and the
//! kubelet settings set its pod count and what the kubelet holds back. Upstream's AWS provider
//! computes capacity per class for the same reason (`providers/instancetype/types.go`); the
//! launch side already writes these settings into user data, so the prediction and the node
//! agree.
//!
//! - ephemeral storage: with `instanceStorePolicy: RAID0`, the type's local NVMe (GB, as EC2
//!   reports it; types without keep the root volume's), else the `rootVolume: true` mapping's
//!   size, else the size of the family's
//!   ephemeral device (`/dev/xvda` on AL2/AL2023, `/dev/xvdb` on Bottlerocket, `/dev/sda1` on
//!   Windows), else for a Custom family the last mapping's size, else the family default (20Gi;
//!   Windows 50Gi);
//! - pods: `kubelet.maxPods`, else the ENI-limited count the catalog holds (Windows: the
//!   kubelet's 110, as upstream, whose Windows family has no ENI-limited pod density); then at
//!   most `podsPerCore × vCPUs` (not on Bottlerocket, which ignores podsPerCore, as upstream);
//! - Windows families (upstream's `getOS` and `privateIPv4Address`): `kubernetes.io/os` is
//!   `windows` and `node.kubernetes.io/windows-build` the family's build; only `amd64` types
//!   (EKS publishes Windows AMIs for x86_64 only: others are left out); and
//!   `vpc.amazonaws.com/PrivateIPv4Address`, the primary interface's IPv4 addresses less its
//!   own, which EKS's VPC resource controller advertises on Windows nodes. Linux classes keep
//!   the catalog's `linux` and no windows-build label (the scheduler reads a missing one as
//!   `DoesNotExist`, as upstream's requirement says);
//! - overhead: kube-reserved (computed from cpu and pods, each resource replaced by
//!   `kubelet.kubeReserved` where given) + `kubelet.systemReserved` + the eviction threshold
//!   (`memory.available` 100Mi and `nodefs.available` 10% unless `evictionHard` says otherwise;
//!   the larger of hard and soft where both are given).

use std::collections::BTreeMap;

use super::overhead::{EVICTION_HARD_MEMORY, EVICTION_HARD_NODEFS_PERCENT, kube_reserved};
use super::{Catalog, InstanceType, PRIVATE_IPV4_ADDRESS};
use crate::api::EC2NodeClass;
use crate::api::ec2nodeclass::{
    AmiFamily, BlockDeviceMapping, InstanceStorePolicy, KubeletConfiguration,
};
use crate::api::labels::{ARCH_LABEL, INSTANCE_LOCAL_NVME_LABEL, OS_LABEL, WINDOWS_BUILD_LABEL};
use crate::nodeclass::userdata::family;
use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources, parse_quantity};

const GIB: i64 = 1 << 30;

/// The device a family's ephemeral storage (the kubelet's root filesystem) lives on.
fn ephemeral_device(family: AmiFamily) -> Option<&'static str> {
    match family {
        AmiFamily::AL2 | AmiFamily::AL2023 => Some("/dev/xvda"),
        AmiFamily::Bottlerocket => Some("/dev/xvdb"),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            Some("/dev/sda1")
        }
        AmiFamily::Custom => None,
    }
}

/// The family's default ephemeral volume size.
fn default_ephemeral(family: AmiFamily) -> i64 {
    match family {
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => 50 * GIB,
        _ => 20 * GIB,
    }
}

fn volume_size(mapping: &BlockDeviceMapping) -> Option<i64> {
    let size = mapping.ebs.as_ref()?.volume_size.as_deref()?;
    parse_quantity(EPHEMERAL_STORAGE, size).ok()
}

/// The node's ephemeral-storage capacity under `mappings` (module docs).
pub fn ephemeral_storage(family: AmiFamily, mappings: &[BlockDeviceMapping]) -> i64 {
    if let Some(size) = mappings
        .iter()
        .find(|m| m.root_volume == Some(true))
        .and_then(volume_size)
    {
        return size;
    }
    match ephemeral_device(family) {
        Some(device) => mappings
            .iter()
            .find(|m| m.device_name.as_deref() == Some(device))
            .and_then(volume_size),
        None => mappings.last().and_then(volume_size),
    }
    .unwrap_or_else(|| default_ephemeral(family))
}

/// A threshold (`"100Mi"`, `"10%"`) as an amount of `capacity` of `resource`.
fn threshold(resource: &str, value: &str, capacity: i64) -> Option<i64> {
    match value.strip_suffix('%') {
        Some(percent) => {
            let percent: f64 = percent.trim().parse().ok()?;
            Some((capacity as f64 / 100.0 * percent).ceil() as i64)
        }
        None => parse_quantity(resource, value).ok(),
    }
}

/// The eviction thresholds held back on a node with `memory` and `storage` capacity.
fn eviction(kubelet: Option<&KubeletConfiguration>, memory: i64, storage: i64) -> Resources {
    let mut memory_held = EVICTION_HARD_MEMORY;
    let mut storage_held = (storage as f64 / 100.0 * EVICTION_HARD_NODEFS_PERCENT).ceil() as i64;
    let signals = |map: Option<&BTreeMap<String, String>>| {
        let map = map.cloned().unwrap_or_default();
        (
            map.get("memory.available")
                .and_then(|v| threshold(MEMORY, v, memory)),
            map.get("nodefs.available")
                .and_then(|v| threshold(EPHEMERAL_STORAGE, v, storage)),
        )
    };
    if let Some(kubelet) = kubelet {
        let (hard_memory, hard_storage) = signals(kubelet.eviction_hard.as_ref());
        memory_held = hard_memory.unwrap_or(memory_held);
        storage_held = hard_storage.unwrap_or(storage_held);
        let (soft_memory, soft_storage) = signals(kubelet.eviction_soft.as_ref());
        memory_held = memory_held.max(soft_memory.unwrap_or(0));
        storage_held = storage_held.max(soft_storage.unwrap_or(0));
    }
    Resources::from_pairs([(MEMORY, memory_held), (EPHEMERAL_STORAGE, storage_held)])
}

/// A resource map from the kubelet settings (`{"cpu": "100m"}`); values that do not parse are
/// left out (validation rejects them before a class is ready).
fn resource_map(map: Option<&BTreeMap<String, String>>) -> Resources {
    let mut out = Resources::new();
    for (name, value) in map.into_iter().flatten() {
        if let Ok(amount) = parse_quantity(name, value) {
            out.set(name, amount);
        }
    }
    out
}

/// The kubelet's own max-pods default: what a Windows node runs without `kubelet.maxPods`.
const KUBELET_DEFAULT_MAX_PODS: i64 = 110;

/// `it` (a type of `catalog`) as launched under `class`; `None` when the class cannot launch it
/// (a Windows class and a type that is not `amd64`).
pub fn instance_type_for(
    catalog: &Catalog,
    it: &InstanceType,
    class: &EC2NodeClass,
) -> Option<InstanceType> {
    let family = family(class);
    let windows_build = family.windows_build();
    if windows_build.is_some() && it.labels.get(ARCH_LABEL).map(String::as_str) != Some("amd64") {
        return None;
    }
    let kubelet = class.spec.kubelet.as_ref();
    let mut capacity = it.capacity.clone();
    let instance_store = it
        .labels
        .get(INSTANCE_LOCAL_NVME_LABEL)
        .and_then(|gb| gb.parse::<i64>().ok())
        .filter(|_| class.spec.instance_store_policy == Some(InstanceStorePolicy::RAID0));
    let mappings = class.spec.block_device_mappings.as_deref();
    capacity.set(
        EPHEMERAL_STORAGE,
        match instance_store {
            // EC2's `TotalSizeInGB` is decimal gigabytes.
            Some(gb) => gb * 1_000_000_000,
            None => ephemeral_storage(family, mappings.unwrap_or_default()),
        },
    );
    let default_pods = match windows_build {
        Some(_) => KUBELET_DEFAULT_MAX_PODS,
        None => it.capacity.get(PODS),
    };
    let mut pods = kubelet
        .and_then(|k| k.max_pods)
        .map(i64::from)
        .unwrap_or(default_pods);
    if let Some(per_core) = kubelet.and_then(|k| k.pods_per_core).filter(|p| *p > 0)
        && family != AmiFamily::Bottlerocket
    {
        let cores = it.capacity.get(CPU) / 1000;
        pods = pods.min(i64::from(per_core) * cores);
    }
    capacity.set(PODS, pods);
    let mut labels = it.labels.clone();
    if let Some(build) = windows_build {
        labels.insert(OS_LABEL.to_string(), "windows".to_string());
        labels.insert(WINDOWS_BUILD_LABEL.to_string(), build.to_string());
        // From DescribeInstanceTypes, not a copy of the VPC resource controller's limits table
        // (deliberate difference 24: the same figure wherever the table knows the type). A type
        // whose interface size is unknown advertises none (upstream: 0), so pods that need an
        // address are never sent to it.
        if let Some(addresses) = catalog
            .ipv4_per_interface
            .get(&it.name)
            .map(|ipv4| ipv4 - 1)
            .filter(|n| *n > 0)
        {
            capacity.set(PRIVATE_IPV4_ADDRESS, addresses);
        }
    }
    let mut reserved = kube_reserved(capacity.get(CPU), pods);
    for (name, amount) in resource_map(kubelet.and_then(|k| k.kube_reserved.as_ref())).iter() {
        reserved.set(name, amount);
    }
    let overhead = reserved
        .plus(&resource_map(
            kubelet.and_then(|k| k.system_reserved.as_ref()),
        ))
        .plus(&eviction(
            kubelet,
            capacity.get(MEMORY),
            capacity.get(EPHEMERAL_STORAGE),
        ));
    let allocatable = capacity.minus(&overhead);
    Some(InstanceType {
        name: it.name.clone(),
        labels,
        capacity,
        overhead,
        allocatable,
        offerings: it.offerings.clone(),
    })
}

/// Whether `class` launches nodes unlike the catalog's defaults (a kubelet setting, a block
/// device mapping, a Windows family): only then does a pool of it need its own catalog.
/// `catalog` as a NodePool of `class` plans with it: its types as the class launches them
/// ([`for_node_class`]) plus, with `reservations`, the class's reserved offerings; `None` when
/// the class changes neither (the pool plans with `catalog` itself). One rule for provisioning,
/// disruption's simulations and `karpenter plan`.
pub fn pool_catalog(
    catalog: &Catalog,
    class: &EC2NodeClass,
    reservations: Option<&super::ReservationAvailability>,
) -> Option<Catalog> {
    let sized = for_node_class(catalog, class);
    let Some(reservations) = reservations else {
        return sized;
    };
    let base = sized.as_ref().unwrap_or(catalog);
    super::reservations::with_reservations(base, class, reservations).or(sized)
}

pub fn changes_capacity(class: &EC2NodeClass) -> bool {
    class.spec.kubelet.is_some()
        || family(class).windows_build().is_some()
        || class.spec.instance_store_policy.is_some()
        || class
            .spec
            .block_device_mappings
            .as_ref()
            .is_some_and(|m| !m.is_empty())
        || default_ephemeral(family(class)) != super::overhead::DEFAULT_EPHEMERAL_STORAGE
}

/// `catalog` as `class` launches it, or `None` when the class changes nothing (the caller keeps
/// using the shared catalog, and no copy is made).
pub fn for_node_class(catalog: &Catalog, class: &EC2NodeClass) -> Option<Catalog> {
    if !changes_capacity(class) {
        return None;
    }
    Some(Catalog {
        instance_types: catalog
            .instance_types
            .iter()
            .filter_map(|it| instance_type_for(catalog, it, class))
            .collect(),
        zone_ids: catalog.zone_ids.clone(),
        ipv4_per_interface: catalog.ipv4_per_interface.clone(),
    })
}
