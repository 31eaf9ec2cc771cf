//! The operator as concurrent loops (`Operator::spawn`) on tokio's paused clock, over the fake
//! API server (with watches) and fakecloud: what one slow cloud call must not hold up.
//!
//! The headline case is issue 13's: a spot warning arrives while a launch is waiting 30 s for
//! CreateFleet. The running operator acts on it (claim deleted, replacement claim created, the
//! node tainted for drain) within 5 s; the same world driven by the sequential `Operator::step`
//! loop cannot, because its step is stuck in the launch (the second test pins that contrast).

use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Config, Fake, FakeCloud, Fault, Operation, Pool};
use fakekube::ApiServer;
use karpenter_core::api::labels::DISRUPTED_TAINT_KEY;
use karpenter_core::api::{NodeClaim, ProviderId, conditions};
use karpenter_core::catalog::live::LiveCatalog;
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::context::Context;
use karpenter_core::operator::loops::CATALOG_REFRESH_POLL;
use karpenter_core::operator::{Operator, SHUTDOWN_DRAIN_MAX};
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{Clock, KubeApi, VirtualClock};
use serde_json::json;

use super::api_server::{self as api, Fixtures};
use super::support::{self, objects};

const QUEUE: &str = "https://sqs.us-west-2.amazonaws.com/123456789012/sim";

struct World {
    kube: Arc<ApiServer>,
    cloud: Arc<FakeCloud>,
    operator: Operator,
}

fn world() -> World {
    let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new(support::start()));
    let cloud = Arc::new(FakeCloud::new(
        clock.clone(),
        Catalog::builtin(),
        Config::default(),
    ));
    let kube = api::api_server(clock.clone());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    kube.apply(
        &ResourceKind::NODE_POOL,
        json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default", "uid": "pool-uid"},
            "spec": {"template": {"spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m6i.large"]}
                ],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
            }}}
        }),
    );
    let operator = Operator::new(
        kube.clone(),
        cloud.clone(),
        clock,
        Arc::new(Catalog::builtin()),
        support::options(),
    )
    .with_interruption_queue(cloud.clone(), QUEUE.into());
    World {
        kube,
        cloud,
        operator,
    }
}

impl World {
    fn claims(&self) -> Vec<NodeClaim> {
        futures::FutureExt::now_or_never(
            self.kube
                .list(&ResourceKind::NODE_CLAIM, &Default::default()),
        )
        .expect("an in-memory list answers at once")
        .expect("listed")
        .items
        .into_iter()
        .map(|c| serde_json::from_value(serde_json::Value::clone(&c)).expect("decodes"))
        .collect()
    }

    fn claim(&self, name: &str) -> Option<NodeClaim> {
        self.kube
            .object_named(&ResourceKind::NODE_CLAIM, name)
            .map(|c| serde_json::from_value(serde_json::Value::clone(&c)).expect("decodes"))
    }

    fn has(&self, claim: &str, condition: &str) -> bool {
        self.claim(claim)
            .and_then(|c| c.status)
            .is_some_and(|s| conditions::is_true(&s.conditions, condition))
    }

    /// What the kubelet and kube-scheduler would do: a Node for `claim`'s instance, and `pod`
    /// bound to it and running.
    fn join(&self, claim: &str, pod: &str) {
        let provider_id = self
            .claim(claim)
            .and_then(|c| c.status)
            .and_then(|s| s.provider_id)
            .expect("launched");
        let node = format!("node-{claim}");
        self.kube.apply(
            &ResourceKind::NODE,
            objects::ready_node(&node, &provider_id),
        );
        let mut object = self
            .kube
            .object_named(&ResourceKind::POD, &format!("default/{pod}"))
            .expect("pod");
        object["spec"]["nodeName"] = json!(node);
        object["status"] = json!({"phase": "Running"});
        self.kube.apply(&ResourceKind::POD, object);
    }

    fn instance_of(&self, claim: &str) -> String {
        self.claim(claim)
            .and_then(|c| c.status)
            .and_then(|s| s.provider_id)
            .and_then(|p| ProviderId::instance_id_of(&p))
            .expect("instance")
    }

