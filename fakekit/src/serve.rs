//! How a fake serves one seam call, and the knobs every fake has for its faults and call log.
//!
//! [`serve()`] is Karpenter's `MockedFunction` habit, with time: the fault plan decides first; an
//! injected latency is slept with the state unlocked; then an injected error wins (a lost
//! response applies the call before failing it), else the call runs against the fake's state;
//! either way the call and its outcome go into the call log.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::sync::MutexGuard;
use std::time::Duration;

use jiff::Timestamp;

use crate::calls::{CallLog, Record, outcome};
use crate::faults::{Decision, Degraded, FaultPlan, FaultWindow, Rates, Scripted};
use crate::streams::Streams;

/// The types one fake's kit is made of.
pub trait KitSpec {
    /// The calls the fake serves, as its fault knobs and call log name them.
    type Operation: Copy + Ord + Send + Sync + 'static;
    type Rates: Rates<Self::Operation> + Send;
    type Fault: Scripted<
            Self::Operation,
            <Self::Rates as Rates<Self::Operation>>::Injected,
            <Self::Rates as Rates<Self::Operation>>::Degraded,
        > + Send;
    type Record: Record<Operation = Self::Operation> + Display + Send;

    /// Every operation (what `set_fault_rates_all` sets).
    const OPERATIONS: &'static [Self::Operation];
}

/// The decision type of a kit.
pub type KitDecision<K> = Decision<
    <<K as KitSpec>::Rates as Rates<<K as KitSpec>::Operation>>::Injected,
    <<K as KitSpec>::Rates as Rates<<K as KitSpec>::Operation>>::Degraded,
>;

/// What a fake keeps to serve calls: its fault plan, its call log, and what injected latency
/// cost its callers.
pub struct Kit<K: KitSpec> {
    pub plan: FaultPlan<K::Operation, K::Rates, K::Fault>,
    pub calls: CallLog<K::Record>,
    /// Calls an injected latency delayed.
    pub delayed_calls: u64,
    /// The latency injected into those calls, summed.
    pub delayed_total: Duration,
    /// Every latency callers slept, injected or normal (the fake's own answer time), summed: what
    /// a simulation on a manual clock charges to time.
    pub slept_total: Duration,
}

impl<K: KitSpec> Kit<K> {
    /// A kit whose fault draws come from `streams` and whose log keeps `call_log_len_max` calls.
    pub fn new(streams: Streams, call_log_len_max: usize) -> Self {
        Self {
            plan: FaultPlan::new(streams),
            calls: CallLog::new(call_log_len_max),
            delayed_calls: 0,
            delayed_total: Duration::ZERO,
            slept_total: Duration::ZERO,
        }
    }

    /// Decides one call and counts its latency.
    pub fn decide(
        &mut self,
        operation: K::Operation,
        now: Timestamp,
        standing: &BTreeMap<K::Operation, K::Rates>,
    ) -> KitDecision<K> {
        let decision = self.plan.decide(operation, now, standing);
        if !decision.latency.is_zero() {
            self.delayed_calls += 1;
            self.delayed_total += decision.latency;
        }
        decision
    }
}

/// What a fake's state lends the kit for one call.
pub struct KitView<'a, K: KitSpec> {
    pub kit: &'a mut Kit<K>,
    /// The standing fault rates (part of the fake's configuration).
    pub rates: &'a mut BTreeMap<K::Operation, K::Rates>,
    /// The time the state has caught up to.
    pub now: Timestamp,
}

/// A seam error that can carry an injected fault of kind `I`.
pub trait FromInjected<I, Op> {
    fn from_injected(injected: I, operation: Op) -> Self;
}

/// An in-memory fake of a remote API. The provided methods are its fault and call-log knobs;
/// none of them is a seam call (they draw no fault and are not logged).
pub trait Fake: Sync {
    type Kit: KitSpec;
    type State: Send;

    /// The state behind the fake's one mutex, caught up with the clock.
    fn state(&self) -> MutexGuard<'_, Self::State>;

    /// The kit, the standing rates and the time of a locked state.
    fn kit(state: &mut Self::State) -> KitView<'_, Self::Kit>;

    /// After a call ran (or was failed), before it is logged: what the call set off at once.
    fn settle(_state: &mut Self::State) {}

    /// How long `operation` takes when nothing is wrong (a fake with realistic latency draws it
    /// here); injected fault latency comes on top. Instant by default.
    fn normal_latency(
        _state: &mut Self::State,
        _operation: <Self::Kit as KitSpec>::Operation,
    ) -> Duration {
        Duration::ZERO
    }

