//! EC2NodeClasses: what a NodeClaim's instance is launched into and with.
//!
//! [`resolve`] turns a class's selector terms into EC2 objects (subnets, security groups, an AMI).
//! The launch path resolves them on every launch, through [`cache::CachedEc2`] when the world
//! enables it (`Context::with_ec2_economy`), so a burst resolves each class once per TTL. This
//! module also holds the EC2NodeClass status controller ([`status`]): it resolves each class once
//! per pass into its status (subnets, security groups, [`ami`]s), which drift reads, keeps the
//! class's finalizer ([`termination`]) and deletes launch templates no longer used
//! ([`garbagecollection`]).

pub mod ami;
pub mod cache;
pub mod capacityreservation;
pub mod cluster;
pub mod garbagecollection;
pub mod instanceprofile;
pub mod launchtemplate;
pub mod resolve;
pub mod status;
pub mod termination;
pub mod userdata;

pub use cache::CachedEc2;
pub use resolve::ResolveError;
pub use status::NodeClassStatus;
