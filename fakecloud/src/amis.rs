//! AMIs and the public SSM parameters that name them: what `amiSelectorTerms` aliases
//! (`al2023@latest`, `al2023@v20250601`, `bottlerocket@latest`, `bottlerocket@v1.40.0`,
//! `al2@latest`, `windows2022@latest`) resolve through. Parameter paths are EKS's and
//! Bottlerocket's public ones.
//!
//! Publishing a release ([`FakeCloud::publish_ami`](crate::FakeCloud::publish_ami)) adds images and
//! moves the `recommended`/`latest` parameters, which is what drift detection must notice.

use std::collections::BTreeMap;

use jiff::Timestamp;
use karpenter_core::seams::ec2::{Ec2Error, Image, ImageQuery};
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use crate::filters;
use crate::rng::resource_id;

/// Owner account of the published AMIs (an Amazon-owned account, alias `amazon`).
pub const AMAZON_OWNER_ID: &str = "602401143452";

/// An AMI family with SSM aliases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AmiFamily {
    /// `al2023@…`: releases `vYYYYMMDD`.
    Al2023,
    /// `al2@…`: releases `vYYYYMMDD`.
    Al2,
    /// `bottlerocket@…`: releases `X.Y.Z` (a leading `v` is accepted).
    Bottlerocket,
    /// `windows2019@latest`, `windows2022@latest`, `windows2025@latest`: EKS-optimized Windows
    /// Server Core, x86_64 only, releases `YYYY.MM.DD`; only the latest is published as a
    /// parameter (the aliases take no version).
    Windows2019,
    Windows2022,
    Windows2025,
}

