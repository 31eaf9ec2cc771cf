//! The `KubeApi` seam over kube-rs (reflectors/watchers, patch, Eviction API) and Lease-based
//! leader election.
//!
//! Not built yet: lands with the simulation-harness and termination issues.
