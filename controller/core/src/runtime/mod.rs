//! The controller runtime: what lets every controller run as its own task over the shared
//! context, the way controller-runtime runs upstream's.
//!
//! - [`queue`]: the deduplicating, delaying work queue of object keys.
//! - [`informer`]: one task per watched kind keeping `crate::state` current, and the triggers
//!   controllers wake on.
//! - [`controller`]: the singleton and keyed runners, with one requeue and retry policy.
//! - [`stop`]: the shutdown signal loops watch to stop taking work and drain.
//! - [`Limits`]: the bounds on parallel work, each named with its unit and its upstream source.
//!
//! `crate::operator` composes them; nothing here knows a controller.

pub mod controller;
pub mod informer;
pub mod pass;
pub mod queue;
pub mod stop;

pub use controller::{Reconciler, Requeue, Singleton, run_keyed, run_singleton};
pub use informer::{Informers, Trigger};
pub use pass::{PassErrors, gone_is_done};
pub use queue::WorkQueue;
pub use stop::{Stop, StopSender};

/// Bounds on how much each controller does at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// NodeClaim lifecycle reconciles in flight (upstream: `LinearScaleReconciles(cpus, 1000,
    /// 5000)`, i.e. 1000 on a small controller): a launch waits on CreateFleet for seconds, so
    /// a burst's claims launch side by side.
    pub lifecycle_reconciles_max: usize,
    /// Termination reconciles in flight (upstream's node termination: `LinearScaleReconciles(cpus,
    /// 100, 5000)`).
    pub termination_reconciles_max: usize,
    /// NodeClaims one provisioning pass creates at once (upstream creates a pass's claims in
    /// parallel with `workqueue.ParallelizeUntil`, bounded by the claim count).
    pub claim_create_parallel_max: usize,
    /// Messages of one received batch acted on at once (upstream: 10 workers per batch).
    pub interruption_messages_parallel_max: usize,
    /// Evictions one termination reconcile has in flight.
    pub evictions_parallel_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            lifecycle_reconciles_max: 1_000,
            termination_reconciles_max: 100,
            claim_create_parallel_max: 100,
            interruption_messages_parallel_max: 10,
            evictions_parallel_max: 100,
        }
    }
}
