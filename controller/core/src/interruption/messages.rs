//! EventBridge message shapes delivered to the interruption queue, shared by the controller (which
//! parses them) and fakecloud (which emits them).
//!
//! One set of types serves both sides on purpose: if the fake cloud emitted its own JSON, a shape
//! mistake would be invisible to every simulation. The shapes follow the EventBridge envelope
//! (`version`, `id`, `detail-type`, `source`, `account`, `time`, `region`, `resources`, `detail`)
//! and the four `detail` schemas the controller acts on; a golden test pins them to AWS's
//! documented examples.
//!
//! [`parse`] never panics: anything that is not a well-formed event is a [`ParseError`] saying
//! what is wrong, and a well-formed event the controller does not act on (another detail type,
//! another Health service, a `running` state change, ...) is [`InterruptionMessage::Ignored`], so
//! the caller can delete it without treating it as an error.

use std::fmt;

use jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// EventBridge schema version of all four events.
pub const SCHEMA_VERSION: &str = "0";
/// `source` of EC2 events (spot warnings, rebalance recommendations, state changes).
pub const SOURCE_EC2: &str = "aws.ec2";
/// `source` of AWS Health events.
pub const SOURCE_HEALTH: &str = "aws.health";

pub const DETAIL_TYPE_SPOT_INTERRUPTION: &str = "EC2 Spot Instance Interruption Warning";
pub const DETAIL_TYPE_REBALANCE_RECOMMENDATION: &str = "EC2 Instance Rebalance Recommendation";
pub const DETAIL_TYPE_SCHEDULED_CHANGE: &str = "AWS Health Event";
pub const DETAIL_TYPE_STATE_CHANGE: &str = "EC2 Instance State-change Notification";
/// The owner of an interruptible capacity reservation is taking capacity back (schema
/// `aws.ec2@EC2CapacityReservationInstanceInterruptionWarning`): EC2 terminates the instance
/// two minutes later.
pub const DETAIL_TYPE_CAPACITY_RESERVATION_INTERRUPTION: &str =
    "EC2 Capacity Reservation Instance Interruption Warning";

/// The Health `service` whose scheduled changes concern instances.
pub const HEALTH_SERVICE_EC2: &str = "EC2";
/// The Health `eventTypeCategory` of planned maintenance.
pub const HEALTH_CATEGORY_SCHEDULED_CHANGE: &str = "scheduledChange";

/// Instance states whose state-change notifications the controller acts on; other states
/// (`pending`, `running`) parse as [`InterruptionMessage::Ignored`].
pub const STATES_ACTED_ON: [&str; 4] = ["stopping", "stopped", "shutting-down", "terminated"];

/// The EventBridge envelope common to every event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metadata {
    pub version: String,
    pub id: String,
    #[serde(rename = "detail-type")]
    pub detail_type: String,
    pub source: String,
    #[serde(default)]
    pub account: String,
    /// RFC 3339, whole seconds in what AWS sends (`2021-11-11T21:29:54Z`).
    #[serde(with = "rfc3339")]
    pub time: Timestamp,
    #[serde(default)]
    pub region: String,
    /// ARNs (EC2 events) or entity values (Health events) of the affected resources.
    #[serde(default)]
    pub resources: Vec<String>,
}

/// An EventBridge event: the envelope with a typed `detail`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event<D> {
    #[serde(flatten)]
    pub metadata: Metadata,
    pub detail: D,
}

