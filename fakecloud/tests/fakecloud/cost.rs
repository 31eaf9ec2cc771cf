//! Cost accounting and prices.

use karpenter_core::catalog::CapacityType::{OnDemand, Spot};

use super::support::{ZONE_A, block_on, config, pool, world};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn an_hour_of_running_on_demand_costs_the_hourly_price() {
    let w = world(config());
    let id = w.launch(OnDemand, "m5.large", "1");
    w.advance_s(10); // pending is free
    w.advance_s(3600);
    block_on(w.ec2().terminate_instances(std::slice::from_ref(&id))).expect("terminate");
    w.advance_s(3600); // shutting down and terminated are free
    let report = w.cloud.cost_report();
    let line = &report.by_capacity_type[&OnDemand];
    assert!(close(line.instance_seconds, 3600.0), "{line:?}");
    assert!(close(line.dollars, 0.096), "{line:?}");
    assert!(close(report.total_dollars, 0.096));
    assert_eq!(report.instances.len(), 1);
    assert_eq!(report.instances[0].instance_id, id);
}

#[test]
fn spot_cost_follows_the_spot_price_history() {
    let w = world(config());
    let spot_pool = pool("m5.large", ZONE_A, Spot);
    w.launch(Spot, "m5.large", "1");
    w.advance_s(10);
    w.advance_s(1800);
    assert!(w.cloud.set_price(&spot_pool, 0.060));
    w.advance_s(1800);
    let report = w.cloud.cost_report();
    let line = &report.by_capacity_type[&Spot];
    assert!(close(line.instance_seconds, 3600.0));
    assert!(close(line.dollars, 0.5 * 0.030 + 0.5 * 0.060), "{line:?}");

    let history = w.cloud.price_history(&spot_pool);
    let prices: Vec<f64> = history.iter().map(|p| p.price).collect();
    assert_eq!(prices, vec![0.030, 0.060]);
    let current = w.cloud.instance_types();
    let offering = current
        .get("m5.large")
        .expect("type")
        .offerings
        .iter()
        .find(|o| o.zone == ZONE_A && o.capacity_type == Spot)
        .expect("offering")
        .clone();
    assert!(close(offering.price, 0.060));
}

#[test]
fn a_spot_price_change_steers_price_capacity_optimized() {
    let w = world(config());
    // m5.large in zone a is the cheapest spot pool until its price jumps.
    assert_eq!(
        w.fleet(
            Spot,
            &[("m5.large", ZONE_A), ("m5.large", "us-west-2b")],
            "1"
        )
        .instances[0]
            .zone,
        ZONE_A
    );
    w.cloud.set_price(&pool("m5.large", ZONE_A, Spot), 0.5);
    assert_eq!(
        w.fleet(
            Spot,
            &[("m5.large", ZONE_A), ("m5.large", "us-west-2b")],
            "2"
        )
        .instances[0]
            .zone,
        "us-west-2b"
    );
}
