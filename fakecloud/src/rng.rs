//! The seeded randomness. One seed, one ChaCha stream per concern: turning on a fault rate then
//! changes which calls fail, not every instance id and boot time after it, so two runs that differ
//! in one knob stay comparable line by line.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug)]
pub(crate) struct Rngs {
    /// Resource ids, event ids, message ids, receipt handles.
    pub ids: ChaCha8Rng,
    pub faults: FaultRngs,
    pub boot: ChaCha8Rng,
    pub spot: ChaCha8Rng,
    pub sqs: ChaCha8Rng,
    /// Whether a receive shuffles its batch (and the shuffle).
    pub sqs_reorder: ChaCha8Rng,
    /// Whether a received message is delivered again.
    pub sqs_duplicate: ChaCha8Rng,
    /// Ids and bodies of messages put into the queue from outside (`inject_message`), so
    /// injecting does not shift the ids of the cloud's own events.
    pub injected: ChaCha8Rng,
}

/// One stream per kind of API fault, so turning one kind on (throttling, say) does not change
/// which calls another kind (5xx) hits.
#[derive(Clone, Debug)]
pub(crate) struct FaultRngs {
    pub throttle: ChaCha8Rng,
    pub internal_error: ChaCha8Rng,
    pub unavailable: ChaCha8Rng,
    pub lost_response: ChaCha8Rng,
    pub latency: ChaCha8Rng,
}

fn stream(seed: u64, n: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(n);
    rng
}

impl Rngs {
    pub fn new(seed: u64) -> Self {
        Self {
            ids: stream(seed, 1),
            faults: FaultRngs {
                // Throttling keeps the stream all faults shared before they had one each.
                throttle: stream(seed, 2),
                internal_error: stream(seed, 6),
                unavailable: stream(seed, 7),
                lost_response: stream(seed, 8),
                latency: stream(seed, 9),
            },
            boot: stream(seed, 3),
            spot: stream(seed, 4),
            sqs: stream(seed, 5),
            sqs_reorder: stream(seed, 10),
            sqs_duplicate: stream(seed, 11),
            injected: stream(seed, 12),
        }
    }
}

/// An EC2-style id: `prefix-0` and 16 hex digits (`i-0123456789abcdef0` has 17 digits in all).
pub(crate) fn resource_id(rng: &mut ChaCha8Rng, prefix: &str) -> String {
    format!("{prefix}-0{:016x}", rng.next_u64())
}

/// A version-4 UUID, as EventBridge event ids and SQS message ids are.
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

/// True with probability `rate` (no draw when the rate is zero, so an unused knob costs nothing).
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
