//! The `CatalogSource` seam over aws-sdk-ec2 and aws-sdk-pricing: instance types, the zones they
//! are sold in, spot prices and on-demand prices of the region.
//!
//! Filters and page sizes are upstream's: HVM types on `x86_64`/`arm64`, offerings by
//! availability zone, `Linux/UNIX` spot prices from now, and the price list's compute instances
//! (Linux, shared tenancy, no pre-installed software, capacity status `Used`) for the region.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_ec2::types::{self as ec2t, LocationType};
use aws_sdk_pricing::types::{Filter as PriceFilter, FilterType};
use karpenter_core::seams::Clock;
use karpenter_core::seams::catalog::{
    CatalogError, CatalogSource, Gpu, InstanceTypeInfo, NeuronDevice, SpotPrice, ZoneOffering,
};
use karpenter_core::seams::ec2::Filter;

use crate::ec2::sdk_filters;
use crate::errors::SdkResultExt;
use crate::time::timestamp;

/// `DescribeInstanceTypes` page size (EC2's maximum).
pub const INSTANCE_TYPES_PAGE_SIZE_MAX: i32 = 100;
/// `DescribeInstanceTypeOfferings` and `DescribeSpotPriceHistory` page size (EC2's maximum).
pub const OFFERINGS_PAGE_SIZE_MAX: i32 = 1000;
/// `GetProducts` page size (the Pricing API's maximum).
pub const PRICE_LIST_PAGE_SIZE_MAX: i32 = 100;

#[derive(Clone)]
pub struct AwsCatalog {
    ec2: aws_sdk_ec2::Client,
    /// A client of the Pricing API's own region (us-east-1 for the commercial partition).
    pricing: aws_sdk_pricing::Client,
    /// The region whose prices are asked for.
    region: String,
    /// "Now" for the spot price history query.
    clock: Arc<dyn Clock>,
}

impl AwsCatalog {
    pub fn new(
        ec2: aws_sdk_ec2::Client,
        pricing: aws_sdk_pricing::Client,
        region: &str,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            ec2,
            pricing,
            region: region.to_string(),
            clock,
        }
    }
}

