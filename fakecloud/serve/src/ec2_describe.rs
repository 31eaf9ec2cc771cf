//! EC2's describe calls for the network, images, launch templates and the instance catalog.

use std::collections::BTreeSet;

use fakecloud::Pool;
use jiff::Timestamp;
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::Ec2;
use karpenter_core::seams::catalog::InstanceTypeInfo;
use karpenter_core::seams::ec2::{Filter, ImageQuery, LaunchTemplate};

use crate::World;
use crate::ec2::{answer, error, page, seam_error, template_not_found, vpc_id};
use crate::wire::{Params, Reply, Xml, iso};

/// The list parameter `key` as an extra filter `name` (EC2 ANDs them like filters).
fn with_ids(p: &Params, key: &str, name: &str) -> Vec<Filter> {
    let mut filters = p.filters();
    let ids = p.list(key);
    if !ids.is_empty() {
        filters.push(Filter {
            name: name.to_string(),
            values: ids,
        });
    }
    filters
}

pub async fn describe_subnets(world: &World, p: &Params, rid: &str) -> Reply {
    let account = &world.account;
    let all = match account.cloud.describe_subnets(&[]).await {
        Ok(all) => all,
        Err(e) => return seam_error(&e, rid),
    };
    let subnets = match account
        .cloud
        .describe_subnets(&with_ids(p, "SubnetId", "subnet-id"))
        .await
    {
        Ok(subnets) => subnets,
        Err(e) => return seam_error(&e, rid),
    };
    if let Some(missing) = p
        .list("SubnetId")
        .into_iter()
        .find(|id| !subnets.iter().any(|s| &s.subnet_id == id))
    {
        return error(
            400,
            "InvalidSubnetID.NotFound",
            &format!("The subnet ID '{missing}' does not exist"),
            rid,
        );
    }
    let (shown, next) = match page(&subnets, p, (5, 1000), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeSubnets", rid, |x| {
        x.items("subnetSet", &shown, |x, s| {
            let index = all
                .iter()
                .position(|a| a.subnet_id == s.subnet_id)
                .unwrap_or(0);
            x.leaf("subnetId", &s.subnet_id)
                .leaf(
                    "subnetArn",
                    format!(
                        "arn:aws:ec2:{}:{}:subnet/{}",
                        account.region(),
                        account.account_id(),
                        s.subnet_id
                    ),
                )
                .leaf("state", "available")
                .leaf("ownerId", account.account_id())
                .leaf("vpcId", vpc_id(account))
                .leaf("cidrBlock", format!("10.{index}.0.0/16"))
                .leaf(
                    "availableIpAddressCount",
                    s.available_ip_address_count.to_string(),
                )
                .leaf("availabilityZone", &s.zone)
                .leaf("availabilityZoneId", &s.zone_id)
                .leaf("defaultForAz", "false")
                .leaf("mapPublicIpOnLaunch", "false")
                .tag_set(&s.tags);
        })
        .maybe("nextToken", next);
    })
}

pub async fn describe_security_groups(world: &World, p: &Params, rid: &str) -> Reply {
    let account = &world.account;
    let mut filters = with_ids(p, "GroupId", "group-id");
    let names = p.list("GroupName");
    if !names.is_empty() {
        filters.push(Filter {
            name: "group-name".into(),
            values: names,
        });
    }
    let groups = match account.cloud.describe_security_groups(&filters).await {
        Ok(groups) => groups,
        Err(e) => return seam_error(&e, rid),
    };
    if let Some(missing) = p
        .list("GroupId")
        .into_iter()
        .find(|id| !groups.iter().any(|g| &g.group_id == id))
    {
        return error(
            400,
            "InvalidGroup.NotFound",
            &format!("The security group '{missing}' does not exist"),
            rid,
        );
    }
    let (shown, next) = match page(&groups, p, (5, 1000), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeSecurityGroups", rid, |x| {
        x.items("securityGroupInfo", &shown, |x, g| {
            x.leaf("ownerId", account.account_id())
                .leaf("groupId", &g.group_id)
                .leaf("groupName", &g.group_name)
                .leaf(
                    "groupDescription",
                    format!("{} security group", g.group_name),
                )
                .leaf("vpcId", vpc_id(account))
                .open("ipPermissions")
                .close("ipPermissions")
                .open("ipPermissionsEgress")
                .close("ipPermissionsEgress")
                .tag_set(&g.tags);
        })
        .maybe("nextToken", next);
    })
}

