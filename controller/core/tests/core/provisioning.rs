//! The provisioner over the seams: batching, eligibility, NodeClaim creation, events.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use karpenter_core::context::Context;
use karpenter_core::provisioning::{BatchWindow, Batcher, Provisioner};
use karpenter_core::scheduling::SchedulerConfiguration;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{KubeApi, ManualClock};
use serde_json::{Value, json};

use fakekube::ApiServer;

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects, start};

/// The provisioner's context: the fake API server, and a fakecloud no test here launches on.
fn context(kube: &Arc<ApiServer>, clock: &Arc<ManualClock>) -> Context {
    support::context(kube, &support::cloud(clock), clock)
}

fn pool() -> Value {
    let mut pool = super::validation::nodepool();
    pool["spec"]["template"]["spec"]["taints"] =
        json!([{"key": "team", "value": "a", "effect": "NoSchedule"}]);
    pool["spec"]["template"]["spec"]["expireAfter"] = json!("24h");
    pool
}

/// A pending pod that tolerates the pool's `team=a` taint.
fn pending_pod(name: &str, cpu: &str) -> Value {
    objects::tolerating(objects::pending_pod(name, cpu), "team", "a")
}

struct World {
    kube: Arc<ApiServer>,
    clock: Arc<ManualClock>,
    provisioner: Provisioner,
    metrics: Arc<karpenter_core::metrics::Metrics>,
    nominations: Arc<karpenter_core::provisioning::Nominations>,
}

fn world() -> World {
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::NODE_POOL, pool());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, ready_class());
    let ctx = Arc::new(context(&kube, &clock));
    let provisioner = Provisioner::new(ctx.clone());
    World {
        kube,
        clock,
        provisioner,
        metrics: ctx.metrics.clone(),
        nominations: ctx.nominations.clone(),
    }
}

/// The EC2NodeClass as its status controller leaves it once everything resolved: `Ready=True`
/// (the provisioner plans only for NodePools whose class is ready).
fn ready_class() -> Value {
    let mut class = super::validation::ec2nodeclass();
    class["status"] = json!({"conditions": [{
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]});
    class
}

fn claims(kube: &ApiServer) -> Vec<Value> {
    kube.objects(&ResourceKind::NODE_CLAIM)
        .into_iter()
        .map(std::sync::Arc::unwrap_or_clone)
        .collect()
}

#[test]
fn the_batch_closes_after_one_idle_second_or_ten_seconds_of_arrivals() {
    let mut batcher = Batcher::new(BatchWindow::default());
    let t0 = start();
    assert!(!batcher.is_ready(t0));
    batcher.trigger(t0);
    assert!(!batcher.is_ready(t0 + Duration::from_millis(900)));
    assert!(batcher.is_ready(t0 + Duration::from_millis(1000)));
    // Arrivals every 500 ms keep it open until the 10 s maximum.
    let mut batcher = Batcher::new(BatchWindow::default());
    for i in 0..30 {
        let now = t0 + Duration::from_millis(500 * i);
        batcher.trigger(now);
        assert_eq!(batcher.is_ready(now), i >= 20, "at {}ms", 500 * i);
    }
    assert_eq!(
        batcher.remaining(t0 + Duration::from_secs(9)),
        Some(Duration::ZERO)
    );
}

#[test]
fn pending_pods_become_one_right_sized_nodeclaim_after_the_batch_window() {
    let mut w = world();
    for i in 0..10 {
        w.kube
            .apply(&ResourceKind::POD, pending_pod(&format!("web-{i}"), "500m"));
    }
    futures::executor::block_on(async {
        assert_eq!(
            w.provisioner.tick().await.expect("tick"),
            None,
            "the batch just opened"
        );
        w.clock.advance(Duration::from_millis(500));
        assert_eq!(
            w.provisioner.tick().await.expect("tick"),
            None,
            "still inside the idle window"
        );
        w.clock.advance(Duration::from_millis(600));
        let outcome = w
            .provisioner
            .tick()
            .await
            .expect("tick")
            .expect("the batch closed");
        assert_eq!(outcome.nominated, 10);
        assert_eq!(outcome.created.len(), claims(&w.kube).len());
    });
    let claims = claims(&w.kube);
    assert!(!claims.is_empty());
    let cpu_millis: i64 = claims
        .iter()
        .map(|c| {
            karpenter_core::resources::parse_quantity(
                "cpu",
                c["spec"]["resources"]["requests"]["cpu"]
                    .as_str()
                    .unwrap_or("0"),
            )
            .unwrap()
        })
        .sum();
    assert!(cpu_millis >= 5000, "requests cover the pods: {cpu_millis}m");
}

#[test]
fn a_nodeclaim_carries_its_nodepools_template_and_owner() {
    let w = world();
    w.kube.apply(&ResourceKind::POD, pending_pod("web-0", "1"));
    futures::executor::block_on(w.provisioner.provision()).expect("pass");
    let claim = &claims(&w.kube)[0];
    assert!(
        claim["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("default-")
    );
    assert_eq!(
        claim["metadata"]["labels"]["karpenter.sh/nodepool"],
        json!("default")
    );
    assert_eq!(claim["metadata"]["labels"]["team"], json!("a"));
    assert_eq!(
        claim["metadata"]["ownerReferences"][0]["kind"],
        json!("NodePool")
    );
    assert_eq!(claim["spec"]["taints"][0]["key"], json!("team"));
    assert_eq!(claim["spec"]["expireAfter"], json!("24h"));
    assert_eq!(claim["spec"]["nodeClassRef"]["kind"], json!("EC2NodeClass"));
    let requirements = claim["spec"]["requirements"].as_array().unwrap();
    let find = |key: &str| {
        requirements
            .iter()
            .find(|r| r["key"] == json!(key))
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(find("karpenter.sh/nodepool")["values"], json!(["default"]));
    assert!(
        find("node.kubernetes.io/instance-type")["values"]
            .as_array()
            .is_some_and(|v| !v.is_empty())
    );
    assert!(find("kubernetes.io/arch")["values"] == json!(["amd64"]));
    // The claim is a valid NodeClaim.
    let typed: karpenter_core::api::NodeClaim =
        serde_json::from_value(claim.clone()).expect("decodes");
    karpenter_core::validation::validate_nodeclaim(&typed).expect("valid");
}

/// A pod requiring a custom key the pool offers as `Exists` (or as several values): the claim
/// must carry a value for the key, or the node never matches the pod and every retry buys
/// another claim (review C1).
#[test]
fn a_custom_requirement_without_one_value_still_labels_the_claim_and_is_not_bought_twice() {
    for (pool_req, pod_req, expected) in [
        (
            json!({"key": "example.com/tier", "operator": "Exists"}),
            json!({"key": "example.com/tier", "operator": "Exists"}),
            "0",
        ),
        (
            json!({"key": "example.com/tier", "operator": "In", "values": ["gold", "silver"]}),
            json!({"key": "example.com/tier", "operator": "In", "values": ["silver", "gold"]}),
            "gold",
        ),
        (
            json!({"key": "example.com/tier", "operator": "NotIn", "values": ["0", "1"]}),
            json!({"key": "example.com/tier", "operator": "Exists"}),
            "2",
        ),
    ] {
        let w = world();
        let mut pool = pool();
        pool["spec"]["template"]["spec"]["requirements"]
            .as_array_mut()
            .unwrap()
            .push(pool_req);
        w.kube.apply(&ResourceKind::NODE_POOL, pool);
        let mut pod = pending_pod("web-0", "1");
        pod["spec"]["affinity"] = json!({"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [pod_req]}
            ]}
        }});
        w.kube.apply(&ResourceKind::POD, pod);
        let first = futures::executor::block_on(w.provisioner.provision()).expect("pass");
        assert_eq!(first.created.len(), 1, "{expected}: {first:?}");
        let claim = &claims(&w.kube)[0];
        assert_eq!(
            claim["metadata"]["labels"]["example.com/tier"],
            json!(expected)
        );
        assert_eq!(
            claim["metadata"]["labels"]["karpenter.k8s.aws/ec2nodeclass"],
            json!("default")
        );
        w.clock.advance(Duration::from_secs(10));
        let second = futures::executor::block_on(w.provisioner.provision()).expect("pass");
        assert!(second.created.is_empty(), "{expected}: {second:?}");
        assert_eq!(second.nominated, 1);
    }
}

