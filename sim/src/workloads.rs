//! The workload controllers the simulation stands in for, shared by the world's scenarios and the
//! behaviour specs (`features`), so both keep pods alive the same way:
//!
//! - [`replicaset`]: a Deployment as the pods its ReplicaSet keeps running, replacing pods that
//!   were deleted, evicted or lost with their node.
//! - [`daemonset`]: one pod per Ready node whose taints the DaemonSet's pods tolerate.
//! - [`statefulset`]: pods with stable names, each with its own PersistentVolumeClaim.

pub mod daemonset;
pub mod replicaset;
pub mod statefulset;

pub use daemonset::DaemonSet;
pub use replicaset::Deployment;
pub use statefulset::StatefulSet;
