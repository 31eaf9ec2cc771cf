//! Termination against fakecloud and the fake API server: taint, tiered drain, PDB backoff,
//! do-not-disrupt, terminationGracePeriod, volume detachment, instance termination, finalizers,
//! and how each wait is reported.

use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Fake, FakeCloud};
use karpenter_core::api::conditions;
use karpenter_core::api::{ConditionStatus, NodeClaim};
use karpenter_core::context::Context;
use karpenter_core::metrics::Metrics;
use karpenter_core::nodeclaim::{Lifecycle, Step};
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, ManualClock};
use karpenter_core::termination::{Stage, Termination};
use serde_json::{Value, json};

use fakekube::{ApiOperation, ApiServer};

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects};

pub use super::support::objects::running_pod as pod;

pub struct World {
    pub kube: Arc<ApiServer>,
    pub cloud: Arc<FakeCloud>,
    pub clock: Arc<ManualClock>,
    pub metrics: Arc<Metrics>,
    /// What the controllers share (a handler under test is built over it too).
    pub ctx: Arc<Context>,
    lifecycle: Lifecycle,
    termination: Termination,
    /// Pods the termination deleted (not evicted), with the grace period it gave them.
    pod_deletes: Vec<(String, Option<i64>)>,
}

pub fn world() -> World {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    let ctx = Arc::new(support::context(&kube, &cloud, &clock));
    World {
        kube,
        cloud,
        clock,
        metrics: ctx.metrics.clone(),
        lifecycle: Lifecycle::new(ctx.clone()),
        termination: Termination::new(ctx.clone()),
        ctx,
        pod_deletes: Vec::new(),
    }
}

fn daemonset_owned(pod: &mut Value) {
    pod["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds"}]);
}

fn critical(pod: &mut Value) {
    pod["spec"]["priorityClassName"] = json!("system-cluster-critical");
}

