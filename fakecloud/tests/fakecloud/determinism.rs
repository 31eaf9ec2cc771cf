//! Same seed and same calls ⇒ same call log and same message stream; reset starts over.

use std::time::Duration;

use fakecloud::{BootModel, CallRecord, Config, Fake, FaultRates, Operation, SentMessage};
use karpenter_core::catalog::CapacityType::{OnDemand, Spot};
use karpenter_core::seams::ec2::Filter;

use super::support::{World, ZONE_A, ZONE_B, block_on, config, world};

fn noisy(seed: u64) -> Config {
    Config {
        seed,
        eventual_consistency_lag_ms: 2_000,
        spot_interruption_rate_per_hour: 6.0,
        rebalance_recommendation_lead_ms: 60_000,
        duplicate_delivery_rate: 0.2,
        reorder_rate: 0.5,
        boot: BootModel {
            slow_boot_fraction: 0.2,
            never_boot_fraction: 0.1,
            ..BootModel::default()
        },
        faults: [
            (Operation::CreateFleet, FaultRates::throttling(0.2)),
            (
                Operation::DescribeInstances,
                FaultRates {
                    internal_error_rate: 0.1,
                    ..FaultRates::default()
                },
            ),
        ]
        .into_iter()
        .collect(),
        ..config()
    }
}

/// A run exercising every random draw: launches, faults, interruptions, SQS knobs.
fn scenario(w: &World) {
    w.launch_template(super::support::LAUNCH_TEMPLATE, "");
    w.cloud.inject_malformed_message();
    for step in 0..60 {
        let capacity_type = if step % 3 == 0 { OnDemand } else { Spot };
        let request = w.request(
            capacity_type,
            &[
                ("m5.large", ZONE_A),
                ("m5.xlarge", ZONE_B),
                ("c6g.large", ZONE_A),
            ],
            &format!("token-{step}"),
        );
        let _ = block_on(w.ec2().create_fleet(&request));
        let _ = block_on(w.ec2().describe_instances(
            &[],
            &[Filter::new("instance-state-name", &["pending", "running"])],
        ));
        for message in block_on(w.sqs().receive_messages(10, Duration::ZERO)).unwrap_or_default() {
            if step % 4 != 0 {
                let _ = block_on(w.sqs().delete_message(&message.receipt_handle));
            }
        }
        if step % 10 == 5 {
            let ids: Vec<String> = w
                .cloud
                .instances()
                .into_iter()
                .take(2)
                .map(|i| i.instance_id)
                .collect();
            let _ = block_on(w.ec2().terminate_instances(&ids));
        }
        w.advance_s(97);
    }
}

fn run(seed: u64) -> (Vec<CallRecord>, Vec<SentMessage>, String) {
    let w = world(noisy(seed));
    scenario(&w);
    (
        w.cloud.calls(),
        w.cloud.sent_messages(),
        format!("{:?}", w.cloud.cost_report()),
    )
}

#[test]
fn the_same_seed_and_calls_give_the_same_call_log_and_message_stream() {
    let (calls, messages, cost) = run(42);
    let (calls_again, messages_again, cost_again) = run(42);
    assert!(calls.len() > 150, "{} calls", calls.len());
    assert!(calls.iter().any(|c| !c.is_ok()), "the scenario hits faults");
    assert!(
        messages
            .iter()
            .any(|m| m.body.contains("EC2 Spot Instance Interruption Warning")),
        "the scenario sees spot interruptions"
    );
    assert_eq!(calls, calls_again);
    assert_eq!(messages, messages_again);
    assert_eq!(cost, cost_again);
}

#[test]
fn a_different_seed_gives_a_different_run() {
    let (calls, messages, _) = run(42);
    let (other_calls, other_messages, _) = run(43);
    assert_ne!(calls, other_calls);
    assert_ne!(messages, other_messages);
}

#[test]
fn reset_returns_to_the_freshly_built_world() {
    let w = world(noisy(5));
    let fresh = world(noisy(5));
    scenario(&w);
    w.cloud
        .set_pool_capacity(&super::support::pool("m5.large", ZONE_A, OnDemand), 0);
    w.cloud
        .configure(|c| c.eventual_consistency_lag_ms = 60_000);
    w.cloud.reset();
    assert!(w.cloud.calls().is_empty());
    assert!(w.cloud.instances().is_empty());
    assert!(w.cloud.sent_messages().is_empty());
    assert_eq!(w.cloud.queue_depth(), 0);
    assert_eq!(w.cloud.parameters(), fresh.cloud.parameters());
    assert_eq!(w.subnets(), fresh.subnets(), "same seed, same subnet ids");

    // From here on the reset fake and a fresh one answer alike, faults included.
    for world in [&w, &fresh] {
        world.launch_template(super::support::LAUNCH_TEMPLATE, "");
    }
    for step in 0..5 {
        let token = format!("after-reset-{step}");
        let a = block_on(w.ec2().create_fleet(&w.request(
            OnDemand,
            &[("m5.large", ZONE_A)],
            &token,
        )));
        let b = block_on(fresh.ec2().create_fleet(&fresh.request(
            OnDemand,
            &[("m5.large", ZONE_A)],
            &token,
        )));
        assert_eq!(a, b);
    }
    let outcomes = |world: &World| -> Vec<String> {
        world.cloud.calls().into_iter().map(|c| c.outcome).collect()
    };
    assert_eq!(outcomes(&w), outcomes(&fresh));
}

#[test]
fn the_call_log_renders_one_line_per_call() {
    let w = world(config());
    w.launch(OnDemand, "m5.large", "1");
    let rendered = w.cloud.render_calls();
    let lines: Vec<&str> = rendered.lines().collect();
    assert_eq!(lines.len(), w.cloud.calls().len());
    assert!(
        lines.iter().any(
            |l| l.contains("CreateFleet on-demand lt=karpenter.k8s.aws/test")
                && l.contains("-> ok instances=[i-0")
        ),
        "{rendered}"
    );
    w.cloud.clear_calls();
    assert!(w.cloud.calls().is_empty());
}
