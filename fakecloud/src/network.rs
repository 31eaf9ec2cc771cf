//! Subnets (zone, free IPs) and security groups, discoverable by tags. Launching takes an IP from
//! the subnet and termination gives it back, so a full subnet shows up as
//! `InsufficientFreeAddressesInSubnet` exactly as it would on EC2.

use std::collections::BTreeMap;

use karpenter_core::catalog::Catalog;
use karpenter_core::seams::ec2::{Ec2Error, Filter, SecurityGroup, Subnet};
use rand_chacha::ChaCha8Rng;

use crate::filters;
use crate::rng::resource_id;

pub(crate) const DISCOVERY_TAG: &str = "karpenter.sh/discovery";

#[derive(Clone, Debug)]
pub(crate) struct SubnetRecord {
    pub subnet: Subnet,
    /// Second octet of the subnet's `10.N.0.0/16` addresses.
    pub octet: u8,
    next_host: u32,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Network {
    pub subnets: BTreeMap<String, SubnetRecord>,
    pub security_groups: BTreeMap<String, SecurityGroup>,
}

impl Network {
    /// The configured subnets and groups, or one tagged subnet per catalog zone and one tagged
    /// group when none are configured.
    pub fn new(
        subnets: &[Subnet],
        security_groups: &[SecurityGroup],
        catalog: &Catalog,
        cluster_name: &str,
        region: &str,
        free_ips: u32,
        rng: &mut ChaCha8Rng,
    ) -> Self {
        let discovery = || BTreeMap::from([(DISCOVERY_TAG.to_string(), cluster_name.to_string())]);
        let subnets: Vec<Subnet> = if subnets.is_empty() {
            zones(catalog)
                .into_iter()
                .map(|zone| {
                    let mut tags = discovery();
                    tags.insert("Name".into(), format!("{cluster_name}-private-{zone}"));
                    Subnet {
                        subnet_id: resource_id(rng, "subnet"),
                        zone_id: karpenter_core::catalog::builtin::zone_id(region, &zone),
                        zone,
                        available_ip_address_count: free_ips,
                        tags,
                    }
                })
                .collect()
        } else {
            subnets.to_vec()
        };
        let security_groups: Vec<SecurityGroup> = if security_groups.is_empty() {
            vec![SecurityGroup {
                group_id: resource_id(rng, "sg"),
                group_name: format!("{cluster_name}-node"),
                tags: discovery(),
            }]
        } else {
            security_groups.to_vec()
        };
        Self {
            subnets: subnets
                .into_iter()
                .enumerate()
                .map(|(i, subnet)| {
                    let record = SubnetRecord {
                        octet: (i % 256) as u8,
                        next_host: 0,
                        subnet,
                    };
                    (record.subnet.subnet_id.clone(), record)
                })
                .collect(),
            security_groups: security_groups
                .into_iter()
                .map(|g| (g.group_id.clone(), g))
                .collect(),
        }
    }

    pub fn describe_subnets(&self, filters: &[Filter]) -> Result<Vec<Subnet>, Ec2Error> {
        filters::check(
            filters,
            &[
                "subnet-id",
                "availability-zone",
                "availability-zone-id",
                "state",
            ],
        )?;
        Ok(self
            .subnets
            .values()
            .map(|r| &r.subnet)
            .filter(|s| {
                filters::matches(filters, &s.tags, |name| match name {
                    "subnet-id" => vec![s.subnet_id.clone()],
                    "availability-zone" => vec![s.zone.clone()],
                    "availability-zone-id" => vec![s.zone_id.clone()],
                    "state" => vec!["available".into()],
                    _ => Vec::new(),
                })
            })
            .cloned()
            .collect())
    }

    pub fn describe_security_groups(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<SecurityGroup>, Ec2Error> {
        filters::check(filters, &["group-id", "group-name"])?;
        Ok(self
            .security_groups
            .values()
            .filter(|g| {
                filters::matches(filters, &g.tags, |name| match name {
                    "group-id" => vec![g.group_id.clone()],
                    "group-name" => vec![g.group_name.clone()],
                    _ => Vec::new(),
                })
            })
            .cloned()
            .collect())
    }

    /// Adds `subnet` (its own `10.N.0.0/16`, after the configured ones).
    pub fn add_subnet(&mut self, subnet: Subnet) {
        let record = SubnetRecord {
            octet: (self.subnets.len() % 256) as u8,
            next_host: 0,
            subnet,
        };
        self.subnets.insert(record.subnet.subnet_id.clone(), record);
    }

    /// Takes a free IP in the subnet: `Some(private ip)` or `None` when the subnet is full.
    pub fn take_ip(&mut self, subnet_id: &str) -> Option<String> {
        let record = self.subnets.get_mut(subnet_id)?;
        if record.subnet.available_ip_address_count == 0 {
            return None;
        }
        record.subnet.available_ip_address_count -= 1;
        // Hosts .4 upwards, as AWS reserves the first four addresses of a subnet.
        let host = record.next_host % 65_000 + 4;
        record.next_host += 1;
        Some(format!("10.{}.{}.{}", record.octet, host / 256, host % 256))
    }

    pub fn give_back_ip(&mut self, subnet_id: &str) {
        if let Some(record) = self.subnets.get_mut(subnet_id) {
            record.subnet.available_ip_address_count =
                record.subnet.available_ip_address_count.saturating_add(1);
        }
    }
}

/// Zones of the catalog's offerings, sorted.
fn zones(catalog: &Catalog) -> Vec<String> {
    let mut zones: Vec<String> = catalog
        .instance_types
        .iter()
        .flat_map(|it| it.offerings.iter().map(|o| o.zone.clone()))
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

/// `ip-10-0-1-4.us-west-2.compute.internal` (`ec2.internal` in us-east-1).
pub(crate) fn private_dns_name(ip: &str, region: &str) -> String {
    let host = format!("ip-{}", ip.replace('.', "-"));
    if region == "us-east-1" {
        format!("{host}.ec2.internal")
    } else {
        format!("{host}.{region}.compute.internal")
    }
}