#[test]
fn a_second_pass_counts_in_flight_nodeclaims_and_creates_nothing_more() {
    let w = world();
    for i in 0..4 {
        w.kube
            .apply(&ResourceKind::POD, pending_pod(&format!("web-{i}"), "500m"));
    }
    let first = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(!first.created.is_empty());
    let second = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(second.created.is_empty(), "duplicated capacity: {second:?}");
    assert_eq!(second.nominated, 4);
    assert_eq!(claims(&w.kube).len(), first.created.len());
}

#[test]
fn pods_that_are_bound_owned_by_a_daemonset_or_not_unschedulable_are_ignored() {
    let w = world();
    let mut bound = pending_pod("bound", "1");
    bound["spec"]["nodeName"] = json!("node-a");
    let mut daemon = pending_pod("daemon", "1");
    daemon["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "x"}]);
    let mut fresh = pending_pod("fresh", "1");
    fresh["status"] = json!({"phase": "Pending"});
    let mut done = pending_pod("done", "1");
    done["status"]["phase"] = json!("Succeeded");
    for pod in [bound, daemon, fresh, done] {
        w.kube.apply(&ResourceKind::POD, pod);
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(
        outcome.created.is_empty() && outcome.nominated == 0,
        "{outcome:?}"
    );
    assert!(claims(&w.kube).is_empty());
}

/// Review A4: only an `apps/v1` DaemonSet makes a pod a daemon. The pods of an OpenKruise
/// Advanced DaemonSet (`apps.kruise.io`) are ordinary pods to upstream: provisioned for.
#[test]
fn a_pod_of_a_daemonset_from_another_api_group_is_provisioned_for() {
    let w = world();
    let mut kruise = pending_pod("kruise-agent", "1");
    kruise["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet", "name": "ads", "uid": "y"
    }]);
    w.kube.apply(&ResourceKind::POD, kruise);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
}

#[test]
fn pods_go_to_an_existing_node_with_room_before_any_new_capacity() {
    let w = world();
    w.kube.apply(&ResourceKind::NODE, json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "kubernetes.io/arch": "amd64"}},
        "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }));
    w.kube.apply(&ResourceKind::POD, pending_pod("web-0", "2"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty());
    assert_eq!(outcome.nominated, 1);
    assert!(
        w.kube
            .recorded_events()
            .iter()
            .any(|e| e.reason == "Nominated" && e.message.contains("node/node-a"))
    );
    // Disruption leaves the node alone for upstream's nomination window (2 × 10 s batch max).
    let nominated_at = |seconds| w.nominations.active(start() + Duration::from_secs(seconds));
    assert!(nominated_at(19).contains("node-a"));
    assert!(nominated_at(20).is_empty());
}

/// A node of 8 CPUs between registration and initialization: it carries its NodeClaim's
/// startup taint and Karpenter's unregistered taint besides the pool's `team=a`.
fn registering_node() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"karpenter.sh/nodepool": "default", "kubernetes.io/arch": "amd64"}},
        "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"},
                            {"key": "example.com/agent-not-ready", "effect": "NoSchedule"},
                            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "False"}]}
    })
}