fn do_not_disrupt(pod: &mut Value) {
    pod["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
}

impl World {
    /// A launched, registered and initialized NodeClaim with its Node (`node-<claim>`); returns
    /// the node's name.
    pub fn node(&self, claim: &str, termination_grace_period: Option<&str>) -> String {
        let mut nodeclaim = objects::nodeclaim(claim)
            .of_types(&["m5.large"])
            .capacity_types(&["on-demand"]);
        if let Some(period) = termination_grace_period {
            nodeclaim = nodeclaim.termination_grace_period(period);
        }
        self.kube.apply(&ResourceKind::NODE_CLAIM, nodeclaim.json());
        self.reconcile_lifecycle(claim, Step::Launched);
        let provider_id = self
            .claim(claim)
            .and_then(|c| c.status.and_then(|s| s.provider_id))
            .expect("launched");
        let node = format!("node-{claim}");
        let mut ready = objects::ready_node(&node, &provider_id);
        ready["metadata"]["labels"] = json!({"karpenter.sh/nodepool": "default"});
        self.kube.apply(&ResourceKind::NODE, ready);
        self.reconcile_lifecycle(claim, Step::Registered);
        self.reconcile_lifecycle(claim, Step::Initialized);
        // Past EC2's consistency window for the launch.
        self.clock.advance(Duration::from_secs(5));
        node
    }

    fn reconcile_lifecycle(&self, claim: &str, expected: Step) {
        let steps = futures::executor::block_on(self.lifecycle.reconcile_all()).expect("lifecycle");
        let step = steps
            .into_iter()
            .find(|(name, _)| name == claim)
            .map(|(_, step)| step);
        assert_eq!(step, Some(Ok(expected)), "lifecycle of {claim}");
    }

    pub fn claim(&self, name: &str) -> Option<NodeClaim> {
        self.kube
            .object_named(&ResourceKind::NODE_CLAIM, name)
            .map(|c| serde_json::from_value(c).expect("decodes"))
    }

    pub fn delete(&self, kind: &ResourceKind, name: &str) {
        futures::executor::block_on(self.kube.delete(
            kind,
            &ObjectKey::cluster(name),
            &DeleteOptions::default(),
        ))
        .expect("delete");
    }

    /// One termination pass; the stage of `claim`. Pods it evicted or deleted then go at once, as
    /// if their kubelet stopped them (no kubelet runs here).
    pub fn terminate(&mut self, claim: &str) -> Stage {
        let out =
            futures::executor::block_on(self.termination.reconcile_all()).expect("termination");
        let deletes = self.kube.calls_on(ApiOperation::Delete, "pods");
        for call in deletes.iter().skip(self.pod_deletes.len()) {
            let pod = self.kube.object_named(&ResourceKind::POD, &call.target);
            let grace = pod.and_then(|p| p["metadata"]["deletionGracePeriodSeconds"].as_i64());
            self.pod_deletes.push((call.target.clone(), grace));
        }
        self.kube.complete_pod_deletions();
        out.into_iter()
            .find(|(name, _)| name == claim)
            .map(|(_, stage)| stage.expect("no error"))
            .unwrap_or_else(|| panic!("{claim} was not reconciled"))
    }

    /// Termination passes over an empty node until its minimum drain time (5 s) has passed; the
    /// next pass goes on past the drain.
    pub fn through_min_drain_time(&mut self, claim: &str) {
        assert_eq!(self.terminate(claim), Stage::Draining { waiting: 0 });
        self.clock.advance(Duration::from_secs(5));
    }

    /// Pods evicted so far (successfully), in order.
    pub fn evicted(&self) -> Vec<String> {
        self.kube
            .calls_on(ApiOperation::Evict, "pods")
            .into_iter()
            .filter(|c| c.is_ok())
            .map(|c| c.target)
            .collect()
    }

    /// Eviction attempts of one pod, successful or not.
    fn eviction_attempts(&self, pod: &str) -> usize {
        self.kube
            .calls_on(ApiOperation::Evict, "pods")
            .iter()
            .filter(|c| c.target == pod)
            .count()
    }

    /// Direct pod deletes so far: (pod, grace period).
    pub fn pod_deletes(&self) -> Vec<(String, Option<i64>)> {
        self.pod_deletes.clone()
    }

    pub fn condition(&self, claim: &str, type_: &str) -> Option<(ConditionStatus, String)> {
        let claim = self.claim(claim)?;
        let status = claim.status?;
        conditions::get(&status.conditions, type_).map(|c| (c.status, c.reason.clone()))
    }

    fn instance_state(&self, claim: &str) -> Option<InstanceState> {
        let provider_id = self.claim(claim)?.status?.provider_id?;
        let id = provider_id.rsplit('/').next()?.to_string();
        self.cloud.instance(&id).map(|i| i.state)
    }

    pub fn event_reasons(&self) -> Vec<String> {
        self.kube
            .recorded_events()
            .into_iter()
            .map(|e| e.reason)
            .collect()
    }
}

#[test]
fn deleting_a_nodeclaim_taints_its_node_disrupted_noschedule_and_deletes_the_node() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube
        .apply(&ResourceKind::POD, pod("web", &node, do_not_disrupt));
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    w.terminate("default-a");
    let node = w
        .kube
        .object_named(&ResourceKind::NODE, &node)
        .expect("node");
    let taints = node["spec"]["taints"].as_array().expect("taints");
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == "karpenter.sh/disrupted" && t["effect"] == "NoSchedule"),
        "{taints:?}"
    );
    assert_eq!(
        node["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"],
        "karpenter"
    );
    assert!(
        node["metadata"]["deletionTimestamp"].is_string(),
        "the node is deleted with its claim"
    );
}

#[test]
fn a_daemonset_pod_is_not_evicted_while_a_non_critical_pod_remains() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(&ResourceKind::POD, pod("web", &node, |_| {}));
    w.kube
        .apply(&ResourceKind::POD, pod("logs", &node, daemonset_owned));
    w.kube.refuse_eviction("default/web");
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    for _ in 0..5 {
        w.terminate("default-a");
        w.clock.advance(Duration::from_secs(1));
    }
    assert!(w.eviction_attempts("default/web") >= 2, "web is retried");
    assert_eq!(
        w.eviction_attempts("default/logs"),
        0,
        "the DaemonSet pod waits for the non-DaemonSet tier"
    );
    w.kube.allow_eviction("default/web");
    w.clock.advance(Duration::from_secs(10));
    w.terminate("default-a");
    assert_eq!(w.evicted(), ["default/web"]);
    w.terminate("default-a");
    assert_eq!(w.evicted(), ["default/web", "default/logs"]);
}

