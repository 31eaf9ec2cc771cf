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
//!   simulation); nothing else awaits.
//!
//! The knobs and inspection methods live in `knobs.rs`; the model in one module per concern.
//! IAM (`iam.rs`) and EKS (`eks.rs`) serve the narrow AWS seams beside EC2 and SQS,
//! `catalog_api.rs` answers the catalog calls from the catalog, and `account.rs` sets up an
//! account ready for a cluster (what `fakecloud serve` starts with).

mod account;
mod amis;
mod boot;
pub mod bootstrap;
mod calls;
mod capacity;
mod catalog_api;
mod config;
mod cost;
mod ec2;
mod eks;
mod events;
mod faults;
mod filters;
mod fleet;
mod iam;
mod instances;
mod knobs;
mod latency;
mod network;
mod nodegroup;
mod registration;
mod reservations;
mod rng;
mod sqs;
mod state;
mod templates;
mod timeline;

use std::sync::{Arc, Mutex, MutexGuard};

use fakekit::KitView;
use jiff::Timestamp;
use karpenter_core::catalog::Catalog;
use karpenter_core::seams::Clock;

pub use account::{Account, node_role_name};
pub use amis::{AMAZON_OWNER_ID, AmiFamily};
pub use boot::{Boot, BootModel};
pub use calls::CallRecord;
pub use capacity::Pool;
pub use config::{Config, DEFAULT_CLUSTER_CA_BUNDLE, DEFAULT_CLUSTER_ENDPOINT};
pub use cost::{CostLine, CostReport, InstanceCost, PricePoint};
pub use eks::FakeEks;
pub use events::MALFORMED_BODIES;
pub use fakekit::Fake;
pub use faults::{Fault, FaultRates, FaultWindow, Injected, Operation};
pub use iam::FakeIam;
pub use instances::SPOT_INTERRUPTION_NOTICE;
pub use knobs::QueueFaults;
pub use latency::{LatencyProfile, REALISTIC_MS};
pub use nodegroup::ForeignInstance;
pub use registration::{Registration, Taint, decode_user_data, parse_user_data};
pub use reservations::{CAPACITY_BLOCK_RECLAIM_LEAD, ReservationSpec};
pub use sqs::SentMessage;
pub use state::CloudKit;

use crate::state::State;

/// The fake cloud. Share it as `Arc<FakeCloud>`: it is both an `Arc<dyn Ec2>` and an
/// `Arc<dyn Sqs>` (one interruption queue).
pub struct FakeCloud {
    clock: Arc<dyn Clock>,
    catalog: Arc<Catalog>,
    /// What [`FakeCloud::reset`] returns to.
    initial: Config,
    state: Mutex<State>,
    /// Long polls waiting for a message: woken whenever the state is taken (whoever takes it may
    /// queue one; the waiter reads the queue only after the taker let go).
    touched: tokio::sync::Notify,
    /// The account's IAM, once attached ([`FakeCloud::attach_iam`]): launches then need an
    /// instance profile that exists, and join only with a role the cluster admits. Unattached
    /// (a bare EC2 in unit tests), profiles are not modelled.
    iam: Mutex<Option<Arc<crate::iam::FakeIam>>>,
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
            iam: Mutex::new(None),
        }
    }

    /// Makes launches check instance profiles against `iam` (the account's; `Account` and the
    /// simulation's worlds attach it): a profile that does not exist fails `CreateFleet` as EC2
    /// does, and one whose role has no access entry gives an instance that never joins.
    pub fn attach_iam(&self, iam: Arc<crate::iam::FakeIam>) {
        *self.iam.lock().unwrap_or_else(|p| p.into_inner()) = Some(iam);
    }

    /// The attached IAM, if any.
    pub fn iam(&self) -> Option<Arc<crate::iam::FakeIam>> {
        self.iam.lock().unwrap_or_else(|p| p.into_inner()).clone()
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

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The state, caught up with the clock.
    fn current(&self) -> MutexGuard<'_, State> {
        let now = self.clock.now();
        let mut state = self.lock();
        state.advance_to(now);
        self.touched.notify_waiters();
        state
    }

    /// [`FakeCloud::current`] without waking the long polls: what a long poll itself reads with,
    /// so two waiting polls never wake each other in turn.
    fn current_quietly(&self) -> MutexGuard<'_, State> {
        let now = self.clock.now();
        let mut state = self.lock();
        state.advance_to(now);
        state
    }
}

impl fakekit::Fake for FakeCloud {
    fn normal_latency(state: &mut State, operation: Operation) -> std::time::Duration {
        state.latencies.draw(&state.config.latency, operation)
    }

    type Kit = CloudKit;
    type State = State;

    fn state(&self) -> MutexGuard<'_, State> {
        self.current()
    }

    fn kit(state: &mut State) -> KitView<'_, CloudKit> {
        KitView {
            kit: &mut state.kit,
            rates: &mut state.config.faults,
            now: state.now,
        }
    }

    /// Events the call caused with no delivery lag are in the queue when it returns.
    fn settle(state: &mut State) {
        let now = state.now;
        state.advance_to(now);
    }
}
