//! The AWS side of the controller: the `Ec2`, `Sqs`, `InstanceProfiles`, `Eks` and
//! `CatalogSource` seams (`karpenter_core::seams`) implemented over aws-sdk-rust.
//!
//! | module | seam | AWS APIs |
//! |---|---|---|
//! | [`ec2`] | `Ec2` | EC2 (fleets, instances, tags, subnets, security groups, images, launch templates), SSM `GetParameter` |
//! | [`sqs`] | `Sqs` | SQS `GetQueueUrl`, `ReceiveMessage`, `DeleteMessage` |
//! | [`iam`] | `InstanceProfiles` | IAM instance profiles and `GetRole` |
//! | [`eks`] | `Eks` | EKS `DescribeCluster` |
//! | [`catalog`] | `CatalogSource` | EC2 `DescribeInstanceTypes`/`Offerings`/`SpotPriceHistory`, Pricing `GetProducts` |
//!
//! [`config`] loads region, endpoint (`AWS_ENDPOINT_URL` honoured) and credentials (IRSA, Pod
//! Identity, ...) and bounds every call with timeouts and the SDK's standard retry; [`errors`]
//! maps AWS error codes to the seams' typed errors. [`actions`] lists the IAM actions all this
//! calls, which the shipped IAM policy (`deploy/`) allows exactly, as its tests check.
//!
//! Only this crate and `controller/cli` may depend on aws-sdk-* (they take 8 GB and minutes to
//! build): the simulation never builds it.

pub mod actions;
pub mod catalog;
pub mod config;
pub mod ec2;
pub mod eks;
pub mod errors;
pub mod iam;
pub mod sqs;
pub mod template;
mod time;

pub use catalog::AwsCatalog;
pub use config::{Aws, ConfigError, Settings};
pub use ec2::AwsEc2;
pub use eks::AwsEks;
pub use iam::AwsIam;
pub use sqs::AwsSqs;