#[test]
fn critical_pods_are_evicted_only_after_every_non_critical_pod_is_gone() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(
        &ResourceKind::POD,
        pod("dns", &node, |p| {
            critical(p);
        }),
    );
    w.kube.apply(
        &ResourceKind::POD,
        pod("cni", &node, |p| {
            critical(p);
            daemonset_owned(p);
        }),
    );
    w.kube
        .apply(&ResourceKind::POD, pod("logs", &node, daemonset_owned));
    w.kube.apply(&ResourceKind::POD, pod("web", &node, |_| {}));
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    let mut order = Vec::new();
    for _ in 0..4 {
        w.terminate("default-a");
        order.push(w.evicted().len());
    }
    assert_eq!(
        w.evicted(),
        ["default/web", "default/logs", "default/dns", "default/cni"],
        "non-critical, non-critical DaemonSet, critical, critical DaemonSet"
    );
    assert_eq!(order, [1, 2, 3, 4], "one tier per step");
}

#[test]
fn a_pdb_refusal_is_retried_with_growing_backoff_and_the_pod_goes_once_the_budget_allows() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(&ResourceKind::POD, pod("web", &node, |_| {}));
    w.kube.refuse_eviction("default/web");
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    w.terminate("default-a");
    assert_eq!(w.eviction_attempts("default/web"), 1);
    w.terminate("default-a");
    assert_eq!(
        w.eviction_attempts("default/web"),
        1,
        "not retried inside the 100 ms backoff"
    );
    w.clock.advance(Duration::from_millis(100));
    w.terminate("default-a");
    assert_eq!(
        w.eviction_attempts("default/web"),
        2,
        "retried after 100 ms"
    );
    w.clock.advance(Duration::from_millis(150));
    w.terminate("default-a");
    assert_eq!(
        w.eviction_attempts("default/web"),
        2,
        "the second backoff is 200 ms"
    );
    w.clock.advance(Duration::from_millis(50));
    w.terminate("default-a");
    assert_eq!(w.eviction_attempts("default/web"), 3);
    // The delay stops growing at 10 s.
    for _ in 0..10 {
        w.clock.advance(Duration::from_secs(10));
        w.terminate("default-a");
    }
    assert_eq!(w.eviction_attempts("default/web"), 13);
    w.kube.allow_eviction("default/web");
    w.clock.advance(Duration::from_secs(10));
    w.terminate("default-a");
    assert_eq!(w.evicted(), ["default/web"]);
    let code = |c: &str| {
        w.metrics
            .eviction_requests
            .get_or_create(&karpenter_core::metrics::CodeLabels { code: c.into() })
            .get()
    };
    assert_eq!((code("429"), code("200")), (13, 1));
    assert!(
        w.event_reasons()
            .iter()
            .filter(|r| *r == "FailedDraining")
            .count()
            >= 1,
        "the refusal is an event"
    );
}

#[test]
fn a_do_not_disrupt_pod_is_never_evicted_and_without_a_grace_period_blocks_visibly() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube
        .apply(&ResourceKind::POD, pod("batch", &node, do_not_disrupt));
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    for _ in 0..6 {
        assert_eq!(w.terminate("default-a"), Stage::DrainBlocked { waiting: 1 });
        w.clock.advance(Duration::from_secs(600));
    }
    assert_eq!(w.eviction_attempts("default/batch"), 0);
    assert!(w.pod_deletes().is_empty());
    assert_eq!(
        w.condition("default-a", "Drained"),
        Some((ConditionStatus::Unknown, "DisruptionBlocked".into()))
    );
    assert_eq!(
        w.kube
            .recorded_events()
            .iter()
            .filter(|e| e.reason == "DisruptionBlocked")
            .count(),
        1,
        "one event for the wait, not one per step"
    );
    assert_eq!(
        w.metrics
            .pods_termination_blocked
            .get_or_create(&Metrics::reason("do_not_disrupt"))
            .get(),
        1
    );
    assert_eq!(w.instance_state("default-a"), Some(InstanceState::Running));
}

