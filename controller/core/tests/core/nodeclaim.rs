//! The NodeClaim lifecycle against fakecloud: launch, registration, initialization, liveness,
//! capacity errors, adoption after a restart, hand-over of deleting claims to termination, and
//! garbage collection.

use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Fake, FakeCloud, Pool};
use karpenter_core::api::NodeClaim;
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::context::Context;
use karpenter_core::nodeclaim::{
    GarbageCollector, LAUNCH_ATTEMPTS_MAX, Lifecycle, LifecycleError, Step,
};
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{Clock, Ec2, KubeApi, ManualClock};
use karpenter_core::termination::{Stage, Termination, TerminationError};
use serde_json::{Value, json};

use fakekube::ApiServer;

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects};

struct World {
    kube: Arc<ApiServer>,
    cloud: Arc<FakeCloud>,
    clock: Arc<ManualClock>,
    ctx: Arc<Context>,
    lifecycle: Lifecycle,
    garbage_collector: GarbageCollector,
    termination: std::sync::Mutex<Termination>,
}

fn world() -> World {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    World {
        kube,
        cloud,
        clock,
        lifecycle: Lifecycle::new(ctx.clone()),
        garbage_collector: GarbageCollector::new(ctx.clone()),
        termination: std::sync::Mutex::new(Termination::new(ctx.clone())),
        ctx,
    }
}

/// A claim for any of `types` as any of `capacity_types`, with a startup taint an agent on the
/// node removes.
fn claim(name: &str, types: &[&str], capacity_types: &[&str]) -> Value {
    objects::nodeclaim(name)
        .of_types(types)
        .capacity_types(capacity_types)
        .startup_taint("example.com/agent-not-ready")
        .json()
}

impl World {
    /// Garbage collection leaves the one unowned instance alone 10 s in, and terminates it once
    /// the 30 s grace period has passed.
    async fn collected_after_the_grace_period(&self) {
        self.clock.advance(Duration::from_secs(10));
        assert_eq!(
            self.garbage_collector.collect().await.expect("gc"),
            (0, 0),
            "inside the grace period"
        );
        self.clock.advance(Duration::from_secs(30));
        assert_eq!(self.garbage_collector.collect().await.expect("gc"), (1, 0));
    }

    /// Deletes the only claim, `name`, without its finalizer (its instance runs on, orphaned),
    /// and moves the clock 40 s on: past garbage collection's grace for young instances.
    async fn orphan(&self, name: &str) {
        let mut orphan = Value::clone(&self.kube.objects(&ResourceKind::NODE_CLAIM)[0]);
        orphan["metadata"]["finalizers"] = json!([]);
        self.kube.apply(&ResourceKind::NODE_CLAIM, orphan);
        self.kube
            .delete(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster(name),
                &DeleteOptions::default(),
            )
            .await
            .expect("delete");
        self.clock.advance(Duration::from_secs(40));
    }

    /// Applies an on-demand m5.large claim `name` and launches it (the only claim).
    fn launch_on_demand(&self, name: &str) {
        self.kube.apply(
            &ResourceKind::NODE_CLAIM,
            claim(name, &["m5.large"], &["on-demand"]),
        );
        assert_eq!(self.reconcile()[0].1, Ok(Step::Launched));
    }

    fn claim(&self, name: &str) -> Option<NodeClaim> {
        self.kube
            .objects(&ResourceKind::NODE_CLAIM)
            .into_iter()
            .find(|c| c["metadata"]["name"] == json!(name))
            .map(|c| serde_json::from_value(Value::clone(&c)).expect("decodes"))
    }

    fn reconcile(&self) -> Vec<(String, Result<Step, LifecycleError>)> {
        futures::executor::block_on(self.lifecycle.reconcile_all()).expect("reconcile")
    }

    fn terminate(&self) -> Vec<(String, Result<Stage, TerminationError>)> {
        let termination = self.termination.lock().unwrap();
        futures::executor::block_on(termination.reconcile_all()).expect("terminate")
    }

    /// What the kubelet does when the instance boots: a Node with the claim's provider id.
    fn register_node(&self, claim: &NodeClaim, taints: Value) {
        let provider_id = claim
            .status
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .expect("launched");
        let mut node = objects::ready_node("ip-10-0-0-1.ec2.internal", &provider_id);
        node["spec"]["taints"] = taints;
        self.kube.apply(&ResourceKind::NODE, node);
    }
}

#[test]
fn a_claim_launches_registers_and_initializes() {
    let w = world();
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-a", &["m5.large", "m6i.large"], &["on-demand"]),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::Launched));
    let launched = w.claim("default-a").expect("claim");
    let provider_id = launched
        .status
        .as_ref()
        .and_then(|s| s.provider_id.clone())
        .expect("provider id");
    assert!(provider_id.starts_with("aws:///us-west-2"), "{provider_id}");
    assert!(
        launched
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .contains(&"karpenter.sh/termination".to_string())
    );
    let labels = launched.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert!(
        ["m5.large", "m6i.large"].contains(&labels["node.kubernetes.io/instance-type"].as_str())
    );
    assert_eq!(w.cloud.instances().len(), 1);
    let instance = &w.cloud.instances()[0];
    assert_eq!(
        instance
            .tags
            .get("kubernetes.io/cluster/sim")
            .map(String::as_str),
        Some("owned")
    );
    assert_eq!(
        instance
            .tags
            .get("karpenter.sh/nodeclaim")
            .map(String::as_str),
        Some("default-a")
    );

    assert_eq!(w.reconcile()[0].1, Ok(Step::Waiting), "no node yet");
    w.register_node(
        &launched,
        json!([
            {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
            {"key": "example.com/agent-not-ready", "effect": "NoSchedule"}
        ]),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::Registered));
    let node = &Value::clone(&w.kube.objects(&ResourceKind::NODE)[0]);
    assert!(
        node["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["key"] != json!("karpenter.sh/unregistered"))
    );
    assert_eq!(
        node["metadata"]["labels"]["karpenter.sh/registered"],
        json!("true")
    );
    assert_eq!(
        node["metadata"]["finalizers"],
        json!(["karpenter.sh/termination"])
    );
    assert_eq!(
        w.reconcile()[0].1,
        Ok(Step::Waiting),
        "startup taint still there"
    );
    let mut node = node.clone();
    node["spec"]["taints"] = json!([]);
    w.kube.apply(&ResourceKind::NODE, node);
    assert_eq!(w.reconcile()[0].1, Ok(Step::Initialized));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Ready));
    let ready = w.claim("default-a").expect("claim");
    assert!(karpenter_core::api::conditions::is_true(
        &ready.status.unwrap().conditions,
        "Ready"
    ));
}

