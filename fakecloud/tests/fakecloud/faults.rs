//! API faults: throttling, 5xx, lost responses and latency, by rate, window or script.

use std::time::Duration;

use fakecloud::{Config, Fake, Fault, FaultRates, FaultWindow, Operation};
use jiff::SignedDuration;
use karpenter_core::catalog::CapacityType::OnDemand;
use karpenter_core::seams::Retryable;
use karpenter_core::seams::ec2::Ec2Error;
use karpenter_core::seams::sqs::SqsError;

use super::support::{ZONE_A, block_on, config, start, world};

#[test]
fn a_throttled_create_fleet_launches_nothing_and_is_retryable() {
    let w = world(config());
    w.launch_template(super::support::LAUNCH_TEMPLATE, "");
    w.cloud
        .set_fault_rates(Operation::CreateFleet, FaultRates::throttling(1.0));
    let request = w.request(OnDemand, &[("m5.large", ZONE_A)], "t");
    let error = block_on(w.ec2().create_fleet(&request)).expect_err("throttled");
    assert!(matches!(&error, Ec2Error::Throttled(m) if m.contains("RequestLimitExceeded")));
    assert!(error.is_retryable());
    assert!(w.cloud.instances().is_empty());
    let log = w.cloud.calls_of(Operation::CreateFleet);
    assert_eq!(log.len(), 1);
    assert!(
        log[0].outcome.starts_with("err throttled"),
        "{}",
        log[0].outcome
    );

    w.cloud.clear_faults();
    assert_eq!(
        block_on(w.ec2().create_fleet(&request))
            .expect("ok")
            .instances
            .len(),
        1
    );
}

#[test]
fn a_throttling_rate_throttles_about_that_share_of_calls() {
    let w = world(config());
    w.cloud
        .set_fault_rates(Operation::DescribeSubnets, FaultRates::throttling(0.5));
    let throttled = (0..400)
        .filter(|_| {
            matches!(
                block_on(w.ec2().describe_subnets(&[])),
                Err(Ec2Error::Throttled(_))
            )
        })
        .count();
    assert!((150..=250).contains(&throttled), "{throttled} of 400");
    // Other operations are unaffected.
    block_on(w.ec2().describe_security_groups(&[])).expect("not throttled");
}

#[test]
fn scripted_faults_hit_the_next_calls_in_order() {
    let w = world(config());
    w.cloud.script_faults(
        Operation::DescribeSubnets,
        [
            Fault::Throttle,
            Fault::InternalError,
            Fault::Pass,
            Fault::Unavailable,
        ],
    );
    let results: Vec<Result<usize, Ec2Error>> = (0..5)
        .map(|_| block_on(w.ec2().describe_subnets(&[])).map(|s| s.len()))
        .collect();
    assert!(matches!(results[0], Err(Ec2Error::Throttled(_))));
    assert!(matches!(&results[1], Err(Ec2Error::Unavailable(m)) if m.starts_with("InternalError")));
    assert_eq!(results[2], Ok(2));
    assert!(matches!(&results[3], Err(Ec2Error::Unavailable(m)) if m.starts_with("Unavailable")));
    assert_eq!(results[4], Ok(2));
}

#[test]
fn a_fault_window_applies_only_between_its_bounds() {
    let w = world(config());
    w.cloud.add_fault_window(FaultWindow {
        operation: None,
        from: start() + SignedDuration::from_secs(60),
        until: start() + SignedDuration::from_secs(120),
        rates: FaultRates {
            unavailable_rate: 1.0,
            ..FaultRates::default()
        },
    });
    let ok = |w: &super::support::World| block_on(w.ec2().describe_subnets(&[])).is_ok();
    assert!(ok(&w));
    w.advance_s(60);
    assert!(!ok(&w));
    let sqs = block_on(w.sqs().receive_messages(10, Duration::ZERO));
    assert!(
        matches!(sqs, Err(SqsError::Unavailable(_))),
        "every operation"
    );
    w.advance_s(59);
    assert!(!ok(&w));
    w.advance_s(1);
    assert!(ok(&w));
}

#[test]
fn a_lost_response_launches_the_instance_and_a_retry_with_the_same_token_finds_it() {
    let w = world(config());
    w.launch_template(super::support::LAUNCH_TEMPLATE, "");
    w.cloud
        .script_faults(Operation::CreateFleet, [Fault::LostResponse]);
    let request = w.request(OnDemand, &[("m5.large", ZONE_A)], "retry-me");
    let error = block_on(w.ec2().create_fleet(&request)).expect_err("lost");
    assert!(error.is_retryable());
    assert_eq!(w.cloud.instances().len(), 1, "the launch happened");
    let retry = block_on(w.ec2().create_fleet(&request)).expect("retry");
    assert_eq!(
        retry.instances[0].instance_id,
        w.cloud.instances()[0].instance_id
    );
    assert_eq!(w.cloud.instances().len(), 1, "and only once");
}

#[test]
fn sqs_calls_can_be_throttled_too() {
    let w = world(config());
    w.cloud
        .script_faults(Operation::DeleteMessage, [Fault::Throttle]);
    w.cloud.inject_message("m");
    let message = block_on(w.sqs().receive_messages(1, Duration::ZERO))
        .expect("receive")
        .remove(0);
    let result = block_on(w.sqs().delete_message(&message.receipt_handle));
    assert!(matches!(result, Err(SqsError::Throttled(_))));
    block_on(w.sqs().delete_message(&message.receipt_handle)).expect("retry deletes");
}

#[test]
fn fault_rates_can_be_configured_up_front() {
    let mut throttled: Config = config();
    throttled
        .faults
        .insert(Operation::GetParameter, FaultRates::throttling(1.0));
    let w = world(throttled);
    assert!(matches!(
        block_on(w.ec2().get_parameter("x")),
        Err(Ec2Error::Throttled(_))
    ));
    w.cloud.reset();
    assert!(
        matches!(
            block_on(w.ec2().get_parameter("x")),
            Err(Ec2Error::Throttled(_))
        ),
        "reset keeps the configured rates"
    );
}
