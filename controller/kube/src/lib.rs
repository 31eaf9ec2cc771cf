//! The `KubeApi` seam of `karpenter-core` over kube-rs: watch-fed reflectors with backoff and
//! relist, get/create/patch with optimistic concurrency, the Eviction API, events, and the Lease
//! the shared `karpenter_core::leader` election runs over.
//!
//! Empty today: issue 19 ("The production binary") builds it. Until then the controller runs only
//! against the simulation's in-memory API server.
