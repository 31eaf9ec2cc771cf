//! `CreateFleet`: allocation strategies, capacity errors, per-override errors, idempotency.

use karpenter_core::catalog::CapacityType::{OnDemand, Spot};
use karpenter_core::seams::ec2::{Ec2Error, FleetError};

use super::support::{ZONE_A, ZONE_B, block_on, catalog, config, pool, world, world_with};

fn codes(errors: &[FleetError]) -> Vec<(String, Option<String>, Option<String>)> {
    errors
        .iter()
        .map(|e| (e.code.clone(), e.instance_type.clone(), e.zone.clone()))
        .collect()
}

#[test]
fn spot_uses_price_capacity_optimized_and_on_demand_uses_lowest_price() {
    let w = world(config());
    // m5.large is the cheapest spot pool but nearly dry; m5.xlarge is dearer and deep.
    w.cloud
        .set_pool_capacity(&pool("m5.large", ZONE_A, Spot), 2);
    w.cloud
        .set_pool_capacity(&pool("m5.xlarge", ZONE_A, Spot), 100);
    let overrides = [("m5.large", ZONE_A), ("m5.xlarge", ZONE_A)];

    let spot = w.fleet(Spot, &overrides, "spot-1");
    assert_eq!(spot.instances.len(), 1);
    assert_eq!(spot.instances[0].instance_type, "m5.xlarge");
    assert_eq!(spot.instances[0].capacity_type, Spot);
    assert!(spot.errors.is_empty(), "{:?}", spot.errors);

    let on_demand = w.fleet(OnDemand, &overrides, "od-1");
    assert_eq!(on_demand.instances[0].instance_type, "m5.large");
    assert_eq!(on_demand.instances[0].capacity_type, OnDemand);
}

#[test]
fn price_capacity_optimized_takes_the_cheapest_pool_when_pools_are_equally_deep() {
    let w = world(config());
    let spot = w.fleet(
        Spot,
        &[
            ("m5.xlarge", ZONE_A),
            ("m5.large", ZONE_B),
            ("m5.large", ZONE_A),
        ],
        "t",
    );
    assert_eq!(spot.instances[0].instance_type, "m5.large");
    assert_eq!(
        spot.instances[0].zone, ZONE_A,
        "0.030 in a beats 0.035 in b"
    );
}

#[test]
fn lowest_price_honours_the_request_price_hint() {
    let w = world(config());
    let mut request = {
        w.fleet(OnDemand, &[("m5.large", ZONE_A)], "warm-up");
        w.request(
            OnDemand,
            &[("m5.large", ZONE_A), ("m5.xlarge", ZONE_A)],
            "hint",
        )
    };
    request.overrides[1].price = Some(0.01);
    let response = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    assert_eq!(response.instances[0].instance_type, "m5.xlarge");
}

#[test]
fn an_empty_pool_returns_insufficient_capacity_and_launches_again_when_capacity_returns() {
    let w = world(config());
    let empty = pool("m5.large", ZONE_A, Spot);
    w.cloud.set_pool_capacity(&empty, 0);

    let response = w.fleet(Spot, &[("m5.large", ZONE_A)], "a");
    assert!(response.instances.is_empty());
    assert_eq!(
        codes(&response.errors),
        vec![
            (
                "InsufficientInstanceCapacity".to_string(),
                Some("m5.large".to_string()),
                Some(ZONE_A.to_string())
            ),
            ("UnfulfillableCapacity".to_string(), None, None),
        ]
    );

    w.cloud.set_pool_capacity(&empty, 5);
    let response = w.fleet(Spot, &[("m5.large", ZONE_A)], "b");
    assert_eq!(response.instances.len(), 1);
    assert!(response.errors.is_empty());
    assert_eq!(w.cloud.pool_capacity(&empty), Some(4));
}

#[test]
fn a_scheduled_capacity_wave_empties_and_refills_a_pool_on_time() {
    let w = world(config());
    let p = pool("m5.large", ZONE_A, OnDemand);
    w.cloud
        .schedule_pool_capacity(w.now() + jiff::SignedDuration::from_secs(60), &p, 0);
    w.cloud
        .schedule_pool_capacity(w.now() + jiff::SignedDuration::from_secs(120), &p, 3);
    assert_eq!(
        w.fleet(OnDemand, &[("m5.large", ZONE_A)], "1")
            .instances
            .len(),
        1
    );
    w.advance_s(60);
    let dry = w.fleet(OnDemand, &[("m5.large", ZONE_A)], "2");
    assert!(dry.instances.is_empty());
    assert_eq!(dry.errors[0].code, "InsufficientInstanceCapacity");
    w.advance_s(60);
    assert_eq!(
        w.fleet(OnDemand, &[("m5.large", ZONE_A)], "3")
            .instances
            .len(),
        1
    );
}

