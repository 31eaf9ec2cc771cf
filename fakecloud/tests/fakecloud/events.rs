//! EventBridge events in the queue: spot warnings, rebalance recommendations, Health scheduled
//! changes, state changes, all parsed with the controller's parser.

use std::time::Duration;

use fakecloud::{Config, SPOT_INTERRUPTION_NOTICE};
use jiff::SignedDuration;
use karpenter_core::catalog::CapacityType::{OnDemand, Spot};
use karpenter_core::interruption::messages::{InterruptionMessage, Kind};
use karpenter_core::seams::ec2::InstanceState;

use super::support::{block_on, config, world};

fn kinds(messages: &[InterruptionMessage]) -> Vec<Kind> {
    messages.iter().map(InterruptionMessage::kind).collect()
}

#[test]
fn a_spot_interruption_warning_arrives_two_minutes_before_the_instance_terminates() {
    let w = world(config());
    let id = w.launch(Spot, "m5.large", "1");
    w.advance_s(30);
    let warned_at = w.now();
    assert!(w.cloud.interrupt_spot(&id));
    assert!(!w.cloud.interrupt_spot(&id), "one warning per instance");

    let messages = w.drain_parsed();
    assert_eq!(kinds(&messages), vec![Kind::SpotInterrupted]);
    assert_eq!(messages[0].instance_ids(), vec![id.clone()]);
    assert_eq!(messages[0].time(), warned_at);
    let InterruptionMessage::SpotInterruption(event) = &messages[0] else {
        panic!("spot warning expected");
    };
    assert_eq!(event.detail.instance_action, "terminate");
    assert_eq!(event.metadata.source, "aws.ec2");
    assert_eq!(event.metadata.region, "us-west-2");
    assert_eq!(
        event.metadata.resources,
        vec![format!("arn:aws:ec2:us-west-2:123456789012:instance/{id}")]
    );

    w.advance_s(119);
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::Running)
    );
    assert!(w.drain().is_empty());
    w.advance_s(1);
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::ShuttingDown)
    );
    let reclaimed = w.drain_parsed();
    assert_eq!(kinds(&reclaimed), vec![Kind::InstanceTerminated]);
    assert_eq!(
        reclaimed[0].time(),
        warned_at + SignedDuration::try_from(SPOT_INTERRUPTION_NOTICE).expect("notice")
    );
}

#[test]
fn random_spot_interruptions_follow_the_rate_and_keep_the_two_minute_notice() {
    let w = world(Config {
        spot_interruption_rate_per_hour: 60.0,
        rebalance_recommendation_lead_ms: 30_000,
        ..config()
    });
    let ids: Vec<String> = (0..5)
        .map(|i| w.launch(Spot, "m5.large", &format!("s{i}")))
        .collect();
    let on_demand = w.launch(OnDemand, "m5.large", "od");
    // Drain every minute: the queue keeps messages for 300 s only.
    let mut messages = Vec::new();
    for _ in 0..180 {
        w.advance_s(60);
        messages.extend(w.drain_parsed());
    }
    for id in &ids {
        let of = |kind: Kind| -> Vec<jiff::Timestamp> {
            messages
                .iter()
                .filter(|m| m.kind() == kind && m.instance_ids() == vec![id.clone()])
                .map(|m| m.time())
                .collect()
        };
        let warnings = of(Kind::SpotInterrupted);
        assert_eq!(warnings.len(), 1, "one warning for {id}");
        let rebalances = of(Kind::RebalanceRecommendation);
        assert_eq!(rebalances.len(), 1, "one rebalance recommendation for {id}");
        assert!(rebalances[0] <= warnings[0]);
        let terminations = of(Kind::InstanceTerminated);
        assert_eq!(
            terminations.len(),
            2,
            "shutting-down and terminated for {id}"
        );
        assert_eq!(
            terminations[0].duration_since(warnings[0]),
            SignedDuration::from_secs(120)
        );
    }
    assert_eq!(
        w.describe(&on_demand).map(|i| i.state),
        Some(InstanceState::Running),
        "on-demand instances are never interrupted"
    );
}

#[test]
fn termination_and_stop_send_state_change_notifications() {
    let w = world(config());
    let terminated = w.launch(OnDemand, "m5.large", "1");
    let stopped = w.launch(OnDemand, "m5.large", "2");
    w.advance_s(10);
    block_on(
        w.ec2()
            .terminate_instances(std::slice::from_ref(&terminated)),
    )
    .expect("terminate");
    assert!(w.cloud.stop_instance(&stopped));
    w.advance_s(60);
    let states: Vec<(String, String, Kind)> = w
        .drain_parsed()
        .into_iter()
        .map(|m| {
            let InterruptionMessage::StateChange(event) = &m else {
                panic!("state change expected, got {m:?}");
            };
            (
                event.detail.instance_id.clone(),
                event.detail.state.clone(),
                m.kind(),
            )
        })
        .collect();
    assert_eq!(
        states,
        vec![
            (
                terminated.clone(),
                "shutting-down".into(),
                Kind::InstanceTerminated
            ),
            (stopped.clone(), "stopping".into(), Kind::InstanceStopped),
            (stopped.clone(), "stopped".into(), Kind::InstanceStopped),
            (
                terminated.clone(),
                "terminated".into(),
                Kind::InstanceTerminated
            ),
        ]
    );
}

#[test]
fn a_rebalance_recommendation_names_the_spot_instance() {
    let w = world(config());
    let spot = w.launch(Spot, "m5.large", "1");
    let od = w.launch(OnDemand, "m5.large", "2");
    assert!(w.cloud.recommend_rebalance(&spot));
    assert!(!w.cloud.recommend_rebalance(&od));
    let messages = w.drain_parsed();
    assert_eq!(kinds(&messages), vec![Kind::RebalanceRecommendation]);
    assert_eq!(messages[0].instance_ids(), vec![spot]);
}

#[test]
fn a_scheduled_change_is_announced_by_aws_health_and_stops_the_instance_at_its_start() {
    let w = world(config());
    let id = w.launch(OnDemand, "m5.large", "1");
    w.advance_s(10);
    assert!(w.cloud.schedule_maintenance(&id, Duration::from_secs(3600)));
    let messages = w.drain_parsed();
    assert_eq!(kinds(&messages), vec![Kind::ScheduledChange]);
    let InterruptionMessage::ScheduledChange(event) = &messages[0] else {
        panic!("scheduled change expected");
    };
    assert_eq!(event.metadata.source, "aws.health");
    assert_eq!(event.detail.service, "EC2");
    assert_eq!(event.detail.event_type_category, "scheduledChange");
    assert_eq!(event.detail.affected_entities[0].entity_value, id);
    assert_eq!(
        event.detail.start_time.as_deref(),
        Some("Thu, 01 Jan 2026 01:00:10 GMT")
    );

    w.advance_s(3599);
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::Running)
    );
    w.advance_s(1);
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::Stopping)
    );
    assert_eq!(kinds(&w.drain_parsed()), vec![Kind::InstanceStopped]);
}

#[test]
fn events_reach_the_queue_after_the_delivery_lag() {
    let w = world(Config {
        event_delivery_lag_ms: 2_000,
        ..config()
    });
    let id = w.launch(Spot, "m5.large", "1");
    w.cloud.interrupt_spot(&id);
    w.advance_ms(1_999);
    assert!(w.drain().is_empty());
    w.advance_ms(1);
    assert_eq!(kinds(&w.drain_parsed()), vec![Kind::SpotInterrupted]);
}
