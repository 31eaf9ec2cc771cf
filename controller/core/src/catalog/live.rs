//! The live catalog: instance types, their zones and their prices read from the region through
//! the [`CatalogSource`] seam and computed into the same [`Catalog`] the solver uses, with the
//! same arithmetic as the built-in table ([`super::overhead`]).
//!
//! [`build`] is the pure part: `DescribeInstanceTypes` answers become capacity, overhead,
//! allocatable and labels exactly as [`super::builtin`] computes them from its own rows, so a
//! region that sells the built-in types at the built-in prices yields the built-in catalog
//! (a test holds the two equal). [`LiveCatalog`] is the refresher: it loads everything at start
//! and then on upstream's intervals, reading time only from the [`Clock`] seam.
//!
//! On-demand prices come from the Pricing API; when it cannot be reached (isolated VPCs, a fake
//! endpoint without it) the built-in price table stands in, like upstream's generated one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::overhead::{
    DEFAULT_EPHEMERAL_STORAGE, VM_MEMORY_OVERHEAD_PERCENT, compute_allocatable, eni_limited_pods,
    memory_capacity,
};
use super::{
    AMD_GPU, AWS_NEURON, AWS_NEURON_CORE, CapacityType, Catalog, EFA, HABANA_GAUDI, InstanceType,
    NVIDIA_GPU, Offering, POD_ENI,
};
use crate::api::labels;
use crate::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources};
use crate::seams::Clock;
use crate::seams::catalog::{
    CatalogError, CatalogSource, InstanceTypeInfo, SpotPrice, ZoneOffering,
};

/// How often instance types and their zones are re-read (upstream: 12 hours).
pub const INSTANCE_TYPES_REFRESH_INTERVAL: Duration = Duration::from_secs(12 * 3600);
/// How often spot prices are re-read (upstream: about an hour).
pub const SPOT_PRICES_REFRESH_INTERVAL: Duration = Duration::from_secs(3600);
/// How often on-demand prices are re-read (upstream: 12 hours).
pub const ON_DEMAND_PRICES_REFRESH_INTERVAL: Duration = Duration::from_secs(12 * 3600);

/// How soon the Pricing API is asked again after it could not be reached and the built-in
/// table stood in (a throttled start should not pin the table for 12 hours).
pub const ON_DEMAND_FALLBACK_RETRY_INTERVAL: Duration = Duration::from_secs(3600);

/// Everything a catalog is computed from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CatalogInputs {
    pub instance_types: Vec<InstanceTypeInfo>,
    pub zone_offerings: Vec<ZoneOffering>,
    /// Latest spot price per (type, zone).
    pub spot_prices: Vec<SpotPrice>,
    /// On-demand $/hour by type.
    pub on_demand_prices: BTreeMap<String, f64>,
    /// Zone name → zone id.
    pub zone_ids: BTreeMap<String, String>,
}

/// The catalog of `region` from `inputs`. A type gets an offering per zone it is sold in and
/// capacity type it supports that has a price; types with no offering at all are left out.
pub fn build(region: &str, inputs: &CatalogInputs) -> Catalog {
    let mut zones: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for offering in &inputs.zone_offerings {
        zones
            .entry(offering.instance_type.as_str())
            .or_default()
            .insert(offering.zone.as_str());
    }
    let mut spot: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for price in &inputs.spot_prices {
        spot.insert((&price.instance_type, &price.zone), price.price);
    }
    let types = inputs
        .instance_types
        .iter()
        .filter_map(|info| {
            let mut offerings = Vec::new();
            for zone in zones.get(info.instance_type.as_str()).into_iter().flatten() {
                let on_demand = inputs.on_demand_prices.get(&info.instance_type);
                if let (true, Some(&price)) = (info.supports("on-demand"), on_demand) {
                    offerings.push(offering(zone, CapacityType::OnDemand, price));
                }
                let spot_price = spot.get(&(info.instance_type.as_str(), *zone));
                if let (true, Some(&price)) = (info.supports("spot"), spot_price) {
                    offerings.push(offering(zone, CapacityType::Spot, price));
                }
            }
            instance_type(region, info, offerings)
        })
        .collect();
    Catalog::new(types)
        .with_zone_ids(inputs.zone_ids.clone())
        .with_ipv4_per_interface(ipv4_per_interface(&inputs.instance_types))
}

