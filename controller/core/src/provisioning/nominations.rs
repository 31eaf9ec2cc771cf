//! The provisioner's nominations: the nodes it just planned pending pods onto, each held for a
//! window, so that disruption leaves them alone while those pods are on their way (upstream's
//! `StateNode.Nominate` / `Nominated`).
//!
//! Disruption reads these instead of solving the pending pods again itself: that second solve
//! on every decision pass was a fifth of a swarm seed's CPU (issue 13), and upstream's
//! disruption does not do it either.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

use super::BatchWindow;

/// Upstream's floor for the nomination window (`nominationWindow`: twice the batch's maximum
/// duration, at least 10 s).
pub const NOMINATION_WINDOW_MIN: Duration = Duration::from_secs(10);

/// How long a nomination holds for a batch window: `max(2 × max, 10 s)`, as upstream.
pub fn nomination_window(window: BatchWindow) -> Duration {
    (window.max * 2).max(NOMINATION_WINDOW_MIN)
}

/// Nodes (by name) nominated for pending pods, each until its instant. One per controller
/// process, in memory, as upstream's cluster state: a new leader starts with none.
#[derive(Debug, Default)]
pub struct Nominations {
    until: Mutex<BTreeMap<String, Timestamp>>,
}

impl Nominations {
    /// Nominates `node` until `until` (a later nomination extends it, never shortens it).
    pub fn nominate(&self, node: &str, until: Timestamp) {
        let mut map = self.lock();
        let entry = map.entry(node.to_string()).or_insert(until);
        *entry = (*entry).max(until);
    }

    /// The nodes nominated at `now`; expired nominations are dropped.
    pub fn active(&self, now: Timestamp) -> BTreeSet<String> {
        let mut map = self.lock();
        map.retain(|_, until| *until > now);
        map.keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Timestamp>> {
        self.until.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nomination_holds_for_its_window_and_is_then_forgotten() {
        let nominations = Nominations::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let window = nomination_window(BatchWindow::default());
        assert_eq!(window, Duration::from_secs(20));
        nominations.nominate("node-a", t0 + window);
        assert!(
            nominations
                .active(t0 + Duration::from_secs(19))
                .contains("node-a")
        );
        assert!(nominations.active(t0 + window).is_empty());
    }

    #[test]
    fn a_later_nomination_extends_an_earlier_one_and_an_earlier_never_shortens_it() {
        let nominations = Nominations::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        nominations.nominate("node-a", t0 + Duration::from_secs(20));
        nominations.nominate("node-a", t0 + Duration::from_secs(30));
        nominations.nominate("node-a", t0 + Duration::from_secs(5));
        assert!(
            nominations
                .active(t0 + Duration::from_secs(25))
                .contains("node-a")
        );
    }

    #[test]
    fn a_short_batch_window_still_nominates_for_ten_seconds() {
        let window = BatchWindow {
            idle: Duration::from_millis(100),
            max: Duration::from_secs(2),
        };
        assert_eq!(nomination_window(window), NOMINATION_WINDOW_MIN);
    }
}