#[test]
fn an_insufficient_capacity_error_deletes_the_claim_and_marks_the_offerings_unavailable() {
    let w = world();
    for zone in ["us-west-2a", "us-west-2b", "us-west-2c"] {
        assert!(
            w.cloud
                .set_pool_capacity(&Pool::new("m5.large", zone, CapacityType::Spot), 0)
        );
    }
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-b", &["m5.large"], &["spot"]),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::DeletedInsufficientCapacity));
    assert_eq!(
        w.reconcile()[0].1,
        Ok(Step::Deleting),
        "a deleting claim is left to termination"
    );
    assert_eq!(
        w.terminate()[0].1,
        Ok(Stage::Terminated),
        "no instance to terminate: the finalizer goes"
    );
    assert!(w.claim("default-b").is_none());
    assert!(w.cloud.instances().is_empty());
    let now = w.clock.now();
    assert!(
        w.ctx
            .unavailable
            .is_unavailable("m5.large", "us-west-2a", CapacityType::Spot, now)
    );
    let builtin = std::sync::Arc::new(Catalog::builtin());
    let view = w.ctx.unavailable.apply(&builtin, now);
    let m5 = view.get("m5.large").expect("type");
    assert!(
        m5.offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot)
            .all(|o| !o.available)
    );
    assert!(
        m5.offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .all(|o| o.available)
    );
    w.clock.advance(Duration::from_secs(181));
    assert!(
        !w.ctx.unavailable.is_unavailable(
            "m5.large",
            "us-west-2a",
            CapacityType::Spot,
            w.clock.now()
        ),
        "the cache entry expires after 3 minutes"
    );
}

#[test]
fn a_claim_whose_node_never_registers_is_deleted_after_fifteen_minutes() {
    let w = world();
    w.launch_on_demand("default-c");
    w.clock.advance(Duration::from_secs(14 * 60));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Waiting));
    w.clock.advance(Duration::from_secs(61));
    assert_eq!(w.reconcile()[0].1, Ok(Step::DeletedRegistrationTimeout));
    // Marked (finalizer) then finalized by termination: the instance is terminated and the
    // claim goes away once EC2 reports it terminated.
    assert_eq!(w.reconcile()[0].1, Ok(Step::Deleting));
    assert_eq!(w.terminate()[0].1, Ok(Stage::InstanceTerminating));
    futures::executor::block_on(async {
        w.clock.advance(Duration::from_secs(120));
        let ids: Vec<String> = w
            .cloud
            .instances()
            .iter()
            .map(|i| i.instance_id.clone())
            .collect();
        let instances = w
            .cloud
            .describe_instances(&ids, &[])
            .await
            .expect("describe");
        assert!(instances.iter().all(|i| matches!(
            i.state,
            karpenter_core::seams::ec2::InstanceState::ShuttingDown
                | karpenter_core::seams::ec2::InstanceState::Terminated
        )));
    });
    assert_eq!(w.terminate()[0].1, Ok(Stage::Terminated));
    assert!(w.claim("default-c").is_none());
}

#[test]
fn a_restarted_controller_adopts_the_instance_it_launched_instead_of_launching_again() {
    let w = world();
    w.launch_on_demand("default-d");
    // The status write is lost (a crash right after CreateFleet): the claim looks unlaunched.
    let mut lost = Value::clone(&w.kube.objects(&ResourceKind::NODE_CLAIM)[0]);
    lost["status"] = json!({});
    w.kube.apply(&ResourceKind::NODE_CLAIM, lost);
    w.clock.advance(Duration::from_secs(5));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Launched));
    assert_eq!(w.cloud.instances().len(), 1, "no second instance");
    let id = &w.cloud.instances()[0].instance_id;
    let provider_id = w
        .claim("default-d")
        .and_then(|c| c.status.and_then(|s| s.provider_id))
        .expect("provider id");
    assert!(provider_id.ends_with(id.as_str()));
}

#[test]
fn garbage_collection_terminates_instances_without_a_claim_after_the_grace_period() {
    let w = world();
    w.launch_on_demand("default-e");
    // The claim disappears without its finalizer running (someone force-removed it).
    futures::executor::block_on(async {
        let mut orphan = Value::clone(&w.kube.objects(&ResourceKind::NODE_CLAIM)[0]);
        orphan["metadata"]["finalizers"] = json!([]);
        w.kube.apply(&ResourceKind::NODE_CLAIM, orphan);
        w.kube
            .delete(
                &ResourceKind::NODE_CLAIM,
                &ObjectKey::cluster("default-e"),
                &DeleteOptions::default(),
            )
            .await
            .expect("delete");
        w.collected_after_the_grace_period().await;
    });
}

