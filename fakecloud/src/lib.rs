//! fakecloud: an in-memory EC2 and SQS implementing the controller's `Ec2` and `Sqs` seams, for
//! the simulation and the behaviour specs. It behaves like EC2 wherever the controller can observe
//! the difference (ids, instance states, eventually consistent describes, capacity errors per
//! pool, spot warnings two minutes before the reclaim, EventBridge message shapes) and every
//! fault is reproducible from a seed.
//!
//! - Time comes from the injected [`Clock`]; the fake has no background task. Everything due
//!   (state transitions, message deliveries, capacity waves) is processed in order when a call
//!   arrives or when the simulation calls [`FakeCloud::advance_to_now`].
//! - Randomness comes from [`Config::seed`] only; collections are ordered. The same seed and the
//!   same calls at the same times give the same call log ([`FakeCloud::calls`]) and the same
//!   message stream ([`FakeCloud::sent_messages`]).
//! - Injected latency and long polls sleep with `tokio::time` (madsim-tokio: virtual time in the
//!   simulation); nothing else awaits. A long poll also wakes whenever anything touched the
//!   state (a call from another task, a knob that sent a message), so it returns as soon as a
//!   message arrives, as SQS does.
//!
//! The knobs and inspection methods live in `knobs.rs`; the model in one module per concern.

mod amis;
mod boot;
mod calls;
mod capacity;
mod config;
mod cost;
mod ec2;
mod events;
mod faults;
mod filters;
mod fleet;
mod instances;
mod knobs;
mod latency;
mod network;
mod registration;
mod rng;
mod sqs;
mod state;
mod templates;
mod timeline;

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use karpenter_core::catalog::Catalog;
use karpenter_core::seams::Clock;

pub use amis::{AMAZON_OWNER_ID, AmiFamily};
pub use boot::{Boot, BootModel};
pub use calls::CallRecord;
pub use capacity::Pool;
pub use config::Config;
pub use cost::{CostLine, CostReport, InstanceCost, PricePoint};
pub use events::MALFORMED_BODIES;
pub use faults::{Fault, FaultRates, FaultWindow, Operation};
pub use instances::SPOT_INTERRUPTION_NOTICE;
pub use knobs::QueueFaults;
pub use latency::{LatencyProfile, REALISTIC_MS};
pub use registration::{Registration, Taint, decode_user_data, parse_user_data};
pub use sqs::SentMessage;

use crate::faults::Injected;
use crate::state::State;

/// The fake cloud. Share it as `Arc<FakeCloud>`: it is both an `Arc<dyn Ec2>` and an
/// `Arc<dyn Sqs>` (one interruption queue).
pub struct FakeCloud {
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    /// What [`FakeCloud::reset`] returns to.
    initial: Config,
    state: Mutex<State>,
    /// Long polls waiting for a message: woken after every access to the state.
    touched: tokio::sync::Notify,
}

/// The locked state; releasing it wakes the long polls waiting for a message (whatever the
/// holder did may have queued one).
struct StateGuard<'a> {
    guard: MutexGuard<'a, State>,
    touched: &'a tokio::sync::Notify,
}

impl Deref for StateGuard<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.guard
    }
}

impl DerefMut for StateGuard<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.guard
    }
}

impl Drop for StateGuard<'_> {
    fn drop(&mut self) {
        self.touched.notify_waiters();
    }
}

impl FakeCloud {
    /// A fresh world at `clock.now()`: the catalog's pools at `pool_capacity_default`, the
    /// configured (or default, discovery-tagged) subnets and security group, and the configured
    /// AMI releases published with their SSM parameters.
    pub fn new(clock: Arc<dyn Clock>, catalog: Catalog, config: Config) -> Self {
        let catalog = Arc::new(catalog);
        let state = State::new(config.clone(), catalog.clone(), clock.now());
        Self {
            clock,
            catalog,
            initial: config,
            state: Mutex::new(state),
            touched: tokio::sync::Notify::new(),
        }
    }

    /// Back to the world [`FakeCloud::new`] built, at the current time: instances, queue, call
    /// log, knob changes, published AMIs and the random streams all start over.
    pub fn reset(&self) {
        let fresh = State::new(self.initial.clone(), self.catalog.clone(), self.clock.now());
        *self.lock() = fresh;
    }

    /// Processes everything due up to the clock's now (the simulation calls this each step so
    /// messages and state changes appear on time even when the controller makes no call).
    pub fn advance_to_now(&self) {
        drop(self.current());
    }

    /// The time the fake has caught up to.
    pub fn now(&self) -> Timestamp {
        self.current().now
    }

    fn lock(&self) -> StateGuard<'_> {
        StateGuard {
            guard: self
                .state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            touched: &self.touched,
        }
    }

    /// The state, caught up with the clock.
    fn current(&self) -> StateGuard<'_> {
        let now = self.clock.now();
        let mut state = self.lock();
        state.advance_to(now);
        state
    }

    /// One API call: decide its fault, sleep its latency (lock released), apply it to the state
    /// caught up with the clock, deliver what became due, and log it.
    async fn serve<T, E: ApiError>(
        &self,
        operation: Operation,
        input: String,
        call: impl FnOnce(&mut State) -> Result<T, E>,
        describe: impl FnOnce(&T) -> String,
    ) -> Result<T, E> {
        let decision = {
            let mut state = self.current();
            let now = state.now;
            let state = &mut *state;
            let mut decision =
                state
                    .faults
                    .decide(operation, now, &state.config.faults, &mut state.rng.faults);
            if !decision.latency.is_zero() {
                state.delayed_calls += 1;
                state.delayed_total += decision.latency;
            }
            decision.latency += state.latencies.draw(&state.config.latency, operation);
            decision
        };
        if !decision.latency.is_zero() {
            tokio::time::sleep(decision.latency).await;
        }
        let mut state = self.current();
        let result = match decision.error {
            None => call(&mut state),
            Some(kind) => {
                if decision.apply_anyway {
                    // The effect happens; only the response is lost.
                    let _ = call(&mut state);
                }
                Err(E::injected(kind))
            }
        };
        let now = state.now;
        // Events the call caused with no delivery lag are in the queue when it returns.
        state.advance_to(now);
        let outcome = calls::outcome(&result, describe);
        state.calls.record(now, operation, input, outcome);
        result
    }
}

/// Seam error types that can carry an injected fault.
trait ApiError: Sized + std::fmt::Display {
    fn injected(kind: Injected) -> Self;
}