    fn tainted_for_drain(&self, node: &str) -> bool {
        self.kube
            .object_named(&ResourceKind::NODE, node)
            .and_then(|n| n["spec"]["taints"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .any(|t| t["key"] == DISRUPTED_TAINT_KEY)
    }

    fn replacements_of(&self, old: &str) -> Vec<String> {
        self.claims()
            .into_iter()
            .filter(|c| {
                c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("karpenter.sh/replaces"))
                    .is_some_and(|list| list.split(',').any(|n| n == old))
            })
            .filter_map(|c| c.metadata.name)
            .collect()
    }
}

/// Polls `done` every 100 ms of simulated time for at most `within`.
async fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Spawns the loops, has a pod's launch wait `fleet_ms` on CreateFleet, and returns the loops and
/// the claim once its launch is under way.
async fn launch_under_way(
    w: &World,
    fleet_ms: u64,
) -> (karpenter_core::operator::OperatorHandle, String) {
    w.cloud
        .script_faults(Operation::CreateFleet, [Fault::LatencyMs(fleet_ms)]);
    let handle = w.operator.spawn();
    w.kube
        .apply(&ResourceKind::POD, objects::pending_pod("web", "1500m"));
    assert!(
        eventually(Duration::from_secs(15), || w.claims().len() == 1).await,
        "a claim is created"
    );
    let claim = w.claims()[0].metadata.name.clone().expect("named");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!w.has(&claim, "Launched"), "its launch is under way");
    (handle, claim)
}

#[tokio::test(start_paused = true)]
async fn a_launch_under_way_at_shutdown_is_finished_and_recorded_and_no_new_work_starts() {
    let w = world();
    let (handle, claim) = launch_under_way(&w, 5_000).await;
    let started = tokio::time::Instant::now();
    let shutdown = handle.shutdown(SHUTDOWN_DRAIN_MAX);
    // A pod arriving while the loops drain gets no claim from this leader.
    w.kube
        .apply(&ResourceKind::POD, objects::pending_pod("late", "1500m"));
    let report = shutdown.await;
    assert!(report.aborted.is_empty(), "nothing aborted: {report:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the drain ends when the launch does, not at the bound"
    );
    assert!(
        w.has(&claim, "Launched"),
        "the launch in flight landed its instance on the claim"
    );
    assert_eq!(
        w.cloud.instances().len(),
        1,
        "one instance, owned by the claim"
    );
    assert_eq!(
        w.claims().len(),
        1,
        "no claim started after the shutdown began"
    );
}

#[tokio::test(start_paused = true)]
async fn a_launch_slower_than_the_drain_bound_is_aborted_at_the_bound_and_named() {
    let w = world();
    let (handle, claim) = launch_under_way(&w, 60_000).await;
    let started = tokio::time::Instant::now();
    let report = handle.shutdown(Duration::from_secs(5)).await;
    let took = started.elapsed();
    assert_eq!(
        report.aborted,
        vec!["lifecycle"],
        "the lifecycle loop was cut off"
    );
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(6),
        "the drain took its bound: {took:?}"
    );
    assert!(
        !w.has(&claim, "Launched"),
        "the cut-off launch recorded nothing"
    );
}

/// One claim launched and initialized with pod `web` running on it, then a second claim (for
/// pod `batch`) whose CreateFleet takes 30 s; 3 s into that launch EC2 warns that the first
/// claim's spot instance will be reclaimed. Returns (the first claim, whether within 5 s of the
/// warning its claim was deleted, a replacement was created and its node was tainted for drain).
async fn warning_during_a_slow_launch(w: &World) -> (String, bool) {
    w.kube
        .apply(&ResourceKind::POD, objects::pending_pod("web", "1500m"));
    assert!(
        eventually(Duration::from_secs(30), || w.claims().len() == 1
            && w.has(
                &w.claims()[0].metadata.name.clone().unwrap_or_default(),
                "Launched"
            ))
        .await,
        "the first claim launches"
    );
    let old = w.claims()[0].metadata.name.clone().expect("named");
    w.join(&old, "web");
    assert!(
        eventually(Duration::from_secs(30), || w.has(&old, "Initialized")).await,
        "the first claim initializes"
    );
    w.cloud
        .script_faults(Operation::CreateFleet, [Fault::LatencyMs(30_000)]);
    w.kube
        .apply(&ResourceKind::POD, objects::pending_pod("batch", "1500m"));
    assert!(
        eventually(Duration::from_secs(15), || w.claims().len() == 2).await,
        "the second claim is created"
    );
    let slow = w
        .claims()
        .iter()
        .filter_map(|c| c.metadata.name.clone())
        .find(|n| *n != old)
        .expect("second claim");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!w.has(&slow, "Launched"), "its launch is in flight");
    assert!(w.cloud.interrupt_spot(&w.instance_of(&old)));
    let node = format!("node-{old}");
    let acted = eventually(Duration::from_secs(5), || {
        w.claim(&old)
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
            && !w.replacements_of(&old).is_empty()
            && w.tainted_for_drain(&node)
    })
    .await;
    assert!(
        !w.has(&slow, "Launched"),
        "the slow launch was still in flight when the warning was acted on"
    );
    (old, acted)
}

