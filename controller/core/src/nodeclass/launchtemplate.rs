//! The launch template an EC2NodeClass makes (upstream's `launchtemplate` provider), as data:
//! block devices (the class's, else the family's defaults), metadata options (the class's, else
//! IMDSv2 required with hop limit 1; instance tags in IMDS always disabled, because Karpenter's
//! `/` tag keys are invalid there), public IP, detailed monitoring, security groups, the instance
//! profile, user data and tags, named by a SHA-256 of all of it so that any change (a new role, a
//! new AMI, new user data) gets a new template and equal launches share one.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::api::EC2NodeClass;
use crate::api::ec2nodeclass::{
    AmiFamily, BlockDevice, BlockDeviceMapping, MetadataOptions, VolumeType,
};
use crate::api::labels::{EC2NODECLASS_TAG, NODECLAIM_TAG, NODEPOOL_LABEL};

/// The tag naming the cluster on every resource Karpenter creates.
pub const EKS_CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";

/// The contents of one launch template.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchTemplateData {
    pub image_id: String,
    pub instance_profile: String,
    pub security_group_ids: Vec<String>,
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    pub metadata_options: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    pub detailed_monitoring: bool,
    /// Decoded user data.
    pub user_data: String,
    pub tags: BTreeMap<String, String>,
    /// `CapacityReservationSpecification`: a reserved launch targets its reservation
    /// (`capacity-reservations-only`); every other launch opts out of open reservations
    /// (`none`), so spot and on-demand launches never take capacity reserved for others
    /// (upstream's targeted launch mode, on by default).
    pub capacity_reservation_specification: Value,
    /// `InstanceMarketOptions` of a launch into a capacity block or an interruptible
    /// reservation, which EC2 requires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_market_options: Option<Value>,
}

impl LaunchTemplateData {
    /// `karpenter.k8s.aws/<sha256 of the content>`: stable across runs and processes.
    pub fn name(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&bytes);
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("karpenter.k8s.aws/{hex}")
    }

    /// The fields `LaunchTemplateRequest::extra` carries, as JSON text by field name.
    pub fn extra(&self) -> BTreeMap<String, String> {
        let mut extra = BTreeMap::from([
            (
                "blockDeviceMappings".to_string(),
                json!(self.block_device_mappings).to_string(),
            ),
            (
                "metadataOptions".to_string(),
                self.metadata_options.to_string(),
            ),
            (
                "monitoring".to_string(),
                json!({"enabled": self.detailed_monitoring}).to_string(),
            ),
        ]);
        if let Some(public) = self.associate_public_ip_address {
            extra.insert("associatePublicIPAddress".into(), public.to_string());
        }
        extra.insert(
            "capacityReservationSpecification".into(),
            self.capacity_reservation_specification.to_string(),
        );
        if let Some(market) = &self.instance_market_options {
            extra.insert("instanceMarketOptions".into(), market.to_string());
        }
        extra
    }
}

fn ebs(device: &str, size: &str) -> BlockDeviceMapping {
    BlockDeviceMapping {
        device_name: Some(device.into()),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_size: Some(size.into()),
            volume_type: Some(VolumeType::Gp3),
            ..Default::default()
        }),
        root_volume: None,
    }
}

/// The family's block devices when the class names none: AL2/AL2023 `/dev/xvda` 20Gi,
/// Bottlerocket `/dev/xvda` 4Gi (OS) and `/dev/xvdb` 20Gi (data), Windows `/dev/sda1` 50Gi,
/// Custom none (the AMI's own). All gp3 and encrypted.
pub fn default_block_devices(family: AmiFamily) -> Vec<BlockDeviceMapping> {
    match family {
        AmiFamily::AL2 | AmiFamily::AL2023 => vec![ebs("/dev/xvda", "20Gi")],
        AmiFamily::Bottlerocket => vec![ebs("/dev/xvda", "4Gi"), ebs("/dev/xvdb", "20Gi")],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            vec![ebs("/dev/sda1", "50Gi")]
        }
        AmiFamily::Custom => Vec::new(),
    }
}

