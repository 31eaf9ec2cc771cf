//! EC2NodeClasses: what a NodeClaim's instance is launched into and with.
//!
//! [`resolve`] turns a class's selector terms into EC2 objects (subnets, security groups, an AMI).
//! Today the launch path resolves them on every launch; this module is where the EC2NodeClass
//! status controller will live (upstream resolves once per class, writes the result to its status
//! and launch reads that), and the launch path will then read the status instead.

pub mod resolve;

pub use resolve::ResolveError;