#[tokio::test(start_paused = true)]
async fn a_spot_warning_is_acted_on_within_five_seconds_while_a_thirty_second_launch_is_in_flight()
{
    let w = world();
    let handle = w.operator.spawn();
    let (old, acted) = warning_during_a_slow_launch(&w).await;
    assert!(
        acted,
        "claim {old} deleted, its replacement created and its node tainted within 5 s"
    );
    handle.shutdown(SHUTDOWN_DRAIN_MAX).await;
}

#[tokio::test(start_paused = true)]
async fn the_sequential_step_loop_cannot_act_on_that_warning_in_time() {
    let w = world();
    let mut operator = Operator::new(
        w.kube.clone(),
        w.cloud.clone(),
        Arc::new(VirtualClock::new(support::start())),
        Arc::new(Catalog::builtin()),
        support::options(),
    )
    .with_interruption_queue(w.cloud.clone(), QUEUE.into());
    let stepping = tokio::spawn(async move {
        loop {
            operator.step().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let (_, acted) = warning_during_a_slow_launch(&w).await;
    assert!(
        !acted,
        "one step waits for the 30 s launch before it polls the queue again"
    );
    stepping.abort();
}

/// The spot price of `m5.large` in `us-west-2a` in the catalog the running controllers read.
fn m5_spot_price(operator: &Operator) -> f64 {
    operator
        .context()
        .catalog
        .current()
        .get("m5.large")
        .and_then(|it| {
            it.offerings
                .iter()
                .find(|o| o.zone == "us-west-2a" && o.capacity_type == CapacityType::Spot)
        })
        .map(|o| o.price)
        .expect("m5.large is offered as spot in us-west-2a")
}

#[tokio::test(start_paused = true)]
async fn a_spot_price_change_reaches_the_running_controllers_at_the_next_hourly_refresh() {
    let clock = Arc::new(VirtualClock::new(support::start()));
    let cloud = Arc::new(FakeCloud::new(
        clock.clone(),
        Catalog::builtin(),
        Config::default(),
    ));
    let kube = api::api_server(clock.clone());
    let mut live = LiveCatalog::new(cloud.clone(), clock.clone(), "us-west-2");
    live.refresh().await.expect("the first load succeeds");
    let catalog = live.catalog().expect("loaded");
    let ctx = Context::new(
        kube,
        cloud.clone(),
        clock.clone(),
        catalog,
        support::options(),
    )
    .with_live_catalog(live);
    let operator = Operator::with_context(ctx);
    let before = m5_spot_price(&operator);
    let handle = operator.spawn();
    let pool = Pool::new("m5.large", "us-west-2a", CapacityType::Spot);
    assert!(
        cloud.set_price(&pool, before * 3.0),
        "EC2's spot price moves"
    );
    // The virtual clock follows tokio's paused time.
    tokio::time::sleep(Duration::from_secs(58 * 60)).await;
    assert_eq!(
        m5_spot_price(&operator),
        before,
        "spot prices are read hourly: not yet"
    );
    tokio::time::sleep(Duration::from_secs(2 * 60) + CATALOG_REFRESH_POLL).await;
    assert_eq!(
        m5_spot_price(&operator),
        before * 3.0,
        "the refresh swapped the new price into the controllers' catalog"
    );
    handle.shutdown(SHUTDOWN_DRAIN_MAX).await;
}
