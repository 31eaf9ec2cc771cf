//! Every AMI an EC2NodeClass's `amiSelectorTerms` select, as the class's `status.amis`: what
//! drift compares a NodeClaim's image with.
//!
//! - an `alias` (`al2023@latest`, `al2023@v20240807`, `bottlerocket@latest`, `al2@…`) reads the
//!   public SSM parameter of each architecture and variant of the family: `@latest` follows each
//!   new release, a pinned version never moves;
//! - `id` terms and the values of `ssmParameter` terms are looked up together through an
//!   `image-id` filter (an unknown id matches nothing; a missing parameter is skipped), to learn
//!   each image's architecture;
//! - `name`/`tags` terms go through DescribeImages; per architecture the newest non-deprecated
//!   image wins (upstream: the newest AMI per requirement set).
//!
//! Each entry carries the requirements that map instance types to it (`kubernetes.io/arch`,
//! and for accelerated variants the GPU or accelerator count).

use std::collections::BTreeMap;

use crate::api::EC2NodeClass;
use crate::api::ec2nodeclass::{AmiFamily, AmiRequirement, AmiStatus};
use crate::seams::Ec2;
use crate::seams::ec2::{Filter, Image, ImageQuery};

use super::ResolveError;

const ARCH_LABEL: &str = "kubernetes.io/arch";
const GPU_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-gpu-count";
const ACCELERATOR_COUNT_LABEL: &str = "karpenter.k8s.aws/instance-accelerator-count";
const OS_LABEL: &str = crate::api::labels::OS_LABEL;
const WINDOWS_BUILD_LABEL: &str = crate::api::labels::WINDOWS_BUILD_LABEL;

/// The accelerated variant of a published image, which decides its requirements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Standard,
    Nvidia,
    Neuron,
    /// A Windows image: `kubernetes.io/os` windows and its `node.kubernetes.io/windows-build`.
    Windows(&'static str),
}

/// One SSM parameter an alias reads, and what the image it names serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AliasParameter {
    pub name: String,
    arch: &'static str,
    variant: Variant,
}

/// The AMIs `class` selects, sorted by id (a stable status). Errors when none is found.
pub async fn resolve(
    ec2: &dyn Ec2,
    class: &EC2NodeClass,
    kubernetes_version: &str,
) -> Result<Vec<AmiStatus>, ResolveError> {
    let mut amis: BTreeMap<String, AmiStatus> = BTreeMap::new();
    let mut newest: BTreeMap<&'static str, Image> = BTreeMap::new();
    // Image ids named by `id` terms and by the `ssmParameter` terms' values: one lookup.
    let mut ids: Vec<String> = Vec::new();
    for term in &class.spec.ami_selector_terms {
        if let Some(alias) = &term.alias {
            for parameter in alias_parameters(alias, kubernetes_version)? {
                if let Some(id) = ec2.get_parameter(&parameter.name).await? {
                    let status = AmiStatus {
                        id: id.clone(),
                        name: None,
                        deprecated: None,
                        requirements: requirements(parameter.arch, parameter.variant),
                    };
                    amis.entry(id).or_insert(status);
                }
            }
            continue;
        }
        if let Some(id) = &term.id {
            ids.push(id.clone());
            continue;
        }
        if let Some(parameter) = &term.ssm_parameter {
            // Upstream skips a parameter that does not exist or does not name an image; the
            // class is unresolvable only when no term selects anything.
            match ec2.get_parameter(parameter).await? {
                Some(id) if id.starts_with("ami-") => ids.push(id),
                value => {
                    tracing::debug!(%parameter, ?value, "ssmParameter names no image; skipped");
                }
            }
            continue;
        }
        for image in ec2
            .describe_images(&super::resolve::image_query(term))
            .await?
        {
            let arch = arch_label(&image.architecture);
            if !image.deprecated
                && newest
                    .get(arch)
                    .is_none_or(|n| image.creation_date > n.creation_date)
            {
                newest.insert(arch, image);
            }
        }
    }
    if !ids.is_empty() {
        // An `image-id` filter, not `ImageIds`: EC2 fails the whole call on one malformed or
        // unknown id (InvalidAMIID.*), while a filter just matches nothing, as upstream relies on.
        ids.sort();
        ids.dedup();
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let query = ImageQuery {
            filters: vec![Filter::new("image-id", &ids)],
            ..ImageQuery::default()
        };
        for image in ec2.describe_images(&query).await? {
            let arch = arch_label(&image.architecture);
            amis.entry(image.image_id.clone())
                .or_insert_with(|| status_of(&image, arch));
        }
    }
    for (arch, image) in newest {
        amis.entry(image.image_id.clone())
            .or_insert_with(|| status_of(&image, arch));
    }
    if amis.is_empty() {
        return Err(ResolveError::Unresolvable(
            "no AMI matches amiSelectorTerms".into(),
        ));
    }
    Ok(amis.into_values().collect())
}

