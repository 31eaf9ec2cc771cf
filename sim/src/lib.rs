//! The deterministic simulation world: in-memory Kubernetes API server semantics, kube-scheduler
//! and kubelet stand-ins, workloads, faults, invariants.
//!
//! - [`apiserver`]: an in-memory API server implementing the `KubeApi` seam.
//! - [`scheduler`]: a kube-scheduler stand-in, written independently of the controller's
//!   scheduling code (it is the check on that code).
//! - [`kubelet`]: a kubelet stand-in that registers nodes for booted instances and runs pods.

pub mod apiserver;
pub mod kubelet;
pub mod scheduler;
