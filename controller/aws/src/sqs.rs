//! The `Sqs` seam over aws-sdk-sqs: the interruption queue, its URL resolved once by name.
//!
//! Receives long-poll with upstream's settings (up to 10 messages, up to 20 s, visibility 20 s);
//! the SQS client's attempt timeout is set above the longest poll (see [`crate::config`]).

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::types::MessageSystemAttributeName;
use karpenter_core::seams::sqs::{Message, RECEIVE_COUNT_MAX, RECEIVE_WAIT_MAX, Sqs, SqsError};

use crate::errors::SdkResultExt;

/// How long a received message stays hidden unless deleted (upstream's 20 s).
pub const RECEIVE_VISIBILITY_TIMEOUT_S: i32 = 20;

/// The interruption queue.
#[derive(Clone, Debug)]
pub struct AwsSqs {
    client: aws_sdk_sqs::Client,
    queue_url: String,
}

impl AwsSqs {
    /// Resolves `queue_name` with `GetQueueUrl`; a missing queue is
    /// [`SqsError::QueueDoesNotExist`].
    pub async fn connect(client: aws_sdk_sqs::Client, queue_name: &str) -> Result<Self, SqsError> {
        let output = client
            .get_queue_url()
            .queue_name(queue_name)
            .send()
            .await
            .seam()?;
        let queue_url = output
            .queue_url()
            .ok_or_else(|| SqsError::Unavailable("GetQueueUrl answered no QueueUrl".into()))?
            .to_string();
        Ok(Self { client, queue_url })
    }

    /// A queue whose URL is already known.
    pub fn with_url(client: aws_sdk_sqs::Client, queue_url: &str) -> Self {
        Self {
            client,
            queue_url: queue_url.to_string(),
        }
    }

    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }
}

#[async_trait]
impl Sqs for AwsSqs {
    async fn receive_messages(
        &self,
        count_max: u8,
        wait: Duration,
    ) -> Result<Vec<Message>, SqsError> {
        let count = count_max.clamp(1, RECEIVE_COUNT_MAX);
        let wait_s = wait.min(RECEIVE_WAIT_MAX).as_secs();
        let output = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(i32::from(count))
            .wait_time_seconds(i32::try_from(wait_s).unwrap_or(20))
            .visibility_timeout(RECEIVE_VISIBILITY_TIMEOUT_S)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .send()
            .await
            .seam()?;
        Ok(output
            .messages()
            .iter()
            .map(|m| Message {
                message_id: m.message_id().unwrap_or_default().to_string(),
                receipt_handle: m.receipt_handle().unwrap_or_default().to_string(),
                body: m.body().unwrap_or_default().to_string(),
            })
            .collect())
    }

    async fn delete_message(&self, receipt_handle: &str) -> Result<(), SqsError> {
        self.client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .seam()?;
        Ok(())
    }
}
