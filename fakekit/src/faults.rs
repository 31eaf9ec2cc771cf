//! The fault plan of a fake: what each call of an operation gets, decided before the call touches
//! any state, so a failed call changes nothing, except a lost response, which applies the call
//! and then fails it (the case where a client cannot know whether its write happened).
//!
//! A call gets, in this order: the next fault of its operation's script, if one is queued; else a
//! draw from the rates of the latest [`FaultWindow`] covering now (an outage, a throttling
//! storm); else a draw from the standing rates. Each kind of fault draws from its own stream
//! ([`FaultStreams`]), and only when its rate is set, so turning one kind on never changes which
//! calls another kind hits.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use rand_chacha::ChaCha8Rng;

use crate::streams::{Streams, between, chance};

/// What happens to one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision<I, D = ()> {
    /// The error the caller sees instead of the call's result.
    pub error: Option<I>,
    /// Apply the call, then fail it with `error` (a lost response).
    pub apply_anyway: bool,
    /// Served this much later (`tokio::time`: virtual under madsim).
    pub latency: Duration,
    /// How a call that succeeds is served otherwise (a watch that drops early).
    pub degraded: D,
}

impl<I, D: Default> Default for Decision<I, D> {
    fn default() -> Self {
        Self {
            error: None,
            apply_anyway: false,
            latency: Duration::ZERO,
            degraded: D::default(),
        }
    }
}

impl<I, D: Default> Decision<I, D> {
    /// Fails the call with `error`; nothing happens.
    pub fn fail(error: I) -> Self {
        Self {
            error: Some(error),
            ..Self::default()
        }
    }

    /// Applies the call, then fails it with `error`.
    pub fn lose_response(error: I) -> Self {
        Self {
            error: Some(error),
            apply_anyway: true,
            ..Self::default()
        }
    }

    /// Serves the call normally, `ms` milliseconds late.
    pub fn late_ms(ms: u64) -> Self {
        Self {
            latency: Duration::from_millis(ms),
            ..Self::default()
        }
    }
}

/// How a call is served besides an error and a latency; `()` for fakes with nothing else.
pub trait Degraded: Copy + Default {
    /// What the call log adds to a successful call's outcome.
    fn note(&self) -> Option<String> {
        None
    }
}

impl Degraded for () {}

/// Standing (or windowed) random faults of one operation: each call draws at most one error,
/// plus a latency.
pub trait Rates<Op>: Copy + Default {
    type Injected: Copy;
    type Degraded: Degraded;

    fn draw(
        &self,
        operation: Op,
        streams: &mut FaultStreams,
    ) -> Decision<Self::Injected, Self::Degraded>;
}

/// One fault of a script: what one call gets.
pub trait Scripted<Op, I, D>: Copy {
    fn decision(self, operation: Op) -> Decision<I, D>;
}

/// Rates that replace the standing ones from `from` until (excluding) `until`: a throttling
/// storm, an outage.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultWindow<Op, R> {
    /// `None` applies to every operation.
    pub operation: Option<Op>,
    pub from: Timestamp,
    pub until: Timestamp,
    pub rates: R,
}

/// One stream per kind of fault (purpose `fault/<kind>` of the fake's [`Streams`]), created at
/// its first draw.
#[derive(Clone, Debug)]
pub struct FaultStreams {
    streams: Streams,
    by_kind: BTreeMap<&'static str, ChaCha8Rng>,
}

impl FaultStreams {
    pub fn new(streams: Streams) -> Self {
        Self {
            streams,
            by_kind: BTreeMap::new(),
        }
    }

    fn rng(&mut self, kind: &'static str) -> &mut ChaCha8Rng {
        let streams = &self.streams;
        self.by_kind
            .entry(kind)
            .or_insert_with(|| streams.stream(&format!("fault/{kind}")))
    }

    /// True with probability `rate`, drawn from `kind`'s stream (no draw at rate zero).
    pub fn chance(&mut self, kind: &'static str, rate: f64) -> bool {
        rate > 0.0 && chance(self.rng(kind), rate)
    }

    /// Uniform in `[min, max]` from `kind`'s stream.
    pub fn between(&mut self, kind: &'static str, min: u64, max: u64) -> u64 {
        between(self.rng(kind), min, max)
    }

    /// A latency drawn from `[min, max]` ms (`latency` stream); zero without a maximum.
    pub fn latency(&mut self, ms_min: u64, ms_max: u64) -> Duration {
        if ms_max == 0 {
            return Duration::ZERO;
        }
        Duration::from_millis(self.between("latency", ms_min, ms_max))
    }
}

/// Scripts and windows of a fake, and the streams its draws come from. The standing rates live in
/// the fake's configuration (they are a setting a run changes, like any other).
#[derive(Clone, Debug)]
pub struct FaultPlan<Op, R, F> {
    scripts: BTreeMap<Op, VecDeque<F>>,
    windows: Vec<FaultWindow<Op, R>>,
    streams: FaultStreams,
}

impl<Op, R, F> FaultPlan<Op, R, F>
where
    Op: Copy + Ord,
    R: Rates<Op>,
    F: Scripted<Op, R::Injected, R::Degraded>,
{
    pub fn new(streams: Streams) -> Self {
        Self {
            scripts: BTreeMap::new(),
            windows: Vec::new(),
            streams: FaultStreams::new(streams),
        }
    }

    /// What the next calls of `operation` get, one fault per call, before any rate applies.
    pub fn script(&mut self, operation: Op, faults: impl IntoIterator<Item = F>) {
        self.scripts.entry(operation).or_default().extend(faults);
    }

    /// Rates that apply inside a time window.
    pub fn add_window(&mut self, window: FaultWindow<Op, R>) {
        self.windows.push(window);
    }

    /// Removes the scripts and windows (the streams go on: a fault turned on again later does not
    /// repeat its earlier draws).
    pub fn clear(&mut self) {
        self.scripts.clear();
        self.windows.clear();
    }

    /// Decides one call of `operation` at `now`: a scripted fault if one is queued, else the
    /// rates of the latest window covering `now`, else the `standing` rates.
    pub fn decide(
        &mut self,
        operation: Op,
        now: Timestamp,
        standing: &BTreeMap<Op, R>,
    ) -> Decision<R::Injected, R::Degraded> {
        if let Some(fault) = self
            .scripts
            .get_mut(&operation)
            .and_then(|script| script.pop_front())
        {
            return fault.decision(operation);
        }
        let rates = self
            .windows
            .iter()
            .rev()
            .find(|w| {
                w.operation.is_none_or(|op| op == operation) && w.from <= now && now < w.until
            })
            .map(|w| w.rates)
            .or_else(|| standing.get(&operation).copied())
            .unwrap_or_default();
        rates.draw(operation, &mut self.streams)
    }
}
