//! The deterministic simulation world: the real controller over fakekube (the in-memory API
//! server) and fakecloud, with kube-scheduler, kubelet and workload stand-ins, faults and
//! invariants, on one clock and one seed.
//!
//! - Stand-ins for what a cluster runs besides Karpenter: [`scheduler`] (kube-scheduler, written
//!   independently of the controller's scheduling code: it is the check on that code),
//!   [`kubelet`] (registers nodes for booted instances and runs pods), [`workloads`] (the
//!   ReplicaSet and DaemonSet controllers, shared with the behaviour specs); they read and write
//!   objects through the same small helpers (`objects`).
//! - The controller's side: [`process`] (the controller processes the world crashes, restarts
//!   and fails over, each behind a fuse) and [`seams`] (the seam layers every process reaches the
//!   API server and the cloud through: [`audit`] of what it removed and created, [`bugs`] that
//!   distort or break its view, test-only).
//! - [`world`]: everything above, stepped in a fixed order; [`scenario`] describes a run,
//!   [`faults`] is the fault catalogue ([`faults::FaultMix`]) a scenario or a caller turns on,
//!   [`invariants`] are checked every step, [`report`] is the result.
//! - [`swarm`]: many seeds, each with its own draw of faults, through a safety and a liveness
//!   phase.

pub mod audit;
pub mod bugs;
pub mod faults;
pub mod invariants;
pub mod kubelet;
pub mod logging;
mod objects;
pub mod process;
pub mod rbac;
pub mod report;
pub mod scenario;
pub mod scheduler;
pub mod seams;
#[cfg(feature = "serve")]
pub mod serve;
pub mod swarm;
pub mod workload_mix;
pub mod workloads;
pub mod world;