#[test]
fn a_node_not_yet_initialized_takes_pods_despite_the_taints_it_is_about_to_lose() {
    let w = world();
    let mut claim = objects::nodeclaim("default-a")
        .startup_taint("example.com/agent-not-ready")
        .running_as("i-0a")
        .json();
    claim["status"]["nodeName"] = json!("node-a");
    w.kube.apply(&ResourceKind::NODE_CLAIM, claim);
    w.kube.apply(&ResourceKind::NODE, registering_node());
    w.kube.apply(&ResourceKind::POD, pending_pod("web-0", "2"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(
        outcome.created.is_empty(),
        "a second NodeClaim for a pod the registering node will take: {:?}",
        outcome.created
    );
    assert!(
        w.kube
            .recorded_events()
            .iter()
            .any(|e| e.reason == "Nominated" && e.message.contains("node/node-a"))
    );
}

/// Review B1: a GPU node registers advertising `nvidia.com/gpu: 0` until its device plugin
/// starts. Judged by that, the GPU pod it was launched for does not fit it and every retry buys
/// another GPU node; upstream fills the missing figure from the NodeClaim while the node boots.
#[test]
fn a_booting_gpu_node_takes_its_gpu_pod_before_the_device_plugin_advertises_the_gpus() {
    let w = world();
    let mut claim = objects::nodeclaim("default-a")
        .startup_taint("example.com/agent-not-ready")
        .running_as("i-0a")
        .json();
    claim["status"]["nodeName"] = json!("node-a");
    claim["status"]["allocatable"] =
        json!({"cpu": "7910m", "memory": "30Gi", "pods": "58", "nvidia.com/gpu": "1"});
    w.kube.apply(&ResourceKind::NODE_CLAIM, claim);
    let mut node = registering_node();
    node["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
    w.kube.apply(&ResourceKind::NODE, node);
    let mut pod = pending_pod("train-0", "2");
    pod["spec"]["containers"][0]["resources"]["limits"] = json!({"nvidia.com/gpu": "1"});
    w.kube.apply(&ResourceKind::POD, pod);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(
        outcome.created.is_empty(),
        "a second GPU NodeClaim while the first boots: {:?}",
        outcome.created
    );
    assert_eq!(outcome.nominated, 1);
}

#[test]
fn a_node_no_nodeclaim_owns_is_judged_by_all_its_taints() {
    let w = world();
    w.kube.apply(&ResourceKind::NODE, registering_node());
    w.kube.apply(&ResourceKind::POD, pending_pod("web-0", "2"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(
        outcome.created.len(),
        1,
        "the pod does not tolerate the node's taints"
    );
}

#[test]
fn a_pod_nothing_can_run_gets_a_failed_scheduling_event_that_says_why() {
    let w = world();
    w.kube
        .apply(&ResourceKind::POD, pending_pod("huge", "1000"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.unschedulable, 1);
    let event = w
        .kube
        .recorded_events()
        .into_iter()
        .find(|e| e.reason == "FailedScheduling")
        .expect("event recorded");
    assert_eq!(event.key.name, "huge");
    assert!(
        event.message.contains("NodePool \"default\""),
        "{}",
        event.message
    );
    assert!(
        event
            .message
            .contains("no instance type has enough resources"),
        "{}",
        event.message
    );
}

#[test]
fn a_pod_without_the_pools_toleration_is_not_provisioned_for() {
    let w = world();
    let mut pod = pending_pod("intolerant", "1");
    pod["spec"]["tolerations"] = json!([]);
    w.kube.apply(&ResourceKind::POD, pod);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty());
    let event = w
        .kube
        .recorded_events()
        .into_iter()
        .find(|e| e.reason == "FailedScheduling")
        .expect("event recorded");
    assert!(
        event
            .message
            .contains("does not tolerate taint team=a:NoSchedule"),
        "{}",
        event.message
    );
    // And nothing is read that is not there: the API holds one NodePool and one pod.
    let pods = futures::executor::block_on(w.kube.list(&ResourceKind::POD, &Default::default()))
        .expect("list");
    assert_eq!(pods.items.len(), 1);
}

#[test]
fn offerings_that_just_ran_out_of_capacity_are_planned_around() {
    use karpenter_core::catalog::CapacityType;
    use karpenter_core::seams::Clock;
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api_server(clock.clone());
    let mut pool = pool();
    pool["spec"]["template"]["spec"]["requirements"] = json!([
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
    ]);
    kube.apply(&ResourceKind::NODE_POOL, pool);
    kube.apply(&ResourceKind::EC2_NODE_CLASS, ready_class());
    kube.apply(&ResourceKind::POD, pending_pod("web-0", "1"));
    let ctx = Arc::new(context(&kube, &clock));
    for zone in ["us-west-2a", "us-west-2b", "us-west-2c"] {
        ctx.unavailable.mark(
            "m5.large",
            zone,
            CapacityType::Spot,
            clock.now(),
            Duration::from_secs(180),
        );
    }
    let provisioner = Provisioner::new(ctx);
    futures::executor::block_on(provisioner.provision()).expect("pass");
    let claim = &claims(&kube)[0];
    let capacity = claim["spec"]["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == json!("karpenter.sh/capacity-type"))
        .cloned();
    assert_eq!(
        capacity.map(|r| r["values"].clone()),
        Some(json!(["on-demand"])),
        "spot is out: fall back to on-demand"
    );
}

#[test]
fn a_nodepool_whose_ec2nodeclass_is_missing_not_ready_or_not_yet_resolved_gets_no_nodeclaims() {
    let w = world();
    w.kube.apply(&ResourceKind::POD, pending_pod("web-0", "1"));
    let mut class = super::validation::ec2nodeclass();
    class["status"] = json!({"conditions": [{
        "type": "Ready", "status": "False", "reason": "SubnetsNotFound", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]});
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    futures::executor::block_on(async {
        let outcome = w.provisioner.provision().await.expect("pass");
        assert!(outcome.created.is_empty(), "not ready: {outcome:?}");
    });
    futures::executor::block_on(async {
        w.kube
            .delete(
                &ResourceKind::EC2_NODE_CLASS,
                &ObjectKey::cluster("default"),
                &DeleteOptions::default(),
            )
            .await
            .expect("delete");
        let outcome = w.provisioner.provision().await.expect("pass");
        assert!(outcome.created.is_empty(), "missing: {outcome:?}");
    });
    w.kube.apply(
        &ResourceKind::EC2_NODE_CLASS,
        super::validation::ec2nodeclass(),
    );
    futures::executor::block_on(async {
        let outcome = w.provisioner.provision().await.expect("pass");
        assert!(outcome.created.is_empty(), "not resolved yet: {outcome:?}");
    });
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, ready_class());
    futures::executor::block_on(async {
        let outcome = w.provisioner.provision().await.expect("pass");
        assert_eq!(outcome.created.len(), 1, "ready again: {outcome:?}");
    });
}

/// Review H1: an unschedulable pod retried every 10 s got a FailedScheduling event every pass.
/// Upstream records it once per pod per 5 minutes, whatever the message says.
#[test]
fn a_pod_retried_every_ten_seconds_gets_one_failed_scheduling_event_per_five_minutes() {
    let w = world();
    w.kube
        .apply(&ResourceKind::POD, pending_pod("huge", "1000"));
    let failed = |w: &World| {
        w.kube
            .recorded_events()
            .iter()
            .filter(|e| e.reason == "FailedScheduling")
            .count()
    };
    for _ in 0..29 {
        futures::executor::block_on(w.provisioner.provision()).expect("pass");
        w.clock.advance(Duration::from_secs(10));
    }
    assert_eq!(failed(&w), 1, "one event in the first 290 s");
    w.clock.advance(Duration::from_secs(10));
    futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(failed(&w), 2, "recorded again once 5 minutes have passed");
}

/// Review H1: nominations share upstream's token bucket (5/s, burst 10), so a 40-pod pass
/// records 10 Nominated events at once and the rest are dropped, not queued.
#[test]
fn nominations_are_limited_to_a_burst_of_ten_then_five_a_second() {
    let w = world();
    for i in 0..40 {
        w.kube
            .apply(&ResourceKind::POD, pending_pod(&format!("web-{i}"), "100m"));
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.nominated, 40, "every pod is placed");
    let nominated = |w: &World| {
        w.kube
            .recorded_events()
            .iter()
            .filter(|e| e.reason == "Nominated")
            .count()
    };
    assert_eq!(nominated(&w), 10);
    // One second later the bucket holds 5 tokens; pods already nominated are not recorded again
    // within 2 minutes, so only new pods use them.
    w.clock.advance(Duration::from_secs(1));
    for i in 40..50 {
        w.kube
            .apply(&ResourceKind::POD, pending_pod(&format!("web-{i}"), "100m"));
    }
    futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(nominated(&w), 15);
}

/// A node going away (tainted `karpenter.sh/disrupted`) with one pod bound to it; `tweak` adds
/// what protects the pod.
fn node_going_away_with(w: &World, tweak: impl FnOnce(&mut Value)) {
    w.kube.apply(&ResourceKind::NODE, json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "kubernetes.io/arch": "amd64"}},
        "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"},
                            {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }));
    let mut pod = objects::running_pod("db-0", "node-a", |p| {
        p["metadata"]["labels"] = json!({"app": "db"});
        p["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    });
    pod = objects::tolerating(pod, "team", "a");
    tweak(&mut pod);
    w.kube.apply(&ResourceKind::POD, pod);
}

/// Review A2: upstream reschedules a deleting node's pods only if they can leave it
/// (`IsCurrentlyReschedulable`); a do-not-disrupt pod stays until the node's grace period ends,
/// so capacity bought for it would sit empty.
#[test]
fn a_do_not_disrupt_pod_on_a_node_going_away_gets_no_replacement_capacity() {
    let w = world();
    node_going_away_with(&w, |p| {
        p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    });
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{:?}", outcome.created);
}

/// Review F1: a duration protects a pod only while the pod is younger than it, in provisioning
/// as in the drain.
#[test]
fn a_do_not_disrupt_duration_protects_a_pod_until_it_is_that_old() {
    let w = world();
    node_going_away_with(&w, |p| {
        p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "30m"});
    });
    w.clock.advance(Duration::from_secs(29 * 60));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(
        outcome.created.is_empty(),
        "29 minutes old: still protected"
    );
    w.clock.advance(Duration::from_secs(2 * 60));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "31 minutes old: rescheduled");
}

#[test]
fn a_pod_a_budget_fully_blocks_gets_no_replacement_capacity_and_others_do() {
    let w = world();
    node_going_away_with(&w, |_| {});
    w.kube.apply(
        &ResourceKind::POD_DISRUPTION_BUDGET,
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "db"}}}
        }),
    );
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{:?}", outcome.created);
    // A budget that allows one disruption does not block: the pod is rescheduled.
    w.kube.apply(
        &ResourceKind::POD_DISRUPTION_BUDGET,
        json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "db"}}}
        }),
    );
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
}

