//! The seeded randomness of a fake: one seed, one ChaCha stream per (component, purpose). Turning
//! a fault rate on then changes which calls fail, not every id and boot time after it, so two runs
//! that differ in one knob stay comparable line by line.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The streams of one component (`fakecloud`, `fakekube`, a fault of the sim) of one seed.
#[derive(Clone, Debug)]
pub struct Streams {
    seed: u64,
    component: &'static str,
    /// Stream numbers by purpose, as the component numbered them by hand.
    numbers: &'static [(&'static str, u64)],
}

impl Streams {
    /// The streams of `component` of `seed`; `numbers` gives each purpose its stream number.
    pub fn new(
        seed: u64,
        component: &'static str,
        numbers: &'static [(&'static str, u64)],
    ) -> Self {
        Self {
            seed,
            component,
            numbers,
        }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn component(&self) -> &'static str {
        self.component
    }

    /// A fresh stream for `purpose` (the same purpose gives the same stream every time).
    pub fn stream(&self, purpose: &str) -> ChaCha8Rng {
        let number = self
            .numbers
            .iter()
            .find(|(name, _)| *name == purpose)
            .map_or(0, |(_, number)| *number);
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(number);
        rng
    }
}

/// A version-4 UUID (EventBridge event ids, SQS message ids, Kubernetes uids).
pub fn uuid(rng: &mut ChaCha8Rng) -> String {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// True with probability `rate` (no draw when the rate is zero, so an unused knob costs nothing
/// and does not shift later draws).
pub fn chance(rng: &mut ChaCha8Rng, rate: f64) -> bool {
    rate > 0.0 && rng.r#gen::<f64>() < rate
}

/// Uniform in `[min, max]` (`min` when the range is empty).
pub fn between(rng: &mut ChaCha8Rng, min: u64, max: u64) -> u64 {
    if max <= min {
        min
    } else {
        rng.gen_range(min..=max)
    }
}
