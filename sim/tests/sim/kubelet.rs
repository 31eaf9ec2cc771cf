//! The kubelet stand-in against a real `FakeCloud` (built-in catalog, instances launched through
//! the `Ec2` seam) and the in-memory API server (fakekube).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{BootModel, Config, FakeCloud};
use karpenter_core::catalog::{CapacityType, Catalog};
use karpenter_core::seams::ec2::{
    CreateFleetRequest, Ec2, Filter, FleetOverride, LaunchTemplateRequest,
};
use karpenter_core::seams::kube::{DeleteOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, ManualClock};
use karpenter_sim::kubelet::{
    Kubelet, KubeletConfig, NOT_READY_TAINT, STARTUP_TAINTS_ANNOTATION,
    STARTUP_TAINTS_REMOVED_ANNOTATION, TickReport,
};
use serde_json::{Value, json};

use fakekube::ApiServer;

use super::fixtures::{Objects, api, node, pod};
use crate::{block_on, start};

const TEMPLATE: &str = "karpenter.k8s.aws/sim-default";
const AL2023: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";
const BOOT_MS: u64 = 30_000;

/// nodeadm user data as Karpenter writes it: NodeClaim labels as `--node-labels`, taints
/// (including the unregistered taint and startup taints) as `registerWithTaints`.
fn user_data() -> String {
    USER_DATA
        .replace("ENDPOINT", fakecloud::DEFAULT_CLUSTER_ENDPOINT)
        .replace("CA_BUNDLE", fakecloud::DEFAULT_CLUSTER_CA_BUNDLE)
}

const USER_DATA: &str = r#"MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: sim
    apiServerEndpoint: ENDPOINT
    certificateAuthority: CA_BUNDLE
    cidr: 10.100.0.0/16
  kubelet:
    config:
      registerWithTaints:
      - effect: NoExecute
        key: karpenter.sh/unregistered
      - effect: NoSchedule
        key: dedicated
        value: batch
      - effect: NoSchedule
        key: example.com/warming
      - effect: NoExecute
        key: node.cilium.io/agent-not-ready
        value: "true"
    flags:
    - --node-labels="karpenter.sh/nodepool=default,team=a"

--//--
"#;

struct World {
    clock: Arc<ManualClock>,
    cloud: Arc<FakeCloud>,
    kube: Arc<ApiServer>,
    kubelet: Kubelet,
}

fn config() -> KubeletConfig {
    KubeletConfig {
        startup_taint_removal_ms: 10_000,
        pod_start_ms: 5_000,
        node_gone_ms: 30_000,
        startup_taint_keys: BTreeSet::from(["node.cilium.io/agent-not-ready".to_string()]),
        ready_delay_ms: 0,
        device_plugin_delay_ms: 0,
        cloud_nodes_only: false,
    }
}

fn world(config: KubeletConfig) -> World {
    let clock = Arc::new(ManualClock::new(start()));
    let cloud = Arc::new(FakeCloud::new(
        clock.clone() as Arc<dyn Clock>,
        Catalog::builtin(),
        Config {
            seed: 11,
            eventual_consistency_lag_ms: 0,
            pending_duration_ms: 10_000,
            shutting_down_duration_ms: 20_000,
            boot: BootModel {
                boot_duration_ms_min: BOOT_MS,
                boot_duration_ms_max: BOOT_MS,
                ..BootModel::default()
            },
            ..Config::default()
        },
    ));
    let kube = api(clock.clone() as Arc<dyn Clock>);
    let kubelet = Kubelet::new(
        kube.clone(),
        clock.clone() as Arc<dyn Clock>,
        cloud.clone(),
        config,
    );
    World {
        clock,
        cloud,
        kube,
        kubelet,
    }
}

impl World {
    fn ec2(&self) -> &dyn Ec2 {
        self.cloud.as_ref()
    }