/// A pending pod mounting claim `data`.
fn pod_with_claim(name: &str) -> Value {
    let mut pod = pending_pod(name, "1");
    pod["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    pod
}

/// The zones a created NodeClaim allows.
fn claim_zones(w: &World, name: &str) -> Vec<String> {
    let claim = w
        .kube
        .object_named(&ResourceKind::NODE_CLAIM, name)
        .expect("claim");
    claim["spec"]["requirements"]
        .as_array()
        .expect("requirements")
        .iter()
        .filter(|r| r["key"] == "topology.kubernetes.io/zone" && r["operator"] == "In")
        .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Review A1: the controller ignored volume topology (only `karpenter plan` had it), so a
/// StatefulSet pod whose EBS volume lives in one zone got a node in another and stayed Pending.
#[test]
fn a_pod_whose_volume_lives_in_one_zone_gets_a_node_in_that_zone() {
    let w = world();
    w.kube.apply(&ResourceKind::PERSISTENT_VOLUME, json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pv-data"},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0a"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-west-2c"]}]}]}}}
    }));
    w.kube.apply(&ResourceKind::PERSISTENT_VOLUME_CLAIM, json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                 "volumeName": "pv-data", "storageClassName": "gp3"}
    }));
    w.kube.apply(&ResourceKind::POD, pod_with_claim("db-0"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
    assert_eq!(claim_zones(&w, &outcome.created[0]), ["us-west-2c"]);
}

#[test]
fn a_pod_whose_claim_does_not_exist_gets_no_node_and_an_event_saying_so() {
    let w = world();
    w.kube.apply(&ResourceKind::POD, pod_with_claim("db-0"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{outcome:?}");
    assert_eq!(outcome.unschedulable, 1);
    let event = w
        .kube
        .recorded_events()
        .into_iter()
        .find(|e| e.reason == "FailedScheduling")
        .expect("event");
    assert!(
        event
            .message
            .contains("persistentvolumeclaim \"data\" not found"),
        "{}",
        event.message
    );
}

#[test]
fn an_unbound_claim_of_a_wait_for_first_consumer_class_takes_the_classes_allowed_zones() {
    let w = world();
    w.kube.apply(
        &ResourceKind::STORAGE_CLASS,
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [
                {"key": "topology.ebs.csi.aws.com/zone", "values": ["us-west-2a"]}]}]
        }),
    );
    w.kube.apply(&ResourceKind::PERSISTENT_VOLUME_CLAIM, json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                 "storageClassName": "gp3"}
    }));
    w.kube.apply(&ResourceKind::POD, pod_with_claim("db-0"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
    assert_eq!(claim_zones(&w, &outcome.created[0]), ["us-west-2a"]);
}

/// Review A3: a pod that refuses Karpenter's nodes is left out silently (it got a
/// FailedScheduling event every pass); a pod with `matchFields` gets one saying why (it was
/// dropped without a word).
#[test]
fn a_pod_refusing_karpenter_nodes_is_left_out_silently_and_match_fields_is_reported() {
    let w = world();
    let mut refusing = pending_pod("controller", "1");
    refusing["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}]}]}}});
    w.kube.apply(&ResourceKind::POD, refusing);
    let mut fields = pending_pod("pinned", "1");
    fields["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}});
    w.kube.apply(&ResourceKind::POD, fields);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{outcome:?}");
    let events: Vec<(String, String)> = w
        .kube
        .recorded_events()
        .into_iter()
        .map(|e| (e.key.name, e.reason))
        .collect();
    assert_eq!(
        events,
        [("pinned".to_string(), "FailedScheduling".to_string())]
    );
}

/// Review B6: a pod asking for 50Gi of ephemeral storage was unschedulable whatever the
/// EC2NodeClass's root volume, because every type was judged with a 20Gi one.
#[test]
fn a_pod_needing_more_scratch_space_than_the_default_root_volume_fits_a_class_with_a_larger_one() {
    let w = world();
    let mut pod = pending_pod("scratch", "1");
    pod["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = json!("50Gi");
    w.kube.apply(&ResourceKind::POD, pod);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(
        outcome.created.is_empty(),
        "20Gi root volumes cannot hold it"
    );
    let mut class = ready_class();
    class["spec"]["blockDeviceMappings"] = json!([
        {"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3"}}
    ]);
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
    // The claim, in flight, counts with its class's capacity: a second pass buys nothing more.
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{outcome:?}");
    // Each pass sized the pool's instance types for its class: upstream's `GetInstanceTypes`.
    let text = w.metrics.encode();
    assert!(
        text.contains("karpenter_cloudprovider_duration_seconds_count{controller=\"provisioner\",method=\"GetInstanceTypes\",provider=\"aws\"} 3"),
        "{text}"
    );
}

/// Found by the fault swarm (`pdb-never-allows` with a spot warning, seed 21): an interrupted
/// node goes whatever protects its pods, so they get replacement capacity first even under a
/// budget that allows no eviction.
#[test]
fn pods_of_an_interrupted_node_get_replacement_capacity_whatever_protects_them() {
    let w = world();
    node_going_away_with(&w, |p| {
        p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    });
    let mut node = w
        .kube
        .object_named(&ResourceKind::NODE, "node-a")
        .expect("node");
    node["spec"]["providerID"] = json!("aws:///us-west-2a/i-0a");
    w.kube.apply(&ResourceKind::NODE, node);
    let mut claim = objects::nodeclaim("default-a").running_as("i-0a").json();
    claim["status"]["nodeName"] = json!("node-a");
    claim["metadata"]["annotations"] = json!({"karpenter.sh/interruption": "spot-interruption"});
    w.kube.apply(&ResourceKind::NODE_CLAIM, claim);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
}

/// A DaemonSet `agent` in `default` whose template asks for `cpu` and binds `host_port` (0: none),
/// tolerating the pool's taint.
fn daemonset(cpu: &str, host_port: i32) -> Value {
    let mut container =
        json!({"name": "agent", "image": "agent", "resources": {"requests": {"cpu": cpu}}});
    if host_port > 0 {
        container["ports"] =
            json!([{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]);
    }
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default", "uid": "ds-agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [container],
                     "tolerations": [{"operator": "Exists"}]}}}
    })
}