pub async fn describe_images(world: &World, p: &Params, rid: &str) -> Reply {
    let query = ImageQuery {
        image_ids: p.list("ImageId"),
        owners: p.list("Owner"),
        filters: p.filters(),
    };
    let images = match world.account.cloud.describe_images(&query).await {
        Ok(images) => images,
        Err(e) => return seam_error(&e, rid),
    };
    let (shown, next) = match page(&images, p, (6, 1000), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeImages", rid, |x| {
        x.items("imagesSet", &shown, |x, i| {
            x.leaf("imageId", &i.image_id)
                .leaf("imageLocation", format!("{}/{}", i.owner_id, i.name))
                .leaf("imageState", "available")
                .leaf("imageOwnerId", &i.owner_id)
                .leaf("creationDate", iso(i.creation_date))
                .leaf(
                    "isPublic",
                    (i.owner_id == fakecloud::AMAZON_OWNER_ID).to_string(),
                )
                .leaf("architecture", &i.architecture)
                .leaf("imageType", "machine")
                .leaf("name", &i.name)
                .leaf("rootDeviceType", "ebs")
                .leaf("rootDeviceName", "/dev/xvda")
                .leaf("virtualizationType", "hvm")
                .leaf("hypervisor", "xen")
                .tag_set(&i.tags);
            if i.owner_id == fakecloud::AMAZON_OWNER_ID {
                x.leaf("imageOwnerAlias", "amazon");
            }
            if i.deprecated {
                x.leaf("deprecationTime", iso(i.creation_date));
            }
        })
        .maybe("nextToken", next);
    })
}

/// The content of a `<launchTemplate>` element.
pub fn template_xml(x: &mut Xml, world: &World, t: &LaunchTemplate, created: Option<Timestamp>) {
    x.leaf("launchTemplateId", &t.launch_template_id)
        .leaf("launchTemplateName", &t.launch_template_name)
        .leaf("createTime", iso(created.unwrap_or(Timestamp::UNIX_EPOCH)))
        .leaf(
            "createdBy",
            format!("arn:aws:iam::{}:root", world.account.account_id()),
        )
        .leaf("defaultVersionNumber", "1")
        .leaf("latestVersionNumber", "1")
        .tag_set(&t.tags);
}

pub async fn describe_launch_templates(world: &World, p: &Params, rid: &str) -> Reply {
    let mut filters = with_ids(p, "LaunchTemplateId", "launch-template-id");
    let names = p.list("LaunchTemplateName");
    if !names.is_empty() {
        filters.push(Filter {
            name: "launch-template-name".into(),
            values: names.clone(),
        });
    }
    let templates = match world
        .account
        .cloud
        .describe_launch_templates(&filters)
        .await
    {
        Ok(templates) => templates,
        Err(e) => return seam_error(&e, rid),
    };
    // Named templates must all exist: EC2 answers an error, not an empty list.
    if let Some(missing) = names
        .iter()
        .find(|n| !templates.iter().any(|t| &t.launch_template_name == *n))
    {
        return template_not_found(missing, rid);
    }
    if let Some(missing) = p
        .list("LaunchTemplateId")
        .iter()
        .find(|id| !templates.iter().any(|t| &t.launch_template_id == *id))
    {
        return error(
            400,
            "InvalidLaunchTemplateId.NotFound",
            &format!("The launch template ID '{missing}' does not exist"),
            rid,
        );
    }
    let (shown, next) = match page(&templates, p, (1, 200), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeLaunchTemplates", rid, |x| {
        x.items("launchTemplates", &shown, |x, t| {
            template_xml(x, world, t, world.template_created(&t.launch_template_name));
        })
        .maybe("nextToken", next);
    })
}