/// IPv4 addresses per interface of each described type.
pub fn ipv4_per_interface(infos: &[InstanceTypeInfo]) -> BTreeMap<String, i64> {
    infos
        .iter()
        .map(|info| {
            (
                info.instance_type.clone(),
                info.ipv4_addresses_per_interface,
            )
        })
        .collect()
}

fn offering(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
    Offering {
        reservation: None,
        zone: zone.to_string(),
        capacity_type,
        price,
        available: true,
    }
}

impl InstanceTypeInfo {
    fn supports(&self, usage_class: &str) -> bool {
        self.usage_classes.iter().any(|c| c == usage_class)
    }

    /// `kubernetes.io/arch` of the type: `amd64` for `x86_64`, `arm64`; `None` for others.
    pub fn kubernetes_arch(&self) -> Option<&'static str> {
        if self.architectures.iter().any(|a| a == "x86_64") {
            Some("amd64")
        } else if self.architectures.iter().any(|a| a == "arm64") {
            Some("arm64")
        } else {
            None
        }
    }
}

/// One catalog entry, or `None` for types the controller cannot launch (no supported
/// architecture, no offering).
pub fn instance_type(
    region: &str,
    info: &InstanceTypeInfo,
    offerings: Vec<Offering>,
) -> Option<InstanceType> {
    let arch = info.kubernetes_arch()?;
    if offerings.is_empty() {
        return None;
    }
    let mut capacity = Resources::from_pairs([
        (CPU, info.vcpus * 1000),
        (
            MEMORY,
            memory_capacity(info.memory_mib, arch, VM_MEMORY_OVERHEAD_PERCENT),
        ),
        (
            PODS,
            eni_limited_pods(
                info.max_network_interfaces,
                info.ipv4_addresses_per_interface,
                0,
            ),
        ),
        (EPHEMERAL_STORAGE, DEFAULT_EPHEMERAL_STORAGE),
    ]);
    for (resource, amount) in extended_resources(info) {
        if amount > 0 {
            capacity.set(resource, amount);
        }
    }
    let (overhead, allocatable) = compute_allocatable(&capacity);
    Some(InstanceType {
        name: info.instance_type.clone(),
        labels: type_labels(region, arch, info),
        capacity,
        overhead,
        allocatable,
        offerings,
    })
}

