//! Tests of the simulation world. One test binary; each component has its own module under
//! `tests/sim/` (declared with `#[path]`, since this file is the crate root), and this file holds
//! only module declarations and helpers they share.

use jiff::Timestamp;

#[path = "sim/fixtures.rs"]
mod fixtures;
#[path = "sim/invariants.rs"]
mod invariants;
#[path = "sim/kubelet.rs"]
mod kubelet;
#[path = "sim/rbac.rs"]
mod rbac;
#[path = "sim/scheduler.rs"]
mod scheduler;
#[path = "sim/swarm.rs"]
mod swarm;
#[path = "sim/world.rs"]
mod world;

/// The simulated clusters' start time.
pub fn start() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("timestamp")
}

/// Runs a future that never sleeps (no runtime needed; a sleep would panic).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

/// Runs a world to completion on a current-thread runtime with paused time, as `karpenter-sim`
/// does: its EC2 and SQS calls sleep their latency (virtual) there.
pub fn sim_block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime builds")
        .block_on(future)
}