fn instance_type_xml(x: &mut Xml, t: &InstanceTypeInfo) {
    x.leaf("instanceType", &t.instance_type)
        .leaf("currentGeneration", "true")
        .items("supportedUsageClasses", &t.usage_classes, |x, u| {
            x.text(u);
        })
        .items("supportedRootDeviceTypes", ["ebs"], |x, r| {
            x.text(r);
        })
        .items("supportedVirtualizationTypes", ["hvm"], |x, v| {
            x.text(v);
        })
        .leaf("bareMetal", t.bare_metal.to_string())
        .maybe("hypervisor", t.hypervisor.as_ref())
        .node("processorInfo", |x| {
            x.items("supportedArchitectures", &t.architectures, |x, a| {
                x.text(a);
            })
            .maybe("manufacturer", t.cpu_manufacturer.as_ref());
        })
        .node("vCpuInfo", |x| {
            x.leaf("defaultVCpus", t.vcpus.to_string());
        })
        .node("memoryInfo", |x| {
            x.leaf("sizeInMiB", t.memory_mib.to_string());
        })
        .leaf(
            "instanceStorageSupported",
            t.local_nvme_gb.is_some().to_string(),
        );
    if let Some(gb) = t.local_nvme_gb {
        x.node("instanceStorageInfo", |x| {
            x.leaf("totalSizeInGB", gb.to_string())
                .leaf("nvmeSupport", "required");
        });
    }
    x.node("ebsInfo", |x| {
        x.leaf("ebsOptimizedSupport", "default");
        if let Some(mbps) = t.ebs_max_bandwidth_mbps {
            x.node("ebsOptimizedInfo", |x| {
                x.leaf("maximumBandwidthInMbps", mbps.to_string());
            });
        }
    })
    .node("networkInfo", |x| {
        x.leaf(
            "maximumNetworkInterfaces",
            t.max_network_interfaces.to_string(),
        )
        .leaf("maximumNetworkCards", "1")
        .leaf(
            "ipv4AddressesPerInterface",
            t.ipv4_addresses_per_interface.to_string(),
        )
        .leaf(
            "encryptionInTransitSupported",
            t.encryption_in_transit.to_string(),
        );
        if t.efa_interfaces > 0 {
            x.leaf("efaSupported", "true").node("efaInfo", |x| {
                x.leaf("maximumEfaInterfaces", t.efa_interfaces.to_string());
            });
        }
        if let Some(mbps) = t.network_baseline_mbps {
            x.items("networkCards", [mbps], |x, mbps| {
                x.leaf("networkCardIndex", "0")
                    .leaf(
                        "maximumNetworkInterfaces",
                        t.max_network_interfaces.to_string(),
                    )
                    .leaf(
                        "baselineBandwidthInGbps",
                        (mbps as f64 / 1000.0).to_string(),
                    );
            });
        }
    });
    if !t.gpus.is_empty() {
        x.node("gpuInfo", |x| {
            x.items("gpus", &t.gpus, |x, g| {
                x.leaf("name", &g.name)
                    .leaf("manufacturer", &g.manufacturer)
                    .leaf("count", g.count.to_string())
                    .node("memoryInfo", |x| {
                        x.leaf("sizeInMiB", g.memory_mib.to_string());
                    });
            });
        });
    }
    if !t.neuron_devices.is_empty() {
        x.node("neuronInfo", |x| {
            x.items("neuronDevices", &t.neuron_devices, |x, d| {
                x.leaf("name", &d.name)
                    .leaf("count", d.count.to_string())
                    .node("coreInfo", |x| {
                        x.leaf("count", d.cores_per_device.to_string());
                    });
            });
        });
    }
}