fn arch_label(ec2_arch: &str) -> &'static str {
    if ec2_arch == "arm64" {
        "arm64"
    } else {
        "amd64"
    }
}

fn status_of(image: &Image, arch: &'static str) -> AmiStatus {
    AmiStatus {
        id: image.image_id.clone(),
        name: Some(image.name.clone()).filter(|n| !n.is_empty()),
        deprecated: image.deprecated.then_some(true),
        requirements: requirements(arch, Variant::Standard),
    }
}

fn requirements(arch: &str, variant: Variant) -> Vec<AmiRequirement> {
    let requirement = |key: &str, operator: &str, values: &[&str]| AmiRequirement {
        key: key.to_string(),
        operator: operator.to_string(),
        values: values.iter().map(|v| v.to_string()).collect(),
    };
    let mut out = vec![requirement(ARCH_LABEL, "In", &[arch])];
    match variant {
        Variant::Standard => {}
        Variant::Nvidia => out.push(requirement(GPU_COUNT_LABEL, "Exists", &[])),
        Variant::Neuron => out.push(requirement(ACCELERATOR_COUNT_LABEL, "Exists", &[])),
        Variant::Windows(build) => {
            out.push(requirement(OS_LABEL, "In", &["windows"]));
            out.push(requirement(WINDOWS_BUILD_LABEL, "In", &[build]));
        }
    }
    out
}

/// The AMI of `amis` (a class's `status.amis`) an instance type with `labels` launches with, as
/// upstream maps its instance types to the class's AMIs: an image whose every requirement the
/// type's labels meet; among several, a non-deprecated one first, then the most specific (an
/// NVIDIA or Neuron variant, which adds a device requirement, over the standard image a GPU type
/// also meets), then the first listed. `None` when no image serves the type.
pub fn for_instance_type<'a>(
    amis: &'a [AmiStatus],
    labels: &BTreeMap<String, String>,
) -> Option<&'a AmiStatus> {
    amis.iter()
        .filter(|ami| ami.requirements.iter().all(|r| meets(r, labels)))
        .min_by_key(|ami| {
            (
                ami.deprecated == Some(true),
                std::cmp::Reverse(ami.requirements.len()),
            )
        })
}

/// Whether `labels` meet one AMI requirement (a label the type lacks meets only `NotIn` and
/// `DoesNotExist`; `Gt`/`Lt` compare integers, as node selectors do).
fn meets(requirement: &AmiRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&requirement.key);
    let number = |v: &str| v.parse::<i64>().ok();
    let bound = || requirement.values.first().and_then(|v| number(v));
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| requirement.values.contains(v)),
        "NotIn" => value.is_none_or(|v| !requirement.values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => matches!((value.and_then(|v| number(v)), bound()), (Some(v), Some(b)) if v > b),
        "Lt" => matches!((value.and_then(|v| number(v)), bound()), (Some(v), Some(b)) if v < b),
        // An operator the API server would have refused: it selects nothing.
        _ => false,
    }
}

