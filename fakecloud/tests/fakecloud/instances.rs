//! Instances: ids, states, eventual consistency, filters, tags, termination.

use std::collections::BTreeMap;

use fakecloud::Config;
use karpenter_core::catalog::CapacityType::{OnDemand, Spot};
use karpenter_core::seams::ec2::{Ec2Error, Filter, InstanceState};

use super::support::{ZONE_A, block_on, config, start, world};

#[test]
fn instance_ids_look_like_ec2_ids() {
    let w = world(config());
    let id = w.launch(OnDemand, "m5.large", "1");
    assert!(id.starts_with("i-0"), "{id}");
    assert_eq!(id.len(), 19, "{id}");
    assert!(id[2..].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
}

#[test]
fn an_instance_goes_pending_running_shutting_down_terminated_and_is_then_forgotten() {
    let w = world(Config {
        terminated_retention_s: 600,
        ..config()
    });
    let id = w.launch(OnDemand, "m5.large", "1");
    let state = |w: &super::support::World| w.describe(&id).map(|i| i.state);
    assert_eq!(state(&w), Some(InstanceState::Pending));
    w.advance_ms(9_999);
    assert_eq!(state(&w), Some(InstanceState::Pending));
    w.advance_ms(1);
    assert_eq!(state(&w), Some(InstanceState::Running));

    let ids = block_on(w.ec2().terminate_instances(std::slice::from_ref(&id))).expect("terminate");
    assert_eq!(ids, vec![id.clone()]);
    assert_eq!(state(&w), Some(InstanceState::ShuttingDown));
    w.advance_s(30);
    assert_eq!(state(&w), Some(InstanceState::Terminated));
    w.advance_s(599);
    assert_eq!(state(&w), Some(InstanceState::Terminated));
    w.advance_s(1);
    assert_eq!(state(&w), None, "EC2 forgets terminated instances");
}

#[test]
fn terminating_twice_or_terminating_an_unknown_instance_succeeds() {
    let w = world(config());
    let id = w.launch(OnDemand, "m5.large", "1");
    for _ in 0..2 {
        let ids = block_on(
            w.ec2()
                .terminate_instances(&[id.clone(), "i-0000000000000000f".into()]),
        )
        .expect("idempotent");
        assert_eq!(ids, vec![id.clone()]);
    }
    w.advance_s(30);
    block_on(w.ec2().terminate_instances(std::slice::from_ref(&id))).expect("terminated again");
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::Terminated)
    );
}

#[test]
fn a_just_launched_instance_is_invisible_for_the_consistency_window() {
    let w = world(Config {
        eventual_consistency_lag_ms: 5_000,
        ..config()
    });
    let id = w.launch(Spot, "m5.large", "1");
    let by_tag = [Filter::new("tag:karpenter.sh/nodepool", &["default"])];
    assert_eq!(w.describe(&id), None);
    assert!(
        block_on(w.ec2().describe_instances(&[], &by_tag))
            .expect("describe")
            .is_empty()
    );
    let tag = BTreeMap::from([("Name".to_string(), "x".to_string())]);
    let error =
        block_on(w.ec2().create_tags(std::slice::from_ref(&id), &tag)).expect_err("not yet");
    assert!(
        matches!(&error, Ec2Error::NotFound { code, .. } if code == "InvalidInstanceID.NotFound"),
        "{error:?}"
    );
    // The fake itself knows the instance all along.
    assert_eq!(w.cloud.instances().len(), 1);

    w.advance_ms(4_999);
    assert_eq!(w.describe(&id), None);
    w.advance_ms(1);
    assert_eq!(w.describe(&id).map(|i| i.instance_id), Some(id.clone()));
    assert_eq!(
        block_on(w.ec2().describe_instances(&[], &by_tag))
            .expect("describe")
            .len(),
        1
    );
    block_on(w.ec2().create_tags(std::slice::from_ref(&id), &tag)).expect("visible now");
}

