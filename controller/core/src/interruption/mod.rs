//! Interruption handling: EventBridge messages from the SQS interruption queue (spot interruption
//! warnings, rebalance recommendations, scheduled changes, instance state changes).

pub mod handler;
pub mod messages;

pub use handler::{InterruptionHandler, Outcome, PollReport};
