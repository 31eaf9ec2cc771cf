//! The deterministic simulation world: in-memory Kubernetes API server semantics, kube-scheduler
//! and kubelet stand-ins, workloads, faults, invariants. Not built yet: see the simulation issue.
