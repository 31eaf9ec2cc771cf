//! Capacity reservations end to end over fakecloud (issue 15, review G): an EC2NodeClass's
//! selector terms resolve into its status; a reserved NodeClaim launches into its reservation
//! with upstream's labels; spot and on-demand launches stay out of open reservations; a full
//! reservation is marked unavailable; interruption warnings, ended ODCRs and expiring capacity
//! blocks are handled as upstream handles them.

use std::sync::Arc;
use std::time::Duration;

use fakecloud::{FakeCloud, ReservationSpec};
use karpenter_core::api::NodeClaim;
use karpenter_core::api::conditions::ec2nodeclass as cond;
use karpenter_core::capacityreservation::CapacityReservations;
use karpenter_core::context::Context;
use karpenter_core::interruption::InterruptionHandler;
use karpenter_core::interruption::messages::{
    DETAIL_TYPE_CAPACITY_RESERVATION_INTERRUPTION, Event, Metadata, SOURCE_EC2,
    SpotInterruptionDetail,
};
use karpenter_core::nodeclaim::Step;
use karpenter_core::nodeclass::NodeClassStatus;
use karpenter_core::seams::kube::ResourceKind;
use karpenter_core::seams::{Clock, ManualClock};
use serde_json::{Value, json};

use fakekube::ApiServer;

use super::api_server::{Fixtures, api_server};
use super::support::{self, objects};

const QUEUE: &str = "https://sqs.us-west-2.amazonaws.com/123456789012/sim";
const ID_LABEL: &str = "karpenter.k8s.aws/capacity-reservation-id";

struct World {
    kube: Arc<ApiServer>,
    cloud: Arc<FakeCloud>,
    clock: Arc<ManualClock>,
    ctx: Arc<Context>,
}

/// The default class selecting reservations tagged `team: ml`.
fn world() -> World {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let kube = api_server(clock.clone());
    let mut class = objects::default_node_class();
    class["spec"]["capacityReservationSelectorTerms"] = json!([{"tags": {"team": "ml"}}]);
    kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    let ctx = Arc::new(
        support::context(&kube, &cloud, &clock)
            .with_interruption_queue(cloud.clone(), QUEUE.into()),
    );
    World {
        kube,
        cloud,
        clock,
        ctx,
    }
}

fn ml(spec: ReservationSpec) -> ReservationSpec {
    spec.tag("team", "ml")
}

impl World {
    fn resolve(&self) {
        futures::executor::block_on(NodeClassStatus::new(self.ctx.clone()).reconcile_all())
            .expect("status pass");
    }

    fn class(&self) -> Value {
        self.kube
            .object_named(&ResourceKind::EC2_NODE_CLASS, "default")
            .expect("class")
    }

    fn launch(&self, claim: Value) -> Step {
        let name = claim["metadata"]["name"].as_str().unwrap().to_string();
        self.kube.apply(&ResourceKind::NODE_CLAIM, claim);
        support::lifecycle_step(&self.ctx, &name)
    }

    /// A reservation tagged `team: ml` (so the class selects it), resolved into the class.
    fn reserve(&self, spec: ReservationSpec) -> String {
        let id = self.cloud.create_capacity_reservation(ml(spec));
        self.resolve();
        id
    }

