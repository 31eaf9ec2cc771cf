//! EC2 on the wire: the Query protocol (`Action=...&Version=2016-11-15`, form-encoded), XML
//! answers with `<item>` lists and no `Result` wrapper, errors as `<Response><Errors>`.
//!
//! Instances, fleets, tags and launch templates are here; the describe calls of the network,
//! images and the instance catalog are in `ec2_describe.rs`. Every call goes through the fake's
//! `Ec2` seam (so faults, latency and the call log apply) or its inspection methods.

use std::collections::BTreeMap;

use fakecloud::Account;
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::Ec2;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, CreateFleetResponse, Ec2Error, Filter, FleetOverride, Instance,
    InstanceState, LaunchTemplateRequest, StatusCheck, Subnet,
};

use crate::World;
use crate::wire::{Params, Reply, Xml, code_and_message, iso};

pub const NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

/// An EC2 error answer.
pub fn error(status: u16, code: &str, message: &str, request_id: &str) -> Reply {
    let mut x = Xml::new();
    x.node("Response", |x| {
        x.node("Errors", |x| {
            x.node("Error", |x| {
                x.leaf("Code", code).leaf("Message", message);
            });
        })
        .leaf("RequestID", request_id);
    });
    Reply::xml(status, x.finish())
}

/// A seam error as EC2 would answer it.
pub fn seam_error(e: &Ec2Error, request_id: &str) -> Reply {
    match e {
        Ec2Error::Throttled(text) => {
            let (code, message) = code_and_message(text, "RequestLimitExceeded");
            error(503, &code, &message, request_id)
        }
        Ec2Error::Unavailable(text) => {
            let (code, message) = code_and_message(text, "InternalError");
            let status = if code == "Unavailable" { 503 } else { 500 };
            error(status, &code, &message, request_id)
        }
        Ec2Error::InsufficientCapacity { code, message } => error(500, code, message, request_id),
        Ec2Error::NotFound { code, message } | Ec2Error::InvalidRequest { code, message } => {
            error(400, code, message, request_id)
        }
        Ec2Error::Unauthorized { code, message } => error(403, code, message, request_id),
    }
}

/// `DryRun=true` on a request that would have succeeded.
pub fn dry_run(request_id: &str) -> Reply {
    error(
        412,
        "DryRunOperation",
        "Request would have succeeded, but DryRun flag is set.",
        request_id,
    )
}

/// A successful answer `<ActionResponse xmlns=…><requestId/>…</ActionResponse>`.
pub fn answer(action: &str, request_id: &str, body: impl FnOnce(&mut Xml)) -> Reply {
    let mut x = Xml::new();
    let root = format!("{action}Response");
    x.open_ns(&root, NAMESPACE).leaf("requestId", request_id);
    body(&mut x);
    x.close(&root);
    Reply::xml(200, x.finish())
}

