//! Interruption messages: parsing and golden shapes.
//!
//! The golden bodies below are written from AWS's documented EventBridge examples (EC2 spot
//! interruption warning, rebalance recommendation, instance state-change notification, AWS Health
//! scheduled change). fakecloud emits its events through the same types, so pinning the types'
//! JSON here pins what every simulation sees.

use karpenter_core::interruption::messages::{
    AffectedEntity, Event, EventDescription, InterruptionMessage, Kind, Metadata, ParseError,
    RebalanceRecommendationDetail, ScheduledChangeDetail, SpotInterruptionDetail,
    StateChangeDetail, parse,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn metadata(detail_type: &str, source: &str, resources: &[&str]) -> Metadata {
    Metadata {
        version: "0".into(),
        id: "7bf73129-1428-4cd3-a780-95db273d1602".into(),
        detail_type: detail_type.into(),
        source: source.into(),
        account: "123456789012".into(),
        time: "2021-11-11T21:29:54Z".parse().expect("time"),
        region: "us-west-2".into(),
        resources: resources.iter().map(|r| r.to_string()).collect(),
    }
}

const INSTANCE_ARN: &str = "arn:aws:ec2:us-west-2:123456789012:instance/i-1234567890abcdef0";

fn spot_warning_json() -> Value {
    json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2021-11-11T21:29:54Z",
        "region": "us-west-2",
        "resources": [INSTANCE_ARN],
        "detail": {
            "instance-id": "i-1234567890abcdef0",
            "instance-action": "terminate"
        }
    })
}

fn reservation_warning_json() -> Value {
    let mut value = spot_warning_json();
    value["detail-type"] = json!("EC2 Capacity Reservation Instance Interruption Warning");
    value
}

fn rebalance_json() -> Value {
    json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Instance Rebalance Recommendation",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2021-11-11T21:29:54Z",
        "region": "us-west-2",
        "resources": [INSTANCE_ARN],
        "detail": { "instance-id": "i-1234567890abcdef0" }
    })
}

fn state_change_json(state: &str) -> Value {
    json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "EC2 Instance State-change Notification",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2021-11-11T21:29:54Z",
        "region": "us-west-2",
        "resources": [INSTANCE_ARN],
        "detail": { "instance-id": "i-1234567890abcdef0", "state": state }
    })
}

fn health_json(service: &str, category: &str) -> Value {
    json!({
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "AWS Health Event",
        "source": "aws.health",
        "account": "123456789012",
        "time": "2021-11-11T21:29:54Z",
        "region": "us-west-2",
        "resources": ["i-1234567890abcdef0"],
        "detail": {
            "eventArn": "arn:aws:health:us-west-2::event/EC2/AWS_EC2_INSTANCE_STOP_SCHEDULED/AWS_EC2_INSTANCE_STOP_SCHEDULED_1",
            "service": service,
            "eventTypeCode": "AWS_EC2_INSTANCE_STOP_SCHEDULED",
            "eventTypeCategory": category,
            "startTime": "Sun, 14 Nov 2021 21:29:54 GMT",
            "endTime": "Sun, 14 Nov 2021 22:29:54 GMT",
            "eventDescription": [{
                "language": "en_US",
                "latestDescription": "The instance is scheduled to be stopped."
            }],
            "affectedEntities": [{ "entityValue": "i-1234567890abcdef0" }]
        }
    })
}

/// The exact body text, key order included (serde_json keeps insertion order here).
fn body(value: &Value) -> String {
    serde_json::to_string(value).expect("json")
}

#[test]
fn a_spot_interruption_warning_serialises_to_the_documented_shape() {
    let event = Event {
        metadata: metadata(
            "EC2 Spot Instance Interruption Warning",
            "aws.ec2",
            &[INSTANCE_ARN],
        ),
        detail: SpotInterruptionDetail {
            instance_id: "i-1234567890abcdef0".into(),
            instance_action: "terminate".into(),
        },
    };
    assert_eq!(event.to_json(), body(&spot_warning_json()));
}

#[test]
fn a_rebalance_recommendation_serialises_to_the_documented_shape() {
    let event = Event {
        metadata: metadata(
            "EC2 Instance Rebalance Recommendation",
            "aws.ec2",
            &[INSTANCE_ARN],
        ),
        detail: RebalanceRecommendationDetail {
            instance_id: "i-1234567890abcdef0".into(),
        },
    };
    assert_eq!(event.to_json(), body(&rebalance_json()));
}