impl<D: Serialize> Event<D> {
    /// The event as the JSON body SQS delivers (keys in AWS's documented order).
    pub fn to_json(&self) -> String {
        // Serialising plain strings, vectors and a timestamp cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `EC2 Spot Instance Interruption Warning` (schema `aws.ec2@EC2SpotInstanceInterruptionWarning`):
/// EC2 reclaims the instance two minutes after this event.
pub type SpotInterruptionWarning = Event<SpotInterruptionDetail>;
/// `EC2 Capacity Reservation Instance Interruption Warning` (same detail as the spot warning).
pub type CapacityReservationInterruptionWarning = Event<SpotInterruptionDetail>;
/// `EC2 Instance Rebalance Recommendation`: the spot instance is at elevated risk of interruption.
pub type RebalanceRecommendation = Event<RebalanceRecommendationDetail>;
/// `AWS Health Event` of category `scheduledChange` for EC2: planned maintenance (stop, retirement,
/// reboot) of the affected instances.
pub type ScheduledChange = Event<ScheduledChangeDetail>;
/// `EC2 Instance State-change Notification`.
pub type StateChange = Event<StateChangeDetail>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpotInterruptionDetail {
    #[serde(rename = "instance-id")]
    pub instance_id: String,
    /// `terminate`, `stop` or `hibernate`.
    #[serde(rename = "instance-action", default)]
    pub instance_action: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebalanceRecommendationDetail {
    #[serde(rename = "instance-id")]
    pub instance_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateChangeDetail {
    #[serde(rename = "instance-id")]
    pub instance_id: String,
    /// `pending`, `running`, `stopping`, `stopped`, `shutting-down` or `terminated`.
    pub state: String,
}

/// The `detail` of an AWS Health event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduledChangeDetail {
    #[serde(default)]
    pub event_arn: String,
    /// `EC2` for the events the controller acts on.
    pub service: String,
    /// e.g. `AWS_EC2_INSTANCE_STOP_SCHEDULED`, `AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED`.
    #[serde(default)]
    pub event_type_code: String,
    /// `scheduledChange` for the events the controller acts on.
    pub event_type_category: String,
    /// RFC 1123 (`Thu, 27 Jun 2019 06:01:00 GMT`), as Health writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    #[serde(default)]
    pub event_description: Vec<EventDescription>,
    pub affected_entities: Vec<AffectedEntity>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventDescription {
    pub language: String,
    pub latest_description: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AffectedEntity {
    /// The instance id for EC2 events.
    pub entity_value: String,
}

/// What a message asks the controller to do (upstream's metric label values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    SpotInterrupted,
    /// An interruptible capacity reservation's instance is being reclaimed.
    CapacityReservationInterrupted,
    RebalanceRecommendation,
    ScheduledChange,
    InstanceStopped,
    InstanceTerminated,
    /// `DescribeInstanceStatus`: the instance's own status check failed ([`super::health`]).
    InstanceStatus,
    /// `DescribeInstanceStatus`: the host's status check failed.
    SystemStatus,
    /// `DescribeInstanceStatus`: EC2 scheduled a reboot, maintenance, retirement or stop.
    EventStatus,
    /// A well-formed event with nothing to act on.
    NoOp,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::SpotInterrupted => "spot_interrupted",
            Kind::CapacityReservationInterrupted => "capacity_reservation_interrupted",
            Kind::RebalanceRecommendation => "rebalance_recommendation",
            Kind::ScheduledChange => "scheduled_change",
            Kind::InstanceStopped => "instance_stopped",
            Kind::InstanceTerminated => "instance_terminated",
            Kind::InstanceStatus => "instance_status",
            Kind::SystemStatus => "system_status",
            Kind::EventStatus => "event_status",
            Kind::NoOp => "no_op",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A parsed interruption-queue message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterruptionMessage {
    SpotInterruption(SpotInterruptionWarning),
    CapacityReservationInterruption(CapacityReservationInterruptionWarning),
    RebalanceRecommendation(RebalanceRecommendation),
    ScheduledChange(ScheduledChange),
    StateChange(StateChange),
    /// A well-formed EventBridge event the controller does not act on, and why.
    Ignored {
        metadata: Metadata,
        reason: String,
    },
}

impl InterruptionMessage {
    pub fn metadata(&self) -> &Metadata {
        match self {
            InterruptionMessage::SpotInterruption(e) => &e.metadata,
            InterruptionMessage::CapacityReservationInterruption(e) => &e.metadata,
            InterruptionMessage::RebalanceRecommendation(e) => &e.metadata,
            InterruptionMessage::ScheduledChange(e) => &e.metadata,
            InterruptionMessage::StateChange(e) => &e.metadata,
            InterruptionMessage::Ignored { metadata, .. } => metadata,
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            InterruptionMessage::SpotInterruption(_) => Kind::SpotInterrupted,
            InterruptionMessage::CapacityReservationInterruption(_) => {
                Kind::CapacityReservationInterrupted
            }
            InterruptionMessage::RebalanceRecommendation(_) => Kind::RebalanceRecommendation,
            InterruptionMessage::ScheduledChange(_) => Kind::ScheduledChange,
            InterruptionMessage::StateChange(e) => {
                if matches!(
                    e.detail.state.to_ascii_lowercase().as_str(),
                    "stopping" | "stopped"
                ) {
                    Kind::InstanceStopped
                } else {
                    Kind::InstanceTerminated
                }
            }
            InterruptionMessage::Ignored { .. } => Kind::NoOp,
        }
    }

    /// The EC2 instances the message is about, in message order.
    pub fn instance_ids(&self) -> Vec<String> {
        match self {
            InterruptionMessage::SpotInterruption(e) => vec![e.detail.instance_id.clone()],
            InterruptionMessage::CapacityReservationInterruption(e) => {
                vec![e.detail.instance_id.clone()]
            }
            InterruptionMessage::RebalanceRecommendation(e) => vec![e.detail.instance_id.clone()],
            InterruptionMessage::ScheduledChange(e) => e
                .detail
                .affected_entities
                .iter()
                .map(|a| a.entity_value.clone())
                .collect(),
            InterruptionMessage::StateChange(e) => vec![e.detail.instance_id.clone()],
            InterruptionMessage::Ignored { .. } => Vec::new(),
        }
    }

    /// When the event happened (the envelope's `time`).
    pub fn time(&self) -> Timestamp {
        self.metadata().time
    }
}

/// Why a message body is not an interruption event. The message names the offending field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty message body")]
    Empty,
    #[error("message body is not JSON: {0}")]
    NotJson(String),
    #[error("message body is JSON but not an object")]
    NotAnObject,
    #[error("not an EventBridge event: {0}")]
    Envelope(String),
    #[error("malformed detail of {detail_type:?} event: {message}")]
    Detail {
        detail_type: String,
        message: String,
    },
}

/// Parses an SQS message body. Never panics; see the module docs for what is an error and what is
/// [`InterruptionMessage::Ignored`].
pub fn parse(body: &str) -> Result<InterruptionMessage, ParseError> {
    if body.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| ParseError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(ParseError::NotAnObject);
    }
    let metadata: Metadata = from_value(&value, "").map_err(ParseError::Envelope)?;
    let ignored = |reason: String| InterruptionMessage::Ignored {
        metadata: metadata.clone(),
        reason,
    };
    if metadata.version != SCHEMA_VERSION {
        return Ok(ignored(format!(
            "schema version {:?} is not handled",
            metadata.version
        )));
    }
    match (metadata.source.as_str(), metadata.detail_type.as_str()) {
        (SOURCE_EC2, DETAIL_TYPE_SPOT_INTERRUPTION) => {
            let detail: SpotInterruptionDetail = detail(&value, &metadata)?;
            require_instance_id(&metadata, &detail.instance_id)?;
            Ok(InterruptionMessage::SpotInterruption(Event {
                metadata: metadata.clone(),
                detail,
            }))
        }
        (SOURCE_EC2, DETAIL_TYPE_CAPACITY_RESERVATION_INTERRUPTION) => {
            let detail: SpotInterruptionDetail = detail(&value, &metadata)?;
            require_instance_id(&metadata, &detail.instance_id)?;
            Ok(InterruptionMessage::CapacityReservationInterruption(
                Event {
                    metadata: metadata.clone(),
                    detail,
                },
            ))
        }
        (SOURCE_EC2, DETAIL_TYPE_REBALANCE_RECOMMENDATION) => {
            let detail: RebalanceRecommendationDetail = detail(&value, &metadata)?;
            require_instance_id(&metadata, &detail.instance_id)?;
            Ok(InterruptionMessage::RebalanceRecommendation(Event {
                metadata: metadata.clone(),
                detail,
            }))
        }
        (SOURCE_EC2, DETAIL_TYPE_STATE_CHANGE) => {
            let detail: StateChangeDetail = detail(&value, &metadata)?;
            require_instance_id(&metadata, &detail.instance_id)?;
            let state = detail.state.to_ascii_lowercase();
            if !STATES_ACTED_ON.contains(&state.as_str()) {
                return Ok(ignored(format!("state {:?} is not acted on", detail.state)));
            }
            Ok(InterruptionMessage::StateChange(Event {
                metadata: metadata.clone(),
                detail,
            }))
        }
        (SOURCE_HEALTH, DETAIL_TYPE_SCHEDULED_CHANGE) => {
            let detail: ScheduledChangeDetail = detail(&value, &metadata)?;
            if detail.service != HEALTH_SERVICE_EC2
                || detail.event_type_category != HEALTH_CATEGORY_SCHEDULED_CHANGE
            {
                return Ok(ignored(format!(
                    "Health event for service {:?}, category {:?} is not acted on",
                    detail.service, detail.event_type_category
                )));
            }
            Ok(InterruptionMessage::ScheduledChange(Event {
                metadata: metadata.clone(),
                detail,
            }))
        }
        (source, detail_type) => Ok(ignored(format!(
            "event {detail_type:?} from {source:?} is not handled"
        ))),
    }
}

/// The typed `detail` of an event whose envelope is `metadata`.
fn detail<T: DeserializeOwned>(
    value: &serde_json::Value,
    metadata: &Metadata,
) -> Result<T, ParseError> {
    let error = |message: String| ParseError::Detail {
        detail_type: metadata.detail_type.clone(),
        message,
    };
    let detail = value
        .get("detail")
        .ok_or_else(|| error("missing field `detail`".to_string()))?;
    from_value(detail, "detail").map_err(error)
}

fn require_instance_id(metadata: &Metadata, instance_id: &str) -> Result<(), ParseError> {
    if instance_id.is_empty() {
        return Err(ParseError::Detail {
            detail_type: metadata.detail_type.clone(),
            message: "instance-id is empty".to_string(),
        });
    }
    Ok(())
}

/// Deserialises with the failing field's path in the message (`detail.instance-id: missing
/// field`), `prefix` being the path of `value` in the body.
fn from_value<T: DeserializeOwned>(value: &serde_json::Value, prefix: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = match (prefix.is_empty(), path == ".") {
            (true, true) => String::new(),
            (true, false) => path,
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}.{path}"),
        };
        if path.is_empty() {
            e.inner().to_string()
        } else {
            format!("{path}: {}", e.inner())
        }
    })
}

/// `time` as RFC 3339 text.
mod rfc3339 {
    use jiff::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(time: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(time)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse::<Timestamp>()
            .map_err(|e| D::Error::custom(format!("invalid RFC 3339 time {text:?}: {e}")))
    }
}