/// One page of `items` by `MaxResults` (within `min..=max`, else `InvalidParameterValue`) and
/// `NextToken` (an offset); all of them, in pages of `max`, when `MaxResults` is absent and
/// `page_by_default`.
pub fn page<T: Clone>(
    items: &[T],
    p: &Params,
    (min, max): (i64, i64),
    page_by_default: bool,
    request_id: &str,
) -> Result<(Vec<T>, Option<String>), Reply> {
    let size = match p.int("MaxResults") {
        Some(n) if n < min || n > max => {
            return Err(error(
                400,
                "InvalidParameterValue",
                &format!(
                    "Value ( {n} ) for parameter maxResults is invalid. Expecting a value between {min} and {max}."
                ),
                request_id,
            ));
        }
        Some(n) => n as usize,
        None if page_by_default => max as usize,
        None => usize::MAX,
    };
    let start = match p.get("NextToken") {
        None => 0,
        Some(token) => match token.parse::<usize>() {
            Ok(n) if n <= items.len() => n,
            _ => {
                return Err(error(
                    400,
                    "InvalidNextToken",
                    "The specified NextToken is not valid.",
                    request_id,
                ));
            }
        },
    };
    let end = start.saturating_add(size).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// EC2's numeric state code.
fn state_code(state: InstanceState) -> (u16, &'static str) {
    match state {
        InstanceState::Pending => (0, "pending"),
        InstanceState::Running => (16, "running"),
        InstanceState::ShuttingDown => (32, "shutting-down"),
        InstanceState::Terminated => (48, "terminated"),
        InstanceState::Stopping => (64, "stopping"),
        InstanceState::Stopped => (80, "stopped"),
    }
}

/// `sir-` and 8 characters derived from the instance id (a spot instance's request).
pub fn spot_request_id(instance_id: &str) -> String {
    let hash = karpenter_core::catalog::builtin::fnv1a64(instance_id.as_bytes());
    format!("sir-{:08x}", hash as u32)
}

/// The private IP a fake DNS name encodes (`ip-10-0-1-4.…` → `10.0.1.4`).
fn private_ip(dns_name: &str) -> String {
    dns_name
        .split('.')
        .next()
        .and_then(|host| host.strip_prefix("ip-"))
        .map(|ip| ip.replace('-', "."))
        .unwrap_or_default()
}

/// One `<instancesSet><item>`'s content.
pub fn instance_xml(x: &mut Xml, account: &Account, i: &Instance) {
    let (code, name) = state_code(i.state);
    let arch = account
        .cloud
        .instance_types()
        .get(&i.instance_type)
        .and_then(|it| it.labels.get("kubernetes.io/arch").cloned())
        .map(|a| {
            if a == "amd64" {
                "x86_64".to_string()
            } else {
                a
            }
        });
    x.leaf("instanceId", &i.instance_id)
        .leaf("imageId", &i.image_id)
        .node("instanceState", |x| {
            x.leaf("code", code.to_string()).leaf("name", name);
        })
        .leaf("privateDnsName", &i.private_dns_name)
        .leaf("dnsName", "")
        .leaf("amiLaunchIndex", "0")
        .leaf("instanceType", &i.instance_type)
        .leaf("launchTime", iso(i.launch_time))
        .node("placement", |x| {
            x.leaf("availabilityZone", &i.zone)
                .leaf("tenancy", "default");
        })
        .node("monitoring", |x| {
            x.leaf("state", "disabled");
        })
        .leaf("subnetId", &i.subnet_id)
        .leaf("vpcId", vpc_id(account))
        .leaf("privateIpAddress", private_ip(&i.private_dns_name))
        .items("groupSet", &i.security_group_ids, |x, id| {
            x.leaf("groupId", id).leaf(
                "groupName",
                account.cloud.security_group_name(id).unwrap_or_default(),
            );
        })
        .maybe("architecture", arch)
        .leaf("rootDeviceType", "ebs")
        .leaf("rootDeviceName", "/dev/xvda")
        .leaf("virtualizationType", "hvm")
        .leaf("hypervisor", "xen")
        .tag_set(&i.tags);
    if i.capacity_type == CapacityType::Spot {
        x.leaf("instanceLifecycle", "spot")
            .leaf("spotInstanceRequestId", spot_request_id(&i.instance_id));
    }
    if let Some(reservation) = &i.capacity_reservation_id {
        x.leaf("capacityReservationId", reservation);
    }
}

/// The account's one VPC.
pub fn vpc_id(account: &Account) -> String {
    let hash = karpenter_core::catalog::builtin::fnv1a64(account.account_id().as_bytes());
    format!("vpc-{:017x}", hash)
}

/// `InvalidInstanceID.NotFound` for `missing`, worded as EC2 words it.
fn instances_not_found(missing: &[String], request_id: &str) -> Reply {
    let message = if missing.len() == 1 {
        format!("The instance ID '{}' does not exist", missing[0])
    } else {
        format!("The instance IDs '{}' do not exist", missing.join(", "))
    };
    error(400, "InvalidInstanceID.NotFound", &message, request_id)
}

fn malformed_instance_id(ids: &[String], request_id: &str) -> Option<Reply> {
    let bad = ids.iter().find(|id| {
        !(id.starts_with("i-") && id.len() > 2 && id[2..].chars().all(|c| c.is_ascii_hexdigit()))
    })?;
    Some(error(
        400,
        "InvalidInstanceID.Malformed",
        &format!("Invalid id: \"{bad}\""),
        request_id,
    ))
}

pub async fn describe_instances(world: &World, p: &Params, rid: &str) -> Reply {
    let ids = p.list("InstanceId");
    if let Some(reply) = malformed_instance_id(&ids, rid) {
        return reply;
    }
    if !ids.is_empty() && p.get("MaxResults").is_some() {
        return error(
            400,
            "InvalidParameterCombination",
            "The parameter instancesSet cannot be used with the parameter maxResults",
            rid,
        );
    }
    let instances = match world
        .account
        .cloud
        .describe_instances(&ids, &p.filters())
        .await
    {
        Ok(instances) => instances,
        Err(e) => return seam_error(&e, rid),
    };
    let missing: Vec<String> = ids
        .iter()
        .filter(|id| !instances.iter().any(|i| &i.instance_id == *id))
        .cloned()
        .collect();
    if !missing.is_empty() && p.filters().is_empty() {
        return instances_not_found(&missing, rid);
    }
    let (shown, next) = match page(&instances, p, (5, 1000), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    let account = &world.account;
    answer("DescribeInstances", rid, |x| {
        x.items("reservationSet", &shown, |x, i| {
            x.leaf("reservationId", reservation_id(&i.instance_id))
                .leaf("ownerId", account.account_id())
                .open("groupSet")
                .close("groupSet")
                .items("instancesSet", [i], |x, i| instance_xml(x, account, i));
        })
        .maybe("nextToken", next);
    })
}

/// `DescribeCapacityReservations`, by ids or filters, paged.
pub async fn describe_capacity_reservations(world: &World, p: &Params, rid: &str) -> Reply {
    let ids = p.list("CapacityReservationId");
    let found = match world
        .account
        .cloud
        .describe_capacity_reservations(&ids, &p.filters())
        .await
    {
        Ok(found) => found,
        Err(e) => return seam_error(&e, rid),
    };
    let (shown, next) = match page(&found, p, (1, 1000), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    answer("DescribeCapacityReservations", rid, |x| {
        x.items("capacityReservationSet", &shown, |x, r| {
            x.leaf("capacityReservationId", &r.id)
                .leaf("ownerId", &r.owner_id)
                .leaf("instanceType", &r.instance_type)
                .leaf("instancePlatform", "Linux/UNIX")
                .leaf("availabilityZone", &r.zone)
                .leaf("tenancy", "default")
                .leaf("totalInstanceCount", r.total_instance_count.to_string())
                .leaf(
                    "availableInstanceCount",
                    r.available_instance_count.to_string(),
                )
                .leaf("state", &r.state)
                .leaf(
                    "instanceMatchCriteria",
                    match r.instance_match_criteria {
                        karpenter_core::seams::ec2::InstanceMatchCriteria::Open => "open",
                        karpenter_core::seams::ec2::InstanceMatchCriteria::Targeted => "targeted",
                    },
                )
                .leaf("reservationType", r.reservation_type.label())
                .leaf("interruptible", r.interruptible.to_string())
                .leaf(
                    "endDateType",
                    if r.end_date.is_some() {
                        "limited"
                    } else {
                        "unlimited"
                    },
                )
                .maybe("endDate", r.end_date.map(iso))
                .tag_set(&r.tags);
        })
        .maybe("nextToken", next);
    })
}

/// `DescribeInstanceStatus` (running instances only, as without `IncludeAllInstances`).
pub async fn describe_instance_status(world: &World, p: &Params, rid: &str) -> Reply {
    if p.get("IncludeAllInstances") == Some("true") || !p.list("InstanceId").is_empty() {
        return error(
            400,
            "InvalidParameterCombination",
            "This fake answers DescribeInstanceStatus by filters only",
            rid,
        );
    }
    let statuses = match world
        .account
        .cloud
        .describe_instance_status(&p.filters())
        .await
    {
        Ok(statuses) => statuses,
        Err(e) => return seam_error(&e, rid),
    };
    let (shown, next) = match page(&statuses, p, (5, 1000), false, rid) {
        Ok(page) => page,
        Err(reply) => return reply,
    };
    let cloud = &world.account.cloud;
    let summary = |x: &mut Xml, name: &str, checks: &[StatusCheck]| {
        let impaired = checks.iter().any(|c| c.status == "failed");
        x.node(name, |x| {
            x.leaf("status", if impaired { "impaired" } else { "ok" })
                .items("details", checks, |x, c| {
                    x.leaf("name", &c.name).leaf("status", &c.status);
                    if let Some(since) = c.impaired_since {
                        x.leaf("impairedSince", iso(since));
                    }
                });
        });
    };
    answer("DescribeInstanceStatus", rid, |x| {
        x.items("instanceStatusSet", &shown, |x, s| {
            let zone = cloud
                .instance(&s.instance_id)
                .map(|i| i.zone)
                .unwrap_or_default();
            x.leaf("instanceId", &s.instance_id)
                .leaf("availabilityZone", zone)
                .node("instanceState", |x| {
                    x.leaf("code", "16").leaf("name", "running");
                });
            summary(x, "systemStatus", &s.system_checks);
            summary(x, "instanceStatus", &s.instance_checks);
            x.items("eventsSet", &s.events, |x, code| {
                x.leaf("code", code).leaf(
                    "description",
                    format!("The instance is scheduled for {code}"),
                );
            });
        })
        .maybe("nextToken", next);
    })
}

fn reservation_id(instance_id: &str) -> String {
    let hash = karpenter_core::catalog::builtin::fnv1a64(format!("r/{instance_id}").as_bytes());
    format!("r-{:017x}", hash)
}

pub async fn terminate_instances(world: &World, p: &Params, rid: &str) -> Reply {
    let ids = p.list("InstanceId");
    if ids.is_empty() {
        return error(
            400,
            "MissingParameter",
            "The request must contain the parameter InstanceId",
            rid,
        );
    }
    if let Some(reply) = malformed_instance_id(&ids, rid) {
        return reply;
    }
    let cloud = &world.account.cloud;
    let before: BTreeMap<String, InstanceState> = ids
        .iter()
        .filter_map(|id| Some((id.clone(), cloud.instance_state(id)?)))
        .collect();
    let missing: Vec<String> = ids
        .iter()
        .filter(|id| !before.contains_key(*id))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return instances_not_found(&missing, rid);
    }
    if p.flag("DryRun") {
        return dry_run(rid);
    }
    let terminated = match cloud.terminate_instances(&ids).await {
        Ok(ids) => ids,
        Err(e) => return seam_error(&e, rid),
    };
    answer("TerminateInstances", rid, |x| {
        x.items("instancesSet", &terminated, |x, id| {
            let (code, name) = state_code(before[id]);
            let now = cloud
                .instance_state(id)
                .unwrap_or(InstanceState::Terminated);
            let (now_code, now_name) = state_code(now);
            x.leaf("instanceId", id)
                .node("currentState", |x| {
                    x.leaf("code", now_code.to_string()).leaf("name", now_name);
                })
                .node("previousState", |x| {
                    x.leaf("code", code.to_string()).leaf("name", name);
                });
        });
    })
}

pub async fn create_tags(world: &World, p: &Params, rid: &str) -> Reply {
    let ids = p.list("ResourceId");
    let tags = p.tags("Tag");
    if ids.is_empty() {
        return error(
            400,
            "MissingParameter",
            "The request must contain the parameter resourceIdSet",
            rid,
        );
    }
    if p.flag("DryRun") {
        return dry_run(rid);
    }
    match world.account.cloud.create_tags(&ids, &tags).await {
        Ok(()) => answer("CreateTags", rid, |x| {
            x.leaf("return", "true");
        }),
        Err(e) => seam_error(&e, rid),
    }
}

/// Instance tags from `TagSpecification.N` with resource type `instance` (or `fleet`, which
/// Karpenter also tags).
fn instance_tags(p: &Params) -> BTreeMap<String, String> {
    let mut tags = BTreeMap::new();
    for spec in p.members("TagSpecification") {
        if matches!(spec.get("ResourceType"), Some("instance")) {
            tags.extend(spec.tags("Tag"));
        }
    }
    tags
}

/// The launch template a `LaunchTemplateSpecification` names, by name or id.
async fn template_name(world: &World, spec: &Params) -> Option<String> {
    if let Some(name) = spec.get("LaunchTemplateName") {
        return Some(name.to_string());
    }
    let id = spec.get("LaunchTemplateId")?;
    let found = world
        .account
        .cloud
        .describe_launch_templates(&[Filter::new("launch-template-id", &[id])])
        .await
        .ok()?;
    found.into_iter().next().map(|t| t.launch_template_name)
}

/// The overrides of one `LaunchTemplateConfigs.N`, each with the zone of its subnet (or a subnet
/// of its zone), and the image each names.
fn fleet_overrides(config: &Params, subnets: &[Subnet]) -> Vec<(FleetOverride, Option<String>)> {
    config
        .members("Overrides")
        .into_iter()
        .filter_map(|o| {
            let instance_type = o.get("InstanceType")?.to_string();
            let subnet = match (o.get("SubnetId"), o.get("AvailabilityZone")) {
                (Some(id), _) => subnets.iter().find(|s| s.subnet_id == id).cloned(),
                (None, Some(zone)) => subnets
                    .iter()
                    .filter(|s| s.zone == zone)
                    .max_by_key(|s| s.available_ip_address_count)
                    .cloned(),
                (None, None) => subnets.first().cloned(),
            };
            let (subnet_id, zone) = match subnet {
                Some(s) => (s.subnet_id, s.zone),
                None => (
                    o.get("SubnetId").unwrap_or_default().to_string(),
                    o.get("AvailabilityZone").unwrap_or_default().to_string(),
                ),
            };
            let price = o.get("Priority").and_then(|v| v.parse().ok());
            Some((
                FleetOverride {
                    instance_type,
                    subnet_id,
                    zone,
                    price,
                },
                o.get("ImageId").map(String::from),
            ))
        })
        .collect()
}

/// What one fleet config asked for, kept to echo it back.
struct FleetConfig {
    template: String,
    version: String,
    overrides: Vec<(FleetOverride, Option<String>)>,
}

pub async fn create_fleet(world: &World, p: &Params, rid: &str) -> Reply {
    if p.get("Type").unwrap_or("maintain") != "instant" {
        return error(
            400,
            "Unsupported",
            "fakecloud serves CreateFleet of Type instant only",
            rid,
        );
    }
    if p.int("TargetCapacitySpecification.TotalTargetCapacity") != Some(1) {
        return error(
            400,
            "InvalidParameterValue",
            "fakecloud launches fleets of TotalTargetCapacity 1",
            rid,
        );
    }
    // A capacity block is launched as `capacity-block`; an ODCR as on-demand (its launch
    // template targets it).
    let target_type = p.get("TargetCapacitySpecification.DefaultTargetCapacityType");
    let capacity_block = target_type == Some("capacity-block");
    let capacity_type = match target_type {
        Some("spot") => CapacityType::Spot,
        Some("capacity-block") => CapacityType::Reserved,
        Some("on-demand") | None => CapacityType::OnDemand,
        Some(other) => {
            return error(
                400,
                "InvalidParameterValue",
                &format!("Invalid DefaultTargetCapacityType: {other}"),
                rid,
            );
        }
    };
    let subnets = match world.account.cloud.describe_subnets(&[]).await {
        Ok(s) => s,
        Err(e) => return seam_error(&e, rid),
    };
    let mut configs = Vec::new();
    for config in p.members("LaunchTemplateConfigs") {
        let spec = config.nested("LaunchTemplateSpecification");
        let Some(template) = template_name(world, &spec).await else {
            return error(
                400,
                "InvalidLaunchTemplateId.NotFound",
                "The specified launch template does not exist.",
                rid,
            );
        };
        configs.push(FleetConfig {
            template,
            version: spec.get("Version").unwrap_or("$Default").to_string(),
            overrides: fleet_overrides(&config, &subnets),
        });
    }
    if configs.is_empty() {
        return error(
            400,
            "MissingParameter",
            "The request must contain the parameter LaunchTemplateConfigs",
            rid,
        );
    }
    if p.flag("DryRun") {
        return dry_run_fleet(world, &configs, rid).await;
    }
    let token = p.get("ClientToken").unwrap_or_default();
    let mut response = CreateFleetResponse::default();
    for (n, config) in configs.iter().enumerate() {
        let request = CreateFleetRequest {
            capacity_block,
            capacity_type,
            launch_template_name: config.template.clone(),
            overrides: config.overrides.iter().map(|(o, _)| o.clone()).collect(),
            tags: instance_tags(p),
            client_token: if token.is_empty() || n == 0 {
                token.to_string()
            } else {
                format!("{token}#{n}")
            },
            context: p.get("Context").map(String::from),
        };
        match world.account.cloud.create_fleet(&request).await {
            Ok(answer) => {
                response.errors.extend(answer.errors);
                if !answer.instances.is_empty() {
                    response.instances = answer.instances;
                    break;
                }
            }
            Err(e) => return seam_error(&e, rid),
        }
    }
    fleet_answer(world, &configs, capacity_type, &response, rid)
}

async fn dry_run_fleet(world: &World, configs: &[FleetConfig], rid: &str) -> Reply {
    for config in configs {
        let found = world
            .account
            .cloud
            .describe_launch_templates(&[Filter::new("launch-template-name", &[&config.template])])
            .await;
        if !matches!(found, Ok(ref t) if !t.is_empty()) {
            return template_not_found(&config.template, rid);
        }
    }
    dry_run(rid)
}

pub fn template_not_found(name: &str, rid: &str) -> Reply {
    error(
        400,
        "InvalidLaunchTemplateName.NotFoundException",
        &format!("The specified launch template, with template name {name}, does not exist."),
        rid,
    )
}

/// `<launchTemplateAndOverrides>` of one override.
fn overrides_xml(x: &mut Xml, config: &FleetConfig, o: &FleetOverride, image: Option<&str>) {
    x.node("launchTemplateAndOverrides", |x| {
        x.node("launchTemplateSpecification", |x| {
            x.leaf("launchTemplateName", &config.template)
                .leaf("version", &config.version);
        })
        .node("overrides", |x| {
            x.leaf("instanceType", &o.instance_type)
                .leaf("subnetId", &o.subnet_id)
                .leaf("availabilityZone", &o.zone)
                .maybe("imageId", image)
                .maybe("priority", o.price.map(|p| p.to_string()));
        });
    });
}

fn fleet_answer(
    world: &World,
    configs: &[FleetConfig],
    capacity_type: CapacityType,
    response: &CreateFleetResponse,
    rid: &str,
) -> Reply {
    let find = |instance_type: &str, zone: &str| {
        configs.iter().find_map(|c| {
            c.overrides
                .iter()
                .find(|(o, _)| o.instance_type == instance_type && o.zone == zone)
                .map(|(o, image)| (c, o, image.clone()))
        })
    };
    let fleet_id = world.fleet_id();
    answer("CreateFleet", rid, |x| {
        x.leaf("fleetId", &fleet_id);
        x.items("errorSet", &response.errors, |x, e| {
            let t = e.instance_type.as_deref().unwrap_or_default();
            let z = e.zone.as_deref().unwrap_or_default();
            if let Some((config, o, image)) = find(t, z) {
                let image = image.or_else(|| world.template_image(&config.template));
                overrides_xml(x, config, o, image.as_deref());
            }
            x.leaf("lifecycle", capacity_type.label())
                .leaf("errorCode", &e.code)
                .leaf("errorMessage", &e.message);
        });
        x.items("fleetInstanceSet", &response.instances, |x, i| {
            if let Some((config, o, _)) = find(&i.instance_type, &i.zone) {
                let image = world
                    .account
                    .cloud
                    .instance(&i.instance_id)
                    .map(|i| i.image_id);
                let o = FleetOverride {
                    subnet_id: i.subnet_id.clone(),
                    ..o.clone()
                };
                overrides_xml(x, config, &o, image.as_deref());
            }
            x.leaf("lifecycle", i.capacity_type.label())
                .items("instanceIds", [&i.instance_id], |x, id| {
                    x.text(id);
                })
                .leaf("instanceType", &i.instance_type)
                .leaf("availabilityZone", &i.zone)
                .leaf("subnetId", &i.subnet_id);
        });
    })
}

pub async fn create_launch_template(world: &World, p: &Params, rid: &str) -> Reply {
    let Some(name) = p.get("LaunchTemplateName") else {
        return error(
            400,
            "MissingParameter",
            "The request must contain the parameter LaunchTemplateName",
            rid,
        );
    };
    let data = p.nested("LaunchTemplateData");
    let mut tags = BTreeMap::new();
    for spec in p.members("TagSpecification") {
        if spec.get("ResourceType") == Some("launch-template") {
            tags.extend(spec.tags("Tag"));
        }
    }
    let request = LaunchTemplateRequest {
        name: name.to_string(),
        image_id: data.get("ImageId").unwrap_or_default().to_string(),
        user_data: data.get("UserData").unwrap_or_default().to_string(),
        security_group_ids: crate::ec2_template::security_groups(&data),
        instance_profile: data
            .get("IamInstanceProfile.Name")
            .unwrap_or_default()
            .to_string(),
        tags,
        extra: crate::ec2_template::extra(&data),
    };
    if p.flag("DryRun") {
        return dry_run(rid);
    }
    match world.account.cloud.create_launch_template(&request).await {
        Ok(template) => {
            world.remember_template(&template.launch_template_name, &request.image_id);
            let created = world.template_created(&template.launch_template_name);
            answer("CreateLaunchTemplate", rid, |x| {
                x.node("launchTemplate", |x| {
                    crate::ec2_describe::template_xml(x, world, &template, created);
                });
            })
        }
        Err(e) => seam_error(&e, rid),
    }
}

pub async fn delete_launch_template(world: &World, p: &Params, rid: &str) -> Reply {
    let cloud = &world.account.cloud;
    let filter = match (p.get("LaunchTemplateName"), p.get("LaunchTemplateId")) {
        (Some(name), _) => Filter::new("launch-template-name", &[name]),
        (None, Some(id)) => Filter::new("launch-template-id", &[id]),
        (None, None) => {
            return error(
                400,
                "MissingParameter",
                "The request must contain the parameter LaunchTemplateName or LaunchTemplateId",
                rid,
            );
        }
    };
    let found = match cloud
        .describe_launch_templates(std::slice::from_ref(&filter))
        .await
    {
        Ok(found) => found,
        Err(e) => return seam_error(&e, rid),
    };
    let Some(template) = found.into_iter().next() else {
        return match p.get("LaunchTemplateName") {
            Some(name) => template_not_found(name, rid),
            None => error(
                400,
                "InvalidLaunchTemplateId.NotFound",
                "The specified launch template does not exist.",
                rid,
            ),
        };
    };
    if p.flag("DryRun") {
        return dry_run(rid);
    }
    let created = world.template_created(&template.launch_template_name);
    if let Err(e) = cloud
        .delete_launch_template(&template.launch_template_name)
        .await
    {
        return seam_error(&e, rid);
    }
    answer("DeleteLaunchTemplate", rid, |x| {
        x.node("launchTemplate", |x| {
            crate::ec2_describe::template_xml(x, world, &template, created);
        });
    })
}