    /// Launches one m5.large in us-west-2a through `CreateFleet`; returns its instance id.
    fn launch(&self, capacity_type: CapacityType) -> String {
        let exists = !block_on(
            self.ec2()
                .describe_launch_templates(&[Filter::new("launch-template-name", &[TEMPLATE])]),
        )
        .expect("templates")
        .is_empty();
        if !exists {
            let image_id = block_on(self.ec2().get_parameter(AL2023))
                .expect("parameter")
                .expect("image");
            block_on(self.ec2().create_launch_template(&LaunchTemplateRequest {
                name: TEMPLATE.to_string(),
                image_id,
                user_data: user_data(),
                security_group_ids: Vec::new(),
                instance_profile: "KarpenterNodeInstanceProfile".into(),
                tags: BTreeMap::new(),
                extra: BTreeMap::new(),
            }))
            .expect("template");
        }
        let subnet = block_on(
            self.ec2()
                .describe_subnets(&[Filter::new("tag:karpenter.sh/discovery", &["sim"])]),
        )
        .expect("subnets")
        .into_iter()
        .find(|s| s.zone == "us-west-2a")
        .expect("subnet in us-west-2a");
        let response = block_on(self.ec2().create_fleet(&CreateFleetRequest {
            capacity_block: false,
            capacity_type,
            launch_template_name: TEMPLATE.to_string(),
            overrides: vec![FleetOverride {
                instance_type: "m5.large".into(),
                subnet_id: subnet.subnet_id,
                zone: "us-west-2a".into(),
                price: None,
            }],
            tags: BTreeMap::new(),
            client_token: format!("token-{}", self.cloud.instances().len()),
            context: None,
        }))
        .expect("fleet");
        assert!(response.errors.is_empty(), "{:?}", response.errors);
        response.instances[0].instance_id.clone()
    }

    fn advance_ms(&self, ms: u64) {
        self.clock.advance(Duration::from_millis(ms));
        self.cloud.advance_to_now();
    }

    fn tick(&self) -> TickReport {
        block_on(self.kubelet.tick()).expect("tick")
    }

    /// Launches an instance, waits for its boot and registers its node; returns (id, node name).
    fn registered_node(&self) -> (String, String) {
        let id = self.launch(CapacityType::OnDemand);
        self.advance_ms(BOOT_MS);
        let report = self.tick();
        assert_eq!(report.registered.len(), 1, "{report:?}");
        (id, report.registered[0].clone())
    }

    fn node(&self, name: &str) -> Value {
        self.kube.node(name).expect("node exists")
    }

    fn terminate(&self, id: &str) {
        block_on(self.ec2().terminate_instances(&[id.to_string()])).expect("terminate");
    }
}

fn ready(node: &Value) -> Value {
    node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready").cloned())
        .unwrap_or(Value::Null)
}

