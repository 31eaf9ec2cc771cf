//! The EC2NodeClass finalizer and the deletion of unused launch templates
//! (`nodeclass::termination`, `nodeclass::garbagecollection`), over fakecloud, its IAM and the
//! in-memory API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Fake, FakeCloud, FakeIam};
use karpenter_core::api::labels::AWS_TERMINATION_FINALIZER;
use karpenter_core::context::Context;
use karpenter_core::nodeclaim::Step;
use karpenter_core::nodeclass::NodeClassStatus;
use karpenter_core::nodeclass::garbagecollection::{
    LAUNCH_TEMPLATE_GC_RETRY, LAUNCH_TEMPLATE_UNUSED_TTL,
};
use karpenter_core::nodeclass::instanceprofile::profile_name;
use karpenter_core::nodeclass::status::StatusPass;
use karpenter_core::nodeclass::termination::WAITING_ON_NODECLAIMS_REASON;
use karpenter_core::seams::ManualClock;
use karpenter_core::seams::ec2::{Ec2, Ec2Error, LaunchTemplateRequest};
use karpenter_core::seams::iam::InstanceProfiles;
use karpenter_core::seams::kube::{DeleteOptions, KubeApi, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::layered::{Ec2Call, Ec2Layer, Ec2Reply, Layered};
use serde_json::{Value, json};

use fakekube::ApiServer;

use super::api_server::{Fixtures, api_server};
use super::support::{self, CLUSTER, objects};

struct World {
    kube: Arc<ApiServer>,
    cloud: Arc<FakeCloud>,
    iam: Arc<FakeIam>,
    clock: Arc<ManualClock>,
    ctx: Arc<Context>,
}

/// The default class (role `KarpenterNodeRole`, which the account has) with IAM attached.
fn world() -> World {
    world_with(|ctx| ctx)
}

/// [`world`], with the context changed by `tune`.
fn world_with(tune: impl FnOnce(Context) -> Context) -> World {
    let clock = support::clock();
    let cloud = support::cloud(&clock);
    let iam = Arc::new(FakeIam::new(clock.clone(), "123456789012", 1));
    iam.add_role("KarpenterNodeRole", "/");
    let kube = api_server(clock.clone());
    kube.apply(&ResourceKind::EC2_NODE_CLASS, objects::default_node_class());
    let ctx = Arc::new(tune(
        support::context(&kube, &cloud, &clock).with_iam(iam.clone()),
    ));
    World {
        kube,
        cloud,
        iam,
        clock,
        ctx,
    }
}

impl World {
    fn pass(&self) -> StatusPass {
        futures::executor::block_on(NodeClassStatus::new(self.ctx.clone()).reconcile_all())
            .expect("status pass")
    }

    fn class(&self) -> Option<Value> {
        self.kube
            .object_named(&ResourceKind::EC2_NODE_CLASS, "default")
    }

    /// Applies claim `name` and runs the lifecycle until it launched.
    fn launch(&self, name: &str) -> Step {
        self.kube.apply(
            &ResourceKind::NODE_CLAIM,
            objects::nodeclaim(name).of_types(&["m5.large"]).json(),
        );
        self.reconcile(name)
    }

    fn reconcile(&self, name: &str) -> Step {
        support::lifecycle_step(&self.ctx, name)
    }

    /// Removes a claim outright (its finalizers dropped): what termination ends with.
    fn remove_claim(&self, name: &str) {
        let key = ObjectKey::cluster(name);
        futures::executor::block_on(async {
            self.kube
                .patch(
                    &ResourceKind::NODE_CLAIM,
                    &key,
                    &Patch::Merge(json!({"metadata": {"finalizers": []}})),
                )
                .await
                .expect("unfinalized");
            self.kube
                .delete(&ResourceKind::NODE_CLAIM, &key, &DeleteOptions::default())
                .await
                .expect("deleted");
        });
    }

    fn delete_class(&self) {
        futures::executor::block_on(self.kube.delete(
            &ResourceKind::EC2_NODE_CLASS,
            &ObjectKey::cluster("default"),
            &DeleteOptions::default(),
        ))
        .expect("delete");
    }

    fn template_names(&self) -> Vec<String> {
        self.cloud
            .launch_templates()
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    fn profile_exists(&self, name: &str) -> bool {
        futures::executor::block_on(self.iam.get_instance_profile(name))
            .expect("iam")
            .is_some()
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

#[test]
fn a_deleted_ec2nodeclass_waits_for_its_nodeclaims_then_deletes_its_templates_and_profile() {
    let w = world();
    w.pass();
    let class = w.class().expect("class");
    assert_eq!(
        class["metadata"]["finalizers"],
        json!([AWS_TERMINATION_FINALIZER])
    );
    assert!(matches!(w.launch("a"), Step::Launched), "launched");
    let profile = profile_name(&serde_json::from_value(class).expect("decodes"), CLUSTER);
    assert!(w.profile_exists(&profile));
    assert_eq!(w.template_names().len(), 1);

    w.delete_class();
    let pass = w.pass();
    assert_eq!(pass.finalized, 0, "claim a still uses the class");
    assert!(
        w.class()
            .is_some_and(|c| !c["metadata"]["deletionTimestamp"].is_null())
    );
    assert_eq!(w.template_names().len(), 1, "its node still runs with it");
    assert!(w.profile_exists(&profile));
    let waiting = w
        .kube
        .recorded_events()
        .into_iter()
        .find(|e| e.reason == WAITING_ON_NODECLAIMS_REASON)
        .expect("a waiting event");
    assert_eq!(waiting.involved, ResourceKind::EC2_NODE_CLASS);
    assert!(waiting.message.contains("a"), "{}", waiting.message);

    w.remove_claim("a");
    let pass = w.pass();
    assert_eq!((pass.finalized, pass.templates_deleted), (1, 1));
    assert!(
        w.class().is_none(),
        "the finalizer is removed and the class goes"
    );
    assert!(w.template_names().is_empty());
    assert!(
        !w.profile_exists(&profile),
        "the managed profile is deleted"
    );
}

#[test]
fn a_class_naming_its_own_instance_profile_keeps_it_when_deleted() {
    let w = world();
    futures::executor::block_on(async {
        w.iam
            .create_instance_profile("Mine", "/", &BTreeMap::new())
            .await
            .expect("profile");
        w.iam
            .add_role_to_instance_profile("Mine", "KarpenterNodeRole")
            .await
            .expect("role");
    });
    let mut class = objects::default_node_class();
    class["spec"]["role"] = Value::Null;
    class["spec"]["instanceProfile"] = json!("Mine");
    w.kube.apply(&ResourceKind::EC2_NODE_CLASS, class);
    w.pass();
    w.delete_class();
    assert_eq!(w.pass().finalized, 1);
    assert!(w.class().is_none());
    assert!(w.profile_exists("Mine"), "the user's profile is theirs");
}

#[test]
fn a_launch_template_unused_for_a_minute_is_deleted_and_others_are_left_alone() {
    let w = world();
    w.pass();
    assert!(matches!(w.launch("a"), Step::Launched));
    let used = w.template_names();
    assert_eq!(used.len(), 1);
    // An earlier process's template for this cluster, and one Karpenter did not make.
    let ours = template(
        "karpenter.k8s.aws/earlier",
        &[("karpenter.k8s.aws/ec2nodeclass", "old")],
    );
    let foreign = template("someone-elses", &[]);
    futures::executor::block_on(async {
        w.cloud
            .create_launch_template(&ours)
            .await
            .expect("created");
        w.cloud
            .create_launch_template(&foreign)
            .await
            .expect("created");
    });

    w.advance(Duration::from_secs(30));
    assert_eq!(
        w.pass().templates_deleted,
        0,
        "a collection runs once a minute"
    );
    w.advance(Duration::from_secs(30));
    assert_eq!(w.pass().templates_deleted, 1, "unused for a minute");
    assert!(!w.template_names().contains(&used[0]));
    assert!(
        w.template_names().contains(&ours.name),
        "first seen now: kept a minute"
    );
    w.advance(LAUNCH_TEMPLATE_UNUSED_TTL);
    assert_eq!(w.pass().templates_deleted, 1);
    assert_eq!(w.template_names(), vec!["someone-elses".to_string()]);

    // The next launch with the same content makes the template again.
    assert!(matches!(w.launch("b"), Step::Launched));
    assert!(w.template_names().contains(&used[0]));
}

/// Fails the first `n` DeleteLaunchTemplate calls as EC2 throttling does.
struct ThrottledDeletes(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl Ec2Layer for ThrottledDeletes {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply {
        use std::sync::atomic::Ordering::SeqCst;
        let throttled = matches!(call, Ec2Call::DeleteLaunchTemplate(_))
            && self
                .0
                .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                .is_ok();
        if throttled {
            return call.fail(Ec2Error::Throttled("Request limit exceeded.".into()));
        }
        call.send(next).await
    }
}

#[test]
fn a_throttled_template_delete_spares_the_others_and_is_retried_ten_seconds_later() {
    let w = world_with(|mut ctx| {
        let layer = ThrottledDeletes(std::sync::atomic::AtomicUsize::new(1));
        ctx.ec2 = Arc::new(Layered::new(layer, ctx.ec2.clone()));
        ctx
    });
    futures::executor::block_on(async {
        for name in ["karpenter.k8s.aws/earlier-a", "karpenter.k8s.aws/earlier-b"] {
            let request = template(name, &[("karpenter.k8s.aws/ec2nodeclass", "old")]);
            w.ctx
                .ec2
                .create_launch_template(&request)
                .await
                .expect("created");
        }
    });
    w.pass();
    w.advance(LAUNCH_TEMPLATE_UNUSED_TTL);
    let pass = w.pass();
    assert_eq!(pass.ec2_errors, 1, "the throttled delete is reported");
    assert_eq!(
        w.template_names().len(),
        1,
        "the other template was deleted all the same"
    );
    w.advance(LAUNCH_TEMPLATE_GC_RETRY);
    w.pass();
    assert!(
        w.template_names().is_empty(),
        "the failed collection ran again {LAUNCH_TEMPLATE_GC_RETRY:?} later"
    );
}

/// Counts DescribeSubnets calls: one per resolution of the default class.
struct CountedResolutions(Arc<std::sync::atomic::AtomicUsize>);

#[async_trait::async_trait]
impl Ec2Layer for CountedResolutions {
    async fn call(&self, call: Ec2Call<'_>, next: &dyn Ec2) -> Ec2Reply {
        if matches!(call, Ec2Call::DescribeSubnets(_)) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        call.send(next).await
    }
}

#[test]
fn a_class_is_resolved_again_only_once_it_changed_or_a_minute_passed() {
    use karpenter_core::nodeclass::status::STATUS_REFRESH;
    let resolutions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = resolutions.clone();
    let w = world_with(move |mut ctx| {
        ctx.ec2 = Arc::new(Layered::new(CountedResolutions(counted), ctx.ec2.clone()));
        ctx
    });
    let status = NodeClassStatus::new(w.ctx.clone());
    let pass = || futures::executor::block_on(status.reconcile_all()).expect("status pass");
    let resolved = || resolutions.load(std::sync::atomic::Ordering::SeqCst);
    pass();
    assert_eq!(resolved(), 1);
    pass();
    w.advance(STATUS_REFRESH - Duration::from_secs(1));
    pass();
    assert_eq!(
        resolved(),
        1,
        "its own writes and a quiet minute change nothing"
    );
    w.advance(Duration::from_secs(1));
    pass();
    assert_eq!(resolved(), 2, "a minute on: resolved again");
    futures::executor::block_on(w.kube.patch(
        &ResourceKind::EC2_NODE_CLASS,
        &ObjectKey::cluster("default"),
        &Patch::Merge(json!({"spec": {"tags": {"team": "b"}}})),
    ))
    .expect("edit");
    pass();
    assert_eq!(resolved(), 3, "an edited class is resolved at once");
}

#[test]
fn a_launch_whose_template_vanished_makes_it_again_and_launches() {
    // With the binary's EC2 cache, which answers that a template it made still exists.
    let w = world_with(Context::with_ec2_economy);
    w.pass();
    assert!(matches!(w.launch("a"), Step::Launched));
    let name = w.template_names().remove(0);
    // Deleted behind the controller's back (another process): CreateFleet says it is gone.
    futures::executor::block_on(w.cloud.delete_launch_template(&name)).expect("deleted");
    let step = w.launch("b");
    assert!(matches!(step, Step::Launched), "{step:?}");
    assert!(w.template_names().contains(&name), "made again");
    let fleets: Vec<String> = w
        .cloud
        .calls_of(fakecloud::Operation::CreateFleet)
        .into_iter()
        .map(|c| c.outcome)
        .collect();
    assert_eq!(fleets.len(), 3, "a, b refused, b again: {fleets:?}");
}

/// A launch template tagged with this cluster and `tags`.
fn template(name: &str, tags: &[(&str, &str)]) -> LaunchTemplateRequest {
    let mut all: BTreeMap<String, String> = tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    all.insert("eks:eks-cluster-name".into(), CLUSTER.into());
    LaunchTemplateRequest {
        name: name.into(),
        image_id: "ami-1".into(),
        user_data: String::new(),
        security_group_ids: Vec::new(),
        instance_profile: String::new(),
        tags: all,
        extra: BTreeMap::new(),
    }
}
