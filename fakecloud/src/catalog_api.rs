//! The catalog calls answered from the fake's catalog: `DescribeInstanceTypes`,
//! `DescribeInstanceTypeOfferings`, `DescribeSpotPriceHistory` and the on-demand price list, as
//! the [`CatalogSource`] seam (which `fakecloud serve` puts on the wire).
//!
//! A built-in type is described with the built-in table's own figures
//! ([`builtin::instance_type_infos`]), so a catalog computed back from these answers equals the
//! built-in one. A type of a custom catalog is described from its labels and capacity, with ENI
//! limits chosen to give its pod capacity.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use karpenter_core::api::labels;
use karpenter_core::catalog::{
    AWS_NEURON, AWS_NEURON_CORE, CapacityType, EFA, InstanceType, NVIDIA_GPU, builtin,
};
use karpenter_core::resources::PODS;
use karpenter_core::seams::catalog::{
    CatalogError, CatalogSource, Gpu, InstanceTypeInfo, NeuronDevice, SpotPrice, ZoneOffering,
};

use crate::FakeCloud;
use crate::capacity::Pool;

/// `DescribeInstanceTypes` of a type the built-in table does not know, from its catalog entry.
fn described(it: &InstanceType) -> InstanceTypeInfo {
    let label = |key: &str| it.labels.get(key).cloned();
    let number = |key: &str| label(key).and_then(|v| v.parse::<i64>().ok());
    let architecture = match label(labels::ARCH_LABEL).as_deref() {
        Some("arm64") => "arm64",
        _ => "x86_64",
    };
    // One interface whose addresses give exactly the catalog's pods (less the 2 host-network ones).
    let pods = it.capacity.get(PODS);
    let gpus = number(labels::INSTANCE_GPU_COUNT_LABEL)
        .or_else(|| Some(it.capacity.get(NVIDIA_GPU)).filter(|n| *n > 0))
        .map(|count| Gpu {
            name: label(labels::INSTANCE_GPU_NAME_LABEL)
                .unwrap_or_default()
                .to_uppercase(),
            manufacturer: label(labels::INSTANCE_GPU_MANUFACTURER_LABEL)
                .unwrap_or_else(|| "nvidia".into())
                .to_uppercase(),
            count,
            memory_mib: number(labels::INSTANCE_GPU_MEMORY_LABEL).unwrap_or(0),
        });
    let usage: BTreeSet<&str> = it
        .offerings
        .iter()
        .map(|o| o.capacity_type.label())
        .collect();
    InstanceTypeInfo {
        instance_type: it.name.clone(),
        architectures: vec![architecture.to_string()],
        cpu_manufacturer: label(labels::INSTANCE_CPU_MANUFACTURER_LABEL),
        vcpus: number(labels::INSTANCE_CPU_LABEL).unwrap_or(it.capacity.get("cpu") / 1000),
        memory_mib: number(labels::INSTANCE_MEMORY_LABEL).unwrap_or(0),
        max_network_interfaces: 1,
        ipv4_addresses_per_interface: (pods - 1).max(1),
        network_baseline_mbps: number(labels::INSTANCE_NETWORK_BANDWIDTH_LABEL),
        encryption_in_transit: label(labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL)
            .as_deref()
            == Some("true"),
        ebs_max_bandwidth_mbps: number(labels::INSTANCE_EBS_BANDWIDTH_LABEL),
        hypervisor: label(labels::INSTANCE_HYPERVISOR_LABEL),
        bare_metal: it.name.ends_with(".metal"),
        local_nvme_gb: number(labels::INSTANCE_LOCAL_NVME_LABEL),
        gpus: gpus.into_iter().collect(),
        // A Neuron type the built-in table does not know: one device holding all its cores.
        neuron_devices: Some(it.capacity.get(AWS_NEURON))
            .filter(|n| *n > 0)
            .map(|count| NeuronDevice {
                name: label(labels::INSTANCE_ACCELERATOR_NAME_LABEL).unwrap_or_default(),
                count,
                cores_per_device: it.capacity.get(AWS_NEURON_CORE) / count,
            })
            .into_iter()
            .collect(),
        efa_interfaces: it.capacity.get(EFA),
        usage_classes: usage
            .into_iter()
            .filter(|u| *u != "reserved")
            .map(String::from)
            .collect(),
    }
}