/// The extended resources nodes of the type advertise once their device plugins (and the VPC
/// resource controller) run, as upstream's AWS provider predicts them: GPUs by manufacturer,
/// Neuron devices and their cores, EFA interfaces, branch interfaces for security groups for pods.
pub fn extended_resources(info: &InstanceTypeInfo) -> [(&'static str, i64); 7] {
    let gpus = |manufacturer: &str| -> i64 {
        info.gpus
            .iter()
            .filter(|g| g.manufacturer.eq_ignore_ascii_case(manufacturer))
            .map(|g| g.count)
            .sum()
    };
    let neuron: i64 = info.neuron_devices.iter().map(|d| d.count).sum();
    let neuron_cores: i64 = info
        .neuron_devices
        .iter()
        .map(|d| d.count * d.cores_per_device)
        .sum();
    [
        (NVIDIA_GPU, gpus("nvidia")),
        (AMD_GPU, gpus("amd")),
        (HABANA_GAUDI, gpus("habana")),
        (AWS_NEURON, neuron),
        (AWS_NEURON_CORE, neuron_cores),
        (EFA, info.efa_interfaces),
        (
            POD_ENI,
            super::trunking::branch_interfaces(&info.instance_type),
        ),
    ]
}

/// `Inferentia2` → `inferentia2`, `Radeon Pro V520` → `radeon-pro-v520` (upstream's label form).
fn kebab(name: &str) -> String {
    name.to_lowercase().replace(' ', "-")
}

/// The single-valued labels upstream derives from `DescribeInstanceTypes`.
fn type_labels(region: &str, arch: &str, info: &InstanceTypeInfo) -> BTreeMap<String, String> {
    let name = &info.instance_type;
    let (family, size) = name.split_once('.').unwrap_or((name, ""));
    let category: String = family
        .chars()
        .take_while(|c| c.is_ascii_lowercase())
        .collect();
    let generation: String = family[category.len()..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let mut l = BTreeMap::new();
    let mut put = |key: &str, value: String| {
        l.insert(key.to_string(), value);
    };
    put(labels::INSTANCE_TYPE_LABEL, name.clone());
    put(labels::ARCH_LABEL, arch.to_string());
    put(labels::OS_LABEL, "linux".to_string());
    put(labels::REGION_LABEL, region.to_string());
    put(labels::INSTANCE_CATEGORY_LABEL, category);
    put(labels::INSTANCE_FAMILY_LABEL, family.to_string());
    put(labels::INSTANCE_GENERATION_LABEL, generation);
    put(labels::INSTANCE_SIZE_LABEL, size.to_string());
    put(labels::INSTANCE_CPU_LABEL, info.vcpus.to_string());
    if let Some(manufacturer) = &info.cpu_manufacturer {
        put(
            labels::INSTANCE_CPU_MANUFACTURER_LABEL,
            manufacturer.to_lowercase(),
        );
    }
    put(labels::INSTANCE_MEMORY_LABEL, info.memory_mib.to_string());
    if let Some(hypervisor) = &info.hypervisor {
        put(labels::INSTANCE_HYPERVISOR_LABEL, hypervisor.clone());
    }
    if let Some(mbps) = info.network_baseline_mbps {
        put(labels::INSTANCE_NETWORK_BANDWIDTH_LABEL, mbps.to_string());
    }
    if let Some(mbps) = info.ebs_max_bandwidth_mbps {
        put(labels::INSTANCE_EBS_BANDWIDTH_LABEL, mbps.to_string());
    }
    put(
        labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED_LABEL,
        info.encryption_in_transit.to_string(),
    );
    if let Some(gb) = info.local_nvme_gb {
        put(labels::INSTANCE_LOCAL_NVME_LABEL, gb.to_string());
    }
    // Upstream labels a type's GPU or Neuron device only when it has exactly one model.
    if let [gpu] = info.gpus.as_slice() {
        put(labels::INSTANCE_GPU_NAME_LABEL, kebab(&gpu.name));
        put(
            labels::INSTANCE_GPU_MANUFACTURER_LABEL,
            kebab(&gpu.manufacturer),
        );
        put(labels::INSTANCE_GPU_COUNT_LABEL, gpu.count.to_string());
        put(
            labels::INSTANCE_GPU_MEMORY_LABEL,
            gpu.memory_mib.to_string(),
        );
    }
    if let [device] = info.neuron_devices.as_slice() {
        put(labels::INSTANCE_ACCELERATOR_NAME_LABEL, kebab(&device.name));
        put(
            labels::INSTANCE_ACCELERATOR_MANUFACTURER_LABEL,
            "aws".to_string(),
        );
        put(
            labels::INSTANCE_ACCELERATOR_COUNT_LABEL,
            device.count.to_string(),
        );
    }
    // Dedicated tenancy is not launched (deliberate difference 21): every type is `default`.
    put(labels::INSTANCE_TENANCY_LABEL, "default".to_string());
    l
}

/// Where the on-demand prices of the current catalog came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PriceSource {
    /// The Pricing API answered.
    PricingApi,
    /// The Pricing API could not be reached: the built-in table (see [`super::builtin`]).
    BuiltIn,
}

/// Loads the catalog at start and refreshes each part on its interval.
pub struct LiveCatalog {
    source: Arc<dyn CatalogSource>,
    clock: Arc<dyn Clock>,
    region: String,
    inputs: CatalogInputs,
    price_source: PriceSource,
    types_loaded_at: Option<Timestamp>,
    spot_loaded_at: Option<Timestamp>,
    on_demand_loaded_at: Option<Timestamp>,
    catalog: Option<Arc<Catalog>>,
}

impl LiveCatalog {
    pub fn new(source: Arc<dyn CatalogSource>, clock: Arc<dyn Clock>, region: &str) -> Self {
        Self {
            source,
            clock,
            region: region.to_string(),
            inputs: CatalogInputs::default(),
            price_source: PriceSource::BuiltIn,
            types_loaded_at: None,
            spot_loaded_at: None,
            on_demand_loaded_at: None,
            catalog: None,
        }
    }

    /// The latest catalog; `None` until the first [`refresh`](Self::refresh) succeeded.
    pub fn catalog(&self) -> Option<Arc<Catalog>> {
        self.catalog.clone()
    }

    pub fn price_source(&self) -> PriceSource {
        self.price_source
    }

    /// Re-reads every part whose interval is over (everything on the first call) and rebuilds
    /// the catalog if anything was read. Returns whether the catalog changed. A failed read keeps
    /// the previous answer of that part and is returned after the other parts were tried, so one
    /// throttled call does not hold back the rest; the Pricing API failing is not an error (the
    /// built-in prices stand in until the next try).
    pub async fn refresh(&mut self) -> Result<bool, CatalogError> {
        let now = self.clock.now();
        let mut read = false;
        let mut first_error = None;
        if due(self.types_loaded_at, INSTANCE_TYPES_REFRESH_INTERVAL, now) {
            let loaded = async {
                let types = self.source.instance_types().await?;
                let zones = self.source.zone_offerings().await?;
                let zone_ids = self.source.zone_ids().await?;
                Ok::<_, CatalogError>((types, zones, zone_ids))
            }
            .await;
            match loaded {
                Ok((types, zones, zone_ids)) => {
                    self.inputs.instance_types = types;
                    self.inputs.zone_offerings = zones;
                    self.inputs.zone_ids = zone_ids;
                    self.types_loaded_at = Some(now);
                    read = true;
                }
                Err(error) => first_error = first_error.or(Some(error)),
            }
        }
        if due(self.spot_loaded_at, SPOT_PRICES_REFRESH_INTERVAL, now) {
            match self.source.spot_prices().await {
                Ok(prices) => {
                    self.inputs.spot_prices = prices;
                    self.spot_loaded_at = Some(now);
                    read = true;
                }
                Err(error) => first_error = first_error.or(Some(error)),
            }
        }
        // After a fallback to the built-in table the Pricing API is asked again sooner.
        let on_demand_interval = match self.price_source {
            PriceSource::PricingApi => ON_DEMAND_PRICES_REFRESH_INTERVAL,
            PriceSource::BuiltIn => ON_DEMAND_FALLBACK_RETRY_INTERVAL,
        };
        if due(self.on_demand_loaded_at, on_demand_interval, now) {
            let (prices, source) = match self.source.on_demand_prices().await {
                Ok(prices) if !prices.is_empty() => (prices, PriceSource::PricingApi),
                // Unreachable, refused or empty (a region the price list lacks): the table.
                Ok(_) | Err(_) => (super::builtin::on_demand_prices(), PriceSource::BuiltIn),
            };
            self.inputs.on_demand_prices = prices;
            self.price_source = source;
            self.on_demand_loaded_at = Some(now);
            read = true;
        }
        let complete = self.types_loaded_at.is_some() && self.spot_loaded_at.is_some();
        let mut changed = false;
        if read && complete {
            let catalog = build(&self.region, &self.inputs);
            changed = self.catalog.as_deref() != Some(&catalog);
            if changed {
                self.catalog = Some(Arc::new(catalog));
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(changed),
        }
    }
}

fn due(loaded_at: Option<Timestamp>, interval: Duration, now: Timestamp) -> bool {
    let interval = SignedDuration::try_from(interval).unwrap_or(SignedDuration::MAX);
    loaded_at.is_none_or(|at| now.duration_since(at) >= interval)
}