#[test]
fn described_instances_carry_launch_time_dns_name_tags_image_and_capacity_type() {
    let w = world(config());
    w.advance_ms(1_500);
    let id = w.launch(Spot, "m5.large", "abc");
    let instance = w.describe(&id).expect("visible");
    assert_eq!(instance.launch_time.to_string(), "2026-01-01T00:00:01Z");
    assert!(
        instance.private_dns_name.starts_with("ip-10-")
            && instance
                .private_dns_name
                .ends_with(".us-west-2.compute.internal"),
        "{}",
        instance.private_dns_name
    );
    assert_eq!(instance.tags["karpenter.sh/nodeclaim"], "claim-abc");
    assert_eq!(instance.zone, ZONE_A);
    assert_eq!(instance.capacity_type, Spot);
    assert_eq!(instance.subnet_id, w.subnets()[ZONE_A]);
    let template_image = block_on(w.ec2().get_parameter(super::support::AL2023_X86))
        .expect("parameter")
        .expect("image");
    assert_eq!(instance.image_id, template_image);
    assert!(start() < w.now());
}

#[test]
fn describe_filters_by_state_tag_key_and_lifecycle() {
    let w = world(config());
    let spot = w.launch(Spot, "m5.large", "1");
    let od = w.launch(OnDemand, "m5.large", "2");
    w.advance_s(10);
    block_on(w.ec2().terminate_instances(std::slice::from_ref(&od))).expect("terminate");
    let ids = |filters: &[Filter]| -> Vec<String> {
        block_on(w.ec2().describe_instances(&[], filters))
            .expect("describe")
            .into_iter()
            .map(|i| i.instance_id)
            .collect()
    };
    assert_eq!(
        ids(&[Filter::new("instance-state-name", &["pending", "running"])]),
        vec![spot.clone()]
    );
    assert_eq!(
        ids(&[Filter::new("instance-lifecycle", &["spot"])]),
        vec![spot.clone()]
    );
    let mut both = vec![spot.clone(), od.clone()];
    both.sort();
    assert_eq!(
        ids(&[Filter::new("tag-key", &["karpenter.sh/nodepool"])]),
        both
    );
    assert_eq!(
        ids(&[Filter::new("tag:karpenter.sh/nodeclaim", &["claim-*"])]),
        both
    );
    assert!(ids(&[Filter::new("tag:karpenter.sh/nodeclaim", &["other"])]).is_empty());
    let error = block_on(
        w.ec2()
            .describe_instances(&[], &[Filter::new("colour", &["red"])]),
    )
    .expect_err("unknown filter");
    assert!(matches!(error, Ec2Error::InvalidRequest { .. }));
}

#[test]
fn create_tags_adds_and_overwrites_tags_and_rejects_reserved_keys() {
    let w = world(config());
    let id = w.launch(OnDemand, "m5.large", "1");
    let tags = BTreeMap::from([
        ("karpenter.sh/nodeclaim".to_string(), "renamed".to_string()),
        ("Name".to_string(), "node".to_string()),
    ]);
    block_on(w.ec2().create_tags(std::slice::from_ref(&id), &tags)).expect("tags");
    let instance = w.describe(&id).expect("instance");
    assert_eq!(instance.tags["karpenter.sh/nodeclaim"], "renamed");
    assert_eq!(instance.tags["Name"], "node");
    assert_eq!(instance.tags["karpenter.sh/nodepool"], "default");

    let reserved = BTreeMap::from([("aws:x".to_string(), "y".to_string())]);
    assert!(matches!(
        block_on(w.ec2().create_tags(std::slice::from_ref(&id), &reserved)),
        Err(Ec2Error::InvalidRequest { .. })
    ));
    let unknown = block_on(
        w.ec2()
            .create_tags(&[id.clone(), "i-0ffffffffffffffff".into()], &tags),
    );
    assert!(matches!(unknown, Err(Ec2Error::NotFound { .. })));
}

#[test]
fn a_stopped_instance_goes_through_stopping_and_gives_its_capacity_back() {
    let w = world(config());
    let p = super::support::pool("m5.large", ZONE_A, OnDemand);
    let id = w.launch(OnDemand, "m5.large", "1");
    let free = w.cloud.pool_capacity(&p).expect("offered");
    w.advance_s(10);
    assert!(w.cloud.stop_instance(&id));
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::Stopping)
    );
    w.advance_s(20);
    assert_eq!(
        w.describe(&id).map(|i| i.state),
        Some(InstanceState::Stopped)
    );
    assert_eq!(w.cloud.pool_capacity(&p), Some(free + 1));
    assert!(!w.cloud.stop_instance(&id), "already stopped");
}
