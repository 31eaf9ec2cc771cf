//! The IAM seam: the instance-profile calls an EC2NodeClass `role` needs.
//!
//! Upstream Karpenter turns `spec.role` into an instance profile it owns (created under a path
//! per cluster and NodeClass, tagged, the role added, garbage-collected when unused), because EC2
//! launches take a profile, not a role. These are exactly the calls that takes.

use std::collections::BTreeMap;

use async_trait::async_trait;

use super::Retryable;

/// An instance profile as `GetInstanceProfile` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceProfile {
    pub name: String,
    pub instance_profile_id: String,
    pub arn: String,
    /// `/` or `/a/b/`, as IAM normalises paths.
    pub path: String,
    /// Names of the roles in the profile (IAM allows at most one).
    pub roles: Vec<String>,
    pub tags: BTreeMap<String, String>,
}

/// A role as `GetRole` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Role {
    pub name: String,
    pub role_id: String,
    pub arn: String,
    pub path: String,
}

/// Errors of the IAM seam, by IAM error code family.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IamError {
    /// `NoSuchEntity`: the profile or role does not exist.
    #[error("not found ({code}): {message}")]
    NotFound { code: String, message: String },
    /// `EntityAlreadyExists`: the name is taken (a retried create, or another owner).
    #[error("already exists ({code}): {message}")]
    AlreadyExists { code: String, message: String },
    /// `LimitExceeded` (a profile already has a role, the account is at its quota) and
    /// `DeleteConflict` (a profile still has its role): fix the state first.
    #[error("conflict ({code}): {message}")]
    Conflict { code: String, message: String },
    /// `Throttling`: back off and retry.
    #[error("throttled: {0}")]
    Throttled(String),
    /// `InvalidInput`, `MalformedPolicyDocument`, ...: fix the request, do not retry.
    #[error("invalid request ({code}): {message}")]
    InvalidRequest { code: String, message: String },
    /// `AccessDenied`, bad credentials: needs operator action.
    #[error("unauthorized ({code}): {message}")]
    Unauthorized { code: String, message: String },
    /// 5xx (`ServiceFailure`), timeouts, connection errors.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl Retryable for IamError {
    fn is_retryable(&self) -> bool {
        matches!(self, IamError::Throttled(_) | IamError::Unavailable(_))
    }
}

/// The IAM calls the controller makes.
///
/// Contract shared by every implementation:
/// - reads of a missing profile or role are `Ok(None)`, not errors (absence is an answer);
/// - `create_instance_profile` of a taken name is [`IamError::AlreadyExists`] (callers that retry a
///   create read the profile back); deleting a missing profile succeeds, deleting one that still
///   has a role is [`IamError::Conflict`] (`DeleteConflict`);
/// - `add_role_to_instance_profile` on a profile that already has a role is
///   [`IamError::Conflict`] (`LimitExceeded`: IAM allows one role per profile), and a missing
///   profile or role is [`IamError::NotFound`]; removing a role the profile does not hold is
///   [`IamError::NotFound`];
/// - IAM is eventually consistent: a profile just created may be unknown to EC2 for seconds, and
///   launches that name it fail with `InvalidParameterValue` meanwhile;
/// - lists come back sorted by name.
#[async_trait]
pub trait InstanceProfiles: Send + Sync {
    async fn get_instance_profile(&self, name: &str) -> Result<Option<InstanceProfile>, IamError>;

    /// Creates an empty profile under `path` (`/` or `/a/b/`) with `tags`.
    async fn create_instance_profile(
        &self,
        name: &str,
        path: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<InstanceProfile, IamError>;

    /// Adds or overwrites tags on a profile.
    async fn tag_instance_profile(
        &self,
        name: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), IamError>;

    async fn add_role_to_instance_profile(&self, profile: &str, role: &str)
    -> Result<(), IamError>;

    async fn remove_role_from_instance_profile(
        &self,
        profile: &str,
        role: &str,
    ) -> Result<(), IamError>;

    async fn delete_instance_profile(&self, name: &str) -> Result<(), IamError>;

    /// Profiles whose path starts with `path_prefix` (`/karpenter/us-west-2/cluster/`), for
    /// garbage collection of the ones no EC2NodeClass uses any more.
    async fn list_instance_profiles(
        &self,
        path_prefix: &str,
    ) -> Result<Vec<InstanceProfile>, IamError>;

    async fn get_role(&self, name: &str) -> Result<Option<Role>, IamError>;
}