    /// Standing fault rates of one operation.
    fn set_fault_rates(
        &self,
        operation: <Self::Kit as KitSpec>::Operation,
        rates: <Self::Kit as KitSpec>::Rates,
    ) {
        Self::kit(&mut self.state()).rates.insert(operation, rates);
    }

    /// Standing fault rates of every operation.
    fn set_fault_rates_all(&self, rates: <Self::Kit as KitSpec>::Rates) {
        let mut state = self.state();
        let view = Self::kit(&mut state);
        for operation in <Self::Kit as KitSpec>::OPERATIONS {
            view.rates.insert(*operation, rates);
        }
    }

    /// What the next calls of `operation` get, one fault per call, before any rate applies.
    fn script_faults(
        &self,
        operation: <Self::Kit as KitSpec>::Operation,
        faults: impl IntoIterator<Item = <Self::Kit as KitSpec>::Fault>,
    ) {
        Self::kit(&mut self.state())
            .kit
            .plan
            .script(operation, faults);
    }

    /// Rates that apply inside a time window (a throttling storm, an outage).
    fn add_fault_window(
        &self,
        window: FaultWindow<<Self::Kit as KitSpec>::Operation, <Self::Kit as KitSpec>::Rates>,
    ) {
        Self::kit(&mut self.state()).kit.plan.add_window(window);
    }

    /// Removes every fault: standing rates, scripts and windows.
    fn clear_faults(&self) {
        let mut state = self.state();
        let view = Self::kit(&mut state);
        view.rates.clear();
        view.kit.plan.clear();
    }

    /// The call log, oldest first (at most the configured bound).
    fn calls(&self) -> Vec<<Self::Kit as KitSpec>::Record> {
        Self::kit(&mut self.state()).kit.calls.records()
    }

    fn calls_of(
        &self,
        operation: <Self::Kit as KitSpec>::Operation,
    ) -> Vec<<Self::Kit as KitSpec>::Record> {
        Self::kit(&mut self.state()).kit.calls.of(operation)
    }

    /// The call log, one line per call, for printing.
    fn render_calls(&self) -> String {
        self.calls().iter().map(|c| format!("{c}\n")).collect()
    }

    fn clear_calls(&self) {
        Self::kit(&mut self.state()).kit.calls.clear();
    }

    /// Calls served late by an injected latency (rates, windows or scripts) so far.
    fn delayed_calls(&self) -> u64 {
        Self::kit(&mut self.state()).kit.delayed_calls
    }

    /// The latency injected so far, summed over the delayed calls: how long callers waited beyond
    /// a normal answer.
    fn delayed_total(&self) -> Duration {
        Self::kit(&mut self.state()).kit.delayed_total
    }

    /// Every latency slept so far, injected or normal, summed (a simulation on a manual clock
    /// charges it to time).
    fn slept_total(&self) -> Duration {
        Self::kit(&mut self.state()).kit.slept_total
    }
}

/// One seam call of `fake`: decide its fault, sleep its latency (state unlocked), apply it (or
/// fail it), settle, and log it with `input` and the outcome `describe` gives a success.
pub async fn serve<F, T, E>(
    fake: &F,
    operation: <F::Kit as KitSpec>::Operation,
    input: <<F::Kit as KitSpec>::Record as Record>::Input,
    apply: impl FnOnce(&mut F::State, &KitDecision<F::Kit>) -> Result<T, E>,
    describe: impl FnOnce(&T) -> String,
) -> Result<T, E>
where
    F: Fake,
    E: Display
        + FromInjected<
            <<F::Kit as KitSpec>::Rates as Rates<<F::Kit as KitSpec>::Operation>>::Injected,
            <F::Kit as KitSpec>::Operation,
        >,
{
    let decision = {
        let mut state = fake.state();
        let view = F::kit(&mut state);
        let mut decision = view.kit.decide(operation, view.now, view.rates);
        decision.latency += F::normal_latency(&mut state, operation);
        F::kit(&mut state).kit.slept_total += decision.latency;
        decision
    };
    if !decision.latency.is_zero() {
        tokio::time::sleep(decision.latency).await;
    }
    let mut state = fake.state();
    let result = match decision.error {
        None => apply(&mut state, &decision),
        Some(injected) => {
            if decision.apply_anyway {
                // The effect happens; only the response is lost.
                let _ = apply(&mut state, &decision);
            }
            Err(E::from_injected(injected, operation))
        }
    };
    F::settle(&mut state);
    let mut outcome = outcome(&result, describe);
    if result.is_ok()
        && let Some(note) = decision.degraded.note()
    {
        outcome.push_str(&note);
    }
    let view = F::kit(&mut state);
    view.kit.calls.record(view.now, operation, input, outcome);
    result
}
