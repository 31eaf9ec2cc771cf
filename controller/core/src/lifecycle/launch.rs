//! Launching a NodeClaim on EC2: resolve the EC2NodeClass (subnets, security groups, AMI), make
//! a launch template, and CreateFleet across the claim's instance types × one subnet per zone.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;

use super::ice::{ICE_TTL, UnavailableOfferings};
use crate::api::ec2nodeclass::{AmiFamily, AmiSelectorTerm};
use crate::api::labels::{
    ARCH_LABEL, CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, ZONE_LABEL,
};
use crate::api::{EC2NodeClass, NodeClaim, Operator};
use crate::catalog::{CapacityType, Catalog, InstanceType};
use crate::resources::Resources;
use crate::scheduling::Requirements;
use crate::seams::Ec2;
use crate::seams::ec2::{
    CreateFleetRequest, Ec2Error, Filter, FleetOverride, LaunchTemplateRequest,
};

/// Most instance types offered to one CreateFleet (upstream's `maxInstanceTypes`).
pub const FLEET_INSTANCE_TYPES_MAX: usize = 60;

/// EC2 error codes that mean "no capacity for this offering" (upstream's list).
pub const ICE_CODES: [&str; 7] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
];

/// What a launch produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: CapacityType,
    pub image_id: String,
}

impl Launched {
    /// `aws:///<zone>/<instance-id>`, as the AWS cloud provider writes it.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.zone, self.instance_id)
    }
}

/// Why a launch did not produce an instance.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Nothing left to try: every offering is out of capacity (the claim is deleted and the next
    /// provisioning pass falls back to other offerings).
    #[error("insufficient capacity: {0}")]
    InsufficientCapacity(String),
    /// The EC2NodeClass cannot be resolved (no subnets, no AMI...): surfaced as a condition.
    #[error("node class not resolvable: {0}")]
    NodeClass(String),
    /// An EC2 call failed; retried by the next reconcile.
    #[error("ec2: {0}")]
    Ec2(#[from] Ec2Error),
}

/// What the launch path needs besides the claim.
pub struct LaunchContext<'a> {
    pub ec2: &'a dyn Ec2,
    pub catalog: &'a Catalog,
    pub ice: &'a UnavailableOfferings,
    pub now: Timestamp,
    pub cluster_name: &'a str,
    pub kubernetes_version: &'a str,
}

fn term_filters(
    tags: Option<&BTreeMap<String, String>>,
    id: Option<&String>,
    id_filter: &str,
) -> Vec<Filter> {
    let mut filters = Vec::new();
    if let Some(id) = id {
        filters.push(Filter::new(id_filter, &[id.as_str()]));
    }
    for (key, value) in tags.into_iter().flatten() {
        filters.push(Filter::new(format!("tag:{key}"), &[value.as_str()]));
    }
    filters
}

/// The claim's candidate instance types, in the claim's (price) order: listed by its
/// instance-type requirement, compatible with its other requirements, large enough for its
/// requests.
fn candidates<'c>(claim: &NodeClaim, catalog: &'c Catalog) -> Vec<&'c InstanceType> {
    let reqs = Requirements::from_api(&claim.spec.requirements);
    let requests = claim
        .spec
        .resources
        .as_ref()
        .map(|r| Resources::from_list(&r.requests).unwrap_or_default())
        .unwrap_or_default();
    let listed: Vec<&InstanceType> = match reqs
        .get(INSTANCE_TYPE_LABEL)
        .filter(|r| r.operator() == Operator::In)
    {
        Some(r) => r.values().filter_map(|name| catalog.get(name)).collect(),
        None => catalog.instance_types.iter().collect(),
    };
    listed
        .into_iter()
        .filter(|it| {
            reqs.iter().all(|(key, req)| {
                key == ZONE_LABEL
                    || key == CAPACITY_TYPE_LABEL
                    || it.labels.get(key).is_none_or(|v| req.has(v))
            })
        })
        .filter(|it| requests.fits_in(&it.allocatable))
        .collect()
}