/// Someone other than Karpenter deletes Karpenter's tags from a running instance (a tag-policy
/// clean-up): garbage collection's tag-scoped list no longer finds it, but EC2 still runs it and
/// its claim still names it, so the claim is kept (deleting it would drain a healthy node). Once
/// EC2 reports the instance terminated, the claim goes.
#[test]
fn garbage_collection_keeps_the_claim_of_a_running_instance_that_lost_its_tags() {
    let w = world();
    w.launch_on_demand("default-t");
    let claim = w.claim("default-t").expect("claim");
    let id = claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(|p| p.rsplit('/').next())
        .expect("launched")
        .to_string();
    let keys: Vec<String> = w
        .cloud
        .instance(&id)
        .expect("instance")
        .tags
        .into_keys()
        .filter(|k| k.starts_with("karpenter.sh/") || k.starts_with("karpenter.k8s.aws/"))
        .collect();
    assert!(!keys.is_empty(), "the launch tagged it");
    assert!(w.cloud.delete_tags(&id, &keys));
    futures::executor::block_on(async {
        w.clock.advance(Duration::from_secs(60));
        assert_eq!(
            w.garbage_collector.collect().await.expect("gc"),
            (0, 0),
            "a running instance is not gone because its tags are"
        );
        assert!(
            w.claim("default-t")
                .is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
            "the claim is kept"
        );
        w.cloud
            .terminate_instances(std::slice::from_ref(&id))
            .await
            .expect("terminate");
        w.clock.advance(Duration::from_secs(600));
        w.cloud.advance_to_now();
        assert_eq!(
            w.garbage_collector.collect().await.expect("gc"),
            (0, 1),
            "an instance EC2 reports terminated is gone"
        );
    });
}

/// A pass whose DescribeInstances fails is retried seconds later (upstream requeues a failed
/// reconcile with backoff), not a whole interval later: the orphan is collected at once.
#[test]
fn a_failed_garbage_collection_pass_is_retried_within_seconds_not_after_the_interval() {
    let mut w = world();
    w.launch_on_demand("default-f");
    futures::executor::block_on(async {
        w.orphan("default-f").await;
        w.cloud.script_faults(
            fakecloud::Operation::DescribeInstances,
            [fakecloud::Fault::Throttle],
        );
        assert!(
            matches!(w.garbage_collector.collect_if_due().await, Some(Err(_))),
            "the throttled pass fails"
        );
        w.clock.advance(Duration::from_secs(1));
        assert_eq!(
            w.garbage_collector.collect_if_due().await.map(|r| r.ok()),
            Some(Some((1, 0))),
            "retried a second later, it terminates the orphan"
        );
        w.clock.advance(Duration::from_secs(1));
        assert!(
            w.garbage_collector.collect_if_due().await.is_none(),
            "after a successful pass, the next waits for the interval"
        );
    });
}

/// Upstream requeues a failed collection with its workqueue's rate limiter (5 ms, doubling), so
/// even after six failures in a row (EC2 throttling, then a 5xx: swarm seed 350) the next pass is
/// due well within a second, not half a minute later.
#[test]
fn a_garbage_collection_pass_that_failed_six_times_in_a_row_is_retried_within_a_second() {
    let mut w = world();
    w.launch_on_demand("default-f");
    futures::executor::block_on(async {
        w.orphan("default-f").await;
        w.cloud.script_faults(
            fakecloud::Operation::DescribeInstances,
            [fakecloud::Fault::Throttle; 6],
        );
        for failure in 1..=6 {
            assert!(
                matches!(w.garbage_collector.collect_if_due().await, Some(Err(_))),
                "throttled pass {failure} fails"
            );
            assert!(
                w.garbage_collector.next_pass_after() < Duration::from_secs(1),
                "after {failure} failures the next pass waits {:?}",
                w.garbage_collector.next_pass_after()
            );
            w.clock.advance(Duration::from_secs(1));
        }
        assert_eq!(
            w.garbage_collector.collect_if_due().await.map(|r| r.ok()),
            Some(Some((1, 0))),
            "the seventh pass, a second after the sixth, terminates the orphan"
        );
    });
}

/// A second instance tagged with a claim that records another one (a launch retried after its
/// answer was lost, under another token) is a leaked duplicate: its name tag must not keep it
/// running for as long as the claim lives.
#[test]
fn garbage_collection_terminates_a_duplicate_tagged_with_a_claim_that_records_another_instance() {
    use karpenter_core::seams::ec2::{CreateFleetRequest, FleetOverride};
    let w = world();
    w.launch_on_demand("default-d");
    let first = w.cloud.instances()[0].clone();
    futures::executor::block_on(async {
        let template = w.cloud.launch_templates()[0].name.clone();
        let duplicate = w
            .cloud
            .create_fleet(&CreateFleetRequest {
                capacity_block: false,
                capacity_type: CapacityType::OnDemand,
                launch_template_name: template,
                overrides: vec![FleetOverride {
                    instance_type: first.instance_type.clone(),
                    subnet_id: first.subnet_id.clone(),
                    zone: first.zone.clone(),
                    price: None,
                }],
                tags: first.tags.clone(),
                client_token: "another-token".into(),
                context: None,
            })
            .await
            .expect("fleet");
        assert_eq!(duplicate.instances.len(), 1);
        w.collected_after_the_grace_period().await;
    });
    let live: Vec<String> = w
        .cloud
        .instances()
        .into_iter()
        .filter(|i| {
            i.state != karpenter_core::seams::ec2::InstanceState::Terminated
                && i.state != karpenter_core::seams::ec2::InstanceState::ShuttingDown
        })
        .map(|i| i.instance_id)
        .collect();
    assert_eq!(
        live,
        vec![first.instance_id],
        "the claim's own instance stays"
    );
}