impl AmiFamily {
    /// The Windows Server release year of a Windows family.
    fn windows_version(self) -> Option<&'static str> {
        match self {
            AmiFamily::Windows2019 => Some("2019"),
            AmiFamily::Windows2022 => Some("2022"),
            AmiFamily::Windows2025 => Some("2025"),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
struct ImageRecord {
    image: Image,
    owner_alias: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Amis {
    images: BTreeMap<String, ImageRecord>,
    parameters: BTreeMap<String, String>,
}

/// One image of a release: its name, the parameter naming this release, the parameter naming the
/// latest release.
struct Published {
    architecture: &'static str,
    name: String,
    versioned: String,
    latest: String,
}

impl Amis {
    /// Publishes `release` of `family` for Kubernetes `k8s`: one image per architecture and
    /// variant, its versioned parameter, and moves the latest parameter to it. Returns the new
    /// image ids.
    pub fn publish(
        &mut self,
        family: AmiFamily,
        release: &str,
        k8s: &str,
        now: Timestamp,
        rng: &mut ChaCha8Rng,
    ) -> Vec<String> {
        let mut ids = Vec::new();
        for published in release_images(family, release, k8s, rng) {
            let image_id = resource_id(rng, "ami");
            self.images.insert(
                image_id.clone(),
                ImageRecord {
                    image: Image {
                        image_id: image_id.clone(),
                        name: published.name,
                        architecture: published.architecture.to_string(),
                        creation_date: Timestamp::from_second(now.as_second()).unwrap_or(now),
                        deprecated: false,
                        owner_id: AMAZON_OWNER_ID.to_string(),
                        tags: BTreeMap::new(),
                    },
                    owner_alias: Some("amazon".to_string()),
                },
            );
            self.parameters
                .insert(published.versioned, image_id.clone());
            self.parameters.insert(published.latest, image_id.clone());
            ids.push(image_id);
        }
        ids.sort();
        ids
    }

    /// Adds a custom (self-owned) image.
    pub fn add(&mut self, image: Image) {
        self.images.insert(
            image.image_id.clone(),
            ImageRecord {
                image,
                owner_alias: None,
            },
        );
    }

    pub fn deprecate(&mut self, image_id: &str) -> bool {
        match self.images.get_mut(image_id) {
            Some(record) => {
                record.image.deprecated = true;
                true
            }
            None => false,
        }
    }

    pub fn exists(&self, image_id: &str) -> bool {
        self.images.contains_key(image_id)
    }

    /// The image's name (`None` if unknown).
    pub fn name_of(&self, image_id: &str) -> Option<&str> {
        self.images.get(image_id).map(|r| r.image.name.as_str())
    }

    pub fn parameter(&self, name: &str) -> Option<String> {
        self.parameters.get(name).cloned()
    }

    pub fn parameters(&self) -> BTreeMap<String, String> {
        self.parameters.clone()
    }

    /// `DescribeImages`: by ids, narrowed by owners and filters. As EC2, a listed id that is
    /// malformed (`InvalidAMIID.Malformed`) or unknown (`InvalidAMIID.NotFound`) fails the whole
    /// call; an `image-id` filter just matches nothing.
    pub fn describe(&self, query: &ImageQuery, account_id: &str) -> Result<Vec<Image>, Ec2Error> {
        if let Some(bad) = query.image_ids.iter().find(|id| !well_formed_ami_id(id)) {
            return Err(Ec2Error::InvalidRequest {
                code: "InvalidAMIID.Malformed".into(),
                message: format!("Invalid id: \"{bad}\" (expecting \"ami-...\")"),
            });
        }
        if let Some(missing) = query.image_ids.iter().find(|id| !self.exists(id)) {
            return Err(Ec2Error::NotFound {
                code: "InvalidAMIID.NotFound".into(),
                message: format!("The image id '[{missing}]' does not exist"),
            });
        }
        filters::check(
            &query.filters,
            &[
                "image-id",
                "name",
                "architecture",
                "owner-id",
                "owner-alias",
                "state",
            ],
        )?;
        Ok(self
            .images
            .values()
            .filter(|r| query.image_ids.is_empty() || query.image_ids.contains(&r.image.image_id))
            .filter(|r| {
                query.owners.is_empty()
                    || query.owners.iter().any(|owner| match owner.as_str() {
                        "self" => r.image.owner_id == account_id,
                        alias @ ("amazon" | "aws-marketplace") => {
                            r.owner_alias.as_deref() == Some(alias)
                        }
                        id => r.image.owner_id == id,
                    })
            })
            .filter(|r| {
                let image = &r.image;
                filters::matches(&query.filters, &image.tags, |name| match name {
                    "image-id" => vec![image.image_id.clone()],
                    "name" => vec![image.name.clone()],
                    "architecture" => vec![image.architecture.clone()],
                    "owner-id" => vec![image.owner_id.clone()],
                    "owner-alias" => r.owner_alias.clone().into_iter().collect(),
                    "state" => vec!["available".into()],
                    _ => Vec::new(),
                })
            })
            .map(|r| r.image.clone())
            .collect())
    }
}

/// EC2's image id shape: `ami-` and 8 or 17 lowercase hex digits.
fn well_formed_ami_id(id: &str) -> bool {
    id.strip_prefix("ami-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17)
            && hex
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    })
}

fn release_images(
    family: AmiFamily,
    release: &str,
    k8s: &str,
    rng: &mut ChaCha8Rng,
) -> Vec<Published> {
    if let Some(version) = family.windows_version() {
        let base = format!("Windows_Server-{version}-English-Core-EKS_Optimized-{k8s}");
        let latest = format!("/aws/service/ami-windows-latest/{base}/image_id");
        return vec![Published {
            architecture: "x86_64",
            name: format!("{base}-{release}"),
            versioned: latest.clone(),
            latest,
        }];
    }
    match family {
        AmiFamily::Al2023 => [
            ("x86_64", "standard"),
            ("x86_64", "nvidia"),
            ("x86_64", "neuron"),
            ("arm64", "standard"),
            ("arm64", "nvidia"),
        ]
        .into_iter()
        .map(|(architecture, variant)| {
            let name = format!("amazon-eks-node-al2023-{architecture}-{variant}-{k8s}-{release}");
            let base = format!(
                "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{architecture}/{variant}"
            );
            Published {
                architecture,
                versioned: format!("{base}/{name}/image_id"),
                latest: format!("{base}/recommended/image_id"),
                name,
            }
        })
        .collect(),
        AmiFamily::Al2 => [
            ("x86_64", "amazon-linux-2", "amazon-eks-node"),
            ("arm64", "amazon-linux-2-arm64", "amazon-eks-arm64-node"),
            ("x86_64", "amazon-linux-2-gpu", "amazon-eks-gpu-node"),
        ]
        .into_iter()
        .map(|(architecture, path, prefix)| {
            let name = format!("{prefix}-{k8s}-{release}");
            let base = format!("/aws/service/eks/optimized-ami/{k8s}/{path}");
            Published {
                architecture,
                versioned: format!("{base}/{name}/image_id"),
                latest: format!("{base}/recommended/image_id"),
                name,
            }
        })
        .collect(),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => Vec::new(),
        AmiFamily::Bottlerocket => {
            let version = release.trim_start_matches('v');
            let build = format!("{:08x}", rng.next_u32());
            [
                (format!("aws-k8s-{k8s}"), "x86_64"),
                (format!("aws-k8s-{k8s}"), "arm64"),
                (format!("aws-k8s-{k8s}-nvidia"), "x86_64"),
                (format!("aws-k8s-{k8s}-nvidia"), "arm64"),
            ]
            .into_iter()
            .map(|(variant, architecture)| {
                let base = format!("/aws/service/bottlerocket/{variant}/{architecture}");
                Published {
                    architecture,
                    name: format!("bottlerocket-{variant}-{architecture}-v{version}-{build}"),
                    versioned: format!("{base}/{version}/image_id"),
                    latest: format!("{base}/latest/image_id"),
                }
            })
            .collect()
        }
    }
}
