//! fakekit: what the in-memory fakes share, so fakecloud (EC2 and SQS) and fakekube (the
//! Kubernetes API server) inject faults, draw randomness and log calls the same way.
//!
//! - [`streams`]: one seed, one ChaCha stream per (component, purpose), so turning a knob of one
//!   concern on never shifts the draws of another.
//! - [`calls`]: the bounded call log ([`CallLog`]) every fake keeps, one [`Record`] per call.
//! - [`faults`]: the fault plan ([`FaultPlan`]): a script of what the next calls of an operation
//!   get, else the rates of the latest [`FaultWindow`] covering now, else the standing rates;
//!   each kind of fault draws from its own stream.
//! - [`serve`]: [`serve()`], the one path of a seam call through a fake (Karpenter's
//!   `MockedFunction`: an injected error wins, the call is recorded, else the default behaviour
//!   runs), and the [`Fake`] trait whose provided methods are the fault and call-log knobs.

pub mod calls;
pub mod faults;
pub mod serve;
pub mod streams;

pub use calls::{CallLog, Record, list, outcome};
pub use faults::{Decision, Degraded, FaultPlan, FaultStreams, FaultWindow, Rates, Scripted};
pub use serve::{Fake, FromInjected, Kit, KitDecision, KitSpec, KitView, serve};
pub use streams::{Streams, between, chance, stream_id, uuid};
