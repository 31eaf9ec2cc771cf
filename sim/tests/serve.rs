//! `karpenter-sim serve` and the node registrar (`karpenter-sim cloud`) over real sockets: the
//! topology of a kind cluster (the API server in one process, the fake cloud and the nodes'
//! kubelets in another, talking HTTP through the production Kubernetes adapter), with
//! `serve --no-kubelet` as the API server. Built only with the `serve` feature; `cargo xtask e2e`
//! runs it before the suite.

// Waiting on real sockets: wall-clock deadlines (nothing here feeds a seeded decision).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fakecloud::{BootModel, FakeCloud};
use fakekube::ApiServer;
use karpenter_core::catalog::CapacityType;
use karpenter_core::seams::KubeApi;
use karpenter_core::seams::ec2::{
    CreateFleetRequest, Ec2, Filter, FleetOverride, LaunchTemplateRequest,
};
use karpenter_core::seams::iam::InstanceProfiles;
use karpenter_core::seams::kube::{ListOptions, ObjectKey, ResourceKind};
use karpenter_sim::kubelet::KubeletConfig;
use karpenter_sim::serve::registrar::{self, NODE_LEASE_NAMESPACE, Registrar, RegistrarOptions};
use karpenter_sim::serve::{self, ServeOptions};
use serde_json::{Value, json};

/// The cluster both sides are set up for (fakecloud's default discovery tag).
const CLUSTER: &str = "sim";
const PROFILE: &str = "KarpenterNodeInstanceProfile";
const TEMPLATE: &str = "karpenter.k8s.aws/registrar-test";
const AL2023: &str =
    "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id";
/// Longest any one step may take (the timings below are all well under a second).
const STEP_MAX: Duration = Duration::from_secs(30);

/// nodeadm user data as Karpenter writes it (a NodePool label, the unregistered taint).
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
    flags:
    - --node-labels="karpenter.sh/nodepool=default"

--//--
"#;

fn runtime() -> real_tokio::runtime::Runtime {
    real_tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A kubeconfig path of its own for this test process.
fn kubeconfig_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "karpenter-sim-{name}-{}.kubeconfig",
        std::process::id()
    ))
}

/// Launches one m5.large in us-west-2a through `CreateFleet`, as the controller would.
async fn launch(cloud: &FakeCloud) -> String {
    let ec2: &dyn Ec2 = cloud;
    let image_id = ec2
        .get_parameter(AL2023)
        .await
        .expect("parameter")
        .expect("image");
    ec2.create_launch_template(&LaunchTemplateRequest {
        name: TEMPLATE.to_string(),
        image_id,
        user_data: USER_DATA
            .replace("ENDPOINT", fakecloud::DEFAULT_CLUSTER_ENDPOINT)
            .replace("CA_BUNDLE", fakecloud::DEFAULT_CLUSTER_CA_BUNDLE),
        security_group_ids: Vec::new(),
        instance_profile: PROFILE.into(),
        tags: BTreeMap::new(),
        extra: BTreeMap::new(),
    })
    .await
    .expect("template");
    let subnet = ec2
        .describe_subnets(&[Filter::new("tag:karpenter.sh/discovery", &[CLUSTER])])
        .await
        .expect("subnets")
        .into_iter()
        .find(|s| s.zone == "us-west-2a")
        .expect("subnet in us-west-2a");
    let response = ec2
        .create_fleet(&CreateFleetRequest {
            capacity_block: false,
            capacity_type: CapacityType::OnDemand,
            launch_template_name: TEMPLATE.to_string(),
            overrides: vec![FleetOverride {
                instance_type: "m5.large".into(),
                subnet_id: subnet.subnet_id,
                zone: "us-west-2a".into(),
                price: None,
            }],
            tags: BTreeMap::new(),
            client_token: "registrar-test".into(),
            context: None,
        })
        .await
        .expect("fleet");
    assert!(response.errors.is_empty(), "{:?}", response.errors);
    response.instances[0].instance_id.clone()
}

