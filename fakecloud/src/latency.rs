//! How long each API action takes when nothing is wrong: EC2 and SQS answer in hundreds of
//! milliseconds to seconds, and a controller that works with instant answers can fail with real
//! ones. [`LatencyProfile`] holds a range per action; every call draws its latency from its
//! action's range (a stream of its own) and sleeps it on the calling task (`tokio::time`),
//! before any injected fault latency on top.
//!
//! [`LatencyProfile::drawn`] gives each seed its own ranges within [`REALISTIC_MS`]'s bounds, so a
//! swarm covers fast and slow clouds; [`LatencyProfile::none`] (the default) answers at once.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::faults::Operation;

/// The bounds every action's range lies within, milliseconds (EC2: CreateFleet 1–3 s, Describe*,
/// CreateTags and TerminateInstances 0.1–0.5 s; SSM GetParameter 0.05–0.2 s; SQS calls
/// 10–50 ms; a receive's long poll comes on top, as the queue's own wait).
pub const REALISTIC_MS: [(Operation, u64, u64); 15] = [
    (Operation::CreateFleet, 1_000, 3_000),
    (Operation::DescribeInstances, 100, 500),
    (Operation::TerminateInstances, 100, 500),
    (Operation::CreateTags, 100, 500),
    (Operation::DescribeSubnets, 100, 500),
    (Operation::DescribeSecurityGroups, 100, 500),
    (Operation::DescribeImages, 100, 500),
    (Operation::GetParameter, 50, 200),
    (Operation::CreateLaunchTemplate, 100, 500),
    (Operation::DescribeLaunchTemplates, 100, 500),
    (Operation::DeleteLaunchTemplate, 100, 500),
    (Operation::DescribeInstanceStatus, 100, 500),
    (Operation::DescribeCapacityReservations, 100, 500),
    (Operation::ReceiveMessage, 10, 50),
    (Operation::DeleteMessage, 10, 50),
];

/// A latency range per action, milliseconds (absent: instant).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyProfile {
    pub ranges_ms: BTreeMap<Operation, (u64, u64)>,
}

impl LatencyProfile {
    /// Every call answers at once.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every action over its whole realistic range.
    pub fn realistic() -> Self {
        Self {
            ranges_ms: REALISTIC_MS
                .iter()
                .map(|&(op, low, high)| (op, (low, high)))
                .collect(),
        }
    }

    /// The seed's own ranges: for each action two draws within its realistic bounds, the lower
    /// the range's start and the higher its end (a seed with a fast CreateFleet, another with a
    /// slow one).
    pub fn drawn(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(LATENCY_PROFILE_STREAM);
        Self {
            ranges_ms: REALISTIC_MS
                .iter()
                .map(|&(op, low, high)| {
                    let a = rng.gen_range(low..=high);
                    let b = rng.gen_range(low..=high);
                    (op, (a.min(b), a.max(b)))
                })
                .collect(),
        }
    }

    /// The same ranges times `factor` (an EC2 slower than normal).
    pub fn scaled(&self, factor: f64) -> Self {
        let scale = |ms: u64| (ms as f64 * factor.max(0.0)).round() as u64;
        Self {
            ranges_ms: self
                .ranges_ms
                .iter()
                .map(|(op, (low, high))| (*op, (scale(*low), scale(*high))))
                .collect(),
        }
    }
}

/// The stream the per-seed ranges come from (fakecloud's other streams are numbered below it).
const LATENCY_PROFILE_STREAM: u64 = 13;
/// The stream each call's latency comes from.
const LATENCY_CALLS_STREAM: u64 = 14;

/// Draws each call's latency from the configured profile.
#[derive(Clone, Debug)]
pub(crate) struct Latencies {
    rng: ChaCha8Rng,
}

impl Latencies {
    pub fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(LATENCY_CALLS_STREAM);
        Self { rng }
    }

    /// How long this call of `operation` takes under `profile` (nothing drawn without a range,
    /// so a profile of `none` leaves every other stream and the timing as they were).
    pub fn draw(&mut self, profile: &LatencyProfile, operation: Operation) -> Duration {
        match profile.ranges_ms.get(&operation) {
            Some(&(low, high)) if high > 0 => {
                Duration::from_millis(self.rng.gen_range(low..=high.max(low)))
            }
            _ => Duration::ZERO,
        }
    }
}