/// Whether `t` passes one `DescribeInstanceTypes` filter; `None` for a filter EC2 has but the
/// fake does not evaluate (refused rather than ignored).
fn type_filter(t: &InstanceTypeInfo, f: &Filter) -> Option<bool> {
    let values: Vec<String> = match f.name.as_str() {
        "instance-type" => vec![t.instance_type.clone()],
        "processor-info.supported-architecture" => t.architectures.clone(),
        "supported-virtualization-type" => vec!["hvm".into()],
        "supported-usage-class" => t.usage_classes.clone(),
        "current-generation" => vec!["true".into()],
        "bare-metal" => vec![t.bare_metal.to_string()],
        "hypervisor" => t.hypervisor.clone().into_iter().collect(),
        _ => return None,
    };
    Some(
        f.values
            .iter()
            .any(|v| values.iter().any(|have| glob(v, have))),
    )
}

/// EC2's `*` wildcard (enough for instance-type filters such as `m5.*`).
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.len() >= head.len() + tail.len()
                && text.starts_with(head)
                && glob_tail(tail, &text[head.len()..])
        }
    }
}

fn glob_tail(pattern: &str, text: &str) -> bool {
    if !pattern.contains('*') {
        return text.ends_with(pattern);
    }
    (0..=text.len()).any(|i| text.is_char_boundary(i) && glob(pattern, &text[i..]))
}

pub async fn describe_instance_types(world: &World, p: &Params, rid: &str) -> Reply {
    let infos = world.account.cloud.instance_type_infos();
    let names = p.list("InstanceType");
    if let Some(missing) = names
        .iter()
        .find(|n| !infos.iter().any(|i| &i.instance_type == *n))
    {
        return error(
            400,
            "InvalidInstanceType",
            &format!("The following supplied instance types do not exist: [{missing}]"),
            rid,
        );
    }
    let filters = p.filters();
    let mut selected = Vec::new();
    for info in infos
        .into_iter()
        .filter(|i| names.is_empty() || names.contains(&i.instance_type))
    {
        let mut keep = true;
        for f in &filters {
            match type_filter(&info, f) {
                Some(pass) => keep &= pass,
                None => {
                    return error(
                        400,
                        "InvalidParameterValue",
                        &format!("The filter '{}' is invalid", f.name),
                        rid,
                    );
                }
            }
        }
        if keep {
            selected.push(info);
        }
    }
    let (shown, next) = match page(&selected, p, (5, 100), true, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeInstanceTypes", rid, |x| {
        x.items("instanceTypeSet", &shown, instance_type_xml)
            .maybe("nextToken", next);
    })
}

/// `DescribeAvailabilityZones`: the region's zones with their ids (no filters; the controller
/// asks for all of them).
pub async fn describe_availability_zones(world: &World, p: &Params, rid: &str) -> Reply {
    if let Some(name) = p.get("Filter.1.Name") {
        return error(
            400,
            "InvalidParameterValue",
            &format!("The filter '{name}' is not supported by this fake"),
            rid,
        );
    }
    let region = world.account.region();
    let zones = world.account.cloud.availability_zones();
    answer("DescribeAvailabilityZones", rid, |x| {
        x.items("availabilityZoneInfo", &zones, |x, (name, id)| {
            x.leaf("zoneName", name)
                .leaf("zoneId", id)
                .leaf("zoneState", "available")
                .leaf("regionName", &region)
                .leaf("zoneType", "availability-zone")
                .leaf("optInStatus", "opt-in-not-required");
        });
    })
}

