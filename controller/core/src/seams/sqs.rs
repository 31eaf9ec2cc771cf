//! The SQS seam: the interruption queue the controller polls.

use std::time::Duration;

use async_trait::async_trait;

use super::Retryable;

/// Most messages one receive may return (an SQS limit).
pub const RECEIVE_COUNT_MAX: u8 = 10;
/// Longest long-poll SQS allows.
pub const RECEIVE_WAIT_MAX: Duration = Duration::from_secs(20);

/// A received message. The body is EventBridge JSON, parsed by the interruption controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub message_id: String,
    /// Handle for `delete_message`; valid until the visibility timeout expires.
    pub receipt_handle: String,
    pub body: String,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SqsError {
    /// The configured queue does not exist (a setup error: surfaced, not retried in a loop).
    #[error("queue does not exist: {0}")]
    QueueDoesNotExist(String),
    /// The receipt handle expired or is malformed: the message will be redelivered.
    #[error("invalid receipt handle: {0}")]
    InvalidReceiptHandle(String),
    /// Throttling.
    #[error("throttled: {0}")]
    Throttled(String),
    /// Credentials or permissions.
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// 5xx, timeouts, connection errors.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

impl Retryable for SqsError {
    fn is_retryable(&self) -> bool {
        matches!(self, SqsError::Throttled(_) | SqsError::Unavailable(_))
    }
}

/// The queue the controller polls for EventBridge interruption events. The queue is fixed when
/// the implementation is built (production resolves its URL by name once).
///
/// Delivery is at least once: a message may arrive twice or out of order, and comes back after
/// its visibility timeout unless deleted. The controller deletes a message only after acting on it.
#[async_trait]
pub trait Sqs: Send + Sync {
    /// Long-polls for up to `count_max` (≤ [`RECEIVE_COUNT_MAX`]) messages, waiting at most `wait`
    /// (≤ [`RECEIVE_WAIT_MAX`]). An empty result is normal.
    async fn receive_messages(
        &self,
        count_max: u8,
        wait: Duration,
    ) -> Result<Vec<Message>, SqsError>;

    /// Deletes a received message. Deleting an already-deleted message succeeds.
    async fn delete_message(&self, receipt_handle: &str) -> Result<(), SqsError>;
}