#[test]
fn a_claim_for_a_missing_node_class_is_deleted_with_an_event() {
    let w = world();
    let mut orphan = claim("default-f", &["m5.large"], &["on-demand"]);
    orphan["spec"]["nodeClassRef"]["name"] = json!("missing");
    w.kube.apply(&ResourceKind::NODE_CLAIM, orphan);
    assert_eq!(w.reconcile()[0].1, Ok(Step::DeletedNodeClassNotFound));
    assert!(
        w.kube
            .recorded_events()
            .iter()
            .any(|e| e.reason == "NodeClassNotReady" && e.message.contains("missing"))
    );
    assert!(w.cloud.instances().is_empty());
}

#[test]
fn a_launch_throttled_twice_is_retried_in_the_same_reconcile() {
    let w = world();
    w.cloud.script_faults(
        fakecloud::Operation::CreateFleet,
        [fakecloud::Fault::Throttle, fakecloud::Fault::Throttle],
    );
    w.launch_on_demand("default-a");
    assert_eq!(w.cloud.instances().len(), 1);
    assert_eq!(
        w.cloud.calls_of(fakecloud::Operation::CreateFleet).len(),
        3,
        "two throttled attempts, then the launch"
    );
}

#[test]
fn a_launch_throttled_past_the_attempt_bound_waits_for_the_next_reconcile() {
    let w = world();
    let bound = LAUNCH_ATTEMPTS_MAX as usize;
    w.cloud.script_faults(
        fakecloud::Operation::CreateFleet,
        vec![fakecloud::Fault::Throttle; bound],
    );
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-a", &["m5.large"], &["on-demand"]),
    );
    assert!(
        matches!(&w.reconcile()[0].1, Ok(Step::LaunchFailed(m)) if m.to_string().contains("RequestLimitExceeded")),
        "bounded: {:?}",
        w.cloud.calls_of(fakecloud::Operation::CreateFleet).len()
    );
    assert_eq!(
        w.cloud.calls_of(fakecloud::Operation::CreateFleet).len(),
        bound
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::Launched));
}

#[test]
fn a_launch_whose_answer_was_lost_is_adopted_on_the_retry_not_launched_again() {
    let w = world();
    w.cloud.script_faults(
        fakecloud::Operation::CreateFleet,
        [fakecloud::Fault::LostResponse],
    );
    w.launch_on_demand("default-a");
    assert_eq!(w.cloud.instances().len(), 1, "{:?}", w.cloud.instances());
}

/// Review finding 2: GC selected `kubernetes.io/cluster/NAME=owned`, which node groups and
/// self-managed nodes carry; it must only ever see Karpenter's own instances.
#[test]
fn finding_2_garbage_collection_leaves_node_group_instances_tagged_only_with_the_cluster_tag() {
    use karpenter_core::seams::ec2::{CreateFleetRequest, FleetOverride, LaunchTemplateRequest};
    let w = world();
    futures::executor::block_on(async {
        let subnet = w.cloud.describe_subnets(&[]).await.expect("subnets")[0].clone();
        let image = w
            .cloud
            .get_parameter("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
            .await
            .expect("ssm")
            .expect("published AMI");
        let template = LaunchTemplateRequest {
            name: "eks-nodegroup".into(),
            image_id: image,
            user_data: String::new(),
            security_group_ids: vec![],
            instance_profile: "nodegroup".into(),
            tags: Default::default(),
            extra: Default::default(),
        };
        w.cloud.create_launch_template(&template).await.expect("lt");
        let fleet = |tags: &[(&str, &str)], token: &str| CreateFleetRequest {
            capacity_block: false,
            capacity_type: CapacityType::OnDemand,
            launch_template_name: "eks-nodegroup".into(),
            overrides: vec![FleetOverride {
                instance_type: "m5.large".into(),
                subnet_id: subnet.subnet_id.clone(),
                zone: subnet.zone.clone(),
                price: None,
            }],
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            client_token: token.into(),
            context: None,
        };
        let node_group = [
            ("kubernetes.io/cluster/sim", "owned"),
            ("eks:nodegroup-name", "system"),
        ];
        // Same cluster tags but another cluster's eks:eks-cluster-name: not ours either.
        let other_cluster = [
            ("karpenter.sh/nodepool", "default"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("eks:eks-cluster-name", "other"),
        ];
        let ours = [
            ("karpenter.sh/nodepool", "default"),
            ("karpenter.k8s.aws/ec2nodeclass", "default"),
            ("eks:eks-cluster-name", "sim"),
        ];
        for (tags, token) in [
            (&node_group[..], "a"),
            (&other_cluster[..], "b"),
            (&ours[..], "c"),
        ] {
            let launched = w
                .cloud
                .create_fleet(&fleet(tags, token))
                .await
                .expect("fleet");
            assert_eq!(launched.instances.len(), 1, "{:?}", launched.errors);
        }
        w.clock.advance(Duration::from_secs(120));
        assert_eq!(w.garbage_collector.collect().await.expect("gc"), (1, 0));
        let live: Vec<_> = w
            .cloud
            .instances()
            .into_iter()
            .filter(|i| {
                !matches!(
                    i.state,
                    karpenter_core::seams::ec2::InstanceState::ShuttingDown
                        | karpenter_core::seams::ec2::InstanceState::Terminated
                )
            })
            .collect();
        assert_eq!(
            live.len(),
            2,
            "the node group's and the other cluster's instances survive"
        );
        assert!(
            live.iter()
                .all(|i| !karpenter_core::nodeclaim::is_ours(&i.tags, "sim"))
        );
    });
}

/// Finding 8: a launch EC2 rejects as misconfigured (here an AMI id that does not exist) is not a
/// capacity error: the claim stays, says why with `Launched=False`, emits an event, and is not
/// relaunched on the very next pass.
#[test]
fn finding_8_a_misconfigured_launch_sets_launched_false_with_an_event_and_backs_off() {
    let w = world();
    let mut class = objects::default_node_class();
    class["spec"]["amiFamily"] = json!("AL2023");
    class["spec"]["amiSelectorTerms"] = json!([{"id": "ami-0doesnotexist"}]);
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-g", &["m5.large"], &["on-demand"]),
    );
    assert!(
        matches!(&w.reconcile()[0].1, Ok(Step::LaunchFailed(e)) if e.to_string().contains("InvalidAMIID")),
        "{:?}",
        w.reconcile()
    );
    let claim = w.claim("default-g").expect("the claim is kept");
    let launched = claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Launched").cloned())
        .expect("Launched condition");
    assert_eq!(launched.reason, "LaunchConfigurationRejected");
    assert!(
        w.kube
            .events()
            .iter()
            .any(|e| e.event.reason == "LaunchConfigurationRejected")
    );
    assert!(
        !w.kube
            .events()
            .iter()
            .any(|e| e.event.reason == "InsufficientCapacityError")
    );
    let fleets = w.cloud.calls_of(fakecloud::Operation::CreateFleet).len();
    w.clock.advance(Duration::from_secs(10));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Waiting));
    assert_eq!(
        w.cloud.calls_of(fakecloud::Operation::CreateFleet).len(),
        fleets,
        "backed off"
    );
}

