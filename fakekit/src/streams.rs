//! The seeded randomness of a fake: one seed, one ChaCha stream per (component, purpose). Turning
//! a fault rate on then changes which calls fail, not every id and boot time after it, so two runs
//! that differ in one knob stay comparable line by line.
//!
//! A stream's id is a hash of its names (FNV-1a of `component/purpose`), not a number someone
//! picked: two components on one seed (fakecloud and the API server, say) never share a stream,
//! and adding a purpose or a fault moves no other stream.

use std::hash::Hasher;

use fnv::FnvHasher;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The streams of one component (`fakecloud`, `fakekube`, the sim's faults) of one seed.
#[derive(Clone, Debug)]
pub struct Streams {
    seed: u64,
    component: &'static str,
}

impl Streams {
    /// The streams of `component` (a name without `/`, so `component/purpose` names one stream)
    /// of `seed`.
    pub fn new(seed: u64, component: &'static str) -> Self {
        debug_assert!(
            !component.contains('/'),
            "component {component:?} contains '/'"
        );
        Self { seed, component }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn component(&self) -> &'static str {
        self.component
    }

    /// A fresh stream for `purpose` (the same purpose gives the same stream every time).
    pub fn stream(&self, purpose: &str) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(stream_id(self.component, purpose));
        rng
    }
}

/// The ChaCha stream id of (`component`, `purpose`): FNV-1a of `component/purpose`.
pub fn stream_id(component: &str, purpose: &str) -> u64 {
    let mut hasher = FnvHasher::default();
    hasher.write(component.as_bytes());
    hasher.write(b"/");
    hasher.write(purpose.as_bytes());
    hasher.finish()
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