/// Ticks the registrar until `done` holds on the served API server's objects.
async fn tick_until(
    registrar: &mut Registrar,
    api: &ApiServer,
    what: &str,
    mut done: impl FnMut(&[Value], &[Value]) -> bool,
) {
    let started = Instant::now();
    loop {
        registrar.tick().await;
        let nodes = api
            .list(&ResourceKind::NODE, &ListOptions::default())
            .await
            .expect("nodes")
            .items;
        let pods = api
            .list(&ResourceKind::POD, &ListOptions::default())
            .await
            .expect("pods")
            .items;
        let owned = |items: Vec<std::sync::Arc<Value>>| -> Vec<Value> {
            items
                .into_iter()
                .map(std::sync::Arc::unwrap_or_clone)
                .collect()
        };
        let (nodes, pods) = (owned(nodes), owned(pods));
        if done(&nodes, &pods) {
            return;
        }
        assert!(
            started.elapsed() < STEP_MAX,
            "timed out waiting until {what}; nodes: {nodes:#?}; pods: {pods:#?}"
        );
        real_tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ready(node: &Value) -> bool {
    node["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

/// The registrar's options for a fast test: boots, starts and removals in well under a second.
fn fast_options(kubeconfig: PathBuf) -> RegistrarOptions {
    let mut options =
        RegistrarOptions::new(kubeconfig, "127.0.0.1:0".parse().expect("addr"), CLUSTER, 7);
    options.cloud.eventual_consistency_lag_ms = 0;
    options.cloud.pending_duration_ms = 100;
    options.cloud.shutting_down_duration_ms = 100;
    options.cloud.boot = BootModel {
        boot_duration_ms_min: 300,
        boot_duration_ms_max: 300,
        ..BootModel::default()
    };
    options.kubelet = KubeletConfig {
        startup_taint_removal_ms: 0,
        pod_start_ms: 0,
        node_gone_ms: 0,
        ready_delay_ms: 0,
        device_plugin_delay_ms: 0,
        ..KubeletConfig::default()
    };
    options.tick_ms = 100;
    options
}

#[test]
fn the_registrar_turns_fake_cloud_instances_into_nodes_and_runs_their_pods_on_an_api_server_it_reaches_over_http()
 {
    runtime().block_on(async {
        let kubeconfig = kubeconfig_path("registrar");
        let running = serve::start(&ServeOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            aws_listen: "127.0.0.1:0".parse().expect("addr"),
            cluster: CLUSTER.into(),
            scenario: None,
            seed: 1,
            controller: false,
            kubelet: false,
            kubeconfig: Some(kubeconfig.clone()),
            tick_ms: 100,
        })
        .await
        .expect("serve starts");
        let api: Arc<ApiServer> = running.api.clone();
        let (stop, stopped) = real_tokio::sync::oneshot::channel::<()>();
        let served = real_tokio::spawn(running.run_until(async {
            let _ = stopped.await;
        }));

        let mut registrar = registrar::start(fast_options(kubeconfig.clone()))
            .await
            .expect("the registrar reaches the served API server");
        // The instance profile a controller's EC2NodeClass would have created.
        let iam: &dyn InstanceProfiles = registrar.aws.account.iam.as_ref();
        iam.create_instance_profile(PROFILE, "/", &BTreeMap::new())
            .await
            .expect("profile");
        iam.add_role_to_instance_profile(PROFILE, &format!("KarpenterNodeRole-{CLUSTER}"))
            .await
            .expect("role");
        let id = launch(registrar.cloud()).await;
        let provider_id = format!("aws:///us-west-2a/{id}");
        tick_until(
            &mut registrar,
            &api,
            "the instance's node is Ready",
            |nodes, _| {
                nodes
                    .iter()
                    .any(|n| n["spec"]["providerID"] == provider_id && ready(n))
            },
        )
        .await;
        let node = api
            .list(&ResourceKind::NODE, &ListOptions::default())
            .await
            .expect("nodes")
            .items
            .into_iter()
            .find(|n| n["spec"]["providerID"] == provider_id)
            .expect("node");
        let name = node["metadata"]["name"].as_str().expect("name").to_string();
        assert_eq!(
            node["metadata"]["labels"]["karpenter.sh/nodepool"],
            "default"
        );

        // A pod bound to the node (what a scheduler does) runs; the node's Lease is renewed. The
        // node still carries `karpenter.sh/unregistered:NoExecute` (no Karpenter here to remove
        // it), so the pod tolerates it, or the taint eviction would delete it as Kubernetes'.
        api.create(
            &ResourceKind::POD,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"nodeName": name, "containers": [{"name": "web", "image": "nginx"}],
                    "tolerations": [{"key": "karpenter.sh/unregistered", "operator": "Exists",
                        "effect": "NoExecute"}]},
            }),
        )
        .await
        .expect("pod");
        tick_until(&mut registrar, &api, "the bound pod runs", |_, pods| {
            pods.iter()
                .any(|p| p["metadata"]["name"] == "web" && p["status"]["phase"] == "Running")
        })
        .await;
        let lease = api
            .get(
                &ResourceKind::LEASE,
                &ObjectKey::namespaced(NODE_LEASE_NAMESPACE, &name),
            )
            .await
            .expect("lease read")
            .expect("the node's Lease exists");
        assert_eq!(lease["spec"]["holderIdentity"], json!(name));
        assert!(lease["spec"]["renewTime"].is_string(), "{lease:#}");

        // The instance goes: its node goes, and the pod with it (PodGC's orphan rule).
        let ec2: &dyn Ec2 = registrar.cloud().as_ref();
        ec2.terminate_instances(std::slice::from_ref(&id))
            .await
            .expect("terminate");
        tick_until(
            &mut registrar,
            &api,
            "the node and its pod are gone",
            |nodes, pods| {
                nodes.iter().all(|n| n["metadata"]["name"] != json!(name)) && pods.is_empty()
            },
        )
        .await;

        let _ = stop.send(());
        served.await.expect("serve stops");
        let _ = std::fs::remove_file(kubeconfig);
    });
}

#[test]
fn the_registrar_says_which_kubeconfig_it_cannot_reach() {
    runtime().block_on(async {
        let kubeconfig = kubeconfig_path("unreachable");
        // A port nothing listens on (bound, then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .port();
        std::fs::write(
            &kubeconfig,
            fakekube_serve::kubeconfig(&format!("http://127.0.0.1:{port}"), CLUSTER),
        )
        .expect("kubeconfig");
        let error = registrar::start(fast_options(kubeconfig.clone()))
            .await
            .err()
            .expect("no API server answers");
        let message = error.to_string();
        assert!(
            message.contains(&kubeconfig.display().to_string())
                && message.contains("does not answer"),
            "{message}"
        );
        let _ = std::fs::remove_file(kubeconfig);
    });
}
