//! EC2 and SQS implementations of the `Ec2` and `Sqs` seams over aws-sdk-ec2 / aws-sdk-sqs.
//!
//! Not built yet (the production-binary issue); only this crate and `controller/cli` may depend on
//! aws-sdk-*. What exists is [`actions`]: the IAM actions that adapter will call, which the shipped
//! IAM policy (`deploy/`) allows exactly, as its tests check.

pub mod actions;