fn taint_keys(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap_or_default(),
                t["effect"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// A pod bound by hand to `node`. The node still carries its registration taints (no controller
/// here removes `karpenter.sh/unregistered`), so the pod tolerates every `NoExecute` taint, or the
/// taint eviction controller would delete it at once, as Kubernetes' would.
fn bound_pod(name: &str, node: &str) -> Value {
    let mut p = pod(name, "100m", "128Mi");
    p["spec"]["nodeName"] = json!(node);
    p["spec"]["tolerations"] = json!([{"operator": "Exists", "effect": "NoExecute"}]);
    p
}

fn pod_key(name: &str) -> ObjectKey {
    ObjectKey::namespaced("default", name)
}

#[test]
fn a_booted_instance_registers_as_a_ready_node_with_its_labels_taints_and_capacity() {
    let w = world(config());
    let id = w.launch(CapacityType::Spot);
    w.advance_ms(BOOT_MS - 1_000);
    assert_eq!(w.tick(), TickReport::default(), "still booting");
    w.advance_ms(1_000);
    let report = w.tick();
    let instance = w.cloud.instance(&id).expect("instance");
    assert_eq!(report.registered, [instance.private_dns_name.as_str()]);

    let node = w.node(&instance.private_dns_name);
    assert_eq!(
        node["spec"]["providerID"],
        format!("aws:///us-west-2a/{id}")
    );
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/hostname"], instance.private_dns_name);
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-west-2a");
    assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(labels["kubernetes.io/arch"], "amd64");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["karpenter.sh/capacity-type"], "spot");
    assert_eq!(labels["karpenter.sh/nodepool"], "default");
    assert_eq!(labels["team"], "a");
    assert_eq!(
        taint_keys(&node),
        [
            "dedicated:NoSchedule",
            "example.com/warming:NoSchedule",
            "karpenter.sh/unregistered:NoExecute",
            "node.cilium.io/agent-not-ready:NoExecute",
        ]
    );
    let m5 = Catalog::builtin_ref().get("m5.large").expect("m5.large");
    for (field, resources) in [("capacity", &m5.capacity), ("allocatable", &m5.allocatable)] {
        // Extended resources (here the VPC resource controller's pod-eni) come later, as
        // device plugins report them.
        for (name, quantity) in resources
            .to_list()
            .into_iter()
            .filter(|(n, _)| !n.contains('/'))
        {
            assert_eq!(node["status"][field][&name], quantity.0, "{field} {name}");
        }
    }
    assert_eq!(ready(&node)["status"], "True");

    // Registered once; its pod-eni (an extended resource) is reported as a device plugin would.
    let next = w.tick();
    assert!(next.registered.is_empty(), "registered once: {next:?}");
    assert_eq!(
        w.node(&instance.private_dns_name)["status"]["allocatable"]["vpc.amazonaws.com/pod-eni"],
        "9"
    );
}

#[test]
fn a_node_deleted_while_its_instance_runs_is_not_registered_again() {
    let w = world(config());
    let (_, name) = w.registered_node();
    block_on(w.kube.delete(
        &ResourceKind::NODE,
        &ObjectKey::cluster(&name),
        &DeleteOptions::default(),
    ))
    .expect("delete");
    assert!(w.tick().registered.is_empty());
    assert!(w.kube.node(&name).is_none());
}

#[test]
fn startup_taints_are_removed_once_the_node_has_been_ready_for_the_delay() {
    let w = world(config());
    let id = w.launch(CapacityType::OnDemand);
    // The NodeClaim the controller would have written, launched and given the provider id.
    w.kube.insert(
        ResourceKind::NODE_CLAIM,
        json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": { "name": "default-abcde" },
            "spec": { "startupTaints": [{ "key": "example.com/warming", "effect": "NoSchedule" }] },
            "status": { "providerID": format!("aws:///us-west-2a/{id}") },
        }),
    );
    w.advance_ms(BOOT_MS);
    let name = w.tick().registered[0].clone();
    assert_eq!(
        w.node(&name)["metadata"]["annotations"][STARTUP_TAINTS_ANNOTATION],
        "example.com/warming:NoSchedule,node.cilium.io/agent-not-ready=true:NoExecute"
    );

    w.advance_ms(9_000);
    assert!(w.tick().startup_taints_removed.is_empty());
    w.advance_ms(1_000);
    assert_eq!(w.tick().startup_taints_removed, [name.as_str()]);
    let node = w.node(&name);
    assert_eq!(
        taint_keys(&node),
        [
            "dedicated:NoSchedule",
            "karpenter.sh/unregistered:NoExecute"
        ],
        "the controller's unregistered taint and ordinary taints stay"
    );
    assert!(node["metadata"]["annotations"][STARTUP_TAINTS_ANNOTATION].is_null());
    assert!(w.tick().startup_taints_removed.is_empty(), "removed once");
}