#[test]
fn a_drought_keeps_a_pool_dry_through_a_capacity_wave_that_refills_it_and_ends_on_time() {
    let w = world(config());
    let p = pool("m5.large", ZONE_A, OnDemand);
    let at = |s: i64| w.now() + jiff::SignedDuration::from_secs(s);
    w.cloud.schedule_drought(&p, at(60), at(300));
    // A wave empties the pool inside the drought and gives its units back before the drought
    // ends: the drought still holds, and the units are there when it ends.
    w.cloud.schedule_pool_capacity(at(90), &p, 0);
    w.cloud.schedule_pool_capacity(at(120), &p, 7);
    let launch = |token: &str| w.fleet(OnDemand, &[("m5.large", ZONE_A)], token);
    assert_eq!(launch("before").instances.len(), 1);
    for (seconds, token) in [(60, "dry"), (40, "wave"), (50, "refilled")] {
        w.advance_s(seconds);
        let dry = launch(token);
        assert!(dry.instances.is_empty(), "{token}: {:?}", dry.instances);
        assert_eq!(
            dry.errors[0].code, "InsufficientInstanceCapacity",
            "{token}"
        );
        assert_eq!(w.cloud.pool_capacity(&p), Some(0), "{token}");
    }
    // 300 s in: the drought is over and the wave's units are back.
    w.advance_s(150);
    assert_eq!(launch("after").instances.len(), 1);
    assert_eq!(w.cloud.pool_capacity(&p), Some(6));
}

#[test]
fn lowest_price_reports_the_dry_pools_it_tried_next_to_the_instance_it_launched() {
    let w = world(config());
    w.cloud
        .set_pool_capacity(&pool("m5.large", ZONE_A, OnDemand), 0);
    let response = w.fleet(
        OnDemand,
        &[("m5.large", ZONE_A), ("m5.xlarge", ZONE_B)],
        "x",
    );
    assert_eq!(response.instances[0].instance_type, "m5.xlarge");
    assert_eq!(response.instances[0].zone, ZONE_B);
    assert_eq!(
        codes(&response.errors),
        vec![(
            "InsufficientInstanceCapacity".to_string(),
            Some("m5.large".to_string()),
            Some(ZONE_A.to_string())
        )]
    );
}

#[test]
fn a_launch_takes_capacity_and_a_termination_gives_it_back() {
    let w = world(config());
    let p = pool("c6g.large", ZONE_A, OnDemand);
    w.cloud.set_pool_capacity(&p, 1);
    let id = w.launch(OnDemand, "c6g.large", "1");
    assert!(
        w.fleet(OnDemand, &[("c6g.large", ZONE_A)], "2")
            .instances
            .is_empty()
    );
    block_on(w.ec2().terminate_instances(std::slice::from_ref(&id))).expect("terminate");
    assert_eq!(
        w.cloud.pool_capacity(&p),
        Some(0),
        "held while shutting down"
    );
    w.advance_s(30);
    assert_eq!(w.cloud.pool_capacity(&p), Some(1));
    assert_eq!(
        w.fleet(OnDemand, &[("c6g.large", ZONE_A)], "3")
            .instances
            .len(),
        1
    );
}

#[test]
fn offerings_the_catalog_marks_unavailable_start_with_no_capacity() {
    let mut catalog = catalog();
    for it in &mut catalog.instance_types {
        for offering in &mut it.offerings {
            offering.available = false;
        }
    }
    let w = world_with(config(), catalog);
    let response = w.fleet(OnDemand, &[("m5.large", ZONE_A)], "x");
    assert!(response.instances.is_empty());
    assert_eq!(response.errors[0].code, "InsufficientInstanceCapacity");
}

