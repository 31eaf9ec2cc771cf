//! Instance profiles for an EC2NodeClass. EC2 launches take a profile, not a role, so a class
//! naming `role:` gets a profile Karpenter manages (created under a path per cluster, tagged as
//! Karpenter's, the role added, replaced when the role changes); a class naming
//! `instanceProfile:` uses that profile as given, which must exist and hold a role. The IAM calls
//! go through the [`InstanceProfiles`] seam; what is known to be in place is cached so a burst of
//! launches costs one read.
//!
//! [`ensure`] is what the EC2NodeClass status controller calls to fill `status.instanceProfile`;
//! until it exists the launch path calls it.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::api::EC2NodeClass;
use crate::api::labels::EC2NODECLASS_TAG;
use crate::seams::iam::{IamError, InstanceProfiles};

use super::launchtemplate::EKS_CLUSTER_NAME_TAG;

/// IAM's longest instance-profile name, in characters.
pub const PROFILE_NAME_LEN_MAX: usize = 128;

/// Why a class has no usable instance profile.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceProfileError {
    #[error("the EC2NodeClass names neither role nor instanceProfile")]
    Unspecified,
    #[error("instance profile {0:?} does not exist")]
    NotFound(String),
    #[error("instance profile {0:?} holds no role")]
    NoRole(String),
    #[error("iam: {0}")]
    Iam(#[from] IamError),
}

/// The IAM path of the profiles Karpenter manages for `cluster` (for listing and clean-up).
pub fn managed_path(cluster: &str) -> String {
    format!("/karpenter/{cluster}/")
}

/// The profile a class launches with: `instanceProfile` as given, else the managed profile of
/// its `role` (`CLUSTER_` + a stable hash of the class name and role, so a role change names a
/// new profile).
pub fn profile_name(class: &EC2NodeClass, cluster: &str) -> String {
    if let Some(profile) = &class.spec.instance_profile {
        return profile.clone();
    }
    let class_name = class.metadata.name.clone().unwrap_or_default();
    let role = class.spec.role.clone().unwrap_or_default();
    let hash = crate::catalog::builtin::fnv1a64(format!("{class_name}\n{role}").as_bytes());
    let suffix = format!("_{hash:016x}");
    let keep = PROFILE_NAME_LEN_MAX - suffix.len();
    let prefix: String = cluster.chars().take(keep).collect();
    format!("{prefix}{suffix}")
}

/// The tags of a managed profile.
pub fn managed_tags(class: &EC2NodeClass, cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (format!("kubernetes.io/cluster/{cluster}"), "owned".into()),
        (EKS_CLUSTER_NAME_TAG.into(), cluster.into()),
        (
            EC2NODECLASS_TAG.into(),
            class.metadata.name.clone().unwrap_or_default(),
        ),
    ])
}

/// Profiles known to be in place, by name, with their role (`""` for a profile used as given).
#[derive(Debug, Default)]
pub struct ProfileCache {
    known: Mutex<BTreeMap<String, String>>,
}

impl ProfileCache {
    fn get(&self, name: &str) -> Option<String> {
        self.lock().get(name).cloned()
    }

    fn put(&self, name: &str, role: &str) {
        self.lock().insert(name.to_string(), role.to_string());
    }

    /// Forgets a profile (after EC2 said it does not exist, say).
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Makes sure the class's instance profile exists and holds its role; returns its name.
pub async fn ensure(
    iam: &dyn InstanceProfiles,
    cache: &ProfileCache,
    class: &EC2NodeClass,
    cluster: &str,
) -> Result<String, InstanceProfileError> {
    if let Some(name) = &class.spec.instance_profile {
        if cache.get(name).is_some() {
            return Ok(name.clone());
        }
        let profile = iam
            .get_instance_profile(name)
            .await?
            .ok_or_else(|| InstanceProfileError::NotFound(name.clone()))?;
        if profile.roles.is_empty() {
            return Err(InstanceProfileError::NoRole(name.clone()));
        }
        cache.put(name, "");
        return Ok(name.clone());
    }
    let role = class
        .spec
        .role
        .clone()
        .ok_or(InstanceProfileError::Unspecified)?;
    let name = profile_name(class, cluster);
    if cache.get(&name).as_deref() == Some(role.as_str()) {
        return Ok(name);
    }
    let tags = managed_tags(class, cluster);
    let profile = match iam.get_instance_profile(&name).await? {
        Some(profile) => profile,
        None => match iam
            .create_instance_profile(&name, &managed_path(cluster), &tags)
            .await
        {
            Ok(profile) => profile,
            // A create whose answer was lost, or a racing replica: read it back.
            Err(IamError::AlreadyExists { .. }) => iam
                .get_instance_profile(&name)
                .await?
                .ok_or_else(|| InstanceProfileError::NotFound(name.clone()))?,
            Err(err) => return Err(err.into()),
        },
    };
    if tags.iter().any(|(k, v)| profile.tags.get(k) != Some(v)) {
        iam.tag_instance_profile(&name, &tags).await?;
    }
    for other in profile.roles.iter().filter(|r| **r != role) {
        iam.remove_role_from_instance_profile(&name, other).await?;
    }
    if !profile.roles.contains(&role) {
        iam.add_role_to_instance_profile(&name, &role).await?;
    }
    cache.put(&name, &role);
    Ok(name)
}
