//! API faults: throttling, 5xx errors, lost responses and latency, per operation, as random rates,
//! as time windows of rates, or as a script of what the next calls get.
//!
//! A fault is decided before the call touches any state, so a throttled `CreateFleet` launches
//! nothing, except [`Fault::LostResponse`], which applies the call and then fails it: the case
//! that makes idempotency tokens necessary.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use crate::rng::{FaultRngs, between, chance};
use jiff::Timestamp;

/// The API operations the fake serves (AWS's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
    ReceiveMessage,
    DeleteMessage,
}

impl Operation {
    pub const ALL: [Operation; 13] = [
        Operation::CreateFleet,
        Operation::DescribeInstances,
        Operation::TerminateInstances,
        Operation::CreateTags,
        Operation::DescribeSubnets,
        Operation::DescribeSecurityGroups,
        Operation::DescribeImages,
        Operation::GetParameter,
        Operation::CreateLaunchTemplate,
        Operation::DescribeLaunchTemplates,
        Operation::DeleteLaunchTemplate,
        Operation::ReceiveMessage,
        Operation::DeleteMessage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::CreateFleet => "CreateFleet",
            Operation::DescribeInstances => "DescribeInstances",
            Operation::TerminateInstances => "TerminateInstances",
            Operation::CreateTags => "CreateTags",
            Operation::DescribeSubnets => "DescribeSubnets",
            Operation::DescribeSecurityGroups => "DescribeSecurityGroups",
            Operation::DescribeImages => "DescribeImages",
            Operation::GetParameter => "GetParameter",
            Operation::CreateLaunchTemplate => "CreateLaunchTemplate",
            Operation::DescribeLaunchTemplates => "DescribeLaunchTemplates",
            Operation::DeleteLaunchTemplate => "DeleteLaunchTemplate",
            Operation::ReceiveMessage => "ReceiveMessage",
            Operation::DeleteMessage => "DeleteMessage",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
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
/// storm, an outage.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultWindow {
    /// `None` applies to every operation.
    pub operation: Option<Operation>,
    pub from: Timestamp,
    pub until: Timestamp,
    pub rates: FaultRates,
}

/// An error the caller sees instead of the call's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Injected {
    Throttle,
    InternalError,
    Unavailable,
}

/// What happens to one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Decision {
    pub error: Option<Injected>,
    /// Apply the call, then fail it with `error`.
    pub apply_anyway: bool,
    pub latency: Duration,
}

/// Scripts and windows; the standing rates are `Config::faults`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Faults {
    pub scripts: BTreeMap<Operation, VecDeque<Fault>>,
    pub windows: Vec<FaultWindow>,
}

impl Faults {
    /// Decides one call of `operation` at `now`: a scripted fault if one is queued, else the
    /// rates of the latest window covering `now`, else the standing `rates`.
    pub fn decide(
        &mut self,
        operation: Operation,
        now: Timestamp,
        rates: &BTreeMap<Operation, FaultRates>,
        rng: &mut FaultRngs,
    ) -> Decision {
        if let Some(fault) = self
            .scripts
            .get_mut(&operation)
            .and_then(|script| script.pop_front())
        {
            return scripted(fault);
        }
        let rates = self
            .windows
            .iter()
            .rev()
            .find(|w| {
                w.operation.is_none_or(|op| op == operation) && w.from <= now && now < w.until
            })
            .map(|w| w.rates)
            .or_else(|| rates.get(&operation).copied())
            .unwrap_or_default();
        drawn(&rates, rng)
    }
}

fn scripted(fault: Fault) -> Decision {
    let error = |e| Decision {
        error: Some(e),
        ..Decision::default()
    };
    match fault {
        Fault::Pass => Decision::default(),
        Fault::Throttle => error(Injected::Throttle),
        Fault::InternalError => error(Injected::InternalError),
        Fault::Unavailable => error(Injected::Unavailable),
        Fault::LostResponse => Decision {
            error: Some(Injected::InternalError),
            apply_anyway: true,
            latency: Duration::ZERO,
        },
        Fault::LatencyMs(ms) => Decision {
            latency: Duration::from_millis(ms),
            ..Decision::default()
        },
    }
}

/// Each kind of fault draws from its own stream, and only when its rate is set: the kinds are
/// tried in a fixed order and the first that hits is the call's error.
fn drawn(rates: &FaultRates, rng: &mut FaultRngs) -> Decision {
    let mut decision = Decision::default();
    let throttle = chance(&mut rng.throttle, rates.throttle_rate);
    let internal = chance(&mut rng.internal_error, rates.internal_error_rate);
    let unavailable = chance(&mut rng.unavailable, rates.unavailable_rate);
    let lost = chance(&mut rng.lost_response, rates.lost_response_rate);
    if throttle {
        decision.error = Some(Injected::Throttle);
    } else if internal {
        decision.error = Some(Injected::InternalError);
    } else if unavailable {
        decision.error = Some(Injected::Unavailable);
    } else if lost {
        decision.error = Some(Injected::InternalError);
        decision.apply_anyway = true;
    }
    if rates.latency_ms_max > 0 {
        decision.latency = Duration::from_millis(between(
            &mut rng.latency,
            rates.latency_ms_min,
            rates.latency_ms_max,
        ));
    }
    decision
}