#[test]
fn a_state_change_notification_serialises_to_the_documented_shape() {
    let event = Event {
        metadata: metadata(
            "EC2 Instance State-change Notification",
            "aws.ec2",
            &[INSTANCE_ARN],
        ),
        detail: StateChangeDetail {
            instance_id: "i-1234567890abcdef0".into(),
            state: "shutting-down".into(),
        },
    };
    assert_eq!(event.to_json(), body(&state_change_json("shutting-down")));
}

#[test]
fn a_health_scheduled_change_serialises_to_the_documented_shape() {
    let event = Event {
        metadata: metadata("AWS Health Event", "aws.health", &["i-1234567890abcdef0"]),
        detail: ScheduledChangeDetail {
            event_arn: "arn:aws:health:us-west-2::event/EC2/AWS_EC2_INSTANCE_STOP_SCHEDULED/AWS_EC2_INSTANCE_STOP_SCHEDULED_1".into(),
            service: "EC2".into(),
            event_type_code: "AWS_EC2_INSTANCE_STOP_SCHEDULED".into(),
            event_type_category: "scheduledChange".into(),
            start_time: Some("Sun, 14 Nov 2021 21:29:54 GMT".into()),
            end_time: Some("Sun, 14 Nov 2021 22:29:54 GMT".into()),
            event_description: vec![EventDescription {
                language: "en_US".into(),
                latest_description: "The instance is scheduled to be stopped.".into(),
            }],
            affected_entities: vec![AffectedEntity {
                entity_value: "i-1234567890abcdef0".into(),
            }],
        },
    };
    assert_eq!(
        event.to_json(),
        body(&health_json("EC2", "scheduledChange"))
    );
}

#[test]
fn a_spot_interruption_warning_parses_to_its_instance_and_kind() {
    let message = parse(&body(&spot_warning_json())).expect("parses");
    assert_eq!(message.kind(), Kind::SpotInterrupted);
    assert_eq!(message.instance_ids(), vec!["i-1234567890abcdef0"]);
    assert_eq!(message.time().to_string(), "2021-11-11T21:29:54Z");
    let InterruptionMessage::SpotInterruption(event) = message else {
        panic!("expected a spot interruption");
    };
    assert_eq!(event.detail.instance_action, "terminate");
    assert_eq!(event.metadata.resources, vec![INSTANCE_ARN]);
}

#[test]
fn a_rebalance_recommendation_parses_to_its_instance_and_kind() {
    let message = parse(&body(&rebalance_json())).expect("parses");
    assert_eq!(message.kind(), Kind::RebalanceRecommendation);
    assert_eq!(message.instance_ids(), vec!["i-1234567890abcdef0"]);
}

#[test]
fn stopping_and_stopped_mean_stopped_while_shutting_down_and_terminated_mean_terminated() {
    for (state, kind) in [
        ("stopping", Kind::InstanceStopped),
        ("stopped", Kind::InstanceStopped),
        ("shutting-down", Kind::InstanceTerminated),
        ("terminated", Kind::InstanceTerminated),
    ] {
        let message = parse(&body(&state_change_json(state))).expect("parses");
        assert_eq!(message.kind(), kind, "state {state}");
        assert_eq!(message.instance_ids(), vec!["i-1234567890abcdef0"]);
    }
}

#[test]
fn pending_and_running_state_changes_are_ignored_not_errors() {
    for state in ["pending", "running"] {
        let message = parse(&body(&state_change_json(state))).expect("parses");
        assert_eq!(message.kind(), Kind::NoOp, "state {state}");
        assert!(message.instance_ids().is_empty());
    }
}

#[test]
fn an_ec2_scheduled_change_names_its_affected_instances() {
    let mut value = health_json("EC2", "scheduledChange");
    // AWS adds fields the controller does not read; they must not break parsing.
    value["detail"]["affectedEntities"] = json!([
        { "entityValue": "i-1", "tags": { "team": "a" } },
        { "entityValue": "i-2" }
    ]);
    value["detail"]["statusCode"] = json!("upcoming");
    let message = parse(&body(&value)).expect("parses");
    assert_eq!(message.kind(), Kind::ScheduledChange);
    assert_eq!(message.instance_ids(), vec!["i-1", "i-2"]);
}

#[test]
fn health_events_of_other_services_or_categories_are_ignored() {
    for (service, category) in [("RDS", "scheduledChange"), ("EC2", "issue")] {
        let message = parse(&body(&health_json(service, category))).expect("parses");
        assert_eq!(message.kind(), Kind::NoOp, "{service} {category}");
    }
}

