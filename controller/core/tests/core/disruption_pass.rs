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

/// One empty, initialized node (`ip-10-0-0-1`, claim `default-a`) of a NodePool that
/// consolidates when empty or underutilized after `consolidate_after`; its last pod event is the
/// test's start.
fn one_quiet_node(
    consolidate_after: &str,
) -> (
    Arc<karpenter_core::seams::ManualClock>,
    Arc<fakekube::ApiServer>,
    Arc<Context>,
) {
    use serde_json::json;
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    let mut pool = super::validation::nodepool();
    pool["spec"]["disruption"] = json!({
        "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": consolidate_after
    });
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
    claim["status"]["lastPodEventTime"] = json!(support::start().to_string());
    kube.apply(&ResourceKind::NODE_CLAIM, claim);
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    (clock, kube, ctx)
}

#[test]
fn a_pass_that_found_nothing_stands_only_until_consolidate_after_passes_on_a_quiet_node() {
    use karpenter_core::disruption::Disruption;
    use karpenter_core::disruption::orchestration::POLL_INTERVAL;
    // The node's last pod event is now: consolidateAfter (45 s) has not passed.
    let (clock, _kube, ctx) = one_quiet_node("45s");
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

/// Disruption reads the live provisioner's nominations (upstream's `StateNode.Nominated`)
/// instead of solving the pending pods again: a node the provisioner just planned pods onto is
/// left alone for the nomination window, and decided on again once it ends.
#[test]
fn a_node_the_provisioner_nominated_is_kept_until_its_nomination_window_ends() {
    use karpenter_core::disruption::Disruption;
    use karpenter_core::disruption::orchestration::POLL_INTERVAL;
    use karpenter_core::provisioning::{BatchWindow, nomination_window};
    let (clock, _kube, ctx) = one_quiet_node("0s");
    let window = nomination_window(BatchWindow::default());
    let until = support::start()
        .checked_add(window)
        .expect("a nomination's end");
    ctx.nominations.nominate("ip-10-0-0-1", until);
    let disruption = Disruption::new(ctx.clone());
    let pass = || futures::executor::block_on(disruption.pass()).expect("pass");
    let mut t = std::time::Duration::ZERO;
    while t < window {
        let outcome = pass();
        assert!(
            outcome.decided.is_none(),
            "{t:?} into a {window:?} nomination the node stays: {outcome:?}"
        );
        clock.advance(POLL_INTERVAL);
        t += POLL_INTERVAL;
    }
    let outcome = pass();
    assert!(
        outcome.decided.is_some(),
        "the nomination ended: the empty node goes: {outcome:?}"
    );
}

/// A disruption command in progress for `default-a` (a drift with one replacement), started at
/// the test's start, with its node; returns the command's id.
fn command_in_progress(kube: &fakekube::ApiServer) -> String {
    use serde_json::json;
    kube.apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    let mut node = objects::ready_node("ip-10-0-0-1", "aws:///us-west-2a/i-0a");
    node["spec"]["taints"] = json!([{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]);
    kube.apply(&ResourceKind::NODE, node);
    let id = format!("default-a@{}", support::start());
    let mut claim = objects::nodeclaim("default-a").running_as("i-0a").json();
    claim["status"]["nodeName"] = json!("ip-10-0-0-1");
    claim["metadata"]["annotations"] =
        json!({"karpenter.sh/disruption-command": format!("Drifted 1 {id}")});
    kube.apply(&ResourceKind::NODE_CLAIM, claim);
    id
}

/// A claim replacing `default-a`: the command's own when `command` is its id, else one the
/// provisioner made for the pods of the disrupted node; initialized or not.
fn replacing_claim(name: &str, command: Option<&str>, initialized: bool) -> serde_json::Value {
    use serde_json::json;
    let mut claim = objects::nodeclaim(name).json();
    claim["metadata"]["annotations"] = json!({"karpenter.sh/replaces": "default-a"});
    if let Some(id) = command {
        claim["metadata"]["annotations"]["karpenter.sh/disruption-replacement"] = json!(id);
    }
    if initialized {
        claim["status"] = json!({"conditions": [{
            "type": "Initialized", "status": "True", "reason": "Initialized", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"
        }]});
    }
    claim
}

/// Noticed in the tenth and eleventh sessions: a command follows only the replacements it
/// launched. The provisioner's claim for the disrupted node's pods also names the candidate in
/// `karpenter.sh/replaces`; counted as the command's, its initialization let the candidate go
/// before the command's own replacement was up, and once the own replacement was gone the command
/// neither noticed nor spared the provisioner's claim.
#[test]
fn a_command_follows_its_own_replacements_not_a_provisioner_claim_naming_its_candidate() {
    use karpenter_core::disruption::Disruption;
    use karpenter_core::disruption::queue::Progress;
    use karpenter_core::seams::KubeApi;
    use karpenter_core::seams::kube::{DeleteOptions, ObjectKey};
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    let id = command_in_progress(&kube);
    kube.apply(
        &ResourceKind::NODE_CLAIM,
        replacing_claim("default-own", Some(&id), false),
    );
    kube.apply(
        &ResourceKind::NODE_CLAIM,
        replacing_claim("default-prov", None, true),
    );
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    let disruption = Disruption::new(ctx.clone());
    let pass = || futures::executor::block_on(disruption.pass()).expect("pass");
    let exists = |name: &str| {
        futures::executor::block_on(kube.get(&ResourceKind::NODE_CLAIM, &ObjectKey::cluster(name)))
            .expect("get")
            .is_some_and(|c| c["metadata"]["deletionTimestamp"].is_null())
    };
    let outcome = pass();
    assert_eq!(
        outcome.progress,
        vec![Progress::Waiting { id: id.clone() }],
        "its own replacement is not initialized"
    );
    assert!(
        exists("default-a"),
        "the candidate stays until its replacement is up"
    );
    futures::executor::block_on(kube.delete(
        &ResourceKind::NODE_CLAIM,
        &ObjectKey::cluster("default-own"),
        &DeleteOptions::default(),
    ))
    .expect("delete");
    clock.advance(std::time::Duration::from_secs(10));
    let outcome = pass();
    assert!(
        matches!(&outcome.progress[..], [Progress::Abandoned { id: a, .. }] if *a == id),
        "{:?}",
        outcome.progress
    );
    assert!(exists("default-a"), "abandoned: the candidate stays");
    assert!(
        exists("default-prov"),
        "the provisioner's claim is not the command's to delete"
    );
}