/// Review B2: a LimitRange gave the DaemonSet's pods 1 CPU though its template asks for none.
/// Upstream counts the live pod; judged by the template the node looked empty and a 7.5-CPU
/// pod was sent to an 8-CPU node that cannot hold it. The running daemon pod (with the
/// `matchFields` affinity and revision labels every real one has) also counts on its node once.
#[test]
fn daemon_overhead_comes_from_the_live_pods_a_limit_range_mutated() {
    let w = world();
    w.kube.apply(&ResourceKind::DAEMON_SET, daemonset("0", 0));
    w.kube.apply(&ResourceKind::NODE, json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "node-a", "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "kubernetes.io/arch": "amd64"}},
        "spec": {"taints": [{"key": "team", "value": "a", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }));
    w.kube.apply(&ResourceKind::POD, json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "agent-x7k2p", "namespace": "default", "uid": "uid-agent",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"app": "agent", "controller-revision-hash": "6d5f8", "pod-template-generation": "1"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-agent", "controller": true}]},
        "spec": {"nodeName": "node-a",
                 "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}},
                 "containers": [{"name": "agent", "image": "agent", "resources": {"requests": {"cpu": "1"}}}],
                 "tolerations": [{"operator": "Exists"}]},
        "status": {"phase": "Running"}
    }));
    w.kube
        .apply(&ResourceKind::POD, pending_pod("big", "7500m"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(
        outcome.created.len(),
        1,
        "node-a has 7 CPUs left, not 8: {outcome:?}"
    );
}

/// Review B2: a DaemonSet binding host port 9100 (node-exporter) holds it on every new node,
/// so a pending pod wanting 9100 cannot go there; it was planned onto one where it could
/// never bind.
#[test]
fn a_pending_pod_cannot_take_a_host_port_every_new_node_gives_a_daemonset() {
    let w = world();
    w.kube
        .apply(&ResourceKind::DAEMON_SET, daemonset("100m", 9100));
    let mut pod = pending_pod("exporter", "1");
    pod["spec"]["containers"][0]["ports"] =
        json!([{"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"}]);
    w.kube.apply(&ResourceKind::POD, pod);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{outcome:?}");
    let event = w
        .kube
        .recorded_events()
        .into_iter()
        .find(|e| e.reason == "FailedScheduling")
        .expect("event");
    assert!(
        event.message.contains("host port 9100/TCP"),
        "{}",
        event.message
    );
}

/// A claim `name` in `default` bound to an EBS volume `pv-<name>` in us-west-2c.
fn ebs_claim(w: &World, name: &str) {
    w.kube.apply(&ResourceKind::PERSISTENT_VOLUME, json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pv-{name}")},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": format!("vol-{name}")},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": ["us-west-2c"]}]}]}}}
    }));
    w.kube.apply(&ResourceKind::PERSISTENT_VOLUME_CLAIM, json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                 "volumeName": format!("pv-{name}"), "storageClassName": "gp3"}
    }));
}