pub async fn describe_instance_type_offerings(world: &World, p: &Params, rid: &str) -> Reply {
    let location_type = p.get("LocationType").unwrap_or("region");
    let region = world.account.region();
    let zone_ids: std::collections::BTreeMap<String, String> =
        match world.account.cloud.describe_subnets(&[]).await {
            Ok(subnets) => subnets.into_iter().map(|s| (s.zone, s.zone_id)).collect(),
            Err(e) => return seam_error(&e, rid),
        };
    let offerings = world.account.cloud.zone_offerings();
    let mut rows: BTreeSet<(String, String)> = BTreeSet::new();
    for o in &offerings {
        let location = match location_type {
            "region" => region.clone(),
            "availability-zone" => o.zone.clone(),
            "availability-zone-id" => zone_ids
                .get(&o.zone)
                .cloned()
                .unwrap_or_else(|| o.zone.clone()),
            other => {
                return error(
                    400,
                    "InvalidParameterValue",
                    &format!("Value ({other}) for parameter locationType is invalid."),
                    rid,
                );
            }
        };
        rows.insert((o.instance_type.clone(), location));
    }
    let mut selected = Vec::new();
    for (instance_type, location) in rows {
        let mut keep = true;
        for f in p.filters() {
            let value = match f.name.as_str() {
                "instance-type" => &instance_type,
                "location" => &location,
                other => {
                    return error(
                        400,
                        "InvalidParameterValue",
                        &format!("The filter '{other}' is invalid"),
                        rid,
                    );
                }
            };
            keep &= f.values.iter().any(|v| glob(v, value));
        }
        if keep {
            selected.push((instance_type, location));
        }
    }
    let (shown, next) = match page(&selected, p, (5, 1000), true, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeInstanceTypeOfferings", rid, |x| {
        x.items("instanceTypeOfferingSet", &shown, |x, (t, l)| {
            x.leaf("instanceType", t)
                .leaf("locationType", location_type)
                .leaf("location", l);
        })
        .maybe("nextToken", next);
    })
}

pub async fn describe_spot_price_history(world: &World, p: &Params, rid: &str) -> Reply {
    let cloud = &world.account.cloud;
    let types = p.list("InstanceType");
    let products = p.list("ProductDescription");
    if !products.is_empty()
        && !products
            .iter()
            .any(|d| d == "Linux/UNIX" || d == "Linux/UNIX (Amazon VPC)")
    {
        return answer("DescribeSpotPriceHistory", rid, |x| {
            x.open("spotPriceHistorySet").close("spotPriceHistorySet");
        });
    }
    let start: Option<Timestamp> = p.get("StartTime").and_then(|t| t.parse().ok());
    let zone = p.get("AvailabilityZone");
    let mut entries = Vec::new();
    for it in cloud.instance_types().instance_types {
        if !types.is_empty() && !types.contains(&it.name) {
            continue;
        }
        for offering in it
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot)
        {
            if zone.is_some_and(|z| z != offering.zone) {
                continue;
            }
            let history =
                cloud.price_history(&Pool::new(&it.name, &offering.zone, CapacityType::Spot));
            // The price in force at the start time, and every change after it.
            let first = start.map_or(0, |s| {
                history
                    .partition_point(|point| point.time <= s)
                    .saturating_sub(1)
            });
            for point in &history[first.min(history.len())..] {
                entries.push((
                    it.name.clone(),
                    offering.zone.clone(),
                    point.price,
                    point.time,
                ));
            }
        }
    }
    // Newest first, as EC2 answers.
    entries.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    let (shown, next) = match page(&entries, p, (5, 1000), true, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeSpotPriceHistory", rid, |x| {
        x.items("spotPriceHistorySet", &shown, |x, (t, z, price, time)| {
            x.leaf("instanceType", t)
                .leaf("productDescription", "Linux/UNIX")
                .leaf("spotPrice", format!("{price:.6}"))
                .leaf("timestamp", iso(*time))
                .leaf("availabilityZone", z);
        })
        .maybe("nextToken", next);
    })
}