#[test]
fn invalid_overrides_get_their_own_errors_while_a_valid_one_launches() {
    let w = world(config());
    let mut request = {
        w.fleet(OnDemand, &[("m5.large", ZONE_A)], "warm-up");
        w.request(
            OnDemand,
            &[
                ("c6g.large", ZONE_B),
                ("m5.large", ZONE_A),
                ("m5.large", ZONE_B),
            ],
            "mixed",
        )
    };
    request.overrides[2].subnet_id = "subnet-0000000000000dead".into();
    let response = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    assert_eq!(response.instances.len(), 1);
    assert_eq!(
        codes(&response.errors),
        vec![
            (
                "Unsupported".to_string(),
                Some("c6g.large".to_string()),
                Some(ZONE_B.to_string())
            ),
            (
                "InvalidSubnetID.NotFound".to_string(),
                Some("m5.large".to_string()),
                Some(ZONE_B.to_string())
            ),
        ]
    );
}

#[test]
fn a_missing_launch_template_fails_the_request_and_is_not_remembered_under_its_token() {
    let w = world(config());
    w.fleet(OnDemand, &[("m5.large", ZONE_A)], "warm-up");
    let mut request = w.request(
        OnDemand,
        &[("m5.large", ZONE_A), ("m5.large", ZONE_B)],
        "lt",
    );
    let template = std::mem::replace(&mut request.launch_template_name, "gone".into());
    request.client_token = "token-1".into();
    let refused = block_on(w.ec2().create_fleet(&request));
    assert!(
        matches!(&refused, Err(Ec2Error::NotFound { code, .. }) if code == "InvalidLaunchTemplateName.NotFoundException"),
        "{refused:?}"
    );
    // The same token with the template in place is a new attempt, not the remembered failure.
    request.launch_template_name = template;
    let launched = block_on(w.ec2().create_fleet(&request)).expect("fleet");
    assert_eq!(launched.instances.len(), 1, "{launched:?}");
}

#[test]
fn a_full_subnet_fails_with_insufficient_free_addresses() {
    let w = world(config());
    let subnet = w.subnets()[ZONE_A].clone();
    w.cloud.set_subnet_free_ips(&subnet, 1);
    w.launch(OnDemand, "m5.large", "1");
    let response = w.fleet(OnDemand, &[("m5.large", ZONE_A)], "2");
    assert!(response.instances.is_empty());
    assert_eq!(response.errors[0].code, "InsufficientFreeAddressesInSubnet");
    let subnets = block_on(w.ec2().describe_subnets(&[])).expect("subnets");
    let a = subnets.iter().find(|s| s.subnet_id == subnet).expect("a");
    assert_eq!(a.available_ip_address_count, 0);
}

#[test]
fn the_same_client_token_returns_the_same_instance_instead_of_a_second_one() {
    let w = world(config());
    let first = w.fleet(OnDemand, &[("m5.large", ZONE_A)], "token-1");
    let again = w.fleet(OnDemand, &[("m5.large", ZONE_A)], "token-1");
    assert_eq!(first, again);
    assert_eq!(w.cloud.instances().len(), 1);

    let different = w.request(OnDemand, &[("m5.xlarge", ZONE_A)], "token-1");
    let error = block_on(w.ec2().create_fleet(&different)).expect_err("mismatch");
    assert!(
        matches!(&error, Ec2Error::InvalidRequest { code, .. } if code == "IdempotentParameterMismatch"),
        "{error:?}"
    );
}

#[test]
fn an_empty_override_list_is_an_invalid_request() {
    let w = world(config());
    w.fleet(OnDemand, &[("m5.large", ZONE_A)], "warm-up");
    let request = w.request(OnDemand, &[], "none");
    assert!(matches!(
        block_on(w.ec2().create_fleet(&request)),
        Err(Ec2Error::InvalidRequest { .. })
    ));
}

#[test]
fn the_built_in_catalog_is_served_with_a_discoverable_subnet_per_zone() {
    let w = world_with(config(), karpenter_core::catalog::Catalog::builtin());
    let zones: Vec<String> = w.subnets().into_keys().collect();
    assert_eq!(zones, ["us-west-2a", "us-west-2b", "us-west-2c"]);
    let spot = w.fleet(
        Spot,
        &[("m5.large", "us-west-2c"), ("m5.xlarge", "us-west-2c")],
        "b",
    );
    assert_eq!(spot.instances.len(), 1, "{:?}", spot.errors);
    let boot = w.cloud.boot(&spot.instances[0].instance_id).expect("boot");
    assert_eq!(boot.labels["kubernetes.io/arch"], "amd64");
    assert_eq!(
        w.cloud.instance_types(),
        karpenter_core::catalog::Catalog::builtin()
    );
}