/// A node whose user data left its claim's startup taint out (a Custom AMI) gets it from the
/// controller's registration; the taint's owner removes it once the node has been Ready for the
/// delay, whenever it appears, and records what it removed.
#[test]
fn a_startup_taint_registration_added_is_removed_by_its_owner_and_recorded() {
    let w = world(config());
    let id = w.launch(CapacityType::OnDemand);
    w.kube.insert(
        ResourceKind::NODE_CLAIM,
        json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": { "name": "default-abcde" },
            "spec": { "startupTaints": [{ "key": "example.com/agent", "effect": "NoSchedule" }] },
            "status": { "providerID": format!("aws:///us-west-2a/{id}") },
        }),
    );
    w.advance_ms(BOOT_MS);
    let name = w.tick().registered[0].clone();
    w.advance_ms(9_000);
    assert!(w.tick().startup_taints_removed.is_empty());
    w.advance_ms(1_000);
    assert_eq!(w.tick().startup_taints_removed, [name.as_str()]);
    let node = w.node(&name);
    assert_eq!(
        node["metadata"]["annotations"][STARTUP_TAINTS_REMOVED_ANNOTATION],
        "node.cilium.io/agent-not-ready:NoExecute",
        "those it registered with are recorded too"
    );
    // Registration (the controller's) adds the claim's startup taint afterwards.
    let mut taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    taints.push(json!({ "key": "example.com/agent", "effect": "NoSchedule" }));
    block_on(w.kube.patch(
        &ResourceKind::NODE,
        &ObjectKey::cluster(&name),
        &Patch::Merge(json!({ "spec": { "taints": taints } })),
    ))
    .expect("patch");
    assert_eq!(w.tick().startup_taints_removed, [name.as_str()]);
    let node = w.node(&name);
    assert!(!taint_keys(&node).contains(&"example.com/agent:NoSchedule".to_string()));
    assert_eq!(
        node["metadata"]["annotations"][STARTUP_TAINTS_REMOVED_ANNOTATION],
        "example.com/agent:NoSchedule,node.cilium.io/agent-not-ready:NoExecute"
    );
    assert!(w.tick().startup_taints_removed.is_empty(), "nothing left");
}

#[test]
fn bound_pods_start_running_after_the_pod_start_delay() {
    let w = world(config());
    let (_, name) = w.registered_node();
    w.kube.insert(ResourceKind::POD, bound_pod("web", &name));
    w.kube
        .insert(ResourceKind::POD, pod("pending", "100m", "1Mi"));

    let report = w.tick();
    assert_eq!(report.pods_accepted, [pod_key("web")]);
    let web = w.kube.pod("web");
    assert_eq!(web["status"]["phase"], "Pending");
    assert_eq!(web["status"]["startTime"], "2026-01-01T00:00:30Z");

    w.advance_ms(4_000);
    assert!(w.tick().pods_started.is_empty());
    w.advance_ms(1_000);
    assert_eq!(w.tick().pods_started, [pod_key("web")]);
    let web = w.kube.pod("web");
    assert_eq!(web["status"]["phase"], "Running");
    let conditions: BTreeMap<String, String> = web["status"]["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| {
            (
                c["type"].as_str().expect("type").to_string(),
                c["status"].as_str().expect("status").to_string(),
            )
        })
        .collect();
    for condition in ["Initialized", "ContainersReady", "Ready"] {
        assert_eq!(conditions[condition], "True", "{condition}");
    }
    assert_eq!(web["status"]["containerStatuses"][0]["ready"], true);
    assert_eq!(
        w.kube.pod("pending")["status"],
        json!({"phase": "Pending"}),
        "an unbound pod is nobody's"
    );
    assert_eq!(w.tick(), TickReport::default());
}

#[test]
fn pods_on_a_node_that_is_not_ready_do_not_start() {
    let w = world(KubeletConfig {
        pod_start_ms: 0,
        ..config()
    });
    let mut down = node("static-down", "us-west-2a", 4, 16, 110);
    down["status"]["conditions"][0]["status"] = json!("False");
    w.kube.insert(ResourceKind::NODE, down);
    w.kube.insert(
        ResourceKind::NODE,
        node("static-up", "us-west-2a", 4, 16, 110),
    );
    w.kube
        .insert(ResourceKind::POD, bound_pod("stuck", "static-down"));
    w.kube
        .insert(ResourceKind::POD, bound_pod("runs", "static-up"));
    let report = w.tick();
    assert_eq!(
        report.pods_started,
        [pod_key("runs")],
        "pod_start_ms 0 starts at once"
    );
    assert!(report.pods_accepted.is_empty());
    assert_eq!(w.kube.pod("stuck")["status"], json!({"phase": "Pending"}));
    assert!(
        w.kube.node("static-down").is_some(),
        "nodes without a provider id are left alone"
    );
}

