//! `pinned-ami-honoured`: an instance launched for an EC2NodeClass whose `amiSelectorTerms` pin
//! an alias to a release (`al2023@v20250601`: any version but `latest`) boots an image of that
//! release: the image's name (fakecloud's, `amazon-eks-node-al2023-...-v20250601`) ends with
//! the pinned version. A newer release must not move it (upstream resolves a pinned alias to
//! the release's own SSM parameter; only `@latest` follows releases). Each live instance of
//! Karpenter's (tagged `karpenter.k8s.aws/ec2nodeclass`) is checked once, when first seen,
//! against its class as it is then; a class without a pinned alias holds it to nothing.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_core::seams::kube::ResourceKind;

use super::{Check, Invariant, StepView, Violation};

const CLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";

/// The `pinned-ami-honoured` checker: instances already checked.
#[derive(Debug, Default)]
pub struct PinnedAmi {
    checked: BTreeSet<String>,
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
        let fresh: Vec<_> = step
            .observation
            .live
            .iter()
            .filter(|i| i.tags.contains_key(CLASS_TAG) && !self.checked.contains(&i.instance_id))
            .collect();
        if fresh.is_empty() {
            return Vec::new();
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
        let mut out = Vec::new();
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