#[test]
fn unknown_detail_types_and_schema_versions_are_ignored() {
    let mut other = rebalance_json();
    other["detail-type"] = json!("EC2 Fast Snapshot Restore State-change Notification");
    assert!(matches!(
        parse(&body(&other)),
        Ok(InterruptionMessage::Ignored { .. })
    ));
    let mut version = rebalance_json();
    version["version"] = json!("1");
    let Ok(InterruptionMessage::Ignored { reason, .. }) = parse(&body(&version)) else {
        panic!("expected ignored");
    };
    assert!(reason.contains("version"), "{reason}");
}

#[test]
fn malformed_bodies_are_rejected_with_an_error_naming_the_problem() {
    assert_eq!(parse(""), Err(ParseError::Empty));
    assert_eq!(parse("  \n"), Err(ParseError::Empty));
    assert!(matches!(
        parse("{\"version\":"),
        Err(ParseError::NotJson(_))
    ));
    assert!(matches!(parse("not json"), Err(ParseError::NotJson(_))));
    assert_eq!(parse("[1,2]"), Err(ParseError::NotAnObject));

    let mut no_type = spot_warning_json();
    no_type
        .as_object_mut()
        .expect("object")
        .remove("detail-type");
    let error = parse(&body(&no_type)).expect_err("no detail-type");
    assert!(
        error.to_string().contains("detail-type"),
        "{error} names the field"
    );

    let mut bad_time = spot_warning_json();
    bad_time["time"] = json!("yesterday");
    let error = parse(&body(&bad_time)).expect_err("bad time");
    assert!(error.to_string().contains("time"), "{error}");

    let mut no_detail = spot_warning_json();
    no_detail.as_object_mut().expect("object").remove("detail");
    let error = parse(&body(&no_detail)).expect_err("no detail");
    assert!(error.to_string().contains("detail"), "{error}");

    let mut wrong_type = spot_warning_json();
    wrong_type["detail"]["instance-id"] = json!(42);
    let error = parse(&body(&wrong_type)).expect_err("numeric id");
    assert!(
        matches!(&error, ParseError::Detail { .. }),
        "{error:?} is a detail error"
    );
    assert!(error.to_string().contains("detail.instance-id"), "{error}");

    let mut empty_id = state_change_json("terminated");
    empty_id["detail"]["instance-id"] = json!("");
    assert!(matches!(
        parse(&body(&empty_id)),
        Err(ParseError::Detail { .. })
    ));

    let mut no_entities = health_json("EC2", "scheduledChange");
    no_entities["detail"]
        .as_object_mut()
        .expect("object")
        .remove("affectedEntities");
    let error = parse(&body(&no_entities)).expect_err("no entities");
    assert!(error.to_string().contains("affectedEntities"), "{error}");
}

#[test]
fn every_kind_survives_a_round_trip_through_its_json() {
    for value in [
        spot_warning_json(),
        reservation_warning_json(),
        rebalance_json(),
        state_change_json("stopped"),
        health_json("EC2", "scheduledChange"),
    ] {
        let message = parse(&body(&value)).expect("parses");
        let again = match &message {
            InterruptionMessage::SpotInterruption(e) => e.to_json(),
            InterruptionMessage::CapacityReservationInterruption(e) => e.to_json(),
            InterruptionMessage::RebalanceRecommendation(e) => e.to_json(),
            InterruptionMessage::ScheduledChange(e) => e.to_json(),
            InterruptionMessage::StateChange(e) => e.to_json(),
            InterruptionMessage::Ignored { reason, .. } => panic!("ignored: {reason}"),
        };
        assert_eq!(again, body(&value));
    }
}

fn valid_bodies() -> Vec<String> {
    vec![
        body(&spot_warning_json()),
        body(&reservation_warning_json()),
        body(&rebalance_json()),
        body(&state_change_json("terminated")),
        body(&health_json("EC2", "scheduledChange")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn parsing_arbitrary_text_never_panics(text in ".{0,300}") {
        let _ = parse(&text);
    }

    #[test]
    fn parsing_damaged_valid_bodies_never_panics(
        which in 0usize..4,
        cut in 0usize..600,
        at in 0usize..600,
        byte in prop::sample::select(&[b'"', b'{', b'}', b'[', b']', b',', b':', b'0', b'x', b' '][..]),
    ) {
        let original = valid_bodies()[which].clone().into_bytes();
        let mut damaged = original.clone();
        damaged.truncate(cut.min(original.len()));
        if !damaged.is_empty() {
            let i = at % damaged.len();
            damaged[i] = byte;
        }
        let text = String::from_utf8_lossy(&damaged);
        let _ = parse(&text);
    }
}