#[test]
fn with_cloud_nodes_only_pods_of_nodes_that_run_their_own_kubelet_are_left_alone() {
    let w = world(KubeletConfig {
        pod_start_ms: 0,
        cloud_nodes_only: true,
        ..config()
    });
    // A kind node: no `aws:///` provider id, a real kubelet runs its pods.
    w.kube.insert(
        ResourceKind::NODE,
        node("kind-control-plane", "us-west-2a", 4, 16, 110),
    );
    w.kube.insert(
        ResourceKind::POD,
        bound_pod("coredns", "kind-control-plane"),
    );
    let (_, name) = w.registered_node();
    w.kube.insert(ResourceKind::POD, bound_pod("web", &name));
    let report = w.tick();
    assert_eq!(report.pods_started, [pod_key("web")]);
    assert_eq!(w.kube.pod("coredns")["status"], json!({"phase": "Pending"}));
}

#[test]
fn a_deleted_pod_is_removed_when_its_grace_period_ends() {
    let w = world(config());
    w.kube.insert(
        ResourceKind::NODE,
        node("static-1", "us-west-2a", 4, 16, 110),
    );
    let mut web = bound_pod("web", "static-1");
    web["spec"]["terminationGracePeriodSeconds"] = json!(20);
    w.kube.insert(ResourceKind::POD, web);
    w.tick();
    w.advance_ms(5_000);
    w.tick();
    assert_eq!(w.kube.pod("web")["status"]["phase"], "Running");

    block_on(w.kube.delete(
        &ResourceKind::POD,
        &pod_key("web"),
        &DeleteOptions::default(),
    ))
    .expect("delete");
    assert!(w.tick().pods_terminated.is_empty());
    w.advance_ms(19_000);
    assert!(w.tick().pods_terminated.is_empty());
    assert!(!w.kube.pod("web")["metadata"]["deletionTimestamp"].is_null());
    w.advance_ms(1_000);
    assert_eq!(w.tick().pods_terminated, [pod_key("web")]);
    assert!(w.kube.objects(&ResourceKind::POD).is_empty());
}

#[test]
fn a_node_whose_instance_terminates_goes_not_ready_and_then_away_with_its_pods() {
    let w = world(config());
    let (id, name) = w.registered_node();
    w.kube.insert(ResourceKind::POD, bound_pod("web", &name));
    w.tick();

    w.terminate(&id);
    let report = w.tick();
    assert_eq!(report.nodes_not_ready, [name.as_str()]);
    let node = w.node(&name);
    assert_eq!(ready(&node)["status"], "False");
    assert_eq!(ready(&node)["reason"], "KubeletNotReady");
    let keys = taint_keys(&node);
    for effect in ["NoSchedule", "NoExecute"] {
        assert!(
            keys.contains(&format!("{NOT_READY_TAINT}:{effect}")),
            "{keys:?}"
        );
    }
    w.advance_ms(10_000);
    assert_eq!(
        w.tick(),
        TickReport::default(),
        "nothing runs on a NotReady node"
    );
    assert!(w.kube.pod("web")["status"]["phase"] == "Pending");

    w.advance_ms(19_000);
    assert!(w.tick().nodes_deleted.is_empty());
    w.advance_ms(1_000);
    let report = w.tick();
    assert_eq!(report.nodes_deleted, [name.as_str()]);
    assert_eq!(report.pods_orphaned, [pod_key("web")]);
    assert!(w.kube.node(&name).is_none());
    assert!(w.kube.objects(&ResourceKind::POD).is_empty());
}