impl FakeCloud {
    /// `DescribeInstanceTypes` of every type the fake sells, sorted by name.
    pub fn instance_type_infos(&self) -> Vec<InstanceTypeInfo> {
        let known: BTreeMap<String, InstanceTypeInfo> = builtin::instance_type_infos()
            .into_iter()
            .map(|info| (info.instance_type.clone(), info))
            .collect();
        self.instance_types()
            .instance_types
            .iter()
            .map(|it| {
                known
                    .get(&it.name)
                    .cloned()
                    .unwrap_or_else(|| described(it))
            })
            .collect()
    }

    /// Where each type is sold, sorted by type then zone.
    pub fn zone_offerings(&self) -> Vec<ZoneOffering> {
        let mut offerings: BTreeSet<ZoneOffering> = BTreeSet::new();
        for it in self.instance_types().instance_types {
            for offering in &it.offerings {
                offerings.insert(ZoneOffering {
                    instance_type: it.name.clone(),
                    zone: offering.zone.clone(),
                });
            }
        }
        offerings.into_iter().collect()
    }

    /// The latest spot price of every spot pool, stamped with when it took effect.
    pub fn latest_spot_prices(&self) -> Vec<SpotPrice> {
        let mut prices = Vec::new();
        for it in self.instance_types().instance_types {
            for offering in &it.offerings {
                if offering.capacity_type != CapacityType::Spot {
                    continue;
                }
                let pool = Pool::new(&it.name, &offering.zone, CapacityType::Spot);
                let Some(point) = self.price_history(&pool).pop() else {
                    continue;
                };
                prices.push(SpotPrice {
                    instance_type: it.name.clone(),
                    zone: offering.zone.clone(),
                    price: point.price,
                    timestamp: point.time,
                });
            }
        }
        prices
    }

    /// `DescribeAvailabilityZones`: every zone the catalog sells in, with its id (a configured
    /// subnet's id for its zone, else AWS's shape of id, as the subnets fakecloud makes have).
    pub fn availability_zones(&self) -> BTreeMap<String, String> {
        let state = self.lock();
        let region = state.config.region.clone();
        let mut out: BTreeMap<String, String> = state
            .network
            .subnets
            .values()
            .map(|r| (r.subnet.zone.clone(), r.subnet.zone_id.clone()))
            .collect();
        drop(state);
        for offering in FakeCloud::zone_offerings(self) {
            out.entry(offering.zone.clone())
                .or_insert_with(|| builtin::zone_id(&region, &offering.zone));
        }
        out
    }

    /// On-demand $/hour by type (the first zone's; EC2 prices a type alike in every zone).
    pub fn on_demand_price_list(&self) -> BTreeMap<String, f64> {
        self.instance_types()
            .instance_types
            .iter()
            .filter_map(|it| {
                it.offerings
                    .iter()
                    .find(|o| o.capacity_type == CapacityType::OnDemand)
                    .map(|o| (it.name.clone(), o.price))
            })
            .collect()
    }
}

#[async_trait]
impl CatalogSource for FakeCloud {
    async fn instance_types(&self) -> Result<Vec<InstanceTypeInfo>, CatalogError> {
        Ok(self.instance_type_infos())
    }

    async fn zone_offerings(&self) -> Result<Vec<ZoneOffering>, CatalogError> {
        Ok(FakeCloud::zone_offerings(self))
    }

    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, CatalogError> {
        Ok(self.latest_spot_prices())
    }

    async fn on_demand_prices(&self) -> Result<BTreeMap<String, f64>, CatalogError> {
        Ok(self.on_demand_price_list())
    }

    async fn zone_ids(&self) -> Result<BTreeMap<String, String>, CatalogError> {
        Ok(self.availability_zones())
    }
}
