//! `no-leaked-instances`: every live cluster instance (not shutting down or terminated) belongs
//! to a NodeClaim, or is terminated within garbage collection's bound of losing it. An instance
//! belongs to a claim when its id is in some claim's `status.providerID`, or its
//! `karpenter.sh/nodeclaim` tag names an existing claim that records no instance yet (a launch
//! whose status write has not landed). A second instance tagged with a claim that records
//! another is a leaked duplicate. Checked after every step.
//!
//! The bound (upstream's: the instance GC spares instances younger than 30 s and runs every
//! 2 minutes): an instance that no claim owns is a leak once it is older than [`LEAK_WINDOW`]
//! *and* has been unowned for longer than [`ORPHAN_WINDOW`] — an instance orphaned long after
//! its launch (its claim force-deleted) gets one GC interval from then, not from its launch.
//!
//! One deliberate limit: an instance whose Karpenter tags someone deleted (the `tags-lost` fault,
//! [`Leaks::note_tags_lost`]) and that no claim owns is not a leak. Upstream's garbage collection
//! finds instances by those tags alone and a launch adopts only an instance tagged with its
//! claim, so no controller can tell it from an instance another tool runs (the event log's
//! `fault=tags-lost` line names it). While a claim names it, it is held to everything else.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;

use super::{Check, Invariant, StepView, Violation};

/// Garbage collection's grace for young instances (upstream: 30 s).
pub const GC_GRACE: Duration = Duration::from_secs(30);
/// Garbage collection's interval (upstream: 2 min; `karpenter_core`'s `GC_INTERVAL`).
pub const GC_INTERVAL: Duration = Duration::from_secs(120);
/// Slack for a step and the termination call.
pub const GC_SLACK: Duration = Duration::from_secs(30);
/// How old an unowned instance may get: grace + interval + slack.
pub const LEAK_WINDOW: Duration =
    Duration::from_secs(GC_GRACE.as_secs() + GC_INTERVAL.as_secs() + GC_SLACK.as_secs());
/// How long an instance may stay unowned: interval + slack.
pub const ORPHAN_WINDOW: Duration = Duration::from_secs(GC_INTERVAL.as_secs() + GC_SLACK.as_secs());

/// The `no-leaked-instances` checker: when each live instance was first seen unowned.
#[derive(Debug, Default)]
pub struct Leaks {
    unowned_since: BTreeMap<String, Timestamp>,
    /// Instances the world stripped of Karpenter's tags.
    stripped: BTreeSet<String>,
}

impl Leaks {
    /// Records that the world deleted Karpenter's tags from `instance` (`tags-lost`).
    pub fn note_tags_lost(&mut self, instance: &str) {
        self.stripped.insert(instance.to_string());
    }
}

impl Check for Leaks {
    fn invariant(&self) -> Invariant {
        Invariant::NoLeakedInstances
    }

    fn check(&mut self, step: &StepView<'_>) -> Vec<Violation> {
        let observation = step.observation;
        let mut out = Vec::new();
        let mut unowned = BTreeMap::new();
        for instance in &observation.live {
            let owned = observation.known_instances.contains(&instance.instance_id)
                || instance
                    .tags
                    .get("karpenter.sh/nodeclaim")
                    .is_some_and(|n| observation.unlaunched_claims.contains(n));
            if owned || self.stripped.contains(&instance.instance_id) {
                continue;
            }
            let since = self
                .unowned_since
                .get(&instance.instance_id)
                .copied()
                .unwrap_or(step.now);
            unowned.insert(instance.instance_id.clone(), since);
            let age = step.now.duration_since(instance.launch_time).unsigned_abs();
            let orphaned = step.now.duration_since(since).unsigned_abs();
            if age > LEAK_WINDOW && orphaned > ORPHAN_WINDOW {
                out.push(Violation::at(
                    step.now,
                    format!(
                        "instance {} ({}s old) has no NodeClaim (for {}s)",
                        instance.instance_id,
                        age.as_secs(),
                        orphaned.as_secs()
                    ),
                ));
            }
        }
        self.unowned_since = unowned;
        out
    }
}
