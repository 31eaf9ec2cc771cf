//! The deterministic simulation world: in-memory Kubernetes API server semantics, kube-scheduler
//! and kubelet stand-ins, workloads, faults, invariants.
//!
//! - [`apiserver`]: an in-memory API server implementing the `KubeApi` seam.
//! - [`scheduler`]: a kube-scheduler stand-in, written independently of the controller's
//!   scheduling code (it is the check on that code).
//! - [`kubelet`]: a kubelet stand-in that registers nodes for booted instances and runs pods;
//!   both stand-ins read and write objects through the same small helpers (`objects`).
//! - [`world`]: everything above plus fakecloud and the controller, on one clock and one seed;
//!   [`scenario`] describes a run, [`invariants`] are checked every step, [`report`] is the result.
//! - [`faults`]: the fault catalogue ([`faults::FaultMix`]) a scenario or a caller turns on;
//!   [`controller`]: the controller processes the world crashes, restarts and fails over.
//! - [`swarm`]: many seeds, each with its own draw of faults, through a safety and a liveness
//!   phase; [`bugs`] are test-only broken behaviours that show the invariants catch them.

pub mod apiserver;
pub mod bugs;
pub mod controller;
pub mod faults;
pub mod invariants;
pub mod kubelet;
mod objects;
pub mod report;
pub mod scenario;
pub mod scheduler;
pub mod swarm;
pub mod world;
