//! `CreateLaunchTemplate`'s `LaunchTemplateData` from the seam's request: the image, user data,
//! security groups and instance profile, plus every `extra` setting the launch path writes
//! (`karpenter_core::nodeclass::launchtemplate::LaunchTemplateData::extra`): block devices,
//! metadata options, monitoring, a public IP, the capacity-reservation preference or target and
//! the market type. A setting this adapter does not know is an error, never dropped: a launch
//! template without a setting the EC2NodeClass asked for would launch the wrong node.

use aws_sdk_ec2::types::{
    self as ec2t, CapacityReservationPreference, CapacityReservationTarget,
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceMetadataTagsState,
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, LaunchTemplatesMonitoringRequest,
    MarketType, RequestLaunchTemplateData,
};
use karpenter_core::api::ec2nodeclass::BlockDeviceMapping;
use karpenter_core::resources::{EPHEMERAL_STORAGE, parse_quantity};
use karpenter_core::seams::ec2::{Ec2Error, LaunchTemplateRequest};
use serde_json::Value;

const GIB: i64 = 1 << 30;

fn invalid(key: &str, why: impl std::fmt::Display) -> Ec2Error {
    Ec2Error::InvalidRequest {
        code: "InvalidParameterValue".into(),
        message: format!("launch template setting {key:?}: {why}"),
    }
}

fn json(key: &str, text: &str) -> Result<Value, Ec2Error> {
    serde_json::from_str(text).map_err(|e| invalid(key, e))
}

fn text(v: &Value) -> Option<&str> {
    v.as_str()
}

/// A `volumeSize` quantity (`20Gi`, `100G`) as whole GiB, rounded up (EC2 takes GiB).
pub fn volume_gib(size: &str) -> Result<i32, String> {
    let bytes = parse_quantity(EPHEMERAL_STORAGE, size).map_err(|e| e.to_string())?;
    i32::try_from((bytes + GIB - 1) / GIB).map_err(|e| e.to_string())
}

fn block_devices(text: &str) -> Result<Vec<LaunchTemplateBlockDeviceMappingRequest>, Ec2Error> {
    let key = "blockDeviceMappings";
    let mappings: Vec<BlockDeviceMapping> =
        serde_json::from_str(text).map_err(|e| invalid(key, e))?;
    mappings
        .iter()
        .map(|m| {
            let ebs = match &m.ebs {
                Some(ebs) => Some(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .set_encrypted(ebs.encrypted)
                        .set_delete_on_termination(ebs.delete_on_termination)
                        .set_iops(ebs.iops.and_then(|i| i32::try_from(i).ok()))
                        .set_throughput(ebs.throughput.and_then(|t| i32::try_from(t).ok()))
                        .set_kms_key_id(ebs.kms_key_id.clone())
                        .set_snapshot_id(ebs.snapshot_id.clone())
                        .set_volume_initialization_rate(ebs.volume_initialization_rate)
                        .set_volume_size(
                            ebs.volume_size
                                .as_deref()
                                .map(volume_gib)
                                .transpose()
                                .map_err(|e| invalid(key, e))?,
                        )
                        .set_volume_type(
                            ebs.volume_type
                                .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
                                .as_ref()
                                .and_then(Value::as_str)
                                .map(ec2t::VolumeType::from),
                        )
                        .build(),
                ),
                None => None,
            };
            Ok(LaunchTemplateBlockDeviceMappingRequest::builder()
                .set_device_name(m.device_name.clone())
                .set_ebs(ebs)
                .build())
        })
        .collect()
}

fn metadata_options(v: &Value) -> LaunchTemplateInstanceMetadataOptionsRequest {
    LaunchTemplateInstanceMetadataOptionsRequest::builder()
        .set_http_endpoint(
            text(&v["httpEndpoint"]).map(LaunchTemplateInstanceMetadataEndpointState::from),
        )
        .set_http_protocol_ipv6(
            text(&v["httpProtocolIPv6"]).map(LaunchTemplateInstanceMetadataProtocolIpv6::from),
        )
        .set_http_put_response_hop_limit(
            v["httpPutResponseHopLimit"]
                .as_i64()
                .and_then(|h| i32::try_from(h).ok()),
        )
        .set_http_tokens(text(&v["httpTokens"]).map(LaunchTemplateHttpTokensState::from))
        .set_instance_metadata_tags(
            text(&v["instanceMetadataTags"]).map(LaunchTemplateInstanceMetadataTagsState::from),
        )
        .build()
}

fn capacity_reservation(v: &Value) -> LaunchTemplateCapacityReservationSpecificationRequest {
    let target = text(&v["capacityReservationTarget"]["capacityReservationId"]).map(|id| {
        CapacityReservationTarget::builder()
            .capacity_reservation_id(id)
            .build()
    });
    LaunchTemplateCapacityReservationSpecificationRequest::builder()
        .set_capacity_reservation_preference(
            text(&v["capacityReservationPreference"]).map(CapacityReservationPreference::from),
        )
        .set_capacity_reservation_target(target)
        .build()
}

/// The `LaunchTemplateData` of `request`.
pub fn launch_template_data(
    request: &LaunchTemplateRequest,
) -> Result<RequestLaunchTemplateData, Ec2Error> {
    let mut data = RequestLaunchTemplateData::builder()
        .image_id(&request.image_id)
        .user_data(aws_smithy_types::base64::encode(&request.user_data))
        .set_iam_instance_profile(
            Some(request.instance_profile.clone())
                .filter(|p| !p.is_empty())
                .map(|name| {
                    LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                        .name(name)
                        .build()
                }),
        );
    let mut public_ip = None;
    for (key, value) in &request.extra {
        data = match key.as_str() {
            "blockDeviceMappings" => data.set_block_device_mappings(Some(block_devices(value)?)),
            "metadataOptions" => data.metadata_options(metadata_options(&json(key, value)?)),
            "monitoring" => data.monitoring(
                LaunchTemplatesMonitoringRequest::builder()
                    .set_enabled(json(key, value)?["enabled"].as_bool())
                    .build(),
            ),
            "associatePublicIPAddress" => {
                public_ip = Some(value.parse::<bool>().map_err(|e| invalid(key, e))?);
                data
            }
            "capacityReservationSpecification" => {
                data.capacity_reservation_specification(capacity_reservation(&json(key, value)?))
            }
            "instanceMarketOptions" => data.instance_market_options(
                LaunchTemplateInstanceMarketOptionsRequest::builder()
                    .set_market_type(text(&json(key, value)?["marketType"]).map(MarketType::from))
                    .build(),
            ),
            _ => return Err(invalid(key, "not carried to EC2 by this adapter")),
        };
    }
    // A public IP is a network-interface setting; EC2 then takes the security groups there
    // (and refuses them at the top level too).
    data = match public_ip {
        Some(public) => data.network_interfaces(
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .associate_public_ip_address(public)
                .set_groups(Some(request.security_group_ids.clone()))
                .build(),
        ),
        None => data.set_security_group_ids(Some(request.security_group_ids.clone())),
    };
    Ok(data.build())
}
