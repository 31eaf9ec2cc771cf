//! Capacity reservations: what `DescribeCapacityReservations` reports, and how `CreateFleet`
//! launches into them (targeted, open, full, misconfigured) as EC2 does.

use std::collections::BTreeMap;
use std::time::Duration;

use fakecloud::{CAPACITY_BLOCK_RECLAIM_LEAD, ReservationSpec};
use karpenter_core::catalog::CapacityType::{OnDemand, Reserved};
use karpenter_core::seams::Clock;
use karpenter_core::seams::ec2::{Filter, InstanceState};

use super::support::{ZONE_A, block_on, config, nodeconfig, world};

const TARGETED: &str = "karpenter.k8s.aws/targeted";

fn targeting(id: &str, market: Option<&str>) -> BTreeMap<String, String> {
    let mut extra = BTreeMap::from([(
        "capacityReservationSpecification".to_string(),
        serde_json::json!({
            "capacityReservationPreference": "capacity-reservations-only",
            "capacityReservationTarget": {"capacityReservationId": id},
        })
        .to_string(),
    )]);
    if let Some(market) = market {
        extra.insert(
            "instanceMarketOptions".into(),
            serde_json::json!({"marketType": market}).to_string(),
        );
    }
    extra
}

#[test]
fn an_on_demand_launch_that_does_not_opt_out_runs_in_a_matching_open_reservation() {
    let w = world(config());
    let id = w
        .cloud
        .create_capacity_reservation(ReservationSpec::new("m5.large", ZONE_A, 2).open());
    let instance = w.launch(OnDemand, "m5.large", "od-1");
    let described = w.cloud.instance(&instance).expect("instance");
    assert_eq!(
        described.capacity_reservation_id.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(described.capacity_type, Reserved);
    assert_eq!(
        w.cloud
            .capacity_reservation(&id)
            .unwrap()
            .available_instance_count,
        1
    );
    block_on(w.ec2().terminate_instances(&[instance])).expect("terminate");
    w.clock.advance(Duration::from_secs(600));
    w.cloud.advance_to_now();
    assert_eq!(
        w.cloud
            .capacity_reservation(&id)
            .unwrap()
            .available_instance_count,
        2,
        "a terminated instance gives its slot back"
    );
}

#[test]
fn a_targeted_launch_takes_a_slot_and_a_full_reservation_answers_reservation_capacity_exceeded() {
    let w = world(config());
    let id = w
        .cloud
        .create_capacity_reservation(ReservationSpec::new("m5.large", ZONE_A, 1));
    w.launch_template_with(TARGETED, &nodeconfig(""), targeting(&id, None));
    let mut request = w.request(Reserved, &[("m5.large", ZONE_A)], "r-1");
    request.launch_template_name = TARGETED.into();
    let first = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    assert_eq!(first.instances.len(), 1, "{:?}", first.errors);
    assert_eq!(first.instances[0].capacity_type, Reserved);
    request.client_token = "r-2".into();
    let second = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    assert!(second.instances.is_empty());
    assert!(
        second
            .errors
            .iter()
            .any(|e| e.code == "ReservationCapacityExceeded"),
        "{:?}",
        second.errors
    );
}

#[test]
fn a_reserved_request_without_a_target_or_with_the_wrong_market_type_is_refused() {
    let w = world(config());
    let untargeted = w.fleet(Reserved, &[("m5.large", ZONE_A)], "r-1");
    assert!(untargeted.instances.is_empty());
    assert_eq!(untargeted.errors[0].code, "InvalidParameterCombination");
    let end = w.clock.now() + jiff::SignedDuration::from_hours(4);
    let block = w.cloud.create_capacity_reservation(
        ReservationSpec::new("m5.large", ZONE_A, 1).capacity_block(end),
    );
    w.launch_template_with(TARGETED, &nodeconfig(""), targeting(&block, None));
    let mut request = w.request(Reserved, &[("m5.large", ZONE_A)], "r-2");
    request.launch_template_name = TARGETED.into();
    let no_market = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    assert!(no_market.instances.is_empty());
    assert_eq!(no_market.errors[0].code, "InvalidParameterCombination");
}

#[test]
fn a_capacity_block_s_instances_are_terminated_thirty_minutes_before_it_ends() {
    let w = world(config());
    let end = w.clock.now() + jiff::SignedDuration::from_hours(2);
    let block = w.cloud.create_capacity_reservation(
        ReservationSpec::new("m5.large", ZONE_A, 1).capacity_block(end),
    );
    w.launch_template_with(
        TARGETED,
        &nodeconfig(""),
        targeting(&block, Some("capacity-block")),
    );
    let mut request = w.request(Reserved, &[("m5.large", ZONE_A)], "cb-1");
    request.launch_template_name = TARGETED.into();
    request.capacity_block = true;
    let launched = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    let instance = launched.instances[0].instance_id.clone();
    let before = Duration::from_secs(2 * 3600) - CAPACITY_BLOCK_RECLAIM_LEAD;
    w.clock.advance(before - Duration::from_secs(1));
    assert!(matches!(
        w.cloud.instance_state(&instance),
        Some(InstanceState::Pending | InstanceState::Running)
    ));
    w.clock.advance(Duration::from_secs(2));
    assert_eq!(
        w.cloud.instance_state(&instance),
        Some(InstanceState::ShuttingDown)
    );
}

#[test]
fn describe_filters_by_state_tags_and_match_criteria_and_an_unknown_id_is_not_found() {
    let w = world(config());
    let tagged = w.cloud.create_capacity_reservation(
        ReservationSpec::new("m5.large", ZONE_A, 1)
            .open()
            .tag("team", "ml"),
    );
    let other = w
        .cloud
        .create_capacity_reservation(ReservationSpec::new("c5.large", ZONE_A, 1));
    assert!(w.cloud.cancel_capacity_reservation(&other));
    let ids = |filters: &[Filter]| -> Vec<String> {
        block_on(w.ec2().describe_capacity_reservations(&[], filters))
            .expect("describe")
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(
        ids(&[Filter::new("tag:team", &["ml"])]),
        vec![tagged.clone()]
    );
    assert_eq!(
        ids(&[Filter::new("state", &["active"])]),
        vec![tagged.clone()]
    );
    assert_eq!(
        ids(&[Filter::new("instance-match-criteria", &["targeted"])]),
        vec![other.clone()]
    );
    let missing = block_on(
        w.ec2()
            .describe_capacity_reservations(&["cr-0000000000000000a".to_string()], &[]),
    );
    assert!(missing.is_err());
}
