//! The `Ec2` and `Sqs` seams of `karpenter-core` over aws-sdk-rust (EC2, SQS, and the SSM, IAM,
//! EKS and pricing calls the seams grow), and the live instance catalog (types, offerings and
//! prices from the region).
//!
//! The adapter itself is issue 18 ("The AWS adapter"); only this crate and `controller/cli` may
//! depend on aws-sdk-* (they take 8 GB and minutes to build). What exists today is [`actions`]:
//! the IAM actions the adapter will call, which the shipped IAM policy (`deploy/`) allows exactly,
//! as its tests check.

pub mod actions;