/// Review F1: `karpenter.sh/do-not-disrupt: "30m"` protects the pod until it is 30 minutes old;
/// `"true"` was the only value the drain honoured.
#[test]
fn a_do_not_disrupt_duration_holds_the_drain_until_the_pod_is_that_old() {
    let mut w = world();
    let node = w.node("default-a", None);
    let created = w.clock.now().to_string();
    w.kube.apply(
        &ResourceKind::POD,
        pod("batch", &node, |p| {
            p["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "30m"});
            p["metadata"]["creationTimestamp"] = json!(created);
        }),
    );
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    assert_eq!(w.terminate("default-a"), Stage::DrainBlocked { waiting: 1 });
    w.clock.advance(Duration::from_secs(20 * 60));
    assert_eq!(w.terminate("default-a"), Stage::DrainBlocked { waiting: 1 });
    assert_eq!(
        w.eviction_attempts("default/batch"),
        0,
        "protected for 30 minutes"
    );
    w.clock.advance(Duration::from_secs(11 * 60));
    w.terminate("default-a");
    assert_eq!(
        w.eviction_attempts("default/batch"),
        1,
        "evicted once 30 minutes old"
    );
}

#[test]
fn the_termination_grace_period_deletes_blocked_pods_at_the_deadline_minus_their_own_grace() {
    let mut w = world();
    let node = w.node("default-a", Some("10m"));
    w.kube.apply(
        &ResourceKind::POD,
        pod("batch", &node, |p| {
            do_not_disrupt(p);
            p["spec"]["terminationGracePeriodSeconds"] = json!(60);
        }),
    );
    w.kube.apply(
        &ResourceKind::POD,
        pod("db", &node, |p| {
            p["spec"]["terminationGracePeriodSeconds"] = json!(120);
        }),
    );
    w.kube.refuse_eviction("default/db");
    let deleted_at = w.clock.now();
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    w.terminate("default-a");
    let deadline = deleted_at + Duration::from_secs(600);
    let annotation = w
        .claim("default-a")
        .expect("claim")
        .metadata
        .annotations
        .unwrap()["karpenter.sh/nodeclaim-termination-timestamp"]
        .clone();
    assert_eq!(annotation, deadline.to_string());
    assert!(
        w.event_reasons()
            .contains(&"TerminationGracePeriodExpiring".to_string())
    );

    // Just before deadline − 120 s nothing is deleted; at it, the PDB-blocked pod is.
    w.clock.set(deadline - Duration::from_secs(121));
    w.terminate("default-a");
    assert!(w.pod_deletes().is_empty());
    w.clock.set(deadline - Duration::from_secs(120));
    w.terminate("default-a");
    assert_eq!(w.pod_deletes(), [("default/db".to_string(), Some(120))]);
    // The do-not-disrupt pod goes at deadline − 60 s, with its 60 s.
    w.clock.set(deadline - Duration::from_secs(61));
    w.terminate("default-a");
    assert_eq!(w.pod_deletes().len(), 1);
    w.clock.set(deadline - Duration::from_secs(60));
    w.terminate("default-a");
    assert_eq!(
        w.pod_deletes(),
        [
            ("default/db".to_string(), Some(120)),
            ("default/batch".to_string(), Some(60))
        ]
    );
    assert_eq!(w.eviction_attempts("default/batch"), 0);
    assert!(w.event_reasons().contains(&"Disrupted".to_string()));
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
    assert_eq!(
        w.condition("default-a", "Drained"),
        Some((ConditionStatus::True, "Drained".into()))
    );
}

#[test]
fn at_the_termination_grace_period_deadline_the_drain_stops_waiting() {
    let mut w = world();
    let node = w.node("default-a", Some("5m"));
    // A pod stuck terminating whose kubelet does not finish it: deleted, but still there.
    w.kube.apply(
        &ResourceKind::POD,
        pod("stuck", &node, |p| {
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:05:30Z");
            p["metadata"]["finalizers"] = json!(["example.com/hold"]);
        }),
    );
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    assert_eq!(
        w.terminate("default-a"),
        Stage::Draining { waiting: 1 },
        "a terminating pod is waited for"
    );
    w.clock.advance(Duration::from_secs(300));
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
    assert_eq!(
        w.condition("default-a", "Drained"),
        Some((
            ConditionStatus::False,
            "TerminationGracePeriodElapsed".into()
        ))
    );
}

#[test]
fn pods_that_tolerate_the_disrupted_taint_mirror_pods_and_finished_pods_are_not_drained() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(
        &ResourceKind::POD,
        pod("tolerant", &node, |p| {
            p["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        }),
    );
    w.kube.apply(
        &ResourceKind::POD,
        pod("static", &node, |p| {
            p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "abc"});
        }),
    );
    w.kube.apply(
        &ResourceKind::POD,
        pod("done", &node, |p| {
            p["status"]["phase"] = json!("Succeeded");
        }),
    );
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    w.through_min_drain_time("default-a");
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
    assert!(w.evicted().is_empty());
    assert_eq!(
        w.condition("default-a", "Drained"),
        Some((ConditionStatus::True, "Drained".into()))
    );
    assert_eq!(
        w.metrics
            .nodes_drained
            .get_or_create(&Metrics::nodepool("default"))
            .get(),
        1
    );
}

#[test]
fn volume_attachments_of_drained_pods_are_waited_for_before_the_instance_is_terminated() {
    let mut w = world();
    let node = w.node("default-a", None);
    let attachment = |name: &str, pv: &str| {
        json!({
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node,
                     "source": {"persistentVolumeName": pv}}
        })
    };
    w.kube.apply(
        &ResourceKind::VOLUME_ATTACHMENT,
        attachment("va-data", "pv-data"),
    );
    // The volume of a pod that stays (it tolerates the taint) does not block.
    w.kube.apply(
        &ResourceKind::VOLUME_ATTACHMENT,
        attachment("va-agent", "pv-agent"),
    );
    w.kube.apply(
        &ResourceKind::PERSISTENT_VOLUME_CLAIM,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "agent", "namespace": "default"},
               "spec": {"volumeName": "pv-agent"}}),
    );
    w.kube.apply(
        &ResourceKind::POD,
        pod("agent", &node, |p| {
            p["spec"]["tolerations"] =
                json!([{"key": "karpenter.sh/disrupted", "operator": "Exists"}]);
            p["spec"]["volumes"] =
                json!([{"name": "data", "persistentVolumeClaim": {"claimName": "agent"}}]);
        }),
    );
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    w.through_min_drain_time("default-a");
    assert_eq!(
        w.terminate("default-a"),
        Stage::AwaitingVolumeDetachment { attachments: 1 }
    );
    assert_eq!(
        w.condition("default-a", "VolumesDetached"),
        Some((ConditionStatus::Unknown, "AwaitingVolumeDetachment".into()))
    );
    assert!(
        w.event_reasons()
            .contains(&"AwaitingVolumeDetachment".to_string())
    );
    assert!(
        matches!(
            w.instance_state("default-a"),
            Some(InstanceState::Pending | InstanceState::Running)
        ),
        "the instance is not terminated while volumes are attached"
    );
    w.clock.advance(Duration::from_secs(3600));
    assert_eq!(
        w.terminate("default-a"),
        Stage::AwaitingVolumeDetachment { attachments: 1 },
        "without a terminationGracePeriod the wait has no deadline"
    );
    w.delete(&ResourceKind::VOLUME_ATTACHMENT, "va-data");
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
    assert_eq!(
        w.condition("default-a", "VolumesDetached"),
        Some((ConditionStatus::True, "VolumesDetached".into()))
    );
}

