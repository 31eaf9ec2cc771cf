//! Injected faults: latency, 5xx, conflicts, lost responses and watch disconnects, per operation,
//! as random rates or as a script of what the next calls get.
//!
//! A fault is decided before the call touches any state, so a failed write changes nothing,
//! except [`ApiFault::LostResponse`], which applies the call and then fails it: the case where a
//! client cannot know whether its write happened.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use crate::apiserver::rng::{FaultRngs, between, chance};
use karpenter_core::seams::KubeError;

/// The calls of the `KubeApi` seam, as the fault knobs and the call log name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApiOperation {
    Get,
    List,
    Create,
    Patch,
    PatchStatus,
    Delete,
    Evict,
    Watch,
    RecordEvent,
}

impl ApiOperation {
    pub const ALL: [ApiOperation; 9] = [
        ApiOperation::Get,
        ApiOperation::List,
        ApiOperation::Create,
        ApiOperation::Patch,
        ApiOperation::PatchStatus,
        ApiOperation::Delete,
        ApiOperation::Evict,
        ApiOperation::Watch,
        ApiOperation::RecordEvent,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ApiOperation::Get => "get",
            ApiOperation::List => "list",
            ApiOperation::Create => "create",
            ApiOperation::Patch => "patch",
            ApiOperation::PatchStatus => "patch_status",
            ApiOperation::Delete => "delete",
            ApiOperation::Evict => "evict",
            ApiOperation::Watch => "watch",
            ApiOperation::RecordEvent => "record_event",
        }
    }

    /// Writes that carry a precondition (resourceVersion, uid, a PodDisruptionBudget check), so a
    /// real API server can answer them 409: the only operations a `conflict_rate` applies to.
    pub fn can_conflict(self) -> bool {
        matches!(
            self,
            ApiOperation::Patch
                | ApiOperation::PatchStatus
                | ApiOperation::Delete
                | ApiOperation::Evict
        )
    }
}

impl fmt::Display for ApiOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one scripted call gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiFault {
    /// Served normally (a gap in a script).
    Pass,
    /// HTTP 503: [`KubeError::Unavailable`]; nothing happened.
    Unavailable,
    /// HTTP 409: [`KubeError::Conflict`]; nothing happened. Scripted conflicts apply to any
    /// operation (the script's author asked for it); drawn ones only to
    /// [`ApiOperation::can_conflict`] operations.
    Conflict,
    /// The call takes effect, then the caller sees [`KubeError::Unavailable`].
    LostResponse,
    /// Served normally after this many milliseconds (`tokio::time`: virtual under madsim).
    LatencyMs(u64),
    /// A watch that ends after delivering this many change events (bookmarks not counted), as
    /// when the connection drops; the caller re-watches. On any other operation a dropped
    /// connection is [`KubeError::Unavailable`].
    Disconnect { after_events: u64 },
}

/// Random faults of one operation: each call draws at most one error, plus a latency.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ApiFaultRates {
    pub unavailable_rate: f64,
    /// Only drawn for [`ApiOperation::can_conflict`] operations.
    pub conflict_rate: f64,
    pub lost_response_rate: f64,
    /// Only drawn for [`ApiOperation::Watch`]: the stream ends after a number of change events
    /// drawn uniformly from `0..=disconnect_after_events_max`.
    pub disconnect_rate: f64,
    pub disconnect_after_events_max: u64,
    pub latency_ms_min: u64,
    pub latency_ms_max: u64,
}

impl ApiFaultRates {
    /// Only 5xx errors, at `rate`.
    pub fn unavailable(rate: f64) -> Self {
        Self {
            unavailable_rate: rate,
            ..Self::default()
        }
    }

    /// Only conflicts, at `rate`.
    pub fn conflicts(rate: f64) -> Self {
        Self {
            conflict_rate: rate,
            ..Self::default()
        }
    }
}

/// An error the caller sees instead of (or after) the call's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Injected {
    Unavailable,
    Conflict,
}

impl Injected {
    pub fn error(self, operation: ApiOperation) -> KubeError {
        match self {
            Injected::Unavailable => {
                KubeError::Unavailable(format!("injected fault: {operation} answered 503"))
            }
            Injected::Conflict => KubeError::Conflict(format!(
                "injected fault: {operation}: the object has been modified; please apply your \
                 changes to the latest version and try again"
            )),
        }
    }
}

/// What happens to one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Decision {
    pub error: Option<Injected>,
    /// Apply the call, then fail it with `error`.
    pub apply_anyway: bool,
    pub latency: Duration,
    /// Watches only: end the stream after this many change events.
    pub disconnect_after_events: Option<u64>,
}

/// Scripts of faults per operation; the standing rates are `ApiServerConfig::faults`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Faults {
    pub scripts: BTreeMap<ApiOperation, VecDeque<ApiFault>>,
}

impl Faults {
    /// Decides one call of `operation`: a scripted fault if one is queued, else the rates.
    pub fn decide(
        &mut self,
        operation: ApiOperation,
        rates: &BTreeMap<ApiOperation, ApiFaultRates>,
        rng: &mut FaultRngs,
    ) -> Decision {
        if let Some(fault) = self
            .scripts
            .get_mut(&operation)
            .and_then(|script| script.pop_front())
        {
            return scripted(operation, fault);
        }
        let rates = rates.get(&operation).copied().unwrap_or_default();
        drawn(operation, &rates, rng)
    }
}

fn scripted(operation: ApiOperation, fault: ApiFault) -> Decision {
    let error = |e| Decision {
        error: Some(e),
        ..Decision::default()
    };
    match fault {
        ApiFault::Pass => Decision::default(),
        ApiFault::Unavailable => error(Injected::Unavailable),
        ApiFault::Conflict => error(Injected::Conflict),
        ApiFault::LostResponse => Decision {
            error: Some(Injected::Unavailable),
            apply_anyway: true,
            ..Decision::default()
        },
        ApiFault::LatencyMs(ms) => Decision {
            latency: Duration::from_millis(ms),
            ..Decision::default()
        },
        ApiFault::Disconnect { after_events } => {
            if operation == ApiOperation::Watch {
                Decision {
                    disconnect_after_events: Some(after_events),
                    ..Decision::default()
                }
            } else {
                error(Injected::Unavailable)
            }
        }
    }
}

/// Each kind of fault draws from its own stream, and only when its rate is set and it applies to
/// the operation: the kinds are tried in a fixed order and the first that hits is the call's.
fn drawn(operation: ApiOperation, rates: &ApiFaultRates, rng: &mut FaultRngs) -> Decision {
    let mut decision = Decision::default();
    let unavailable = chance(&mut rng.unavailable, rates.unavailable_rate);
    let conflict = operation.can_conflict() && chance(&mut rng.conflict, rates.conflict_rate);
    let lost = chance(&mut rng.lost_response, rates.lost_response_rate);
    let disconnect = (operation == ApiOperation::Watch
        && chance(&mut rng.disconnect, rates.disconnect_rate))
    .then(|| between(&mut rng.disconnect, 0, rates.disconnect_after_events_max));
    if unavailable {
        decision.error = Some(Injected::Unavailable);
    } else if conflict {
        decision.error = Some(Injected::Conflict);
    } else if lost {
        decision.error = Some(Injected::Unavailable);
        decision.apply_anyway = true;
    } else {
        decision.disconnect_after_events = disconnect;
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
