//! The `KubeApi` seam over kube-rs (reflectors/watchers, patch, Eviction API) and Lease-based
//! leader election.
//!
//! Not built yet (the production-binary issue). What exists is [`rbac`]: the permissions that
//! adapter will use, which the Helm chart grants and CI checks the rendered chart against.

pub mod rbac;
