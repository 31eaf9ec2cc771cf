//! The controller processes the world runs, crashes, restarts and fails over (this is process
//! management, not a controller):
//!
//! - [`fuse`]: the life of one process as a seam layer over its Kubernetes, EC2 and SQS seams; a
//!   blown fuse fails every later call of the process without effect.
//! - [`replicas`]: the replica slots ([`Controllers`]), leader election over a Lease, restarts
//!   after a downtime.

pub mod fuse;
pub mod replicas;

pub use fuse::{Fuse, Trigger};
pub use replicas::{
    Controllers, ControllersStep, LEASE_NAME, LEASE_NAMESPACE, LOST_LEASE, ProcessSeams,
};
