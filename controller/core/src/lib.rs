//! karpenter-core: the product's logic, written against narrow seams so that the same code runs in
//! production, in the deterministic simulation and in e2e.
//!
//! - [`api`]: the Karpenter v1 API types and their CRDs.
//! - [`validation`]: upstream's admission rules (schema, CEL, runtime) as one Rust function per
//!   object, returning every violation with its JSON path.
//! - [`manifest`]: reading multi-document YAML into typed, validated objects.
//! - [`seams`]: the traits (`Clock`, `KubeApi`, `Ec2`, `Sqs`) every world plugs into.

pub mod api;
pub mod catalog;
pub mod context;
pub mod events;
pub mod interruption;
pub mod leader;
pub mod manifest;
pub mod metrics;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod operator;
pub mod plan;
pub mod provisioning;
pub mod replacement;
pub mod resources;
pub mod scheduling;
pub mod seams;
pub mod state;
pub mod termination;
pub mod validation;
