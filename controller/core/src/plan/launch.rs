//! `karpenter plan --show-launch`: what launching each planned NodeClaim would send EC2, without
//! a cloud. For every architecture among the claim's instance types, the launch template
//! Karpenter would create: AMI family, image (an `id` term as given; an alias or SSM parameter
//! shown by name, since resolving it needs the cloud), the decoded user data, block devices,
//! metadata options, tags and instance profile. Built by the launch path's own
//! [`crate::nodeclaim::template_data`], so the dry run cannot drift from the real launch.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::Cluster;
use crate::api::EC2NodeClass;
use crate::api::labels::{ARCH_LABEL, CAPACITY_TYPE_LABEL};
use crate::catalog::{CapacityType, Catalog};
use crate::nodeclass::cluster::ClusterInfo;
use crate::nodeclass::userdata;
use crate::provisioning::nodeclaim_for;
use crate::scheduling::PlannedClaim;

/// The launch templates of `planned` (one per architecture), or a JSON error object when its
/// NodePool or EC2NodeClass is missing or its user data cannot be built.
pub fn launch_templates(
    cluster: &Cluster,
    catalog: &Catalog,
    info: &ClusterInfo,
    planned: &PlannedClaim,
) -> Vec<Value> {
    let Some(pool) = cluster
        .node_pools
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(planned.node_pool.as_str()))
    else {
        return vec![json!({"error": format!("NodePool {} not in the input", planned.node_pool)})];
    };
    let class_name = &pool.spec.template.spec.node_class_ref.name;
    let Some(class) = cluster
        .node_classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()))
    else {
        return vec![json!({"error": format!("EC2NodeClass {class_name} not in the input")})];
    };
    let claim = nodeclaim_for(pool, planned);
    let capacity_type = capacity_type(planned);
    let family = userdata::family(class);
    architectures(planned, catalog)
        .into_iter()
        .map(|arch| {
            let image = image(class);
            match crate::nodeclaim::template_data(
                info,
                &claim,
                class,
                &image,
                capacity_type,
                Vec::new(),
            ) {
                Ok(data) => json!({
                    "name": data.name(),
                    "amiFamily": family,
                    "architecture": arch,
                    "imageId": image,
                    "userData": data.user_data,
                    "blockDeviceMappings": data.block_device_mappings,
                    "metadataOptions": data.metadata_options,
                    "associatePublicIPAddress": data.associate_public_ip_address,
                    "detailedMonitoring": data.detailed_monitoring,
                    "tags": data.tags,
                    "instanceProfile": data.instance_profile,
                }),
                Err(err) => json!({"architecture": arch, "error": err.to_string()}),
            }
        })
        .collect()
}

/// The capacity type a launch would pick: spot when the claim allows it, else on-demand.
fn capacity_type(planned: &PlannedClaim) -> CapacityType {
    let allowed = |ct: CapacityType| {
        planned
            .requirements
            .iter()
            .filter(|r| r.key == CAPACITY_TYPE_LABEL)
            .all(|r| r.values.iter().any(|v| v == ct.label()))
    };
    [CapacityType::Spot, CapacityType::OnDemand]
        .into_iter()
        .find(|ct| allowed(*ct))
        .unwrap_or(CapacityType::OnDemand)
}

/// The claim's instance types' architectures (`amd64`, `arm64`), sorted; `amd64` if unknown.
fn architectures(planned: &PlannedClaim, catalog: &Catalog) -> Vec<String> {
    let archs: BTreeSet<String> = planned
        .instance_types
        .iter()
        .filter_map(|name| catalog.get(name))
        .filter_map(|it| it.labels.get(ARCH_LABEL).cloned())
        .collect();
    if archs.is_empty() {
        vec!["amd64".to_string()]
    } else {
        archs.into_iter().collect()
    }
}

/// The image a term names without the cloud: the first `id` term, else `alias:NAME`,
/// `ssmParameter:NAME` or `name:NAME` of the first term.
fn image(class: &EC2NodeClass) -> String {
    let terms = &class.spec.ami_selector_terms;
    if let Some(id) = terms.iter().find_map(|t| t.id.clone()) {
        return id;
    }
    terms
        .iter()
        .find_map(|t| {
            t.alias
                .as_ref()
                .map(|a| format!("alias:{a}"))
                .or_else(|| {
                    t.ssm_parameter
                        .as_ref()
                        .map(|p| format!("ssmParameter:{p}"))
                })
                .or_else(|| t.name.as_ref().map(|n| format!("name:{n}")))
        })
        .unwrap_or_default()
}
