//! The disruption controller's pass (`Disruption::pass`) over the fake API server: when it
//! decides and when it lets an earlier decision stand.

use std::sync::Arc;

use karpenter_core::context::Context;
use karpenter_core::seams::kube::ResourceKind;

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects};

/// How many times the disruption controller decided (the count of upstream's evaluation-duration
/// histogram for emptiness, the method every decision starts with).
fn decisions(ctx: &Context) -> u64 {
    let text = ctx.metrics.encode();
    text.lines()
        .find(|l| {
            l.starts_with(
                "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count",
            ) && l.contains("consolidation_type=\"single\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_pass_that_found_nothing_stands_until_the_cluster_changes_or_five_minutes_pass() {
    use karpenter_core::disruption::Disruption;
    use karpenter_core::disruption::orchestration::{CONSOLIDATED_STATE_TTL, POLL_INTERVAL};
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    let disruption = Disruption::new(ctx.clone());
    let pass = || futures::executor::block_on(disruption.pass()).expect("pass");
    pass();
    assert_eq!(decisions(&ctx), 1, "the first pass decides");
    clock.advance(POLL_INTERVAL);
    pass();
    assert_eq!(
        decisions(&ctx),
        1,
        "nothing changed: the pass that found nothing stands"
    );
    kube.apply(&ResourceKind::POD, objects::pending_pod("web", "500m"));
    clock.advance(POLL_INTERVAL);
    pass();
    assert_eq!(decisions(&ctx), 2, "a new pod: decided again");
    let mut since_decided = std::time::Duration::ZERO;
    while since_decided < CONSOLIDATED_STATE_TTL {
        clock.advance(POLL_INTERVAL);
        since_decided += POLL_INTERVAL;
        pass();
    }
    assert_eq!(
        decisions(&ctx),
        3,
        "after five quiet minutes the cluster is looked at again, once"
    );
}

#[test]
fn a_pass_that_found_nothing_stands_only_until_consolidate_after_passes_on_a_quiet_node() {
    use karpenter_core::disruption::Disruption;
    use karpenter_core::disruption::orchestration::POLL_INTERVAL;
    use serde_json::json;
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    let mut pool = super::validation::nodepool();
    pool["spec"]["disruption"] =
        json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "45s"});
    // No template labels: the node below carries none, and must not count as drifted.
    pool["spec"]["template"]["metadata"] = json!({});
    kube.apply(&ResourceKind::NODE_POOL, pool);
    let mut class = objects::default_node_class();
    class["status"] = json!({"conditions": [{
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]});
    kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    let provider = "aws:///us-west-2a/i-0a";
    let mut node = objects::ready_node("ip-10-0-0-1", provider);
    node["metadata"]["labels"] = json!({
        "karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true",
        "node.kubernetes.io/instance-type": "m5.large", "karpenter.sh/capacity-type": "on-demand",
        "topology.kubernetes.io/zone": "us-west-2a"
    });
    kube.apply(&ResourceKind::NODE, node);
    let mut claim = objects::nodeclaim("default-a").running_as("i-0a").json();
    claim["status"]["nodeName"] = json!("ip-10-0-0-1");
    // The node's last pod event is now: consolidateAfter (45 s) has not passed.
    claim["status"]["lastPodEventTime"] = json!(support::start().to_string());
    kube.apply(&ResourceKind::NODE_CLAIM, claim);
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    let disruption = Disruption::new(ctx.clone());
    let pass = || futures::executor::block_on(disruption.pass()).expect("pass");
    pass();
    assert_eq!(decisions(&ctx), 1, "the first pass decides");
    clock.advance(POLL_INTERVAL);
    pass();
    // The first pass published why the node stays (a condition on its claim): a change like any
    // other, so the second pass decides too. (Deliberately not absorbed: a change someone else
    // made at the same moment must not be taken as decided on.)
    assert_eq!(decisions(&ctx), 2, "the pass's own writes are a change");
    for _ in 0..3 {
        clock.advance(POLL_INTERVAL);
        pass();
    }
    assert_eq!(decisions(&ctx), 2, "40 s in, nothing changed: no decision");
    clock.advance(POLL_INTERVAL);
    let outcome = pass();
    assert!(
        outcome.decided.is_some(),
        "50 s in, consolidateAfter has passed: the pass decides, and the empty node goes: {outcome:?}"
    );
}
