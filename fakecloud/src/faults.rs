//! API faults: throttling, 5xx errors, lost responses and latency, per operation, as random rates,
//! as time windows of rates, or as a script of what the next calls get.
//!
//! A fault is decided before the call touches any state, so a throttled `CreateFleet` launches
//! nothing, except [`Fault::LostResponse`], which applies the call and then fails it: the case
//! that makes idempotency tokens necessary.

use fakekit::{Decision, FaultStreams, Rates, Scripted};

/// The API operations the fake serves (AWS's names).
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::Display,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
pub enum Operation {
    CreateFleet,
    DescribeInstances,
    TerminateInstances,
    CreateTags,
    DescribeSubnets,
    DescribeSecurityGroups,
    DescribeImages,
    GetParameter,
    CreateLaunchTemplate,
    DescribeLaunchTemplates,
    DeleteLaunchTemplate,
    DescribeInstanceStatus,
    DescribeCapacityReservations,
    ReceiveMessage,
    DeleteMessage,
}

/// What one scripted call gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Served normally (a gap in a script).
    Pass,
    /// `RequestLimitExceeded` (SQS: `ThrottlingException`).
    Throttle,
    /// HTTP 500 `InternalError`.
    InternalError,
    /// HTTP 503 `Unavailable`.
    Unavailable,
    /// The call takes effect, then the caller sees `InternalError`.
    LostResponse,
    /// Served normally after this many milliseconds.
    LatencyMs(u64),
}

/// Random faults of one operation: each call draws at most one error, plus a latency.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultRates {
    pub throttle_rate: f64,
    pub internal_error_rate: f64,
    pub unavailable_rate: f64,
    pub lost_response_rate: f64,
    pub latency_ms_min: u64,
    pub latency_ms_max: u64,
}

impl FaultRates {
    /// Only throttling, at `rate`.
    pub fn throttling(rate: f64) -> Self {
        Self {
            throttle_rate: rate,
            ..Self::default()
        }
    }
}

/// Rates that replace the configured ones from `from` until (excluding) `until`: a throttling
/// storm, an outage (`operation: None` applies to every operation).
pub type FaultWindow = fakekit::FaultWindow<Operation, FaultRates>;

/// An error the caller sees instead of the call's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    Throttle,
    InternalError,
    Unavailable,
}

impl Scripted<Operation, Injected, ()> for Fault {
    fn decision(self, _: Operation) -> Decision<Injected> {
        match self {
            Fault::Pass => Decision::default(),
            Fault::Throttle => Decision::fail(Injected::Throttle),
            Fault::InternalError => Decision::fail(Injected::InternalError),
            Fault::Unavailable => Decision::fail(Injected::Unavailable),
            Fault::LostResponse => Decision::lose_response(Injected::InternalError),
            Fault::LatencyMs(ms) => Decision::late_ms(ms),
        }
    }
}

impl Rates<Operation> for FaultRates {
    type Injected = Injected;
    type Degraded = ();

    /// Each kind of fault draws from its own stream, and only when its rate is set: the kinds are
    /// tried in a fixed order and the first that hits is the call's error.
    fn draw(&self, _: Operation, streams: &mut FaultStreams) -> Decision<Injected> {
        let throttle = streams.chance("throttle", self.throttle_rate);
        let internal = streams.chance("internal-error", self.internal_error_rate);
        let unavailable = streams.chance("unavailable", self.unavailable_rate);
        let lost = streams.chance("lost-response", self.lost_response_rate);
        let mut decision = if throttle {
            Decision::fail(Injected::Throttle)
        } else if internal {
            Decision::fail(Injected::InternalError)
        } else if unavailable {
            Decision::fail(Injected::Unavailable)
        } else if lost {
            Decision::lose_response(Injected::InternalError)
        } else {
            Decision::default()
        };
        decision.latency = streams.latency(self.latency_ms_min, self.latency_ms_max);
        decision
    }
}
