//! The Karpenter v1 API: `NodePool`, `NodeClaim` (`karpenter.sh/v1`) and `EC2NodeClass`
//! (`karpenter.k8s.aws/v1`), field for field compatible with upstream manifests, and the CRDs
//! generated from them.

pub mod cel;
pub mod common;
pub mod conditions;
pub mod crd;
pub mod ec2nodeclass;
pub mod hash;
pub mod labels;
pub mod nodeclaim;
pub mod nodepool;
pub mod provider_id;

pub use common::{
    Condition, ConditionStatus, NodeClassReference, Operator, Quantity, Requirement, ResourceList,
    Taint, TaintEffect,
};
pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodepool::{NodePool, NodePoolSpec, NodePoolStatus};
pub use provider_id::{ProviderId, ProviderIdError};