/// The metadata options: the class's, else IMDSv2 required, hop limit 1; tags never in IMDS.
pub fn metadata_options(class: &EC2NodeClass) -> Value {
    let options = class.spec.metadata_options.clone().unwrap_or_default();
    let mut value = serde_json::to_value(&options).unwrap_or_else(|_| {
        serde_json::to_value(MetadataOptions::default()).unwrap_or(Value::Null)
    });
    value["instanceMetadataTags"] = json!("disabled");
    value
}

/// The tags upstream puts on instances, volumes, network interfaces and launch templates: the
/// class's own, overridden by Karpenter's (`kubernetes.io/cluster/NAME=owned`,
/// `eks:eks-cluster-name`, `karpenter.sh/nodepool`, `karpenter.k8s.aws/ec2nodeclass`). Tag keys
/// the API forbids users (those four and `karpenter.sh/nodeclaim`) are dropped from the class's.
pub fn tags(class: &EC2NodeClass, cluster: &str, nodepool: &str) -> BTreeMap<String, String> {
    let mut tags: BTreeMap<String, String> = class
        .spec
        .tags
        .iter()
        .filter(|(k, _)| {
            !k.starts_with("kubernetes.io/cluster")
                && ![
                    EKS_CLUSTER_NAME_TAG,
                    NODEPOOL_LABEL,
                    NODECLAIM_TAG,
                    EC2NODECLASS_TAG,
                ]
                .contains(&k.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    tags.insert(EKS_CLUSTER_NAME_TAG.into(), cluster.into());
    tags.insert(NODEPOOL_LABEL.into(), nodepool.into());
    tags.insert(
        EC2NODECLASS_TAG.into(),
        class.metadata.name.clone().unwrap_or_default(),
    );
    tags
}

/// The tags the tagging controller adds once the node registered: `Name` (the node's name) and
/// `karpenter.sh/nodeclaim`.
pub fn registered_tags(node: &str, claim: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("Name".to_string(), node.to_string()),
        (NODECLAIM_TAG.to_string(), claim.to_string()),
    ])
}

/// The launch template of `class` for one AMI and user data.
pub fn build(
    class: &EC2NodeClass,
    family: AmiFamily,
    image_id: &str,
    security_group_ids: Vec<String>,
    user_data: String,
    tags: BTreeMap<String, String>,
) -> LaunchTemplateData {
    let block_device_mappings = match &class.spec.block_device_mappings {
        Some(mappings) if !mappings.is_empty() => mappings.clone(),
        _ => default_block_devices(family),
    };
    LaunchTemplateData {
        image_id: image_id.into(),
        instance_profile: class
            .status
            .as_ref()
            .and_then(|s| s.instance_profile.clone())
            .or_else(|| class.spec.instance_profile.clone())
            .unwrap_or_default(),
        security_group_ids,
        block_device_mappings,
        metadata_options: metadata_options(class),
        associate_public_ip_address: class.spec.associate_public_ip_address,
        detailed_monitoring: class.spec.detailed_monitoring.unwrap_or(false),
        user_data,
        tags,
        capacity_reservation_specification: json!({"capacityReservationPreference": "none"}),
        instance_market_options: None,
    }
}

/// `data` launching into `reservation`: targeted, with the market type a capacity block or an
/// interruptible reservation needs.
pub fn into_reservation(
    mut data: LaunchTemplateData,
    reservation: &crate::catalog::Reservation,
) -> LaunchTemplateData {
    data.capacity_reservation_specification = json!({
        "capacityReservationPreference": "capacity-reservations-only",
        "capacityReservationTarget": {"capacityReservationId": reservation.id},
    });
    data.instance_market_options = match (reservation.kind, reservation.interruptible) {
        (crate::api::ec2nodeclass::ReservationType::CapacityBlock, _) => {
            Some(json!({"marketType": "capacity-block"}))
        }
        (_, true) => Some(json!({"marketType": "interruptible-capacity-reservation"})),
        _ => None,
    };
    data
}
