//! The interruption queue: SQS standard-queue semantics the controller must cope with. Delivery
//! is at least once: a received message is hidden for the visibility timeout and comes back unless
//! deleted; optional knobs deliver duplicates and shuffle batches; messages expire after the
//! retention period; receives long-poll.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use karpenter_core::seams::sqs::{Message, RECEIVE_COUNT_MAX, RECEIVE_WAIT_MAX, Sqs, SqsError};
use rand::RngCore;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::FakeCloud;
use crate::config::Config;
use crate::faults::{Injected, Operation};
use crate::rng::{Rngs, chance, uuid};
use crate::state::after;
use fakekit::{FromInjected, list, outcome, serve};

/// A message as it entered the queue: the message stream two same-seed runs share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentMessage {
    pub time: Timestamp,
    pub message_id: String,
    pub body: String,
}

#[derive(Clone, Debug)]
struct Entry {
    message_id: String,
    body: String,
    sent_at: Timestamp,
    visible_at: Timestamp,
    receive_count: u32,
    /// The handle of the latest receive; only it can delete the message, and only while the
    /// message is still hidden.
    handle: Option<String>,
}

#[derive(Clone, Debug)]
pub(crate) struct Queue {
    pub exists: bool,
    /// By enqueue order (a duplicate is a new entry with the same message id).
    entries: BTreeMap<u64, Entry>,
    next_seq: u64,
    pub dropped: u64,
    /// Messages delivered a second time by the `duplicate_delivery_rate` knob.
    pub duplicated: u64,
    /// Receives of two or more messages whose order the `reorder_rate` knob shuffled.
    pub reordered: u64,
    sent: VecDeque<SentMessage>,
    sent_len_max: usize,
}

impl Queue {
    pub fn new(sent_len_max: usize) -> Self {
        Self {
            exists: true,
            entries: BTreeMap::new(),
            next_seq: 0,
            dropped: 0,
            duplicated: 0,
            reordered: 0,
            sent: VecDeque::new(),
            sent_len_max,
        }
    }

    /// Adds a message at `time`, its id drawn from `ids`; dropped (and counted) if the queue is
    /// missing or full.
    pub fn enqueue(&mut self, body: &str, time: Timestamp, config: &Config, ids: &mut ChaCha8Rng) {
        self.expire(time, config);
        if !self.exists || self.entries.len() >= config.queue_depth_max {
            self.dropped += 1;
            return;
        }
        let message_id = uuid(ids);
        self.push(Entry {
            message_id: message_id.clone(),
            body: body.to_string(),
            sent_at: time,
            visible_at: time,
            receive_count: 0,
            handle: None,
        });
        if self.sent_len_max > 0 {
            while self.sent.len() >= self.sent_len_max {
                self.sent.pop_front();
            }
            self.sent.push_back(SentMessage {
                time,
                message_id,
                body: body.to_string(),
            });
        }
    }

    fn push(&mut self, entry: Entry) {
        self.entries.insert(self.next_seq, entry);
        self.next_seq += 1;
    }

    /// Drops messages past the retention period.
    fn expire(&mut self, now: Timestamp, config: &Config) {
        let retention = Duration::from_secs(config.message_retention_s);
        self.entries
            .retain(|_, e| after(e.sent_at, retention) > now);
    }

    /// Receives up to `count` visible messages and hides them for the visibility timeout.
    pub fn receive(
        &mut self,
        count: usize,
        now: Timestamp,
        config: &Config,
        rng: &mut Rngs,
    ) -> Vec<Message> {
        self.expire(now, config);
        let mut visible: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| e.visible_at <= now)
            .map(|(seq, _)| *seq)
            .collect();
        if chance(&mut rng.sqs_reorder, config.reorder_rate) {
            visible.shuffle(&mut rng.sqs_reorder);
            if visible.len() > 1 {
                self.reordered += 1;
            }
        }
        visible.truncate(count);
        let hidden_until = after(now, Duration::from_secs(config.visibility_timeout_s));
        let mut messages = Vec::new();
        for seq in visible {
            let duplicate = chance(&mut rng.sqs_duplicate, config.duplicate_delivery_rate);
            let tag = rng.sqs.next_u64();
            let Some(entry) = self.entries.get_mut(&seq) else {
                continue;
            };
            entry.receive_count += 1;
            let handle = format!("{seq:016x}{:08x}{tag:016x}", entry.receive_count);
            entry.handle = Some(handle.clone());
            entry.visible_at = hidden_until;
            messages.push(Message {
                message_id: entry.message_id.clone(),
                receipt_handle: handle,
                body: entry.body.clone(),
            });
            if duplicate {
                let copy = Entry {
                    visible_at: now,
                    receive_count: 0,
                    handle: None,
                    ..entry.clone()
                };
                self.push(copy);
                self.duplicated += 1;
            }
        }
        messages
    }

    pub fn delete(&mut self, handle: &str, now: Timestamp) -> Result<(), SqsError> {
        let seq = (handle.len() == 40)
            .then(|| u64::from_str_radix(&handle[..16], 16).ok())
            .flatten()
            .filter(|seq| *seq < self.next_seq && handle.chars().all(|c| c.is_ascii_hexdigit()))
            .ok_or_else(|| {
                SqsError::InvalidReceiptHandle(format!(
                    "The input receipt handle \"{handle}\" is not a valid receipt handle."
                ))
            })?;
        match self.entries.get(&seq) {
            // Already deleted (or expired): deleting again succeeds.
            None => Ok(()),
            Some(entry) if entry.handle.as_deref() == Some(handle) && now < entry.visible_at => {
                self.entries.remove(&seq);
                Ok(())
            }
            Some(_) => Err(SqsError::InvalidReceiptHandle(format!(
                "The receipt handle \"{handle}\" has expired."
            ))),
        }
    }

    /// When the next hidden message becomes visible again.
    pub fn next_visible(&self, now: Timestamp) -> Option<Timestamp> {
        self.entries
            .values()
            .map(|e| e.visible_at)
            .filter(|t| *t > now)
            .min()
    }

    /// Messages in the queue (visible or in flight), after expiry at `now`.
    pub fn depth(&mut self, now: Timestamp, config: &Config) -> usize {
        self.expire(now, config);
        self.entries.len()
    }

    pub fn sent(&self) -> Vec<SentMessage> {
        self.sent.iter().cloned().collect()
    }
}

