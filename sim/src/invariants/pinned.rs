//! `pinned-ami-honoured`: an EC2NodeClass whose `amiSelectorTerms` pin an alias to a release
//! (`al2023@v20250601`: any version but `latest`) resolves to, and launches, images of that
//! release only: the image's name (fakecloud's, `amazon-eks-node-al2023-...-v20250601`) ends
//! with the pinned version. A newer release must not move it (upstream resolves a pinned alias to
//! the release's own SSM parameter; only `@latest` follows releases). Two things are held to it:
//! each live instance of Karpenter's (tagged `karpenter.k8s.aws/ec2nodeclass`), checked once,
//! when first seen, against its class as it is then; and the class's `status.amis`, checked at
//! every step (each image reported once): the status is what upstream launches from and what
//! drift compares nodes with, so a status that follows a newer release drifts every pinned node
//! even where the launch itself still boots the pinned image (mutation 14: this controller's
//! launch resolves the alias on its own, so its instances kept the pinned image while the status
//! moved on and the pool churned through replacements). A class without a pinned alias holds
//! nothing to it.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_core::seams::kube::ResourceKind;

use super::{Check, Invariant, StepView, Violation};

const CLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

/// The `pinned-ami-honoured` checker: instances already checked, and (class, image) pairs of a
/// class status already reported.
#[derive(Debug, Default)]
pub struct PinnedAmi {
    checked: BTreeSet<String>,
    status_reported: BTreeSet<(String, String)>,
}

/// The images of a pinned class's `status.amis` that are not of the pinned release, with their
/// names (`name_of`: the image's name as EC2 knows it).
pub fn status_off_release(
    class: &serde_json::Value,
    name_of: impl Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let Some(version) = pinned_version(class) else {
        return Vec::new();
    };
    let release = version.trim_start_matches('v');
    class["status"]["amis"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ami| ami["id"].as_str())
        .map(|id| (id.to_string(), name_of(id).unwrap_or_default()))
        .filter(|(_, name)| !name.ends_with(release))
        .collect()
}

impl PinnedAmi {
    /// Violations for pinned classes whose status names an image of another release (each
    /// class and image once).
    fn check_status(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for class in step.api.objects(&ResourceKind::EC2_NODE_CLASS) {
            let name = class["metadata"]["name"].as_str().unwrap_or_default();
            for (id, image) in status_off_release(&class, |id| step.cloud.image_name(id)) {
                if !self.status_reported.insert((name.to_string(), id.clone())) {
                    continue;
                }
                let version = pinned_version(&class).unwrap_or_default();
                out.push(Violation::at(
                    step.now,
                    format!(
                        "EC2NodeClass {name} (pinned to {version}) resolves to {id} ({image}) in its status.amis"
                    ),
                ));
            }
        }
        out
    }
}

/// The version a class's `amiSelectorTerms` pins (`v20250601` of `al2023@v20250601`), if its
/// terms are aliases pinned to one release.
pub fn pinned_version(class: &serde_json::Value) -> Option<String> {
    let terms = class["spec"]["amiSelectorTerms"].as_array()?;
    let mut versions = terms.iter().map(|t| {
        let alias = t["alias"].as_str()?;
        let (_, version) = alias.split_once('@')?;
        (version != "latest").then(|| version.to_string())
    });
    let first = versions.next()??;
    versions
        .all(|v| v.as_deref() == Some(first.as_str()))
        .then_some(first)
}

impl Check for PinnedAmi {
    fn invariant(&self) -> Invariant {
        Invariant::PinnedAmiHonoured
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let mut out = self.check_status(step);
        let fresh: Vec<_> = step
            .observation
            .live
            .iter()
            .filter(|i| i.tags.contains_key(CLASS_TAG) && !self.checked.contains(&i.instance_id))
            .collect();
        if fresh.is_empty() {
            return out;
        }
        let pinned: BTreeMap<String, String> = step
            .api
            .objects(&ResourceKind::EC2_NODE_CLASS)
            .iter()
            .filter_map(|c| {
                let name = c["metadata"]["name"].as_str()?.to_string();
                Some((name, pinned_version(c)?))
            })
            .collect();
        for instance in fresh {
            self.checked.insert(instance.instance_id.clone());
            let class = &instance.tags[CLASS_TAG];
            let Some(version) = pinned.get(class) else {
                continue;
            };
            let image = step
                .cloud
                .image_name(&instance.image_id)
                .unwrap_or_default();
            if !image.ends_with(version.trim_start_matches('v')) {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "instance {} of EC2NodeClass {class} (pinned to {version}) boots {} ({image})",
                        instance.instance_id, instance.image_id
                    ),
                ));
            }
        }
        out
    }
}