#[test]
fn the_instance_is_terminated_and_finalizers_removed_only_after_ec2_reports_it_terminated() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    w.through_min_drain_time("default-a");
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
    assert_eq!(
        w.instance_state("default-a"),
        Some(InstanceState::ShuttingDown)
    );
    assert_eq!(
        w.condition("default-a", "InstanceTerminating"),
        Some((ConditionStatus::True, "InstanceTerminating".into()))
    );
    assert!(
        w.event_reasons()
            .contains(&"InstanceTerminating".to_string())
    );
    for _ in 0..2 {
        w.clock.advance(Duration::from_secs(10));
        assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
        assert!(w.kube.object_named(&ResourceKind::NODE, &node).is_some());
        assert!(w.claim("default-a").is_some());
    }
    w.clock.advance(Duration::from_secs(10));
    assert_eq!(w.terminate("default-a"), Stage::Terminated);
    assert!(
        w.kube.object_named(&ResourceKind::NODE, &node).is_none(),
        "node finalizer removed"
    );
    assert!(w.claim("default-a").is_none(), "claim finalizer removed");
    let pool = Metrics::nodepool("default");
    assert_eq!(w.metrics.nodes_terminated.get_or_create(&pool).get(), 1);
    let on_demand = karpenter_core::metrics::NodePoolCapacityLabels {
        nodepool: "default".into(),
        capacity_type: "on-demand".into(),
    };
    assert_eq!(
        w.metrics
            .nodeclaims_terminated
            .get_or_create(&on_demand)
            .get(),
        1
    );
}