    /// Launches `name`, pinned to reserved capacity in reservation `id` (with the termination
    /// finalizer, so a deletion leaves it visible).
    fn launch_reserved(&self, name: &str, id: &str) -> Step {
        let mut reserved = claim(name, &["reserved"])
            .requirement(ID_LABEL, &[id])
            .json();
        reserved["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
        self.launch(reserved)
    }

    fn claim(&self, name: &str) -> Option<NodeClaim> {
        self.kube
            .object_named(&ResourceKind::NODE_CLAIM, name)
            .map(|c| serde_json::from_value(c).expect("decodes"))
    }

    fn labels(&self, name: &str) -> std::collections::BTreeMap<String, String> {
        self.claim(name)
            .and_then(|c| c.metadata.labels)
            .unwrap_or_default()
    }

    fn instance_of(&self, name: &str) -> String {
        let provider = self
            .claim(name)
            .and_then(|c| c.status)
            .and_then(|s| s.provider_id)
            .expect("launched");
        provider.rsplit('/').next().unwrap().to_string()
    }
}

/// A claim for m5.large in us-west-2a of capacity types `types`.
fn claim(name: &str, types: &[&str]) -> objects::NodeClaimBuilder {
    objects::nodeclaim(name)
        .of_types(&["m5.large"])
        .capacity_types(types)
        .requirement("topology.kubernetes.io/zone", &["us-west-2a"])
}

#[test]
fn a_node_class_s_reservation_terms_resolve_into_its_status_and_sync_the_counts() {
    let w = world();
    let id =
        w.cloud
            .create_capacity_reservation(ml(ReservationSpec::new("m5.large", "us-west-2a", 2)));
    w.cloud
        .create_capacity_reservation(ReservationSpec::new("m5.large", "us-west-2a", 5));
    w.resolve();
    let class = w.class();
    let listed = class["status"]["capacityReservations"]
        .as_array()
        .expect("listed");
    assert_eq!(listed.len(), 1, "only the tagged reservation: {listed:#?}");
    assert_eq!(listed[0]["id"], json!(id));
    assert_eq!(listed[0]["instanceType"], "m5.large");
    assert_eq!(listed[0]["reservationType"], "default");
    assert_eq!(listed[0]["state"], "active");
    let ready = class["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == cond::CAPACITY_RESERVATIONS_READY)
        .expect("condition");
    assert_eq!(ready["status"], "True");
    assert_eq!(w.ctx.reservations.available(&id), 2);
}

#[test]
fn a_reserved_claim_launches_into_its_reservation_and_carries_its_labels() {
    let w = world();
    let id = w.reserve(ReservationSpec::new("m5.large", "us-west-2a", 2));
    assert_eq!(w.launch_reserved("default-a", &id), Step::Launched);
    let labels = w.labels("default-a");
    assert_eq!(labels["karpenter.sh/capacity-type"], "reserved");
    assert_eq!(labels[ID_LABEL], id);
    assert_eq!(
        labels["karpenter.k8s.aws/capacity-reservation-type"],
        "default"
    );
    assert_eq!(
        labels["karpenter.k8s.aws/capacity-reservation-interruptible"],
        "false"
    );
    let instance = w
        .cloud
        .instance(&w.instance_of("default-a"))
        .expect("instance");
    assert_eq!(
        instance.capacity_reservation_id.as_deref(),
        Some(id.as_str())
    );
    assert_eq!(
        w.cloud
            .capacity_reservation(&id)
            .unwrap()
            .available_instance_count,
        1
    );
    assert_eq!(w.ctx.reservations.available(&id), 1, "counted at launch");
}

#[test]
fn an_on_demand_launch_stays_out_of_an_open_reservation_that_would_take_it() {
    let w = world();
    let id = w
        .cloud
        .create_capacity_reservation(ReservationSpec::new("m5.large", "us-west-2a", 3).open());
    assert_eq!(
        w.launch(claim("default-a", &["on-demand"]).json()),
        Step::Launched
    );
    let instance = w
        .cloud
        .instance(&w.instance_of("default-a"))
        .expect("instance");
    assert_eq!(instance.capacity_reservation_id, None, "preference none");
    assert_eq!(
        w.labels("default-a")["karpenter.sh/capacity-type"],
        "on-demand"
    );
    assert_eq!(
        w.cloud
            .capacity_reservation(&id)
            .unwrap()
            .available_instance_count,
        3
    );
}

#[test]
fn a_launch_into_a_full_reservation_marks_it_unavailable_and_deletes_the_claim() {
    let w = world();
    let id = w.reserve(ReservationSpec::new("m5.large", "us-west-2a", 1));
    let first = claim("default-a", &["reserved"]).requirement(ID_LABEL, &[&id]);
    assert_eq!(w.launch(first.json()), Step::Launched);
    // A stale count (another controller's launch, say) still says one is left.
    w.ctx.reservations.sync([(id.clone(), 1)], w.clock.now());
    let second = claim("default-b", &["reserved"]).requirement(ID_LABEL, &[&id]);
    assert_eq!(w.launch(second.json()), Step::DeletedInsufficientCapacity);
    assert_eq!(w.ctx.reservations.available(&id), 0, "marked unavailable");
    assert_eq!(w.cloud.instances().len(), 1);
}

#[test]
fn a_reservation_interruption_warning_deletes_the_claim_and_marks_the_reservation_unavailable() {
    let w = world();
    let id = w.reserve(ReservationSpec::new("m5.large", "us-west-2a", 2).interruptible());
    assert_eq!(w.launch_reserved("default-a", &id), Step::Launched);
    assert_eq!(
        w.labels("default-a")["karpenter.k8s.aws/capacity-reservation-interruptible"],
        "true"
    );
    let instance = w.instance_of("default-a");
    let template = w
        .cloud
        .launch_templates()
        .into_iter()
        .find(|t| t.extra.contains_key("instanceMarketOptions"))
        .expect("an interruptible reservation's template names its market type");
    assert!(template.extra["instanceMarketOptions"].contains("interruptible-capacity-reservation"));
    let warned = w.cloud.interrupt_capacity_reservation(&id, 1);
    assert_eq!(warned, vec![instance.clone()]);
    w.clock.advance(Duration::from_secs(5));
    let handler = InterruptionHandler::new(w.ctx.clone()).expect("queue");
    futures::executor::block_on(handler.poll()).expect("poll");
    let claim = w.claim("default-a").expect("held by its finalizer");
    assert!(claim.metadata.deletion_timestamp.is_some(), "deleted");
    assert_eq!(w.ctx.reservations.available(&id), 0);
}

#[test]
fn a_claim_whose_reservation_ended_is_relabelled_on_demand() {
    let w = world();
    let id = w.reserve(ReservationSpec::new("m5.large", "us-west-2a", 1));
    assert_eq!(w.launch_reserved("default-a", &id), Step::Launched);
    // Past EC2's eventual-consistency window, so DescribeInstances sees the instance.
    w.clock.advance(Duration::from_secs(60));
    let controllers = CapacityReservations::new(w.ctx.clone());
    let report = futures::executor::block_on(controllers.reconcile()).expect("pass");
    assert!(report.relabelled.is_empty(), "still in its reservation");
    assert!(w.cloud.cancel_capacity_reservation(&id));
    let report = futures::executor::block_on(controllers.reconcile()).expect("pass");
    assert_eq!(report.relabelled, vec!["default-a".to_string()]);
    let labels = w.labels("default-a");
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert!(!labels.contains_key(ID_LABEL));
    assert!(!labels.contains_key("karpenter.k8s.aws/capacity-reservation-type"));
}

#[test]
fn claims_in_a_capacity_block_are_deleted_forty_minutes_before_it_ends() {
    let w = world();
    let end = w.clock.now() + jiff::SignedDuration::from_hours(2);
    let id = w.reserve(ReservationSpec::new("m5.large", "us-west-2a", 1).capacity_block(end));
    assert_eq!(w.launch_reserved("default-a", &id), Step::Launched);
    assert_eq!(
        w.labels("default-a")["karpenter.k8s.aws/capacity-reservation-type"],
        "capacity-block"
    );
    let controllers = CapacityReservations::new(w.ctx.clone());
    w.clock.advance(Duration::from_secs(79 * 60));
    let report = futures::executor::block_on(controllers.reconcile()).expect("pass");
    assert!(report.expired.is_empty(), "41 minutes before the end");
    w.clock.advance(Duration::from_secs(60));
    let report = futures::executor::block_on(controllers.reconcile()).expect("pass");
    assert_eq!(report.expired, vec!["default-a".to_string()]);
    assert!(
        w.claim("default-a")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    w.resolve();
    assert_eq!(
        w.class()["status"]["capacityReservations"][0]["state"],
        "expiring",
        "no more launches into it"
    );
}

/// The message EC2 sends for an interruptible reservation's instance (used by fakecloud; kept
/// here to pin the shape the handler parses).
#[allow(dead_code)]
fn reservation_warning(instance: &str, time: jiff::Timestamp) -> String {
    Event {
        metadata: Metadata {
            version: "0".into(),
            id: format!("event-{instance}"),
            detail_type: DETAIL_TYPE_CAPACITY_RESERVATION_INTERRUPTION.into(),
            source: SOURCE_EC2.into(),
            account: "123456789012".into(),
            time,
            region: "us-west-2".into(),
            resources: Vec::new(),
        },
        detail: SpotInterruptionDetail {
            instance_id: instance.into(),
            instance_action: "terminate".into(),
        },
    }
    .to_json()
}
