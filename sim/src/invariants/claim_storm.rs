//! `claim-storm`: retry storms do not mint NodeClaims endlessly. Over every sliding window of
//! [`CLAIM_STORM_WINDOW`], the NodeClaims the controller deleted without an instance ever
//! launched for them (insufficient-capacity failures) number at most
//! [`CLAIM_STORM_FAILED_LAUNCHES_FLOOR`] plus the number of distinct pods pending at some step
//! of the window.
//!
//! Why that bound: after a capacity error the failed offerings are cached unavailable for three
//! minutes, so each group of pending pods (at least one pod) gets a new claim only when an
//! offering it has not tried remains, a handful per window; a controller that turns retries into
//! new claims makes one per reconcile, hundreds per window.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use jiff::Timestamp;

use super::pod_facts::minus;
use super::{Check, Invariant, StepView, Violation};

/// Sliding window of `claim-storm`.
pub const CLAIM_STORM_WINDOW: Duration = Duration::from_secs(10 * 60);
/// Failed launches `claim-storm` allows in a window besides one per pending pod.
pub const CLAIM_STORM_FAILED_LAUNCHES_FLOOR: usize = 10;

/// The `claim-storm` checker: the window's pending pods and failed launches.
#[derive(Debug, Default)]
pub struct ClaimStorm {
    /// Pod name → last step it was pending.
    pending_seen: BTreeMap<String, Timestamp>,
    /// When each claim deleted without a launch was deleted, oldest first.
    failed_launches: VecDeque<Timestamp>,
}

impl Check for ClaimStorm {
    fn invariant(&self) -> Invariant {
        Invariant::ClaimStorm
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let now = step.now;
        let start = minus(now, CLAIM_STORM_WINDOW);
        for name in step.observation.pending_names.iter() {
            self.pending_seen.insert(name.clone(), now);
        }
        self.pending_seen.retain(|_, t| *t > start);
        let ended = &step.audit.claims_ended;
        self.failed_launches
            .extend(ended.iter().filter(|e| !e.launched).map(|e| e.at));
        while self.failed_launches.front().is_some_and(|t| *t <= start) {
            self.failed_launches.pop_front();
        }
        let allowed = CLAIM_STORM_FAILED_LAUNCHES_FLOOR + self.pending_seen.len();
        if self.failed_launches.len() <= allowed {
            return Vec::new();
        }
        vec![Violation::at(
            now,
            format!(
                "{} NodeClaims deleted without launching in the last {}s, with {} pods pending (at most {allowed})",
                self.failed_launches.len(),
                CLAIM_STORM_WINDOW.as_secs(),
                self.pending_seen.len()
            ),
        )]
    }
}