/// Resolves the EC2NodeClass and launches one instance for `claim`.
pub async fn launch(
    ctx: &LaunchContext<'_>,
    claim: &NodeClaim,
    class: &EC2NodeClass,
) -> Result<Launched, LaunchError> {
    let reqs = Requirements::from_api(&claim.spec.requirements);
    let zone_ok = |z: &str| reqs.get(ZONE_LABEL).is_none_or(|r| r.has(z));
    let ct_ok = |c: CapacityType| {
        reqs.get(CAPACITY_TYPE_LABEL)
            .is_none_or(|r| r.has(c.label()))
    };
    let types = candidates(claim, ctx.catalog);
    if types.is_empty() {
        return Err(LaunchError::InsufficientCapacity(
            "no instance type of the claim fits its requests".into(),
        ));
    }

    // Subnets: the one with the most free addresses per allowed zone.
    let mut subnets = BTreeMap::new();
    for term in &class.spec.subnet_selector_terms {
        for subnet in ctx
            .ec2
            .describe_subnets(&term_filters(
                term.tags.as_ref(),
                term.id.as_ref(),
                "subnet-id",
            ))
            .await?
        {
            if !zone_ok(&subnet.zone) {
                continue;
            }
            let best = subnets
                .entry(subnet.zone.clone())
                .or_insert_with(|| subnet.clone());
            if subnet.available_ip_address_count > best.available_ip_address_count {
                *best = subnet;
            }
        }
    }
    if subnets.is_empty() {
        return Err(LaunchError::NodeClass(
            "no subnet matches subnetSelectorTerms in an allowed zone".into(),
        ));
    }
    let mut security_groups = BTreeSet::new();
    for term in &class.spec.security_group_selector_terms {
        let mut filters = term_filters(term.tags.as_ref(), term.id.as_ref(), "group-id");
        if let Some(name) = &term.name {
            filters.push(Filter::new("group-name", &[name.as_str()]));
        }
        security_groups.extend(
            ctx.ec2
                .describe_security_groups(&filters)
                .await?
                .into_iter()
                .map(|g| g.group_id),
        );
    }
    if security_groups.is_empty() {
        return Err(LaunchError::NodeClass(
            "no security group matches securityGroupSelectorTerms".into(),
        ));
    }

    // Capacity type: spot when allowed and some spot offering is left, else on-demand.
    let available = |it: &InstanceType, zone: &str, ct: CapacityType| {
        it.offerings
            .iter()
            .any(|o| o.zone == zone && o.capacity_type == ct && o.available)
            && !ctx.ice.is_unavailable(&it.name, zone, ct, ctx.now)
    };
    let capacity_type = [CapacityType::Spot, CapacityType::OnDemand]
        .into_iter()
        .filter(|ct| ct_ok(*ct))
        .find(|ct| {
            types
                .iter()
                .any(|it| subnets.keys().any(|z| available(it, z, *ct)))
        })
        .ok_or_else(|| {
            LaunchError::InsufficientCapacity("every offering of the claim is unavailable".into())
        })?;

    // One architecture per launch (its AMI is in the launch template): the cheapest type's.
    let arch = types[0]
        .labels
        .get(ARCH_LABEL)
        .cloned()
        .unwrap_or_else(|| "amd64".into());
    let types: Vec<&InstanceType> = types
        .into_iter()
        .filter(|it| it.labels.get(ARCH_LABEL).is_none_or(|a| *a == arch))
        .take(FLEET_INSTANCE_TYPES_MAX)
        .collect();
    let image_id = resolve_ami(ctx, class, &arch).await?;

    let mut overrides = Vec::new();
    for it in &types {
        for (zone, subnet) in &subnets {
            if available(it, zone, capacity_type) {
                let price = it
                    .offerings
                    .iter()
                    .find(|o| &o.zone == zone && o.capacity_type == capacity_type)
                    .map(|o| o.price);
                overrides.push(FleetOverride {
                    instance_type: it.name.clone(),
                    subnet_id: subnet.subnet_id.clone(),
                    zone: zone.clone(),
                    price,
                });
            }
        }
    }
    if overrides.is_empty() {
        return Err(LaunchError::InsufficientCapacity(
            "no available offering in the selected subnets".into(),
        ));
    }

    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let pool = claim
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NODEPOOL_LABEL))
        .cloned()
        .unwrap_or_default();
    let class_name = class.metadata.name.clone().unwrap_or_default();
    let mut tags = class.spec.tags.clone();
    tags.insert(
        format!("kubernetes.io/cluster/{}", ctx.cluster_name),
        "owned".into(),
    );
    tags.insert("eks:eks-cluster-name".into(), ctx.cluster_name.to_string());
    tags.insert(NODEPOOL_LABEL.into(), pool);
    tags.insert("karpenter.k8s.aws/ec2nodeclass".into(), class_name.clone());
    // Tagging the claim at launch (upstream adds it after registration) lets a restarted
    // controller adopt an instance launched just before a crash instead of leaking it.
    tags.insert("karpenter.sh/nodeclaim".into(), claim_name.clone());

    let user_data = user_data(claim, ctx.cluster_name, class);
    let template_name = format!(
        "karpenter.k8s.aws/{}",
        fingerprint(&[
            &image_id,
            &user_data,
            &security_groups
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(",")
        ])
    );
    let template = LaunchTemplateRequest {
        name: template_name.clone(),
        image_id: image_id.clone(),
        user_data,
        security_group_ids: security_groups.into_iter().collect(),
        instance_profile: class
            .spec
            .instance_profile
            .clone()
            .or_else(|| class.spec.role.clone())
            .unwrap_or_default(),
        tags: tags.clone(),
        extra: BTreeMap::new(),
    };
    match ctx.ec2.create_launch_template(&template).await {
        Ok(_) => {}
        Err(Ec2Error::InvalidRequest { code, .. }) if code.contains("AlreadyExists") => {}
        Err(err) => return Err(err.into()),
    }
    let response = ctx
        .ec2
        .create_fleet(&CreateFleetRequest {
            capacity_type,
            launch_template_name: template_name,
            overrides,
            tags,
            client_token: claim.metadata.uid.clone().unwrap_or(claim_name),
            context: class.spec.context.clone(),
        })
        .await?;
    for error in &response.errors {
        if ICE_CODES.contains(&error.code.as_str())
            && let (Some(it), Some(zone)) = (&error.instance_type, &error.zone)
        {
            ctx.ice.mark(it, zone, capacity_type, ctx.now, ICE_TTL);
        }
    }
    match response.instances.into_iter().next() {
        Some(instance) => Ok(Launched {
            instance_id: instance.instance_id,
            instance_type: instance.instance_type,
            zone: instance.zone,
            capacity_type: instance.capacity_type,
            image_id,
        }),
        None => {
            let codes: BTreeSet<&str> = response.errors.iter().map(|e| e.code.as_str()).collect();
            Err(LaunchError::InsufficientCapacity(format!(
                "CreateFleet launched nothing ({})",
                codes.into_iter().collect::<Vec<_>>().join(", ")
            )))
        }
    }
}