/// Every SSM parameter `alias` reads for Kubernetes `k8s`: one per architecture and variant of
/// its family, `recommended`/`latest` for `@latest`, the release's own parameter otherwise.
pub(crate) fn alias_parameters(
    alias: &str,
    k8s: &str,
) -> Result<Vec<AliasParameter>, ResolveError> {
    let (family, version) = alias.split_once('@').unwrap_or((alias, "latest"));
    let latest = version == "latest";
    let param = |name: String, arch, variant| AliasParameter {
        name,
        arch,
        variant,
    };
    let ec2 = |arch: &str| if arch == "arm64" { "arm64" } else { "x86_64" };
    match AmiFamily::from_alias_family(family) {
        Some(AmiFamily::AL2023) => Ok([
            ("amd64", "standard", Variant::Standard),
            ("amd64", "nvidia", Variant::Nvidia),
            ("amd64", "neuron", Variant::Neuron),
            ("arm64", "standard", Variant::Standard),
            ("arm64", "nvidia", Variant::Nvidia),
        ]
        .into_iter()
        .map(|(arch, variant_name, variant)| {
            let a = ec2(arch);
            let leaf = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{a}-{variant_name}-{k8s}-{version}")
            };
            param(
                format!(
                    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{a}/{variant_name}/{leaf}/image_id"
                ),
                arch,
                variant,
            )
        })
        .collect()),
        Some(AmiFamily::AL2) => Ok([
            ("amd64", "amazon-linux-2", "amazon-eks-node", Variant::Standard),
            ("arm64", "amazon-linux-2-arm64", "amazon-eks-arm64-node", Variant::Standard),
            ("amd64", "amazon-linux-2-gpu", "amazon-eks-gpu-node", Variant::Nvidia),
        ]
        .into_iter()
        .map(|(arch, path, prefix, variant)| {
            let leaf = if latest {
                "recommended".to_string()
            } else {
                format!("{prefix}-{k8s}-{version}")
            };
            param(
                format!("/aws/service/eks/optimized-ami/{k8s}/{path}/{leaf}/image_id"),
                arch,
                variant,
            )
        })
        .collect()),
        Some(AmiFamily::Bottlerocket) => {
            let version = if latest {
                "latest"
            } else {
                version.trim_start_matches('v')
            };
            Ok([
                ("", "amd64", Variant::Standard),
                ("", "arm64", Variant::Standard),
                ("-nvidia", "amd64", Variant::Nvidia),
                ("-nvidia", "arm64", Variant::Nvidia),
            ]
            .into_iter()
            .map(|(suffix, arch, variant)| {
                param(
                    format!(
                        "/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{}/{version}/image_id",
                        ec2(arch)
                    ),
                    arch,
                    variant,
                )
            })
            .collect())
        }
        Some(family @ (AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025)) => {
            let name = windows_parameter(family, k8s)?;
            let build = family.windows_build().unwrap_or_default();
            Ok(vec![param(name, "amd64", Variant::Windows(build))])
        }
        _ => Err(ResolveError::Unresolvable(format!(
            "alias {alias} is not supported"
        ))),
    }
}

