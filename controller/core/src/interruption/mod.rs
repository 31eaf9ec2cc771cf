//! Interruption handling: EventBridge messages from the SQS interruption queue (spot interruption
//! warnings, rebalance recommendations, scheduled changes, instance state changes), and the EC2
//! instance-status health controller ([`health`]).

pub mod handler;
pub mod health;
pub mod messages;

pub use handler::{InterruptionHandler, Outcome, PollReport};
