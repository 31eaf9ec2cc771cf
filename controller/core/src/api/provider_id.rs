//! The provider id the AWS cloud provider writes on a Node (`spec.providerID`) and Karpenter on a
//! NodeClaim (`status.providerID`): `aws:///<zone>/<instance-id>`. It is how a Node, a NodeClaim
//! and an EC2 instance find each other.

use std::fmt;
use std::str::FromStr;

/// The scheme every AWS provider id starts with.
const SCHEME: &str = "aws://";

/// A parsed `aws:///<zone>/<instance-id>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderId {
    /// The availability zone (`us-west-2a`).
    pub zone: String,
    /// The EC2 instance id (`i-0123456789abcdef0`).
    pub instance_id: String,
}

/// A provider id that is not `aws:///<zone>/<instance-id>`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an AWS provider id (aws:///<zone>/<instance-id>)")]
pub struct ProviderIdError(pub String);

impl ProviderId {
    pub fn new(zone: impl Into<String>, instance_id: impl Into<String>) -> Self {
        Self {
            zone: zone.into(),
            instance_id: instance_id.into(),
        }
    }

    /// The instance id of `text`, if it is an AWS provider id.
    pub fn instance_id_of(text: &str) -> Option<String> {
        text.parse::<ProviderId>().ok().map(|p| p.instance_id)
    }
}

impl FromStr for ProviderId {
    type Err = ProviderIdError;

    /// Accepts `aws:///<zone>/<instance-id>` (the form the AWS cloud provider writes) and
    /// `aws://<zone>/<instance-id>`; the instance id is the last segment and must not be empty.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || ProviderIdError(text.to_string());
        let path = text.strip_prefix(SCHEME).ok_or_else(invalid)?;
        let (zone, instance_id) = path
            .trim_start_matches('/')
            .rsplit_once('/')
            .ok_or_else(invalid)?;
        if zone.is_empty() || zone.contains('/') || instance_id.is_empty() {
            return Err(invalid());
        }
        Ok(Self::new(zone, instance_id))
    }
}

impl fmt::Display for ProviderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}/{}/{}", self.zone, self.instance_id)
    }
}
