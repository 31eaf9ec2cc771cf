//! The seeded randomness: one named stream per concern (fakekit's [`Streams`] of the component
//! `fakecloud`). Turning on a fault rate then changes which calls fail, not every instance id and
//! boot time after it, so two runs that differ in one knob stay comparable line by line. (The
//! fault kinds' streams belong to the fault plan.)

use fakekit::Streams;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

pub(crate) use fakekit::{between, chance, uuid};

/// The component name the streams are derived from.
pub(crate) const COMPONENT: &str = "fakecloud";

/// The streams of fakecloud for `seed`.
pub(crate) fn streams(seed: u64) -> Streams {
    Streams::new(seed, COMPONENT)
}

#[derive(Clone, Debug)]
pub(crate) struct Rngs {
    /// Resource ids, event ids, message ids, receipt handles.
    pub ids: ChaCha8Rng,
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
    /// Ids of the Windows AMIs published at start: a stream of their own, so adding them left
    /// every other id of a seed as it was.
    pub windows_amis: ChaCha8Rng,
    /// Ids and boot draws of what another cluster runs in the account (its subnets and
    /// instances, `run_neighbour_instance`): streams of their own, so the neighbour's instance
    /// left every id and boot time of this cluster's launches as it was.
    pub neighbour_ids: ChaCha8Rng,
    pub neighbour_boot: ChaCha8Rng,
}

impl Rngs {
    pub fn new(streams: &Streams) -> Self {
        Self {
            ids: streams.stream("ids"),
            boot: streams.stream("boot"),
            spot: streams.stream("spot"),
            sqs: streams.stream("sqs"),
            sqs_reorder: streams.stream("sqs-reorder"),
            sqs_duplicate: streams.stream("sqs-duplicate"),
            injected: streams.stream("injected"),
            windows_amis: streams.stream("windows-amis"),
            neighbour_ids: streams.stream("neighbour-ids"),
            neighbour_boot: streams.stream("neighbour-boot"),
        }
    }
}

/// An EC2-style id: `prefix-0` and 16 hex digits (`i-0123456789abcdef0` has 17 digits in all).
pub(crate) fn resource_id(rng: &mut ChaCha8Rng, prefix: &str) -> String {
    format!("{prefix}-0{:016x}", rng.next_u64())
}