fn pod_using(name: &str, claim: &str, node: Option<&str>) -> Value {
    let mut pod = pending_pod(name, "100m");
    pod["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]);
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
        pod["status"] = json!({"phase": "Running"});
    }
    pod
}

#[test]
fn a_node_whose_csi_driver_cannot_attach_another_volume_gets_no_more_volume_pods() {
    let run = |limit: Option<i32>| {
        let w = world();
        let mut node = objects::ready_node("node-c", "aws:///us-west-2c/i-0c");
        node["metadata"]["labels"] = json!({
            "topology.kubernetes.io/zone": "us-west-2c",
            "topology.ebs.csi.aws.com/zone": "us-west-2c",
            "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        });
        w.kube.apply(&ResourceKind::NODE, node);
        if let Some(count) = limit {
            w.kube.apply(
                &ResourceKind::CSI_NODE,
                json!({
                    "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                    "metadata": {"name": "node-c"},
                    "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-0c",
                                          "allocatable": {"count": count}}]}
                }),
            );
        }
        for name in ["a", "b", "c"] {
            ebs_claim(&w, name);
        }
        w.kube
            .apply(&ResourceKind::POD, pod_using("db-a", "a", Some("node-c")));
        w.kube
            .apply(&ResourceKind::POD, pod_using("db-b", "b", Some("node-c")));
        w.kube
            .apply(&ResourceKind::POD, pod_using("db-c", "c", None));
        futures::executor::block_on(w.provisioner.provision()).expect("pass")
    };
    // Room for the CPU, and for the volume: the pod goes to the node, nothing is launched.
    assert!(run(Some(3)).created.is_empty());
    assert!(run(None).created.is_empty(), "no CSINode, no known limit");
    // The driver attaches two volumes already and may attach no more: a new node.
    let full = run(Some(2));
    assert_eq!(full.created.len(), 1, "{full:?}");
}

#[test]
fn provisioning_records_each_pods_decision_time_once_and_how_long_the_cluster_was_unsynced() {
    use fakekube::{ApiFault, ApiOperation, Fake};
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::NODE_POOL, pool());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, ready_class());
    let ctx = Arc::new(context(&kube, &clock));
    let metrics = ctx.metrics.clone();
    let mut provisioner = Provisioner::new(ctx);
    // Reading the cluster fails twice, 30 s apart: unsynced for 30 s, then synced again.
    kube.script_faults(
        ApiOperation::List,
        [ApiFault::Unavailable, ApiFault::Unavailable],
    );
    futures::executor::block_on(async {
        assert!(provisioner.provision().await.is_err());
        clock.advance(Duration::from_secs(30));
        assert!(provisioner.provision().await.is_err());
    });
    let text = metrics.encode();
    assert!(text.contains("karpenter_cluster_state_synced 0"), "{text}");
    assert!(
        text.contains("karpenter_cluster_state_unsynced_time_seconds 30.0"),
        "{text}"
    );
    kube.apply(&ResourceKind::POD, pending_pod("web", "500m"));
    futures::executor::block_on(async {
        assert_eq!(
            provisioner.tick().await.expect("tick"),
            None,
            "batch opened"
        );
        clock.advance(Duration::from_millis(1500));
        let outcome = provisioner.tick().await.expect("tick").expect("a pass");
        assert_eq!(outcome.nominated, 1);
        // Retried passes decide about it again; it is counted once.
        clock.advance(Duration::from_secs(11));
        provisioner.tick().await.expect("tick");
    });
    let text = metrics.encode();
    assert!(text.contains("karpenter_cluster_state_synced 1"), "{text}");
    assert!(
        text.contains("karpenter_cluster_state_unsynced_time_seconds 0.0"),
        "{text}"
    );
    assert!(
        text.contains("karpenter_pods_scheduling_decision_duration_seconds_count 1"),
        "{text}"
    );
    assert!(
        text.contains("karpenter_pods_scheduling_decision_duration_seconds_sum 1.5"),
        "{text}"
    );
    assert!(
        !text.contains("karpenter_scheduler_queue_depth{"),
        "a finished simulation leaves no queue series: {text}"
    );
}

