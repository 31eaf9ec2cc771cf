//! [`CloudHistory`]: what several checkers need to remember of fakecloud across steps: spot
//! interruption warnings (from the messages EC2 sent to the queue) and capacity incidents
//! (insufficient-capacity answers, slow and never-booting instances), with the [`Counters`] the
//! swarm reports. Updated once after every step, before any checker looks.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fakecloud::{FakeCloud, Operation};
use fakekit::Fake;
use jiff::Timestamp;
use serde_json::Value;

use super::claims_progress::CLAIM_DEADLINE;
use super::pod_facts::{minus, plus};
use super::{Counters, Observation};

/// How long after an insufficient-capacity answer capacity counts as missing (upstream's
/// unavailable-offerings cache keeps the offering out that long).
pub const CAPACITY_ERROR_SHADOW: Duration = Duration::from_secs(3 * 60);

/// CreateFleet error codes that mean capacity was missing.
const INSUFFICIENT_CAPACITY_CODES: [&str; 5] = [
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "UnfulfillableCapacity",
    "VcpuLimitExceeded",
    "InsufficientFreeAddressesInSubnet",
];

/// Spot warnings and capacity incidents seen so far.
#[derive(Debug)]
pub struct CloudHistory {
    /// Every instance seen, so each launch is looked at once.
    seen: BTreeSet<String>,
    /// Spot warnings by instance id.
    warned: BTreeMap<String, Timestamp>,
    /// The warnings the last update found, in the order EC2 sent them.
    fresh_warnings: Vec<(String, Timestamp)>,
    messages_seen: usize,
    /// Intervals during which capacity was missing.
    incidents: Vec<(Timestamp, Timestamp)>,
    /// The boot model's longest normal boot: slower ones are incidents.
    boot_max: Duration,
    counters: Counters,
}

impl CloudHistory {
    pub fn new(cloud: &FakeCloud) -> Self {
        let mut boot_max = Duration::from_secs(60);
        cloud.configure(|c| boot_max = Duration::from_millis(c.boot.boot_duration_ms_max));
        Self {
            seen: BTreeSet::new(),
            warned: BTreeMap::new(),
            fresh_warnings: Vec::new(),
            messages_seen: 0,
            incidents: Vec::new(),
            boot_max,
            counters: Counters::default(),
        }
    }

    /// Takes in one step: fakecloud's call log (before the world clears it), the instances of
    /// `observation` and the queue's new messages. Incidents that ended before both
    /// `oldest_pending` (the longest-waiting pod's start) and a whole claim deadline ago are
    /// forgotten: nothing looks back further.
    pub fn update(
        &mut self,
        cloud: &FakeCloud,
        observation: &Observation,
        now: Timestamp,
        oldest_pending: Option<Timestamp>,
    ) {
        self.watch_calls(cloud);
        self.watch_boots(cloud, observation);
        let horizon = oldest_pending
            .unwrap_or(now)
            .min(minus(now, CLAIM_DEADLINE));
        self.incidents.retain(|(_, end)| *end >= horizon);
        self.watch_warnings(cloud);
    }

    /// Whether capacity itself was missing in `from..=to` (insufficient capacity, slow or never
    /// booting instances). EC2 throttling and 5xx answers are not missing capacity: the
    /// invariants hold the controller to riding them out (it retries them).
    pub fn capacity_lost(&self, from: Timestamp, to: Timestamp) -> bool {
        self.incidents.iter().any(|(a, b)| *a <= to && *b >= from)
    }

    /// Capacity incidents remembered, as (start, end).
    pub fn incidents(&self) -> &[(Timestamp, Timestamp)] {
        &self.incidents
    }

    /// When `instance` got its spot interruption warning, if it did.
    pub fn warned_at(&self, instance: &str) -> Option<Timestamp> {
        self.warned.get(instance).copied()
    }

    /// Every spot warning so far: (instance id, when).
    pub fn warnings(&self) -> impl Iterator<Item = (&str, Timestamp)> {
        self.warned.iter().map(|(id, at)| (id.as_str(), *at))
    }

    /// The warnings the last update found, in the order EC2 sent them.
    pub fn fresh_warnings(&self) -> &[(String, Timestamp)] {
        &self.fresh_warnings
    }

    /// What was counted so far (the rehome counts are the rehome checker's).
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Insufficient-capacity answers to CreateFleet become incidents; throttling and 5xx (the
    /// substrings the world's fault tally uses) are counted, not incidents.
    fn watch_calls(&mut self, cloud: &FakeCloud) {
        for call in cloud.calls() {
            let failed = !call.is_ok()
                && ["RequestLimitExceeded", "InternalError", "Unavailable"]
                    .iter()
                    .any(|code| call.outcome.contains(code));
            if failed {
                self.counters.ec2_errors += 1;
            }
            if call.operation != Operation::CreateFleet {
                continue;
            }
            let nothing = call.outcome.contains("instances=[]") || !call.is_ok();
            if nothing
                && INSUFFICIENT_CAPACITY_CODES
                    .iter()
                    .any(|code| call.outcome.contains(code))
            {
                self.counters.capacity_errors += 1;
                self.incidents
                    .push((call.time, plus(call.time, CAPACITY_ERROR_SHADOW)));
            }
        }
    }

    /// A new instance that never boots is an incident until its registration deadline; one that
    /// boots slower than the boot model's normal range, until it is ready.
    fn watch_boots(&mut self, cloud: &FakeCloud, observation: &Observation) {
        for id in observation.instances.keys() {
            if !self.seen.insert(id.clone()) {
                continue;
            }
            let Some(boot) = cloud.boot(id) else { continue };
            match boot.ready_at {
                None => {
                    self.counters.never_boots += 1;
                    self.incidents
                        .push((boot.launch_time, plus(boot.launch_time, CLAIM_DEADLINE)));
                }
                Some(ready)
                    if ready.duration_since(boot.launch_time).unsigned_abs() > self.boot_max =>
                {
                    self.counters.slow_boots += 1;
                    self.incidents.push((boot.launch_time, ready));
                }
                Some(_) => {}
            }
        }
    }

    /// Spot warnings among the messages EC2 sent since the last update.
    fn watch_warnings(&mut self, cloud: &FakeCloud) {
        let messages = cloud.sent_messages();
        let fresh = messages.get(self.messages_seen..).unwrap_or_default();
        self.fresh_warnings.clear();
        for message in fresh {
            let Ok(body) = serde_json::from_str::<Value>(&message.body) else {
                continue;
            };
            if body["detail-type"] != "EC2 Spot Instance Interruption Warning" {
                continue;
            }
            if let Some(id) = body["detail"]["instance-id"].as_str() {
                self.fresh_warnings.push((id.to_string(), message.time));
            }
        }
        self.messages_seen = messages.len();
        for (id, warned) in &self.fresh_warnings {
            self.counters.spot_warnings += 1;
            self.warned.insert(id.clone(), *warned);
        }
    }
}
