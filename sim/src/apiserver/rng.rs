//! The seeded randomness. One seed, one ChaCha stream per concern: turning on a fault rate then
//! changes which calls fail, not every generated name and uid after it, so two runs that differ in
//! one knob stay comparable line by line.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Characters of a `generateName` suffix: Kubernetes' `utilrand.String` alphabet (no vowels, no
/// look-alike digits, so a random suffix never spells a word).
const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Length of a `generateName` suffix, as Kubernetes draws it.
pub(crate) const NAME_SUFFIX_LEN: usize = 5;

#[derive(Clone, Debug)]
pub(crate) struct Rngs {
    /// Generated names and uids.
    pub ids: ChaCha8Rng,
    /// Fault decisions, one stream per kind.
    pub faults: FaultRngs,
}

/// One stream per kind of injected fault, so turning one kind on (5xx, say) does not change which
/// calls another kind (conflicts) hits.
#[derive(Clone, Debug)]
pub(crate) struct FaultRngs {
    pub unavailable: ChaCha8Rng,
    pub conflict: ChaCha8Rng,
    pub lost_response: ChaCha8Rng,
    pub disconnect: ChaCha8Rng,
    pub latency: ChaCha8Rng,
}

impl Rngs {
    pub fn new(seed: u64) -> Self {
        let stream = |n: u64| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(n);
            rng
        };
        Self {
            ids: stream(1),
            faults: FaultRngs {
                // 5xx keeps the stream all faults shared before they had one each.
                unavailable: stream(2),
                conflict: stream(3),
                lost_response: stream(4),
                disconnect: stream(5),
                latency: stream(6),
            },
        }
    }
}

/// A version-4 UUID, the shape of Kubernetes uids.
pub(crate) fn uuid(rng: &mut ChaCha8Rng) -> String {
    let mut bytes = [0u8; 16];
    rng.fill_bytes(&mut bytes);
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The random suffix `generateName` appends.
pub(crate) fn name_suffix(rng: &mut ChaCha8Rng) -> String {
    (0..NAME_SUFFIX_LEN)
        .map(|_| char::from(NAME_SUFFIX_ALPHABET[rng.gen_range(0..NAME_SUFFIX_ALPHABET.len())]))
        .collect()
}

/// True with probability `rate` (no draw when the rate is zero, so an unused knob costs nothing
/// and does not shift later draws).
pub(crate) fn chance(rng: &mut ChaCha8Rng, rate: f64) -> bool {
    rate > 0.0 && rng.r#gen::<f64>() < rate
}

/// Uniform in `[min, max]` (`min` when the range is empty).
pub(crate) fn between(rng: &mut ChaCha8Rng, min: u64, max: u64) -> u64 {
    if max <= min {
        min
    } else {
        rng.gen_range(min..=max)
    }
}
