//! The provisioning batch window: wait for pending pods to stop arriving (idle window) but not
//! forever (max window), so one scheduling run sees a burst as a whole.

use std::time::Duration;

use jiff::Timestamp;

/// Batch window bounds (upstream `BATCH_IDLE_DURATION` 1 s, `BATCH_MAX_DURATION` 10 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchWindow {
    pub idle: Duration,
    pub max: Duration,
}

impl Default for BatchWindow {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(1),
            max: Duration::from_secs(10),
        }
    }
}

/// Collects triggers; says when the batch is complete. Pure: time is passed in.
#[derive(Clone, Debug, Default)]
pub struct Batcher {
    window: BatchWindow,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
}

impl Batcher {
    pub fn new(window: BatchWindow) -> Self {
        Self {
            window,
            first: None,
            last: None,
        }
    }

    /// Something worth provisioning for happened at `now` (a new pending pod).
    pub fn trigger(&mut self, now: Timestamp) {
        self.first.get_or_insert(now);
        self.last = Some(now);
    }

    /// Whether a batch is open.
    pub fn is_open(&self) -> bool {
        self.first.is_some()
    }

    /// Whether the open batch is complete at `now`: idle for `idle` since the last trigger, or
    /// open for `max` since the first.
    pub fn is_ready(&self, now: Timestamp) -> bool {
        let (Some(first), Some(last)) = (self.first, self.last) else {
            return false;
        };
        let since = |t: Timestamp| now.duration_since(t).unsigned_abs();
        since(last) >= self.window.idle || since(first) >= self.window.max
    }

    /// How long until the open batch is complete (zero if it is; `None` if no batch is open).
    pub fn remaining(&self, now: Timestamp) -> Option<Duration> {
        let (first, last) = (self.first?, self.last?);
        let since = |t: Timestamp| now.duration_since(t).unsigned_abs();
        let idle_left = self.window.idle.saturating_sub(since(last));
        let max_left = self.window.max.saturating_sub(since(first));
        Some(idle_left.min(max_left))
    }

    /// Closes the batch (after a scheduling run).
    pub fn reset(&mut self) {
        self.first = None;
        self.last = None;
    }
}
