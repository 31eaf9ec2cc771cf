//! Tests of the fake kit on a toy fake: the fault plan's order (script, window, standing rates),
//! one stream per fault kind, the bounded call log and the serve path.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use fakekit::{
    Decision, Fake, FaultPlan, FaultStreams, FaultWindow, FromInjected, Kit, KitSpec, KitView,
    Rates, Record, Scripted, Streams, serve,
};
use jiff::Timestamp;
use rand::Rng;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Read,
    Write,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Injected {
    Busy,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ToyRates {
    busy_rate: f64,
}

impl Rates<Op> for ToyRates {
    type Injected = Injected;
    type Degraded = ();

    fn draw(&self, _: Op, streams: &mut FaultStreams) -> Decision<Injected> {
        if streams.chance("busy", self.busy_rate) {
            Decision::fail(Injected::Busy)
        } else {
            Decision::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ToyFault {
    Pass,
    Busy,
    LostResponse,
}

impl Scripted<Op, Injected, ()> for ToyFault {
    fn decision(self, _: Op) -> Decision<Injected> {
        match self {
            ToyFault::Pass => Decision::default(),
            ToyFault::Busy => Decision::fail(Injected::Busy),
            ToyFault::LostResponse => Decision::lose_response(Injected::Busy),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
struct Call {
    seq: u64,
    operation: Op,
    input: String,
    outcome: String,
}

impl Record for Call {
    type Operation = Op;
    type Input = String;

    fn new(seq: u64, _: Timestamp, operation: Op, input: String, outcome: String) -> Self {
        Self {
            seq,
            operation,
            input,
            outcome,
        }
    }

    fn operation(&self) -> Op {
        self.operation
    }
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{} {:?} {} -> {}",
            self.seq, self.operation, self.input, self.outcome
        )
    }
}

struct ToyKit;

impl KitSpec for ToyKit {
    type Operation = Op;
    type Rates = ToyRates;
    type Fault = ToyFault;
    type Record = Call;
    const OPERATIONS: &'static [Op] = &[Op::Read, Op::Write];
}

#[derive(Debug, PartialEq)]
struct Busy;

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("busy")
    }
}

impl FromInjected<Injected, Op> for Busy {
    fn from_injected(_: Injected, _: Op) -> Self {
        Busy
    }
}

struct ToyState {
    kit: Kit<ToyKit>,
    rates: BTreeMap<Op, ToyRates>,
    writes: u32,
}

/// A fake whose only state is a counter of writes.
struct Toy {
    state: Mutex<ToyState>,
}

impl Toy {
    fn new(seed: u64) -> Self {
        Self {
            state: Mutex::new(ToyState {
                kit: Kit::new(streams(seed), 3),
                rates: BTreeMap::new(),
                writes: 0,
            }),
        }
    }

    async fn write(&self) -> Result<u32, Busy> {
        serve(
            self,
            Op::Write,
            "one".to_string(),
            |state, _| {
                state.writes += 1;
                Ok(state.writes)
            },
            |n| format!("writes={n}"),
        )
        .await
    }

    fn writes(&self) -> u32 {
        self.state().writes
    }
}

impl Fake for Toy {
    type Kit = ToyKit;
    type State = ToyState;

    fn state(&self) -> MutexGuard<'_, ToyState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn kit(state: &mut ToyState) -> KitView<'_, ToyKit> {
        KitView {
            kit: &mut state.kit,
            rates: &mut state.rates,
            now: at(0),
        }
    }
}

fn streams(seed: u64) -> Streams {
    Streams::new(seed, "toy")
}

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_767_225_600 + second).expect("in range")
}

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    futures::executor::block_on(future)
}