/// A Windows Server 2022 EC2NodeClass `windows` (ready) and its NodePool `windows`, untainted,
/// weighted above `default` so that any pod it can take goes there first.
fn windows_pool_and_class(kube: &ApiServer) {
    let mut class = ready_class();
    class["metadata"]["name"] = json!("windows");
    class["spec"]["amiSelectorTerms"] = json!([{"alias": "windows2022@latest"}]);
    kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    let mut pool = super::validation::nodepool();
    pool["metadata"]["name"] = json!("windows");
    pool["spec"]["weight"] = json!(10);
    pool["spec"]["template"]["spec"]["requirements"] = json!([
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
    ]);
    pool["spec"]["template"]["spec"]["nodeClassRef"]["name"] = json!("windows");
    kube.apply(&ResourceKind::NODE_POOL, pool);
}

/// A pending pod selecting `kubernetes.io/os: <os>`, tolerating the default pool's taint; a
/// Windows one requests the address EKS's admission webhook adds to every Windows pod.
fn pod_for_os(name: &str, os: &str) -> Value {
    let mut pod = pending_pod(name, "500m");
    pod["spec"]["nodeSelector"] = json!({"kubernetes.io/os": os});
    if os == "windows" {
        pod["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/PrivateIPv4Address"] =
            json!("1");
        pod["spec"]["containers"][0]["resources"]["limits"] =
            json!({"vpc.amazonaws.com/PrivateIPv4Address": "1"});
    }
    pod
}

