//! EC2NodeClasses: what a NodeClaim's instance is launched into and with.
//!
//! [`resolve`] turns a class's selector terms into EC2 objects (subnets, security groups, an AMI).
//! The launch path resolves them on every launch, through [`cache::CachedEc2`] when the world
//! enables it (`Context::with_ec2_economy`), so a burst resolves each class once per TTL. This
//! module is where the EC2NodeClass status controller will live (upstream resolves once per
//! class, writes the result to its status and launch reads that).

pub mod cache;
pub mod cluster;
pub mod instanceprofile;
pub mod launchtemplate;
pub mod resolve;
pub mod userdata;

pub use cache::CachedEc2;
pub use resolve::ResolveError;
