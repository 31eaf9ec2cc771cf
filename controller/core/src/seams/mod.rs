//! The four seams the controller is written against. Each world plugs in its own implementations:
//!
//! | seam | production | simulation | e2e |
//! |---|---|---|---|
//! | [`Clock`] | system clock | [`ManualClock`], advanced by the world ([`VirtualClock`], tokio/madsim time, for worlds on virtual time) | system clock |
//! | [`KubeApi`] | kube-rs client | in-memory API server (`fakekube`) | kube-rs against kind |
//! | [`Ec2`] / [`Sqs`] | aws-sdk-ec2 / aws-sdk-sqs | `fakecloud` in-process | `fakecloud` over HTTP |
//!
//! Beside the four, narrow AWS seams for what launching on a real cluster needs:
//! [`InstanceProfiles`] (IAM, for an EC2NodeClass `role`), [`Eks`] (endpoint, CA and service CIDR
//! discovery) and [`CatalogSource`] (instance types, zones and prices of the region). Production
//! serves them with the AWS SDK (`controller/aws`), the simulation with `fakecloud`.
//!
//! The traits are narrow: only the calls the controller makes. They are object safe
//! (`Arc<dyn KubeApi>`), so one composition root wires a world without generics leaking through
//! the controller. Every error type says whether a retry can help ([`Retryable`]).
//!
//! [`layered`] gives each seam its calls as data and one generic wrapper, so a concern that cuts
//! across every call (a fuse, an audit, a fault) is one layer, not one decorator per method.

pub mod batch;
pub mod catalog;
pub mod clock;
pub mod ec2;
pub mod eks;
pub mod iam;
pub mod kube;
pub mod layered;
pub mod sqs;

pub use catalog::{CatalogError, CatalogSource};
pub use clock::{Clock, ManualClock, VirtualClock};
pub use ec2::{Ec2, Ec2Error};
pub use eks::{Eks, EksError};
pub use iam::{IamError, InstanceProfiles};
pub use kube::{KubeApi, KubeApiExt, KubeError};
pub use sqs::{Sqs, SqsError};

/// Whether an operating error is transient. Callers retry retryable errors with backoff (bounded,
/// see each controller's `*_retry_count_max`) and surface the rest as conditions or events.
pub trait Retryable {
    fn is_retryable(&self) -> bool;
}
