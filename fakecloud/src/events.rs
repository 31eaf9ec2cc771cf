//! EventBridge events the interruption queue receives, built with the controller's own message
//! types (`karpenter_core::interruption::messages`), so the bodies are exactly what the controller
//! parses and what the golden test pins to AWS's documented shape.

use jiff::Timestamp;
use karpenter_core::interruption::messages::{
    AffectedEntity, DETAIL_TYPE_CAPACITY_RESERVATION_INTERRUPTION,
    DETAIL_TYPE_REBALANCE_RECOMMENDATION, DETAIL_TYPE_SCHEDULED_CHANGE,
    DETAIL_TYPE_SPOT_INTERRUPTION, DETAIL_TYPE_STATE_CHANGE, Event, EventDescription,
    HEALTH_CATEGORY_SCHEDULED_CHANGE, HEALTH_SERVICE_EC2, Metadata, RebalanceRecommendationDetail,
    SCHEMA_VERSION, SOURCE_EC2, SOURCE_HEALTH, ScheduledChangeDetail, SpotInterruptionDetail,
    StateChangeDetail,
};

/// The Health event type the fake schedules: the instance is stopped at the start time.
pub(crate) const HEALTH_STOP_SCHEDULED: &str = "AWS_EC2_INSTANCE_STOP_SCHEDULED";

/// Where and when an event happened; `id` is its EventBridge id.
pub(crate) struct Origin<'a> {
    pub region: &'a str,
    pub account: &'a str,
    pub id: String,
    pub time: Timestamp,
}

impl Origin<'_> {
    fn metadata(&self, detail_type: &str, source: &str, resources: Vec<String>) -> Metadata {
        Metadata {
            version: SCHEMA_VERSION.to_string(),
            id: self.id.clone(),
            detail_type: detail_type.to_string(),
            source: source.to_string(),
            account: self.account.to_string(),
            time: whole_seconds(self.time),
            region: self.region.to_string(),
            resources,
        }
    }

    fn instance_arn(&self, instance_id: &str) -> Vec<String> {
        vec![format!(
            "arn:aws:ec2:{}:{}:instance/{instance_id}",
            self.region, self.account
        )]
    }
}

/// A two-minute warning that EC2 terminates `instance_id` (the spot and the capacity-reservation
/// warnings share the detail).
fn termination_warning(origin: &Origin<'_>, detail_type: &str, instance_id: &str) -> String {
    Event {
        metadata: origin.metadata(detail_type, SOURCE_EC2, origin.instance_arn(instance_id)),
        detail: SpotInterruptionDetail {
            instance_id: instance_id.to_string(),
            instance_action: "terminate".to_string(),
        },
    }
    .to_json()
}

pub(crate) fn spot_interruption_warning(origin: &Origin<'_>, instance_id: &str) -> String {
    termination_warning(origin, DETAIL_TYPE_SPOT_INTERRUPTION, instance_id)
}

pub(crate) fn capacity_reservation_interruption_warning(
    origin: &Origin<'_>,
    instance_id: &str,
) -> String {
    termination_warning(
        origin,
        DETAIL_TYPE_CAPACITY_RESERVATION_INTERRUPTION,
        instance_id,
    )
}

pub(crate) fn rebalance_recommendation(origin: &Origin<'_>, instance_id: &str) -> String {
    Event {
        metadata: origin.metadata(
            DETAIL_TYPE_REBALANCE_RECOMMENDATION,
            SOURCE_EC2,
            origin.instance_arn(instance_id),
        ),
        detail: RebalanceRecommendationDetail {
            instance_id: instance_id.to_string(),
        },
    }
    .to_json()
}

/// `state` is EC2's name: `stopping`, `stopped`, `shutting-down`, `terminated`.
pub(crate) fn state_change(origin: &Origin<'_>, instance_id: &str, state: &str) -> String {
    Event {
        metadata: origin.metadata(
            DETAIL_TYPE_STATE_CHANGE,
            SOURCE_EC2,
            origin.instance_arn(instance_id),
        ),
        detail: StateChangeDetail {
            instance_id: instance_id.to_string(),
            state: state.to_string(),
        },
    }
    .to_json()
}

/// An AWS Health scheduled stop of `instance_id` during `[start, end)`.
pub(crate) fn scheduled_change(
    origin: &Origin<'_>,
    instance_id: &str,
    start: Timestamp,
    end: Timestamp,
) -> String {
    Event {
        metadata: origin.metadata(
            DETAIL_TYPE_SCHEDULED_CHANGE,
            SOURCE_HEALTH,
            vec![instance_id.to_string()],
        ),
        detail: ScheduledChangeDetail {
            event_arn: format!(
                "arn:aws:health:{}::event/EC2/{HEALTH_STOP_SCHEDULED}/{HEALTH_STOP_SCHEDULED}_{}",
                origin.region, origin.id
            ),
            service: HEALTH_SERVICE_EC2.to_string(),
            event_type_code: HEALTH_STOP_SCHEDULED.to_string(),
            event_type_category: HEALTH_CATEGORY_SCHEDULED_CHANGE.to_string(),
            start_time: Some(rfc1123(start)),
            end_time: Some(rfc1123(end)),
            event_description: vec![EventDescription {
                language: "en_US".to_string(),
                latest_description: format!(
                    "EC2 has detected degradation of the underlying hardware hosting your instance {instance_id}. The instance is scheduled to be stopped."
                ),
            }],
            affected_entities: vec![AffectedEntity {
                entity_value: instance_id.to_string(),
            }],
        },
    }
    .to_json()
}

/// Bodies that are not interruption events, for malformed-message injection: each breaks the
/// parser a different way.
pub const MALFORMED_BODIES: [&str; 6] = [
    "",
    "not json at all",
    "{\"version\":\"0\",\"detail-type\":",
    "[\"an\",\"array\"]",
    "{\"version\":\"0\",\"id\":\"x\",\"source\":\"aws.ec2\",\"time\":\"2024-01-01T00:00:00Z\"}",
    "{\"version\":\"0\",\"id\":\"x\",\"detail-type\":\"EC2 Spot Instance Interruption Warning\",\"source\":\"aws.ec2\",\"time\":\"2024-01-01T00:00:00Z\",\"detail\":{\"instance-id\":42}}",
];

/// AWS event times carry whole seconds.
pub(crate) fn whole_seconds(time: Timestamp) -> Timestamp {
    Timestamp::from_second(time.as_second()).unwrap_or(time)
}

/// `Thu, 27 Jun 2019 06:01:00 GMT`, as Health writes start and end times.
fn rfc1123(time: Timestamp) -> String {
    time.strftime("%a, %d %b %Y %H:%M:%S GMT").to_string()
}
