//! `RunInstances`: one to `MaxCount` instances, as the AWS CLI's `ec2 run-instances` and
//! upstream's dry-run validation use it.
//!
//! The fake launches through `CreateFleet` (its one launch path): with a `LaunchTemplate` it uses
//! that template; with a bare `ImageId` it uses a template it keeps per (image, user data),
//! named `fakecloud-run-instances/<hash>`, which `DescribeLaunchTemplates` shows like any other.

use std::collections::BTreeMap;

use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::Ec2;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, Ec2Error, Filter, FleetOverride, LaunchTemplateRequest,
};

use crate::World;
use crate::ec2::{answer, dry_run, error, instance_xml, seam_error, template_not_found};
use crate::wire::{Params, Reply};

/// Most instances one `RunInstances` launches here.
pub const RUN_COUNT_MAX: i64 = 20;

/// The template `RunInstances` launches from: the named one, or the fake's own for the image.
async fn template(world: &World, p: &Params, rid: &str) -> Result<String, Reply> {
    let cloud = &world.account.cloud;
    let named = p.nested("LaunchTemplate");
    if let Some(name) = named.get("LaunchTemplateName") {
        let found = cloud
            .describe_launch_templates(&[Filter::new("launch-template-name", &[name])])
            .await
            .map_err(|e| seam_error(&e, rid))?;
        return match found.is_empty() {
            true => Err(template_not_found(name, rid)),
            false => Ok(name.to_string()),
        };
    }
    if let Some(id) = named.get("LaunchTemplateId") {
        let found = cloud
            .describe_launch_templates(&[Filter::new("launch-template-id", &[id])])
            .await
            .map_err(|e| seam_error(&e, rid))?;
        return found
            .into_iter()
            .next()
            .map(|t| t.launch_template_name)
            .ok_or_else(|| {
                error(
                    400,
                    "InvalidLaunchTemplateId.NotFound",
                    &format!("The launch template ID '{id}' does not exist"),
                    rid,
                )
            });
    }
    let Some(image) = p.get("ImageId") else {
        return Err(error(
            400,
            "MissingParameter",
            "The request must contain the parameter ImageId",
            rid,
        ));
    };
    let user_data = p.get("UserData").unwrap_or_default();
    let hash =
        karpenter_core::catalog::builtin::fnv1a64(format!("{image}\n{user_data}").as_bytes());
    let name = format!("fakecloud-run-instances/{hash:016x}");
    let request = LaunchTemplateRequest {
        name: name.clone(),
        image_id: image.to_string(),
        user_data: user_data.to_string(),
        security_group_ids: p.list("SecurityGroupId"),
        instance_profile: p
            .get("IamInstanceProfile.Name")
            .unwrap_or_default()
            .to_string(),
        tags: BTreeMap::new(),
        extra: BTreeMap::new(),
    };
    match cloud.create_launch_template(&request).await {
        Ok(_) => {
            world.remember_template(&name, image);
            Ok(name)
        }
        Err(Ec2Error::InvalidRequest { code, .. }) if code.ends_with("AlreadyExistsException") => {
            Ok(name)
        }
        Err(e) => Err(seam_error(&e, rid)),
    }
}

pub async fn run_instances(world: &World, p: &Params, rid: &str) -> Reply {
    let cloud = &world.account.cloud;
    let (min, max) = (
        p.int("MinCount").unwrap_or(0),
        p.int("MaxCount").unwrap_or(0),
    );
    if min < 1 || max < min {
        return error(
            400,
            "InvalidParameterValue",
            "MinCount and MaxCount must be at least 1, and MinCount at most MaxCount",
            rid,
        );
    }
    let Some(instance_type) = p.get("InstanceType") else {
        return error(
            400,
            "MissingParameter",
            "The request must contain the parameter InstanceType",
            rid,
        );
    };
    let subnets = match cloud.describe_subnets(&[]).await {
        Ok(s) => s,
        Err(e) => return seam_error(&e, rid),
    };
    let subnet = match p.get("SubnetId") {
        Some(id) => match subnets.iter().find(|s| s.subnet_id == id) {
            Some(s) => s.clone(),
            None => {
                return error(
                    400,
                    "InvalidSubnetID.NotFound",
                    &format!("The subnet ID '{id}' does not exist"),
                    rid,
                );
            }
        },
        None => match subnets.first() {
            Some(s) => s.clone(),
            None => {
                return error(
                    400,
                    "MissingInput",
                    "No subnets found for the default VPC",
                    rid,
                );
            }
        },
    };
    let template = match template(world, p, rid).await {
        Ok(t) => t,
        Err(reply) => return reply,
    };
    if p.flag("DryRun") {
        return dry_run(rid);
    }
    let capacity_type = match p.get("InstanceMarketOptions.MarketType") {
        Some("spot") => CapacityType::Spot,
        _ => CapacityType::OnDemand,
    };
    let mut tags = BTreeMap::new();
    for spec in p.members("TagSpecification") {
        if spec.get("ResourceType") == Some("instance") {
            tags.extend(spec.tags("Tag"));
        }
    }
    let token = p.get("ClientToken").unwrap_or_default();
    let mut launched = Vec::new();
    for n in 0..max.min(RUN_COUNT_MAX) {
        let request = CreateFleetRequest {
            capacity_block: false,
            capacity_type,
            launch_template_name: template.clone(),
            overrides: vec![FleetOverride {
                instance_type: instance_type.to_string(),
                subnet_id: subnet.subnet_id.clone(),
                zone: subnet.zone.clone(),
                price: None,
            }],
            tags: tags.clone(),
            client_token: if token.is_empty() {
                String::new()
            } else {
                format!("{token}#{n}")
            },
            context: None,
        };
        match cloud.create_fleet(&request).await {
            Ok(response) if !response.instances.is_empty() => launched.extend(response.instances),
            Ok(response) => {
                if (launched.len() as i64) >= min {
                    break;
                }
                let e = response.errors.first();
                let code = e.map_or("InsufficientInstanceCapacity", |e| e.code.as_str());
                let message = e.map_or("Insufficient capacity.", |e| e.message.as_str());
                let status = if code == "InsufficientInstanceCapacity" {
                    500
                } else {
                    400
                };
                return error(status, code, message, rid);
            }
            Err(e) => return seam_error(&e, rid),
        }
    }
    let instances: Vec<_> = launched
        .iter()
        .filter_map(|i| cloud.instance(&i.instance_id))
        .collect();
    let account = &world.account;
    answer("RunInstances", rid, |x| {
        x.leaf("reservationId", world.hex_id("r"))
            .leaf("ownerId", account.account_id())
            .open("groupSet")
            .close("groupSet")
            .items("instancesSet", &instances, |x, i| {
                instance_xml(x, account, i)
            });
    })
}
