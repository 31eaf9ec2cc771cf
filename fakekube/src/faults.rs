//! Injected faults: latency, 5xx, conflicts, lost responses and watch disconnects, per operation,
//! as random rates, as time windows of rates, or as a script of what the next calls get (fakekit's
//! [`FaultPlan`](fakekit::FaultPlan) decides).
//!
//! A fault is decided before the call touches any state, so a failed write changes nothing,
//! except [`ApiFault::LostResponse`], which applies the call and then fails it: the case where a
//! client cannot know whether its write happened.

use fakekit::{Degraded, FaultStreams, FromInjected, Rates, Scripted};
use karpenter_core::seams::KubeError;

/// The calls of the `KubeApi` seam, as the fault knobs and the call log name them.
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
#[strum(serialize_all = "snake_case")]
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

/// Rates that replace the standing ones from `from` until (excluding) `until`: an outage
/// (`operation: None` applies to every operation).
pub type ApiFaultWindow = fakekit::FaultWindow<ApiOperation, ApiFaultRates>;

/// An error the caller sees instead of (or after) the call's effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injected {
    Unavailable,
    Conflict,
}

impl FromInjected<Injected, ApiOperation> for KubeError {
    fn from_injected(injected: Injected, operation: ApiOperation) -> Self {
        match injected {
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

/// Watches only: the stream ends after this many change events (a dropped connection).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Disconnect(pub Option<u64>);

impl Degraded for Disconnect {
    fn note(&self) -> Option<String> {
        self.0
            .map(|after| format!(" (injected fault: drops after {after} events)"))
    }
}

/// What happens to one call.
pub(crate) type Decision = fakekit::Decision<Injected, Disconnect>;

impl Scripted<ApiOperation, Injected, Disconnect> for ApiFault {
    fn decision(self, operation: ApiOperation) -> Decision {
        match self {
            ApiFault::Pass => Decision::default(),
            ApiFault::Unavailable => Decision::fail(Injected::Unavailable),
            ApiFault::Conflict => Decision::fail(Injected::Conflict),
            ApiFault::LostResponse => Decision::lose_response(Injected::Unavailable),
            ApiFault::LatencyMs(ms) => Decision::late_ms(ms),
            ApiFault::Disconnect { after_events } if operation == ApiOperation::Watch => Decision {
                degraded: Disconnect(Some(after_events)),
                ..Decision::default()
            },
            ApiFault::Disconnect { .. } => Decision::fail(Injected::Unavailable),
        }
    }
}

impl Rates<ApiOperation> for ApiFaultRates {
    type Injected = Injected;
    type Degraded = Disconnect;

    /// Each kind of fault draws from its own stream, and only when its rate is set and it applies
    /// to the operation: the kinds are tried in a fixed order and the first that hits is the
    /// call's.
    fn draw(&self, operation: ApiOperation, streams: &mut FaultStreams) -> Decision {
        let unavailable = streams.chance("unavailable", self.unavailable_rate);
        let conflict = operation.can_conflict() && streams.chance("conflict", self.conflict_rate);
        let lost = streams.chance("lost-response", self.lost_response_rate);
        let disconnect = (operation == ApiOperation::Watch
            && streams.chance("disconnect", self.disconnect_rate))
        .then(|| streams.between("disconnect", 0, self.disconnect_after_events_max));
        let mut decision = if unavailable {
            Decision::fail(Injected::Unavailable)
        } else if conflict {
            Decision::fail(Injected::Conflict)
        } else if lost {
            Decision::lose_response(Injected::Unavailable)
        } else {
            Decision {
                degraded: Disconnect(disconnect),
                ..Decision::default()
            }
        };
        decision.latency = streams.latency(self.latency_ms_min, self.latency_ms_max);
        decision
    }
}