/// The public SSM parameter of a Windows family's EKS-optimized Server Core AMI for Kubernetes
/// `k8s` (only `@latest` exists, which validation enforces). EKS publishes x86_64 images only.
/// Windows Server 2025 needs Kubernetes 1.35 or newer, as upstream refuses it below.
pub(crate) fn windows_parameter(family: AmiFamily, k8s: &str) -> Result<String, ResolveError> {
    let version = family
        .windows_version()
        .ok_or_else(|| ResolveError::Unresolvable(format!("{family:?} is not a Windows family")))?;
    let minor = k8s.split('.').nth(1).and_then(|m| m.parse::<u32>().ok());
    if family == AmiFamily::Windows2025 && minor.is_some_and(|m| m < 35) {
        return Err(ResolveError::Unresolvable(format!(
            "Windows Server 2025 requires EKS version 1.35 or higher, current version: {k8s}"
        )));
    }
    Ok(format!(
        "/aws/service/ami-windows-latest/Windows_Server-{version}-English-Core-EKS_Optimized-{k8s}/image_id"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ami(id: &str, arch: &str, variant: Variant) -> AmiStatus {
        AmiStatus {
            id: id.into(),
            name: None,
            deprecated: None,
            requirements: requirements(arch, variant),
        }
    }

    #[test]
    fn a_gpu_type_gets_the_nvidia_variant_and_other_types_the_standard_image_of_their_arch() {
        let amis = [
            ami("ami-std-amd", "amd64", Variant::Standard),
            ami("ami-nvidia-amd", "amd64", Variant::Nvidia),
            ami("ami-std-arm", "arm64", Variant::Standard),
        ];
        let pick = |l: &[(&str, &str)]| for_instance_type(&amis, &labels(l)).map(|a| a.id.as_str());
        assert_eq!(pick(&[(ARCH_LABEL, "amd64")]), Some("ami-std-amd"));
        assert_eq!(pick(&[(ARCH_LABEL, "arm64")]), Some("ami-std-arm"));
        assert_eq!(
            pick(&[(ARCH_LABEL, "amd64"), (GPU_COUNT_LABEL, "1")]),
            Some("ami-nvidia-amd")
        );
        // No arm64 NVIDIA image listed: an arm64 GPU type falls back to the standard one.
        assert_eq!(
            pick(&[(ARCH_LABEL, "arm64"), (GPU_COUNT_LABEL, "1")]),
            Some("ami-std-arm")
        );
        assert_eq!(pick(&[("other", "x")]), None, "no arch label meets none");
    }

    #[test]
    fn a_deprecated_image_is_taken_only_when_nothing_else_serves_the_type() {
        let mut old = ami("ami-old", "amd64", Variant::Standard);
        old.deprecated = Some(true);
        let amd = labels(&[(ARCH_LABEL, "amd64")]);
        let both = [old.clone(), ami("ami-new", "amd64", Variant::Standard)];
        assert_eq!(
            for_instance_type(&both, &amd).map(|a| a.id.as_str()),
            Some("ami-new")
        );
        assert_eq!(
            for_instance_type(&[old], &amd).map(|a| a.id.as_str()),
            Some("ami-old")
        );
    }

    #[test]
    fn a_latest_al2023_alias_reads_the_recommended_parameter_of_every_arch_and_variant() {
        let params = alias_parameters("al2023@latest", "1.33").expect("supported");
        assert_eq!(params.len(), 5);
        assert!(params.iter().all(|p| p.name.contains("/recommended/")));
        assert_eq!(
            params[0].name,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
        );
    }

    #[test]
    fn a_pinned_alias_reads_the_parameter_of_its_release() {
        let params = alias_parameters("al2023@v20240807", "1.33").expect("supported");
        assert_eq!(
            params[3].name,
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.33-v20240807/image_id"
        );
        let bottlerocket = alias_parameters("bottlerocket@v1.40.0", "1.33").expect("supported");
        assert_eq!(
            bottlerocket[0].name,
            "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.40.0/image_id"
        );
    }

    #[test]
    fn an_unsupported_alias_family_is_an_unresolvable_error() {
        assert!(matches!(
            alias_parameters("ubuntu@latest", "1.33"),
            Err(ResolveError::Unresolvable(_))
        ));
    }

    #[test]
    fn a_windows_alias_reads_eks_windows_parameter_and_windows_2025_needs_kubernetes_1_35() {
        let params = alias_parameters("windows2022@latest", "1.33").expect("supported");
        assert_eq!(params.len(), 1);
        assert_eq!(
            params[0].name,
            "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id"
        );
        let reqs: Vec<(String, Vec<String>)> = requirements(params[0].arch, params[0].variant)
            .into_iter()
            .map(|r| (r.key, r.values))
            .collect();
        let pair = |k: &str, v: &str| (k.to_string(), vec![v.to_string()]);
        assert_eq!(
            reqs,
            [
                pair(ARCH_LABEL, "amd64"),
                pair(OS_LABEL, "windows"),
                pair(WINDOWS_BUILD_LABEL, "10.0.20348"),
            ]
        );
        assert!(matches!(
            alias_parameters("windows2025@latest", "1.33"),
            Err(ResolveError::Unresolvable(_))
        ));
        assert!(alias_parameters("windows2025@latest", "1.35").is_ok());
    }
}
