//! Resolving an EC2NodeClass's selector terms through EC2: the subnets (one per allowed zone),
//! the security groups and the AMI a launch uses.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::EC2NodeClass;
use crate::api::ec2nodeclass::{AmiFamily, AmiSelectorTerm};
use crate::seams::Ec2;
use crate::seams::ec2::{Ec2Error, Filter, Image, ImageQuery, Subnet};

/// Why a class could not be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Nothing matches the class's terms (no subnet, no AMI...): fixing the class fixes it.
    #[error("{0}")]
    Unresolvable(String),
    /// An EC2 call failed; a retry may help.
    #[error(transparent)]
    Ec2(#[from] Ec2Error),
}

/// The filters of one selector term: its id (as `id_filter`) and its tags.
pub(crate) fn term_filters(
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

/// The subnets of `subnetSelectorTerms` in zones `zone_allowed` accepts: per zone, the one with
/// the most free addresses (the first seen on a tie).
pub async fn subnets(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
    zone_allowed: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, Subnet>, ResolveError> {
    let mut subnets: BTreeMap<String, Subnet> = BTreeMap::new();
    for term in &class.spec.subnet_selector_terms {
        let filters = term_filters(term.tags.as_ref(), term.id.as_ref(), "subnet-id");
        for subnet in ec2.describe_subnets(&filters).await? {
            if !zone_allowed(&subnet.zone) {
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
        return Err(ResolveError::Unresolvable(
            "no subnet matches subnetSelectorTerms in an allowed zone".into(),
        ));
    }
    Ok(subnets)
}

/// The ids of the security groups `securityGroupSelectorTerms` select.
pub async fn security_groups(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
) -> Result<BTreeSet<String>, ResolveError> {
    let mut groups = BTreeSet::new();
    for term in &class.spec.security_group_selector_terms {
        let mut filters = term_filters(term.tags.as_ref(), term.id.as_ref(), "group-id");
        if let Some(name) = &term.name {
            filters.push(Filter::new("group-name", &[name.as_str()]));
        }
        groups.extend(
            ec2.describe_security_groups(&filters)
                .await?
                .into_iter()
                .map(|g| g.group_id),
        );
    }
    if groups.is_empty() {
        return Err(ResolveError::Unresolvable(
            "no security group matches securityGroupSelectorTerms".into(),
        ));
    }
    Ok(groups)
}

/// The AMI for `arch` (`amd64`/`arm64`): the first term that is an alias (through its public SSM
/// parameter for `kubernetes_version`) or an id (as is) decides; otherwise every term goes
/// through DescribeImages and the newest non-deprecated image of the architecture wins.
pub async fn image(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
    arch: &str,
    kubernetes_version: &str,
) -> Result<String, ResolveError> {
    let ec2_arch = if arch == "arm64" { "arm64" } else { "x86_64" };
    for term in &class.spec.ami_selector_terms {
        if let Some(alias) = &term.alias {
            let parameter = alias_parameter(alias, arch, kubernetes_version)?;
            return match ec2.get_parameter(&parameter).await? {
                Some(id) => Ok(id),
                None => Err(ResolveError::Unresolvable(format!(
                    "alias {alias}: no AMI published at {parameter}"
                ))),
            };
        }
        if let Some(id) = &term.id {
            return Ok(id.clone());
        }
    }
    let mut newest: Option<Image> = None;
    for term in &class.spec.ami_selector_terms {
        for image in ec2.describe_images(&image_query(term)).await? {
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
        .ok_or_else(|| ResolveError::Unresolvable("no AMI matches amiSelectorTerms".into()))
}

/// The public SSM parameter holding the AMI id of `alias` (`al2023@latest`, `al2@v20240807`,
/// `bottlerocket@1.20.0`) for `arch` and Kubernetes `k8s`.
fn alias_parameter(alias: &str, arch: &str, k8s: &str) -> Result<String, ResolveError> {
    let ec2_arch = if arch == "arm64" { "arm64" } else { "x86_64" };
    let (family, version) = alias.split_once('@').unwrap_or((alias, "latest"));
    let latest = version == "latest";
    match AmiFamily::from_alias_family(family) {
        Some(AmiFamily::AL2023) => {
            let leaf = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{ec2_arch}-standard-{k8s}-{version}")
            };
            Ok(format!(
                "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ec2_arch}/standard/{leaf}/image_id"
            ))
        }
        Some(AmiFamily::AL2) => {
            let (path, prefix) = if arch == "arm64" {
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node")
            } else {
                ("amazon-linux-2", "amazon-eks-node")
            };
            let leaf = if latest {
                "recommended".to_string()
            } else {
                format!("{prefix}-{k8s}-{version}")
            };
            Ok(format!(
                "/aws/service/eks/optimized-ami/{k8s}/{path}/{leaf}/image_id"
            ))
        }
        Some(AmiFamily::Bottlerocket) => {
            let version = if latest {
                "latest"
            } else {
                version.trim_start_matches('v')
            };
            Ok(format!(
                "/aws/service/bottlerocket/aws-k8s-{k8s}/{ec2_arch}/{version}/image_id"
            ))
        }
        Some(
            family @ (AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025),
        ) => {
            // EKS publishes Windows AMIs for x86_64 only; a Windows class's catalog holds amd64
            // types only, so this names a claim that should not exist.
            if arch != "amd64" {
                return Err(ResolveError::Unresolvable(format!(
                    "alias {alias}: no Windows AMI for {arch}"
                )));
            }
            super::ami::windows_parameter(family, k8s)
        }
        _ => Err(ResolveError::Unresolvable(format!(
            "alias {alias} is not supported for launches"
        ))),
    }
}

/// The DescribeImages query of one name/owner/tags term.
pub(crate) fn image_query(term: &AmiSelectorTerm) -> ImageQuery {
    let mut query = ImageQuery::default();
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
