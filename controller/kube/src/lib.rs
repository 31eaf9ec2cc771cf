//! The `KubeApi` seam of `karpenter-core` over kube-rs: watch-fed reflectors with backoff and
//! relist, get/create/patch with optimistic concurrency, the Eviction API, events, and the Lease
//! the shared `karpenter_core::leader` election runs over.
//!
//! The adapter itself is issue 19 ("The production binary"). What exists today is [`rbac`]: the
//! permissions that adapter will use, which the Helm chart grants and CI checks the rendered chart
//! against.

pub mod rbac;