#[test]
fn deleting_the_node_deletes_its_nodeclaim() {
    let w = world();
    let node = w.node("default-a", None);
    w.delete(&ResourceKind::NODE, &node);
    assert!(
        w.claim("default-a")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    let out = futures::executor::block_on(w.termination.reconcile_all()).expect("termination");
    assert_eq!(
        out[0],
        ("default-a".to_string(), Ok(Stage::DeletedNodeClaim))
    );
    assert!(
        w.claim("default-a")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "kubectl delete node deletes the NodeClaim"
    );
    assert_eq!(
        out[1],
        ("default-a".to_string(), Ok(Stage::Draining { waiting: 0 })),
        "and its termination starts in the same pass"
    );
}

#[test]
fn a_nodeclaim_that_never_launched_is_finalized_without_ec2_calls() {
    let mut w = world();
    w.kube.apply(
        &ResourceKind::NODE_CLAIM,
        objects::nodeclaim("default-b").finalized().json(),
    );
    w.delete(&ResourceKind::NODE_CLAIM, "default-b");
    w.cloud.clear_calls();
    assert_eq!(w.terminate("default-b"), Stage::Terminated);
    assert!(w.claim("default-b").is_none());
    assert!(w.cloud.calls().is_empty(), "{}", w.cloud.render_calls());
}

#[test]
fn a_draining_node_reports_its_wait_as_a_condition_an_event_and_a_metric() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(
        &ResourceKind::POD,
        pod("web", &node, |p| {
            // Terminating already (evicted earlier): the drain waits for it.
            p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
        }),
    );
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    assert_eq!(w.terminate("default-a"), Stage::Draining { waiting: 1 });
    assert_eq!(
        w.condition("default-a", "Drained"),
        Some((ConditionStatus::Unknown, "Draining".into()))
    );
    let failed: Vec<_> = w
        .kube
        .recorded_events()
        .into_iter()
        .filter(|e| e.reason == "FailedDraining")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].key.name, node);
    assert_eq!(
        w.metrics
            .termination_waiting
            .get_or_create(&karpenter_core::metrics::StageLabels {
                stage: "draining".into()
            })
            .get(),
        1
    );
    let text = w.metrics.encode();
    assert!(
        text.contains("karpenter_nodeclaims_termination_waiting{stage=\"draining\"} 1"),
        "{text}"
    );
}

