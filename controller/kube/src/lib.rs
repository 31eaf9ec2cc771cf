//! The `KubeApi` seam of `karpenter-core` over kube-rs, for the production binary.
//!
//! - [`client`]: [`KubeClient`], every seam call over `Api<DynamicObject>` (get, list, watch,
//!   create, merge and JSON patches of the object and its status, deletes with a UID
//!   precondition, the Eviction API), behind upstream's client QPS/burst limit.
//! - [`errors`]: the API server's `Status` (and transport failures) as the seam's `KubeError`.
//! - [`events`]: `events.k8s.io/v1` Events, repeats folded into a series.
//! - [`rbac`]: the permissions all this uses, which the Helm chart grants and CI checks the
//!   rendered chart against.
//!
//! The informers (`karpenter_core::runtime::informer`) and leader election
//! (`karpenter_core::leader`) run over the seam, so the list-then-watch, backoff and relist
//! logic, and the Lease handling, are the same code the simulation tests.

pub mod client;
pub mod errors;
pub mod events;
/// The permissions table lives in the core (pure data), so the simulation's API server can
/// enforce it on the controller's calls; re-exported here for the chart checks.
pub use karpenter_core::rbac;

pub use client::{ClientLimits, KubeClient};