/// Review D1: a claim that cannot launch (here EC2 rejects its AMI on every attempt) is deleted
/// five minutes after its creation, upstream's launch timeout, so the provisioner stops counting
/// it as capacity and its pods get a claim that can launch. Before, a misconfigured launch was
/// retried until the 15-minute registration timeout, and any other failure forever.
#[test]
fn a_claim_not_launched_within_five_minutes_of_its_creation_is_deleted_with_an_event() {
    let w = world();
    let mut class = objects::default_node_class();
    class["spec"]["amiSelectorTerms"] = json!([{"id": "ami-0doesnotexist"}]);
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-h", &["m5.large"], &["on-demand"]),
    );
    assert!(matches!(&w.reconcile()[0].1, Ok(Step::LaunchFailed(_))));
    for _ in 0..4 {
        w.clock.advance(Duration::from_secs(61));
        assert!(
            matches!(&w.reconcile()[0].1, Ok(Step::LaunchFailed(_))),
            "retried every minute inside the timeout"
        );
    }
    w.clock.advance(Duration::from_secs(60));
    assert_eq!(w.reconcile()[0].1, Ok(Step::DeletedLaunchTimeout));
    assert!(
        w.kube
            .events()
            .iter()
            .any(|e| e.event.reason == "FailedLaunch" && e.event.message.contains("InvalidAMIID"))
    );
    assert!(w.cloud.instances().is_empty());
}

/// Review D1: a claim whose EC2NodeClass resolves no subnets is deleted at once with
/// `NodeClassNotReady`, as upstream deletes it: kept, it would hold its pods' capacity forever.
#[test]
fn a_claim_whose_node_class_resolves_no_subnets_is_deleted_at_once() {
    let w = world();
    let mut class = objects::default_node_class();
    class["spec"]["subnetSelectorTerms"] = json!([{"tags": {"karpenter.sh/discovery": "nowhere"}}]);
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-i", &["m5.large"], &["on-demand"]),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::DeletedNodeClassNotReady));
    assert!(
        w.kube
            .events()
            .iter()
            .any(|e| e.event.reason == "NodeClassNotReady")
    );
    assert!(w.cloud.instances().is_empty());
}

/// The status of NodePool `default` condition `type_`: (status, reason).
fn pool_condition(w: &World, type_: &str) -> Option<(String, String)> {
    let pool = w.kube.objects(&ResourceKind::NODE_POOL).first().cloned()?;
    let found = pool["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == json!(type_))?
        .clone();
    Some((
        found["status"].as_str()?.to_string(),
        found["reason"].as_str()?.to_string(),
    ))
}

/// Review H3: a node that registers marks its NodePool `NodeRegistrationHealthy=True`; one that
/// never registers marks it `False` (`RegistrationFailed`), so `kubectl describe nodepool` shows
/// a launch path that yields nodes that never join.
#[test]
fn registrations_and_registration_timeouts_set_the_nodepools_registration_health() {
    let w = world();
    w.kube
        .apply(&ResourceKind::NODE_POOL, super::validation::nodepool());
    w.launch_on_demand("default-a");
    let launched = w.claim("default-a").expect("claim");
    w.register_node(&launched, json!([]));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Registered));
    assert_eq!(
        pool_condition(&w, "NodeRegistrationHealthy"),
        Some(("True".into(), "NodeRegistrationHealthy".into()))
    );
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-b", &["m5.large"], &["on-demand"]),
    );
    let steps = w.reconcile();
    assert!(
        steps
            .iter()
            .any(|(n, s)| n == "default-b" && *s == Ok(Step::Launched))
    );
    w.clock.advance(Duration::from_secs(15 * 60 + 1));
    let steps = w.reconcile();
    assert!(
        steps
            .iter()
            .any(|(n, s)| n == "default-b" && *s == Ok(Step::DeletedRegistrationTimeout)),
        "{steps:?}"
    );
    assert_eq!(
        pool_condition(&w, "NodeRegistrationHealthy"),
        Some(("False".into(), "RegistrationFailed".into()))
    );
}