#[test]
fn the_same_purpose_gives_the_same_stream_and_another_purpose_another() {
    let streams = streams(42);
    let draw = |purpose: &str| -> Vec<u64> {
        let mut rng = streams.stream(purpose);
        (0..4).map(|_| rng.r#gen()).collect()
    };
    assert_eq!(draw("ids"), draw("ids"));
    assert_ne!(draw("ids"), draw("fault/busy"));
}

#[test]
fn a_script_comes_before_a_window_and_a_window_before_the_standing_rates() {
    let mut plan: FaultPlan<Op, ToyRates, ToyFault> = FaultPlan::new(streams(1));
    let always = ToyRates { busy_rate: 1.0 };
    let standing = BTreeMap::from([(Op::Write, always)]);
    plan.script(Op::Write, [ToyFault::Pass]);
    plan.add_window(FaultWindow {
        operation: Some(Op::Write),
        from: at(10),
        until: at(20),
        rates: ToyRates::default(),
    });
    assert_eq!(
        plan.decide(Op::Write, at(0), &standing).error,
        None,
        "scripted pass"
    );
    assert_eq!(
        plan.decide(Op::Write, at(15), &standing).error,
        None,
        "window"
    );
    assert_eq!(
        plan.decide(Op::Write, at(20), &standing).error,
        Some(Injected::Busy),
        "the window ends before `until`"
    );
    assert_eq!(
        plan.decide(Op::Read, at(15), &standing).error,
        None,
        "other operation"
    );
    plan.clear();
    assert_eq!(
        plan.decide(Op::Write, at(15), &standing).error,
        Some(Injected::Busy)
    );
}

#[test]
fn an_injected_error_wins_and_a_lost_response_applies_the_call_first() {
    let toy = Toy::new(1);
    toy.script_faults(Op::Write, [ToyFault::Busy, ToyFault::LostResponse]);
    assert_eq!(block_on(toy.write()), Err(Busy));
    assert_eq!(toy.writes(), 0, "a failed call changes nothing");
    assert_eq!(block_on(toy.write()), Err(Busy));
    assert_eq!(toy.writes(), 1, "a lost response happened all the same");
    assert_eq!(block_on(toy.write()), Ok(2));
    let outcomes: Vec<String> = toy.calls().into_iter().map(|c| c.outcome).collect();
    assert_eq!(outcomes, ["err busy", "err busy", "ok writes=2"]);
}

#[test]
fn the_call_log_keeps_the_newest_calls_and_counts_every_call() {
    let toy = Toy::new(1);
    for _ in 0..5 {
        block_on(toy.write()).expect("no faults");
    }
    let seqs: Vec<u64> = toy.calls().iter().map(|c| c.seq).collect();
    assert_eq!(seqs, [3, 4, 5], "bounded at 3, sequence numbers go on");
    toy.clear_calls();
    block_on(toy.write()).expect("no faults");
    assert_eq!(toy.calls()[0].seq, 6);
    assert_eq!(toy.render_calls(), "#6 Write one -> ok writes=6\n");
}

#[test]
fn standing_rates_apply_to_every_operation_until_cleared() {
    let toy = Toy::new(3);
    toy.set_fault_rates_all(ToyRates { busy_rate: 1.0 });
    assert_eq!(block_on(toy.write()), Err(Busy));
    toy.clear_faults();
    assert_eq!(block_on(toy.write()), Ok(1));
    assert_eq!(toy.calls_of(Op::Write).len(), 2);
    assert!(toy.calls_of(Op::Read).is_empty());
    assert_eq!(toy.delayed_total(), Duration::ZERO);
}

#[test]
fn each_fault_kind_draws_from_its_own_stream() {
    // Drawing one kind many times does not change what another kind draws next.
    let mut quiet = FaultStreams::new(streams(9));
    let mut busy = FaultStreams::new(streams(9));
    for _ in 0..50 {
        busy.chance("other", 0.5);
    }
    let draws = |s: &mut FaultStreams| (0..20).map(|_| s.chance("busy", 0.5)).collect::<Vec<_>>();
    assert_eq!(draws(&mut quiet), draws(&mut busy));
}

#[test]
fn two_components_on_one_seed_never_share_a_stream() {
    // fakecloud's and the API server's ids, and EC2 throttling and API 5xx, once drew from the
    // same numbered streams of the world's one seed.
    let cloud = Streams::new(7, "fakecloud");
    let api = Streams::new(7, "fakekube");
    let draw = |streams: &Streams, purpose: &str| -> Vec<u64> {
        let mut rng = streams.stream(purpose);
        (0..4).map(|_| rng.r#gen()).collect()
    };
    assert_ne!(draw(&cloud, "ids"), draw(&api, "ids"));
    assert_ne!(
        draw(&cloud, "fault/throttle"),
        draw(&api, "fault/unavailable")
    );
    assert_ne!(
        fakekit::stream_id("fakecloud", "ids"),
        fakekit::stream_id("fakekube", "ids")
    );
    assert_eq!(
        draw(&cloud, "ids"),
        draw(&Streams::new(7, "fakecloud"), "ids")
    );
}
