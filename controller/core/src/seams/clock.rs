//! The Clock seam: the only source of "now" for decisions.

use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

/// Where decisions read the current time from. Production uses the system clock; the simulation
/// a [`ManualClock`] its world advances step by step (TigerBeetle's tick model; madsim only seeds
/// the runtime). Controller code never calls `SystemTime::now` itself (clippy enforces it), so a
/// seeded run replays bit for bit. Sleeping and timeouts go through `tokio::time`, which madsim
/// virtualises.
pub trait Clock: Send + Sync {
    /// The current time. Never goes backwards within one process.
    fn now(&self) -> Timestamp;
}

/// A clock that moves only when told to: for unit tests that need exact timestamps.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<Timestamp>,
}

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Saturates at the end of time; only a calendar span could fail, and a `Duration` is none.
        *now = now.saturating_add(by).unwrap_or(*now);
    }

    /// Sets the clock to `to`; asserts it does not go backwards (a test bug).
    pub fn set(&self, to: Timestamp) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        assert!(to >= *now, "ManualClock::set must not move time backwards");
        *now = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self
            .now
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The clock of a world that runs on tokio's time: `now = epoch + (tokio's now − origin)`.
/// Under madsim that is the seeded virtual time; in a current-thread runtime started paused
/// (`start_paused(true)`) it is tokio's paused clock, which jumps ahead whenever every task
/// waits. Either way time passes exactly as the tasks' sleeps and latencies say, so a call that
/// takes 2 s holds up only the task that waits for it.
#[derive(Debug, Clone, Copy)]
pub struct VirtualClock {
    epoch: Timestamp,
    origin: tokio::time::Instant,
}

impl VirtualClock {
    /// A clock reading `epoch` now. Build it inside the runtime whose time it follows.
    pub fn new(epoch: Timestamp) -> Self {
        Self {
            epoch,
            origin: tokio::time::Instant::now(),
        }
    }

    /// How long the clock has run.
    pub fn elapsed(&self) -> Duration {
        tokio::time::Instant::now().saturating_duration_since(self.origin)
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Timestamp {
        // Saturates at the end of time, like `ManualClock::advance`.
        self.epoch
            .saturating_add(self.elapsed())
            .unwrap_or(self.epoch)
    }
}