impl FromInjected<Injected, Operation> for SqsError {
    fn from_injected(kind: Injected, _: Operation) -> Self {
        match kind {
            Injected::Throttle => SqsError::Throttled("ThrottlingException: Rate exceeded".into()),
            Injected::InternalError => SqsError::Unavailable(
                "InternalFailure: The request processing has failed because of an unknown error"
                    .into(),
            ),
            Injected::Unavailable => SqsError::Unavailable(
                "ServiceUnavailable: The request has failed due to a temporary failure of the server"
                    .into(),
            ),
        }
    }
}

fn queue_missing() -> SqsError {
    SqsError::QueueDoesNotExist("The specified queue does not exist.".into())
}

#[async_trait]
impl Sqs for FakeCloud {
    /// Long-polls: without visible messages it sleeps (`tokio::time`, virtual under madsim) until
    /// the next message can appear or `wait` is over, so it needs a runtime only when it waits.
    async fn receive_messages(
        &self,
        count_max: u8,
        wait: Duration,
    ) -> Result<Vec<Message>, SqsError> {
        let count = usize::from(count_max.clamp(1, RECEIVE_COUNT_MAX));
        let wait = wait.min(RECEIVE_WAIT_MAX);
        let input = format!("max={count} wait={}ms", wait.as_millis());
        let (decision, deadline) = {
            let mut state = self.current();
            let now = state.now;
            let state = &mut *state;
            let mut decision =
                state
                    .kit
                    .decide(Operation::ReceiveMessage, now, &state.config.faults);
            decision.latency += state
                .latencies
                .draw(&state.config.latency, Operation::ReceiveMessage);
            // The long poll's own wait is the queue's, not the call's: not counted.
            state.kit.slept_total += decision.latency;
            (decision, after(now, wait))
        };
        if !decision.latency.is_zero() {
            tokio::time::sleep(decision.latency).await;
        }
        if let Some(kind) = decision.error {
            let mut state = self.current();
            let state = &mut *state;
            if decision.apply_anyway && state.queue.exists {
                // Received, so hidden for the visibility timeout, but the caller never sees them.
                state
                    .queue
                    .receive(count, state.now, &state.config, &mut state.rng);
            }
            let error = SqsError::from_injected(kind, Operation::ReceiveMessage);
            let outcome = format!("err {error}");
            state
                .kit
                .calls
                .record(state.now, Operation::ReceiveMessage, input, outcome);
            return Err(error);
        }
        let started = tokio::time::Instant::now();
        loop {
            let slept = started.elapsed();
            let step = {
                let mut state = self.current_quietly();
                let state = &mut *state;
                let now = state.now;
                let result = if state.queue.exists {
                    Ok(state
                        .queue
                        .receive(count, now, &state.config, &mut state.rng))
                } else {
                    Err(queue_missing())
                };
                let done = match &result {
                    Ok(messages) => !messages.is_empty() || now >= deadline || slept >= wait,
                    Err(_) => true,
                };
                if done {
                    let outcome = outcome(&result, |messages| {
                        list(messages.iter().map(|m| m.message_id.as_str()))
                    });
                    state
                        .kit
                        .calls
                        .record(now, Operation::ReceiveMessage, input, outcome);
                    return result;
                }
                let next = [
                    state.timeline.next_time(),
                    state.queue.next_visible(now),
                    Some(deadline),
                ]
                .into_iter()
                .flatten()
                .filter(|t| *t > now)
                .min()
                .unwrap_or(deadline);
                let ms = (next.as_millisecond() - now.as_millisecond()).max(1);
                Duration::from_millis(ms.unsigned_abs()).min(wait.saturating_sub(slept))
            };
            // Anything that takes the state from now on may have queued a message.
            let touched = self.touched.notified();
            tokio::select! {
                biased;
                () = touched => {}
                () = tokio::time::sleep(step) => {}
            }
        }
    }

    async fn delete_message(&self, receipt_handle: &str) -> Result<(), SqsError> {
        serve(
            self,
            Operation::DeleteMessage,
            receipt_handle.to_string(),
            |state, _| {
                if !state.queue.exists {
                    return Err(queue_missing());
                }
                state.queue.delete(receipt_handle, state.now)
            },
            |_| String::new(),
        )
        .await
    }
}