/// The AMI for `arch` (`amd64`/`arm64`): an alias through its public SSM parameter, an id as is,
/// other terms through DescribeImages (newest non-deprecated wins).
async fn resolve_ami(
    ctx: &LaunchContext<'_>,
    class: &EC2NodeClass,
    arch: &str,
) -> Result<String, LaunchError> {
    let ec2_arch = if arch == "arm64" { "arm64" } else { "x86_64" };
    for term in &class.spec.ami_selector_terms {
        if let Some(alias) = &term.alias {
            let (family, version) = alias.split_once('@').unwrap_or((alias.as_str(), "latest"));
            let k8s = ctx.kubernetes_version;
            let parameter = match AmiFamily::from_alias_family(family) {
                Some(AmiFamily::AL2023) => {
                    let leaf = if version == "latest" {
                        "recommended".to_string()
                    } else {
                        format!("amazon-eks-node-al2023-{ec2_arch}-standard-{k8s}-{version}")
                    };
                    format!(
                        "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/standard/{leaf}/image_id"
                    )
                }
                Some(AmiFamily::AL2) => {
                    let path = if arch == "arm64" {
                        "amazon-linux-2-arm64"
                    } else {
                        "amazon-linux-2"
                    };
                    let prefix = if arch == "arm64" {
                        "amazon-eks-arm64-node"
                    } else {
                        "amazon-eks-node"
                    };
                    let leaf = if version == "latest" {
                        "recommended".to_string()
                    } else {
                        format!("{prefix}-{k8s}-{version}")
                    };
                    format!("/aws/service/eks/optimized-ami/{k8s}/{path}/{leaf}/image_id")
                }
                Some(AmiFamily::Bottlerocket) => {
                    let version = if version == "latest" {
                        "latest".to_string()
                    } else {
                        version.trim_start_matches('v').to_string()
                    };
                    format!("/aws/service/bottlerocket/aws-k8s-{k8s}/{ec2_arch}/{version}/image_id")
                }
                _ => {
                    return Err(LaunchError::NodeClass(format!(
                        "alias {alias} is not supported for launches"
                    )));
                }
            };
            return match ctx.ec2.get_parameter(&parameter).await? {
                Some(id) => Ok(id),
                None => Err(LaunchError::NodeClass(format!(
                    "alias {alias}: no AMI published at {parameter}"
                ))),
            };
        }
        if let Some(id) = &term.id {
            return Ok(id.clone());
        }
    }
    let mut newest: Option<crate::seams::ec2::Image> = None;
    for term in &class.spec.ami_selector_terms {
        for image in ctx.ec2.describe_images(&image_query(term)).await? {
            if image.deprecated || image.architecture != ec2_arch {
                continue;
            }
            if newest
                .as_ref()
                .is_none_or(|n| image.creation_date > n.creation_date)
            {
                newest = Some(image);
            }
        }
    }
    newest
        .map(|i| i.image_id)
        .ok_or_else(|| LaunchError::NodeClass("no AMI matches amiSelectorTerms".into()))
}