#[test]
fn a_node_with_finalizers_is_only_marked_and_its_pods_go_when_it_does() {
    let w = world(KubeletConfig {
        node_gone_ms: 0,
        ..config()
    });
    let (id, name) = w.registered_node();
    w.kube
        .edit(ResourceKind::NODE, &ObjectKey::cluster(&name), |n| {
            n["metadata"]["finalizers"] = json!(["karpenter.sh/termination"]);
        });
    w.kube.insert(ResourceKind::POD, bound_pod("web", &name));
    w.terminate(&id);
    let report = w.tick();
    assert_eq!(report.nodes_not_ready, [name.as_str()]);
    assert_eq!(report.nodes_marked, [name.as_str()]);
    assert!(!w.node(&name)["metadata"]["deletionTimestamp"].is_null());
    assert_eq!(
        w.tick(),
        TickReport::default(),
        "marked once; the pod waits"
    );

    // The controller finishes its termination and removes the finalizer.
    block_on(w.kube.patch(
        &ResourceKind::NODE,
        &ObjectKey::cluster(&name),
        &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
    ))
    .expect("remove finalizer");
    assert!(w.kube.node(&name).is_none());
    assert_eq!(w.tick().pods_orphaned, [pod_key("web")]);
}

#[test]
fn a_stopped_instance_makes_its_node_not_ready_but_keeps_it() {
    let w = world(config());
    let (id, name) = w.registered_node();
    assert!(w.cloud.stop_instance(&id));
    assert_eq!(w.tick().nodes_not_ready, [name.as_str()]);
    w.advance_ms(3_600_000);
    let report = w.tick();
    assert!(report.nodes_deleted.is_empty() && report.nodes_marked.is_empty());
    assert_eq!(ready(&w.node(&name))["status"], "False");
}

#[test]
fn the_pods_of_a_stopped_instance_are_deleted_once_their_not_ready_toleration_runs_out() {
    // The taint eviction controller: the default 300 s toleration for a pod without its own
    // (do-not-disrupt or not: it is not Karpenter's eviction), the pod's own tolerationSeconds,
    // and never for a toleration without them (a DaemonSet's).
    let w = world(config());
    let (id, name) = w.registered_node();
    // Registered and initialized: Karpenter and the CNI agent removed their taints.
    block_on(w.kube.patch(
        &ResourceKind::NODE,
        &ObjectKey::cluster(&name),
        &Patch::Merge(json!({"spec": {"taints": null}})),
    ))
    .expect("untaint");
    let mut guarded = bound_pod("guarded", &name);
    guarded["spec"]["tolerations"] = json!([]);
    guarded["metadata"]["annotations"] = json!({"karpenter.sh/do-not-disrupt": "true"});
    w.kube.insert(ResourceKind::POD, guarded);
    let mut brief = bound_pod("brief", &name);
    brief["spec"]["tolerations"] = json!([{"key": NOT_READY_TAINT, "operator": "Exists",
        "effect": "NoExecute", "tolerationSeconds": 60}]);
    w.kube.insert(ResourceKind::POD, brief);
    let mut daemon = bound_pod("daemon", &name);
    daemon["spec"]["tolerations"] =
        json!([{"key": NOT_READY_TAINT, "operator": "Exists", "effect": "NoExecute"}]);
    w.kube.insert(ResourceKind::POD, daemon);
    w.tick();

    assert!(w.cloud.stop_instance(&id));
    assert_eq!(w.tick().nodes_not_ready, [name.as_str()]);
    w.advance_ms(59_000);
    assert!(w.tick().pods_taint_evicted.is_empty());
    w.advance_ms(1_000);
    assert_eq!(w.tick().pods_taint_evicted, [pod_key("brief")]);
    w.advance_ms(239_000);
    assert!(w.tick().pods_taint_evicted.is_empty());
    w.advance_ms(1_000);
    assert_eq!(w.tick().pods_taint_evicted, [pod_key("guarded")]);
    assert!(
        w.kube.pod("guarded")["metadata"]["deletionTimestamp"].is_string(),
        "deleted, and Terminating for good: no kubelet confirms it"
    );
    w.advance_ms(3_600_000);
    assert!(w.tick().pods_taint_evicted.is_empty());
    assert!(w.kube.pod("daemon")["metadata"]["deletionTimestamp"].is_null());
}