impl World {
    /// The claim's `Initialized` condition: status and reason.
    fn initialized(&self, name: &str) -> Option<(String, String)> {
        let claim = self.claim(name)?;
        let conditions = claim.status?.conditions;
        karpenter_core::api::conditions::get(&conditions, "Initialized")
            .map(|c| (format!("{:?}", c.status), c.reason.clone()))
    }
}

/// Review D2: initialization waits for what upstream waits for, says which in an Unknown
/// reason, and ignores extended resources nobody requested (a GPU type bought for CPU pods, with
/// no device plugin, initializes).
#[test]
fn initialization_waits_for_ephemeral_taints_and_requested_resources_only_and_says_which() {
    let w = world();
    let gpu_claim = |name: &str| {
        objects::nodeclaim(name)
            .of_types(&["g4dn.xlarge"])
            .capacity_types(&["on-demand"])
            .json()
    };
    let mut requested = gpu_claim("default-a");
    requested["spec"]["resources"] = json!({"requests": {"cpu": "1", "nvidia.com/gpu": "1"}});
    w.kube.apply(&ResourceKind::NODE_CLAIM, requested);
    w.kube
        .apply(&ResourceKind::NODE_CLAIM, gpu_claim("default-b"));
    w.reconcile();
    let mut names = Vec::new();
    for (i, name) in ["default-a", "default-b"].iter().enumerate() {
        let launched = w.claim(name).expect("claim");
        let provider_id = launched
            .status
            .and_then(|s| s.provider_id)
            .expect("launched");
        let node_name = format!("ip-10-0-0-{i}.ec2.internal");
        let mut node = objects::ready_node(&node_name, &provider_id);
        node["spec"]["taints"] = json!([
            {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}
        ]);
        node["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
        w.kube.apply(&ResourceKind::NODE, node);
        names.push(node_name);
    }
    w.reconcile();
    w.reconcile();
    for name in ["default-a", "default-b"] {
        assert_eq!(
            w.initialized(name),
            Some(("Unknown".into(), "KnownEphemeralTaintsExist".into())),
            "{name}"
        );
    }
    for node_name in &names {
        let mut node = w
            .kube
            .object_named(&ResourceKind::NODE, node_name)
            .expect("node");
        node["spec"]["taints"] = json!([]);
        w.kube.apply(&ResourceKind::NODE, node);
    }
    w.reconcile();
    assert_eq!(
        w.initialized("default-a"),
        Some(("Unknown".into(), "ResourceNotRegistered".into())),
        "the GPU it was bought for is not advertised yet"
    );
    assert_eq!(
        w.initialized("default-b"),
        Some(("True".into(), "Initialized".into())),
        "nobody asked for its GPU"
    );
}

/// Review D3: registration copies the claim's annotations, and leaves the taints to a node that
/// says it registers with them itself (`karpenter.sh/do-not-sync-taints`, which our user data
/// sets), so a startup taint its agent already removed is not put back.
#[test]
fn registration_copies_annotations_and_leaves_taints_to_a_node_that_owns_them() {
    let w = world();
    let mut tainted = claim("default-a", &["m5.large"], &["on-demand"]);
    tainted["metadata"]["annotations"] = json!({"example.com/owner": "team-a"});
    tainted["spec"]["taints"] = json!([{"key": "team", "value": "a", "effect": "NoSchedule"}]);
    w.kube.apply(&ResourceKind::NODE_CLAIM, tainted);
    w.reconcile();
    let launched = w.claim("default-a").expect("claim");
    w.register_node(
        &launched,
        json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]),
    );
    let mut node = Value::clone(&w.kube.objects(&ResourceKind::NODE)[0]);
    node["metadata"]["labels"] = json!({"karpenter.sh/do-not-sync-taints": "true"});
    w.kube.apply(&ResourceKind::NODE, node);
    assert_eq!(w.reconcile()[0].1, Ok(Step::Registered));
    let node = &Value::clone(&w.kube.objects(&ResourceKind::NODE)[0]);
    assert_eq!(node["spec"]["taints"], json!([]), "{node}");
    assert_eq!(
        node["metadata"]["annotations"]["example.com/owner"],
        json!("team-a")
    );
}

#[test]
fn registration_syncs_taints_and_startup_taints_onto_a_node_without_the_opt_out() {
    let w = world();
    let mut tainted = claim("default-a", &["m5.large"], &["on-demand"]);
    tainted["spec"]["taints"] = json!([{"key": "team", "value": "a", "effect": "NoSchedule"}]);
    w.kube.apply(&ResourceKind::NODE_CLAIM, tainted);
    w.reconcile();
    let launched = w.claim("default-a").expect("claim");
    w.register_node(
        &launched,
        json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::Registered));
    let node = &Value::clone(&w.kube.objects(&ResourceKind::NODE)[0]);
    let keys: Vec<&str> = node["spec"]["taints"]
        .as_array()
        .expect("taints")
        .iter()
        .filter_map(|t| t["key"].as_str())
        .collect();
    assert_eq!(keys, ["team", "example.com/agent-not-ready"], "{node}");
}

#[test]
fn a_claim_requiring_a_zone_id_launches_in_that_zone_and_is_labelled_with_its_id() {
    let w = world();
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        objects::nodeclaim("default-a")
            .of_types(&["m5.large"])
            .capacity_types(&["on-demand"])
            .requirement("topology.k8s.aws/zone-id", &["usw2-az3"])
            .json(),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::Launched));
    let labels = w
        .claim("default-a")
        .and_then(|c| c.metadata.labels)
        .unwrap_or_default();
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-west-2c");
    assert_eq!(labels["topology.k8s.aws/zone-id"], "usw2-az3");
}

