//! The seeded randomness: one named stream per concern (fakekit's [`Streams`] of the component
//! `fakekube`). Turning on a fault rate then changes which calls fail, not every generated name and
//! uid after it, so two runs that differ in one knob stay comparable line by line. (The fault
//! kinds' streams belong to the fault plan.)

use fakekit::Streams;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

pub(crate) use fakekit::uuid;

/// Characters of a `generateName` suffix: Kubernetes' `utilrand.String` alphabet (no vowels, no
/// look-alike digits, so a random suffix never spells a word).
const NAME_SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Length of a `generateName` suffix, as Kubernetes draws it.
pub(crate) const NAME_SUFFIX_LEN: usize = 5;

/// The component name the streams are derived from.
pub(crate) const COMPONENT: &str = "fakekube";

/// The streams of the API server for `seed`.
pub(crate) fn streams(seed: u64) -> Streams {
    Streams::new(seed, COMPONENT)
}

/// The random suffix `generateName` appends.
pub(crate) fn name_suffix(rng: &mut ChaCha8Rng) -> String {
    (0..NAME_SUFFIX_LEN)
        .map(|_| char::from(NAME_SUFFIX_ALPHABET[rng.gen_range(0..NAME_SUFFIX_ALPHABET.len())]))
        .collect()
}