fn image_query(term: &AmiSelectorTerm) -> crate::seams::ec2::ImageQuery {
    let mut query = crate::seams::ec2::ImageQuery::default();
    if let Some(name) = &term.name {
        query.filters.push(Filter::new("name", &[name.as_str()]));
        query.owners = term
            .owner
            .clone()
            .map(|o| o.split(',').map(str::to_string).collect())
            .unwrap_or_else(|| vec!["self".into(), "amazon".into()]);
    }
    for (key, value) in term.tags.iter().flatten() {
        query
            .filters
            .push(Filter::new(format!("tag:{key}"), &[value.as_str()]));
    }
    query
}

/// Bootstrap user data: the kubelet registers with the claim's labels, its taints plus the
/// `karpenter.sh/unregistered` taint, and its startup taints (nodeadm-style flags; the user's
/// own user data is appended).
fn user_data(claim: &NodeClaim, cluster: &str, class: &EC2NodeClass) -> String {
    let labels: Vec<String> = claim
        .metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut taints: Vec<String> = claim
        .spec
        .taints
        .iter()
        .chain(&claim.spec.startup_taints)
        .map(|t| {
            format!(
                "{}={}:{}",
                t.key,
                t.value.clone().unwrap_or_default(),
                crate::scheduling::pod::effect_name(t.effect)
            )
        })
        .collect();
    taints.push(format!(
        "{}=:NoExecute",
        crate::api::labels::UNREGISTERED_TAINT_KEY
    ));
    let mut out = format!(
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: {cluster}\n  kubelet:\n    flags:\n      - --node-labels={}\n      - --register-with-taints={}\n",
        labels.join(","),
        taints.join(",")
    );
    if let Some(extra) = &class.spec.user_data {
        out.push_str("---\n");
        out.push_str(extra);
    }
    out
}

/// A short stable hash (FNV-1a) naming launch templates by their content.
fn fingerprint(parts: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}