#[test]
fn a_finalizer_added_after_the_claim_was_read_is_a_conflict_and_a_retry_not_lost() {
    use karpenter_core::seams::KubeError;
    use karpenter_core::seams::kube::Patch;
    let w = world();
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-a", &["m5.large"], &["on-demand"]),
    );
    let stale = w.claim("default-a").expect("claim");
    // Another controller adds its finalizer after our read.
    futures::executor::block_on(w.kube.patch(
        &ResourceKind::NODE_CLAIM,
        &ObjectKey::cluster("default-a"),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/audit"]}})),
    ))
    .expect("their write");
    let out = futures::executor::block_on(w.lifecycle.reconcile(&stale, &Default::default()));
    assert!(
        matches!(out, Err(LifecycleError::Kube(KubeError::Conflict(_)))),
        "{out:?}"
    );
    let fresh = w.claim("default-a").expect("claim");
    assert_eq!(
        fresh.metadata.finalizers.clone().unwrap_or_default(),
        ["example.com/audit"],
        "their finalizer survives our stale write"
    );
    assert_eq!(
        futures::executor::block_on(w.lifecycle.reconcile(&fresh, &Default::default()))
            .expect("retry"),
        Step::Launched
    );
    let finalizers = w.claim("default-a").unwrap().metadata.finalizers.unwrap();
    assert_eq!(
        finalizers,
        ["example.com/audit", "karpenter.sh/termination"]
    );
}

#[test]
fn a_node_much_smaller_than_its_claim_promised_fails_the_consistency_check() {
    use karpenter_core::nodeclaim::consistency::{CONSISTENCY_SCAN_PERIOD, Consistency};
    let w = world();
    let mut claim = claim("default-a", &["m5.large"], &["on-demand"]);
    claim["spec"]["resources"] = json!({"requests": {"cpu": "1", "memory": "1Gi"}});
    w.kube.apply(&ResourceKind::NODE_CLAIM, claim);
    assert_eq!(w.reconcile()[0].1, Ok(Step::Launched));
    let launched = w.claim("default-a").expect("claim");
    w.register_node(&launched, json!([]));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Registered));
    // The kubelet reports an m5.large's cpus but a quarter of its memory, and its agent is up
    // (no startup taint left).
    let mut node = Value::clone(&w.kube.objects(&ResourceKind::NODE)[0]);
    node["spec"]["taints"] = json!([]);
    node["status"]["capacity"] = json!({"cpu": "2", "memory": "2Gi", "pods": "29"});
    w.kube.apply(&ResourceKind::NODE, node.clone());
    assert_eq!(w.reconcile()[0].1, Ok(Step::Initialized));
    let node = Value::clone(&w.kube.objects(&ResourceKind::NODE)[0]);
    let mut node = node;
    let consistency = Consistency::new(w.ctx.clone());
    let inconsistent = futures::executor::block_on(consistency.reconcile()).expect("pass");
    assert_eq!(inconsistent, vec!["default-a".to_string()]);
    let condition = |w: &World| {
        let claim = w.claim("default-a").expect("claim");
        karpenter_core::api::conditions::get(
            &claim.status.unwrap().conditions,
            "ConsistentStateFound",
        )
        .map(|c| (c.status, c.reason.clone()))
    };
    assert_eq!(
        condition(&w),
        Some((
            karpenter_core::api::ConditionStatus::False,
            "ConsistencyCheckFailed".to_string()
        ))
    );
    assert!(
        w.kube
            .recorded_events()
            .iter()
            .any(|e| e.reason == "FailedConsistencyCheck" && e.message.contains("resource memory")),
        "{:#?}",
        w.kube.recorded_events()
    );
    // Fixed (the real capacity), checked again only after the scan period: consistent.
    node["status"]["capacity"] = json!({"cpu": "2", "memory": "7910Mi", "pods": "29"});
    w.kube.apply(&ResourceKind::NODE, node);
    assert!(
        futures::executor::block_on(consistency.reconcile())
            .expect("pass")
            .is_empty()
    );
    assert_eq!(
        condition(&w).map(|c| c.0),
        Some(karpenter_core::api::ConditionStatus::False),
        "not checked again within ten minutes"
    );
    w.clock.advance(CONSISTENCY_SCAN_PERIOD);
    assert!(
        futures::executor::block_on(consistency.reconcile())
            .expect("pass")
            .is_empty()
    );
    assert_eq!(
        condition(&w).map(|c| c.0),
        Some(karpenter_core::api::ConditionStatus::True)
    );
}

