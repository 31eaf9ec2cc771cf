//! Interruption handling: EventBridge messages from the SQS interruption queue (spot interruption
//! warnings, rebalance recommendations, scheduled changes, instance state changes).

pub mod messages;