/// Every instance type a claim may launch (its `node.kubernetes.io/instance-type` values).
fn claim_types(claim: &Value) -> Vec<String> {
    claim["spec"]["requirements"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["key"] == "node.kubernetes.io/instance-type")
        .and_then(|r| r["values"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Windows nodes (upstream's `getOS`): a pod selecting `kubernetes.io/os: windows` (and
/// requesting its webhook-added address) gets a claim from the Windows class's pool, over amd64
/// types only, labelled windows; the catalog alone (every type `linux`) gave it none.
#[test]
fn a_windows_pod_gets_a_claim_from_the_windows_pool_over_amd64_types_only() {
    let w = world();
    windows_pool_and_class(&w.kube);
    w.kube
        .apply(&ResourceKind::POD, pod_for_os("iis", "windows"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
    let claim = &claims(&w.kube)[0];
    assert_eq!(
        claim["metadata"]["labels"]["karpenter.sh/nodepool"],
        "windows"
    );
    assert_eq!(claim["metadata"]["labels"]["kubernetes.io/os"], "windows");
    let types = claim_types(claim);
    assert!(!types.is_empty(), "{claim}");
    let catalog = karpenter_core::catalog::Catalog::builtin_ref();
    for name in &types {
        let it = catalog.get(name).expect("a catalog type");
        assert_eq!(it.labels["kubernetes.io/arch"], "amd64", "{name}");
    }
    assert_eq!(
        claim["spec"]["resources"]["requests"]["vpc.amazonaws.com/PrivateIPv4Address"], "1",
        "{claim}"
    );
}

/// A pod selecting `kubernetes.io/os: linux` is never put on the Windows pool, even weighted
/// first: it goes to the Linux pool, and with the Windows pool alone it gets no node.
#[test]
fn a_linux_pod_is_not_put_on_the_windows_pool() {
    let w = world();
    windows_pool_and_class(&w.kube);
    w.kube.apply(&ResourceKind::POD, pod_for_os("web", "linux"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
    let claim = &claims(&w.kube)[0];
    assert_eq!(
        claim["metadata"]["labels"]["karpenter.sh/nodepool"],
        "default"
    );
    // Without the Linux pool the pod waits.
    let w = world();
    futures::executor::block_on(w.kube.delete(
        &ResourceKind::NODE_POOL,
        &ObjectKey::cluster("default"),
        &DeleteOptions::default(),
    ))
    .expect("delete the linux pool");
    windows_pool_and_class(&w.kube);
    w.kube.apply(&ResourceKind::POD, pod_for_os("web", "linux"));
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{outcome:?}");
}

/// A Windows pod never gets a Linux class's pool: not by its os selector, and not by requiring
/// a Windows build (a Linux type has no `node.kubernetes.io/windows-build`, which upstream's
/// requirement `DoesNotExist` says).
#[test]
fn a_windows_pod_is_not_given_a_linux_class_pool() {
    let w = world();
    w.kube
        .apply(&ResourceKind::POD, pod_for_os("iis", "windows"));
    let mut by_build = pending_pod("by-build", "500m");
    by_build["spec"]["nodeSelector"] = json!({"node.kubernetes.io/windows-build": "10.0.20348"});
    w.kube.apply(&ResourceKind::POD, by_build);
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert!(outcome.created.is_empty(), "{outcome:?}");
    assert!(claims(&w.kube).is_empty());
}

// ------------------------------------------------------------------------------------------------
// Default topology spread constraints (upstream's `--scheduler-config`)
// ------------------------------------------------------------------------------------------------

/// A provisioner whose options carry `config` (a `--scheduler-config` value), over a pool
/// without limits (a claim counts its largest instance type against them).
fn world_with_scheduler_config(config: &str) -> World {
    let clock = Arc::new(ManualClock::new(start()));
    let kube = api_server(clock.clone());
    let mut unlimited = pool();
    unlimited["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("limits");
    kube.apply(&ResourceKind::NODE_POOL, unlimited);
    kube.apply(&ResourceKind::EC2_NODE_CLASS, ready_class());
    let mut ctx = context(&kube, &clock);
    ctx.options.scheduler_config = SchedulerConfiguration::parse(config)
        .expect("a valid configuration")
        .map(Arc::new);
    let ctx = Arc::new(ctx);
    World {
        metrics: ctx.metrics.clone(),
        nominations: ctx.nominations.clone(),
        provisioner: Provisioner::new(ctx),
        kube,
        clock,
    }
}

/// kube-scheduler's zonal default, as a cluster configures it.
const ZONE_DEFAULT: &str = "podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
";

/// The ReplicaSet of Deployment `web` (what kube-scheduler deduces the default selector from).
fn web_replica_set() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-5d4f8", "namespace": "default", "uid": "rs-web-5d4f8"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d4f8"}},
            "template": {
                "metadata": {"labels": {"app": "web", "pod-template-hash": "5d4f8"}},
                "spec": {"containers": [{"name": "app", "image": "web"}]}
            }
        }
    })
}

/// Pending pod `name` of Deployment `web` (labelled and controlled by [`web_replica_set`]),
/// with no topology spread constraint of its own.
fn web_pod(name: &str) -> Value {
    let mut pod = pending_pod(name, "500m");
    pod["metadata"]["labels"] = json!({"app": "web", "pod-template-hash": "5d4f8"});
    pod["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d4f8",
        "uid": "rs-web-5d4f8", "controller": true
    }]);
    pod
}

/// Each created claim's zones, sorted by claim.
fn zones_of_created(
    w: &World,
    outcome: &karpenter_core::provisioning::Outcome,
) -> Vec<Vec<String>> {
    outcome
        .created
        .iter()
        .map(|name| claim_zones(w, name))
        .collect()
}

#[test]
fn a_deployments_pods_without_spreads_are_spread_across_zones_by_a_default_zone_constraint() {
    let w = world_with_scheduler_config(ZONE_DEFAULT);
    w.kube.apply(&ResourceKind::REPLICA_SET, web_replica_set());
    for i in 0..3 {
        w.kube
            .apply(&ResourceKind::POD, web_pod(&format!("web-{i}")));
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    // One node would hold all three; the default spread puts one in each zone.
    assert_eq!(outcome.created.len(), 3, "{outcome:?}");
    let zones: BTreeSet<Vec<String>> = zones_of_created(&w, &outcome).into_iter().collect();
    assert_eq!(
        zones,
        BTreeSet::from([
            vec!["us-west-2a".to_string()],
            vec!["us-west-2b".to_string()],
            vec!["us-west-2c".to_string()],
        ])
    );
}

#[test]
fn without_a_scheduler_config_a_deployments_pods_share_one_node() {
    let w = world();
    w.kube.apply(&ResourceKind::REPLICA_SET, web_replica_set());
    for i in 0..3 {
        w.kube
            .apply(&ResourceKind::POD, web_pod(&format!("web-{i}")));
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
}

#[test]
fn pods_with_their_own_spread_constraints_are_not_given_the_default() {
    let w = world_with_scheduler_config(ZONE_DEFAULT);
    w.kube.apply(&ResourceKind::REPLICA_SET, web_replica_set());
    for i in 0..3 {
        let mut pod = web_pod(&format!("web-{i}"));
        // Their own spread lets all three share a node; the default would split them by zone.
        pod["spec"]["topologySpreadConstraints"] = json!([{
            "maxSkew": 3, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}
        }]);
        w.kube.apply(&ResourceKind::POD, pod);
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
}

#[test]
fn a_pod_no_service_or_workload_controller_selects_gets_no_default_spread() {
    let w = world_with_scheduler_config(ZONE_DEFAULT);
    for i in 0..3 {
        let mut pod = pending_pod(&format!("job-{i}"), "500m");
        pod["metadata"]["labels"] = json!({"app": "batch"});
        w.kube.apply(&ResourceKind::POD, pod);
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    // kube-scheduler deduces an empty selector for them and applies no default.
    assert_eq!(outcome.created.len(), 1, "{outcome:?}");
}

#[test]
fn pods_a_service_selects_are_spread_by_the_default_through_the_services_selector() {
    let w = world_with_scheduler_config(ZONE_DEFAULT);
    w.kube.apply(
        &ResourceKind::SERVICE,
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "api", "namespace": "default"},
            "spec": {"selector": {"app": "api"}, "ports": [{"port": 80}]}
        }),
    );
    for i in 0..3 {
        let mut pod = pending_pod(&format!("api-{i}"), "500m");
        pod["metadata"]["labels"] = json!({"app": "api", "instance": format!("{i}")});
        w.kube.apply(&ResourceKind::POD, pod);
    }
    let outcome = futures::executor::block_on(w.provisioner.provision()).expect("pass");
    assert_eq!(outcome.created.len(), 3, "{outcome:?}");
    let zones: BTreeSet<Vec<String>> = zones_of_created(&w, &outcome).into_iter().collect();
    assert_eq!(zones.len(), 3, "one claim per zone: {zones:?}");
}