/// The `karpenter_cloudprovider_*` line of `family` whose labels contain every one of `labels`,
/// and its value.
fn cloud_series(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("karpenter_cloudprovider_{family}{{")))
        .find(|l| labels.iter().all(|label| l.contains(label)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Issue 15 (H2): upstream decorates its CloudProvider so every method is timed and its errors
/// counted by calling controller. Here a launch that finds no capacity is a `Create` counted
/// as `InsufficientCapacityError`; a launched claim's termination checks its instance (`Get`)
/// and terminates it (`Delete`); garbage collection lists the cluster's instances (`List`).
#[test]
fn cloud_provider_calls_are_timed_per_method_and_a_failed_launch_counts_its_error() {
    let w = world();
    for zone in ["us-west-2a", "us-west-2b", "us-west-2c"] {
        let pool = Pool::new("m5.large", zone, CapacityType::Spot);
        assert!(w.cloud.set_pool_capacity(&pool, 0));
    }
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        claim("default-b", &["m5.large"], &["spot"]),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::DeletedInsufficientCapacity));
    assert_eq!(w.reconcile()[0].1, Ok(Step::Deleting));
    assert_eq!(w.terminate()[0].1, Ok(Stage::Terminated));
    w.launch_on_demand("default-c");
    futures::executor::block_on(w.kube.delete(
        &ResourceKind::NODE_CLAIM,
        &ObjectKey::cluster("default-c"),
        &DeleteOptions::default(),
    ))
    .expect("delete");
    assert_eq!(w.reconcile()[0].1, Ok(Step::Deleting));
    assert_eq!(w.terminate()[0].1, Ok(Stage::InstanceTerminating));
    futures::executor::block_on(w.garbage_collector.collect()).expect("gc");
    let text = w.ctx.metrics.encode();
    let create = [
        "controller=\"nodeclaim.lifecycle\"",
        "method=\"Create\"",
        "provider=\"aws\"",
    ];
    let mut ice = create.to_vec();
    ice.push("error=\"InsufficientCapacityError\"");
    assert_eq!(
        cloud_series(&text, "errors_total", &ice),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("karpenter_cloudprovider_errors_total{"))
            .count(),
        1,
        "the successful calls count no error: {text}"
    );
    assert_eq!(
        cloud_series(&text, "duration_seconds_count", &create),
        Some(2.0),
        "both launch attempts are timed"
    );
    for (controller, method) in [
        ("node.termination", "Get"),
        ("node.termination", "Delete"),
        ("nodeclaim.garbagecollection", "List"),
    ] {
        let labels = [
            &*format!("controller=\"{controller}\""),
            &*format!("method=\"{method}\""),
        ];
        assert_eq!(
            cloud_series(&text, "duration_seconds_count", &labels),
            Some(1.0),
            "{controller} {method}: {text}"
        );
    }
}

/// A launch takes its image from the class's `status.amis`, as upstream does: a GPU type gets
/// the entry of the NVIDIA variant (it meets both that one's and the standard image's
/// requirements, and the variant's are the more specific), and an image the status still lists
/// is launched even after SSM's `recommended` parameter has moved on, so drift, which compares
/// with the status, never sees a fresh node as drifted.
#[test]
fn a_launch_takes_the_image_the_class_status_lists_for_the_type_the_gpu_variant_for_a_gpu_type() {
    let w = world();
    let parameter = |variant: &str| {
        w.cloud
            .parameters()
            .get(&format!(
                "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/{variant}/recommended/image_id"
            ))
            .cloned()
            .expect("published")
    };
    let (standard, nvidia) = (parameter("standard"), parameter("nvidia"));
    let mut class = objects::default_node_class();
    class["status"]["amis"] = json!([
        {"id": standard, "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
        {"id": nvidia, "requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Exists"},
        ]},
    ]);
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    for (claim, instance_type) in [("default-gpu", "g4dn.xlarge"), ("default-std", "m5.large")] {
        w.kube.apply(
            &ResourceKind::NODE_CLAIM,
            objects::nodeclaim(claim)
                .of_types(&[instance_type])
                .capacity_types(&["on-demand"])
                .json(),
        );
    }
    for (_, step) in w.reconcile() {
        assert_eq!(step, Ok(Step::Launched));
    }
    let image_of = |instance_type: &str| {
        w.cloud
            .instances()
            .into_iter()
            .find(|i| i.instance_type == instance_type)
            .map(|i| i.image_id)
            .expect("launched")
    };
    assert_eq!(image_of("g4dn.xlarge"), nvidia);
    assert_eq!(image_of("m5.large"), standard);
    // SSM moves on (a release); the status has not been refreshed yet: launches stay on it.
    let released = w
        .cloud
        .publish_ami(fakecloud::AmiFamily::Al2023, "v20991231");
    assert_ne!(parameter("standard"), standard, "SSM moved: {released:?}");
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        objects::nodeclaim("default-later")
            .of_types(&["m5.xlarge"])
            .capacity_types(&["on-demand"])
            .json(),
    );
    w.reconcile();
    assert_eq!(image_of("m5.xlarge"), standard);
}

/// Windows nodes: a claim of a Windows Server 2022 class launches the EKS-optimized Windows
/// image with user data its bootstrap accepts, and is labelled and sized as the class launches
/// the type (upstream's `instanceToNodeClaim`): os `windows`, build `10.0.20348`, the kubelet's
/// 110 pods and m5.large's 9 `vpc.amazonaws.com/PrivateIPv4Address`. The kubelet of the
/// instance registers the same os and build.
#[test]
fn a_claim_of_a_windows_class_launches_a_windows_image_and_carries_its_os_build_and_addresses() {
    let w = world();
    let mut class = objects::default_node_class();
    class["spec"]["amiSelectorTerms"] = json!([{"alias": "windows2022@latest"}]);
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        objects::nodeclaim("default-a")
            .of_types(&["m5.large"])
            .capacity_types(&["on-demand"])
            .requirement("kubernetes.io/os", &["windows"])
            .json(),
    );
    assert_eq!(w.reconcile()[0].1, Ok(Step::Launched));
    let claim = w.claim("default-a").expect("claim");
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["kubernetes.io/os"], "windows");
    assert_eq!(labels["node.kubernetes.io/windows-build"], "10.0.20348");
    let status = claim.status.expect("status");
    let capacity: std::collections::BTreeMap<String, String> = status
        .capacity
        .iter()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    assert_eq!(capacity["pods"], "110");
    assert_eq!(capacity["vpc.amazonaws.com/PrivateIPv4Address"], "9");
    let instance = &w.cloud.instances()[0];
    let image = w
        .cloud
        .parameters()
        .get("/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id")
        .cloned()
        .expect("published");
    assert_eq!(instance.image_id, image);
    assert_eq!(w.cloud.join_error(&instance.instance_id), None);
    let boot = w.cloud.boot(&instance.instance_id).expect("boot");
    assert_eq!(boot.labels["kubernetes.io/os"], "windows");
    assert_eq!(
        boot.labels["node.kubernetes.io/windows-build"],
        "10.0.20348"
    );
}