/// One `DescribeInstanceTypes` entry in the seam's shape.
pub fn instance_type_info(t: &ec2t::InstanceTypeInfo) -> InstanceTypeInfo {
    let network = t.network_info();
    let processor = t.processor_info();
    InstanceTypeInfo {
        instance_type: t
            .instance_type()
            .map(|i| i.as_str().to_string())
            .unwrap_or_default(),
        architectures: processor
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_string())
                    .collect()
            })
            .unwrap_or_default(),
        cpu_manufacturer: processor.and_then(|p| p.manufacturer()).map(String::from),
        vcpus: t
            .v_cpu_info()
            .and_then(|v| v.default_v_cpus())
            .map_or(0, i64::from),
        memory_mib: t.memory_info().and_then(|m| m.size_in_mib()).unwrap_or(0),
        max_network_interfaces: network
            .and_then(|n| n.maximum_network_interfaces())
            .map_or(0, i64::from),
        ipv4_addresses_per_interface: network
            .and_then(|n| n.ipv4_addresses_per_interface())
            .map_or(0, i64::from),
        network_baseline_mbps: network
            .and_then(|n| n.network_cards().first())
            .and_then(|c| c.baseline_bandwidth_in_gbps())
            .map(|gbps| (gbps * 1000.0).round() as i64),
        encryption_in_transit: network
            .and_then(|n| n.encryption_in_transit_supported())
            .unwrap_or(false),
        ebs_max_bandwidth_mbps: t
            .ebs_info()
            .and_then(|e| e.ebs_optimized_info())
            .and_then(|o| o.maximum_bandwidth_in_mbps())
            .map(i64::from),
        hypervisor: t.hypervisor().map(|h| h.as_str().to_string()),
        bare_metal: t.bare_metal().unwrap_or(false),
        local_nvme_gb: t.instance_storage_info().and_then(|s| {
            let nvme = s
                .nvme_support()
                .is_some_and(|n| n.as_str() != "unsupported");
            s.total_size_in_gb().filter(|_| nvme)
        }),
        gpus: t
            .gpu_info()
            .map(|g| {
                g.gpus()
                    .iter()
                    .map(|d| Gpu {
                        name: d.name().unwrap_or_default().to_string(),
                        manufacturer: d.manufacturer().unwrap_or_default().to_string(),
                        count: d.count().map_or(0, i64::from),
                        memory_mib: d
                            .memory_info()
                            .and_then(|m| m.size_in_mib())
                            .map_or(0, i64::from),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        neuron_devices: t
            .neuron_info()
            .map(|n| {
                n.neuron_devices()
                    .iter()
                    .map(|d| NeuronDevice {
                        name: d.name().unwrap_or_default().to_string(),
                        count: d.count().map_or(0, i64::from),
                        cores_per_device: d
                            .core_info()
                            .and_then(|c| c.count())
                            .map_or(0, i64::from),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        efa_interfaces: network
            .and_then(|n| n.efa_info())
            .and_then(|e| e.maximum_efa_interfaces())
            .map_or(0, i64::from),
        usage_classes: t
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
    }
}

/// The on-demand USD price in one price-list product document, with its instance type.
pub fn price_list_entry(document: &str) -> Option<(String, f64)> {
    let doc: serde_json::Value = serde_json::from_str(document).ok()?;
    let instance_type = doc
        .pointer("/product/attributes/instanceType")?
        .as_str()?
        .to_string();
    let terms = doc.pointer("/terms/OnDemand")?.as_object()?;
    let price = terms
        .values()
        .filter_map(|term| term.get("priceDimensions")?.as_object())
        .flat_map(|dims| dims.values())
        .filter_map(|dim| {
            dim.pointer("/pricePerUnit/USD")?
                .as_str()?
                .parse::<f64>()
                .ok()
        })
        .find(|price| *price > 0.0)?;
    Some((instance_type, price))
}

fn term_match(field: &str, value: &str) -> Result<PriceFilter, CatalogError> {
    PriceFilter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .map_err(|e| CatalogError::InvalidRequest {
            code: "BuildError".into(),
            message: e.to_string(),
        })
}

#[async_trait]
impl CatalogSource for AwsCatalog {
    async fn instance_types(&self) -> Result<Vec<InstanceTypeInfo>, CatalogError> {
        let filters = [
            Filter::new(
                "processor-info.supported-architecture",
                &["x86_64", "arm64"],
            ),
            Filter::new("supported-virtualization-type", &["hvm"]),
        ];
        let pages: Vec<_> = self
            .ec2
            .describe_instance_types()
            .set_filters(Some(sdk_filters(&filters)))
            .max_results(INSTANCE_TYPES_PAGE_SIZE_MAX)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut infos: Vec<InstanceTypeInfo> = pages
            .iter()
            .flat_map(|p| p.instance_types())
            .map(instance_type_info)
            .collect();
        infos.sort_by(|a, b| a.instance_type.cmp(&b.instance_type));
        Ok(infos)
    }

    async fn zone_offerings(&self) -> Result<Vec<ZoneOffering>, CatalogError> {
        let pages: Vec<_> = self
            .ec2
            .describe_instance_type_offerings()
            .location_type(LocationType::AvailabilityZone)
            .max_results(OFFERINGS_PAGE_SIZE_MAX)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        let mut offerings: Vec<ZoneOffering> = pages
            .iter()
            .flat_map(|p| p.instance_type_offerings())
            .map(|o| ZoneOffering {
                instance_type: o
                    .instance_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                zone: o.location().unwrap_or_default().to_string(),
            })
            .collect();
        offerings.sort();
        offerings.dedup();
        Ok(offerings)
    }

    async fn spot_prices(&self) -> Result<Vec<SpotPrice>, CatalogError> {
        let now = self.clock.now();
        let start = aws_smithy_types::DateTime::from_secs(now.as_second());
        let pages: Vec<_> = self
            .ec2
            .describe_spot_price_history()
            .product_descriptions("Linux/UNIX")
            .start_time(start)
            .max_results(OFFERINGS_PAGE_SIZE_MAX)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        // The latest entry per (type, zone).
        let mut latest: BTreeMap<(String, String), SpotPrice> = BTreeMap::new();
        for entry in pages.iter().flat_map(|p| p.spot_price_history()) {
            let (Some(instance_type), Some(zone), Some(price)) = (
                entry.instance_type().map(|t| t.as_str().to_string()),
                entry.availability_zone().map(String::from),
                entry.spot_price().and_then(|p| p.parse::<f64>().ok()),
            ) else {
                continue;
            };
            let price = SpotPrice {
                instance_type: instance_type.clone(),
                zone: zone.clone(),
                price,
                timestamp: entry.timestamp().map(timestamp).unwrap_or_default(),
            };
            let newer = latest
                .get(&(instance_type.clone(), zone.clone()))
                .is_none_or(|old| old.timestamp <= price.timestamp);
            if newer {
                latest.insert((instance_type, zone), price);
            }
        }
        Ok(latest.into_values().collect())
    }

    async fn on_demand_prices(&self) -> Result<BTreeMap<String, f64>, CatalogError> {
        let filters = vec![
            term_match("regionCode", &self.region)?,
            term_match("operatingSystem", "Linux")?,
            term_match("tenancy", "Shared")?,
            term_match("preInstalledSw", "NA")?,
            term_match("capacitystatus", "Used")?,
            term_match("productFamily", "Compute Instance")?,
        ];
        let pages: Vec<_> = self
            .pricing
            .get_products()
            .service_code("AmazonEC2")
            .format_version("aws_v1")
            .set_filters(Some(filters))
            .max_results(PRICE_LIST_PAGE_SIZE_MAX)
            .into_paginator()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .seam()?;
        Ok(pages
            .iter()
            .flat_map(|p| p.price_list())
            .filter_map(|doc| price_list_entry(doc))
            .collect())
    }

    async fn zone_ids(&self) -> Result<BTreeMap<String, String>, CatalogError> {
        let out = self.ec2.describe_availability_zones().send().await.seam()?;
        Ok(out
            .availability_zones()
            .iter()
            .filter_map(|z| Some((z.zone_name()?.to_string(), z.zone_id()?.to_string())))
            .collect())
    }
}