#[test]
fn metrics_are_encoded_under_upstream_names() {
    let metrics = Metrics::new();
    let pool = Metrics::nodepool("default");
    metrics.nodes_terminated.get_or_create(&pool).inc();
    metrics
        .nodeclaims_terminated
        .get_or_create(&karpenter_core::metrics::NodePoolCapacityLabels {
            nodepool: "default".into(),
            capacity_type: "spot".into(),
        })
        .inc();
    metrics.nodes_drained.get_or_create(&pool).inc();
    metrics
        .pods_drained
        .get_or_create(&Metrics::reason("Forceful Termination"))
        .inc();
    metrics.interruption_deleted.inc();
    metrics.interruption_queue_duration.observe(3.0);
    let text = metrics.encode();
    for line in [
        "karpenter_nodes_terminated_total{nodepool=\"default\"} 1",
        "karpenter_nodeclaims_terminated_total{nodepool=\"default\",capacity_type=\"spot\"} 1",
        "karpenter_nodes_drained_total{nodepool=\"default\"} 1",
        "karpenter_pods_drained_total{reason=\"Forceful Termination\"} 1",
        "karpenter_interruption_deleted_messages_total 1",
        "karpenter_interruption_message_queue_duration_seconds_count 1",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

#[test]
fn a_notready_node_whose_instance_is_gone_is_not_drained() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(&ResourceKind::POD, pod("web", &node, |_| {}));
    // The instance went away under the node; the kubelet stopped reporting.
    let id = w
        .claim("default-a")
        .and_then(|c| c.status.and_then(|s| s.provider_id))
        .and_then(|p| p.rsplit('/').next().map(str::to_string))
        .expect("instance");
    futures::executor::block_on(karpenter_core::seams::Ec2::terminate_instances(
        w.cloud.as_ref(),
        std::slice::from_ref(&id),
    ))
    .expect("terminate");
    let mut not_ready = w
        .kube
        .object_named(&ResourceKind::NODE, &node)
        .expect("node");
    not_ready["status"]["conditions"] = json!([{"type": "Ready", "status": "False"}]);
    w.kube.apply(&ResourceKind::NODE, not_ready);
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
    assert!(w.evicted().is_empty(), "nothing to drain on a dead node");
    w.clock.advance(Duration::from_secs(31));
    assert_eq!(w.terminate("default-a"), Stage::Terminated);
}

#[test]
fn an_empty_node_stays_draining_for_five_seconds_so_a_pod_bound_before_the_taint_was_seen_is_evicted()
 {
    let mut w = world();
    let node = w.node("default-a", None);
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    assert_eq!(w.terminate("default-a"), Stage::Draining { waiting: 0 });
    assert_eq!(
        w.condition("default-a", "Drained"),
        Some((ConditionStatus::Unknown, "Draining".into()))
    );
    // The scheduler had not seen the taint yet and bound a pod to the node.
    w.clock.advance(Duration::from_secs(2));
    w.kube.apply(&ResourceKind::POD, pod("late", &node, |_| {}));
    assert_eq!(w.terminate("default-a"), Stage::Draining { waiting: 1 });
    assert_eq!(w.evicted(), ["default/late"]);
    w.clock.advance(Duration::from_secs(1));
    assert_eq!(
        w.terminate("default-a"),
        Stage::Draining { waiting: 0 },
        "still inside the minimum drain time"
    );
    assert!(
        !matches!(
            w.instance_state("default-a"),
            Some(InstanceState::ShuttingDown | InstanceState::Terminated)
        ),
        "the instance is not terminated yet"
    );
    w.clock.advance(Duration::from_secs(2));
    assert_eq!(w.terminate("default-a"), Stage::InstanceTerminating);
}

#[test]
fn a_pod_under_two_budgets_is_refused_with_a_500_and_reported_as_blocked_by_a_pdb() {
    let mut w = world();
    let node = w.node("default-a", None);
    w.kube.apply(
        &ResourceKind::POD,
        pod("web", &node, |p| {
            p["metadata"]["labels"] = json!({"app": "web"});
        }),
    );
    for name in ["web-a", "web-b"] {
        w.kube.apply(
            &ResourceKind::POD_DISRUPTION_BUDGET,
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": name, "namespace": "default"},
                   "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
        );
    }
    w.delete(&ResourceKind::NODE_CLAIM, "default-a");
    assert_eq!(w.terminate("default-a"), Stage::DrainBlocked { waiting: 1 });
    assert!(w.evicted().is_empty());
    assert!(
        w.event_reasons().contains(&"FailedDraining".to_string()),
        "{:?}",
        w.event_reasons()
    );
    let code = |code: &str| {
        w.metrics
            .eviction_requests
            .get_or_create(&karpenter_core::metrics::CodeLabels { code: code.into() })
            .get()
    };
    assert_eq!(code("500"), 1);
}
