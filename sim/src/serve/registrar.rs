//! `karpenter-sim cloud`: the node registrar, kwok-style. One process plays the fake cloud (the
//! AWS endpoint of [`fakecloud_serve`], with its control API) and the kubelet of every node its
//! instances become, against a *real* Kubernetes API server named by a kubeconfig: kind, k3s,
//! any cluster, or `karpenter-sim serve --no-kubelet` (how CI runs this topology).
//!
//! The kubelet stand-in ([`Kubelet`]) is the simulation's, unchanged; only its [`KubeApi`] is
//! the production adapter ([`KubeClient`], kube-rs over HTTP) instead of the in-memory API
//! server, so whatever it writes passes a real API server's validation. The fake cloud stays in
//! this process because the kubelet reads instances (their boot, user data and state) from it
//! directly, as a real node's kubelet knows its own machine.
//!
//! Against a real control plane the stand-in plays only the nodes of the fake cloud's instances
//! ([`KubeletConfig::cloud_nodes_only`]): kind's own nodes keep their real kubelet. It also
//! renews each such node's Lease in `kube-node-lease`, as a kubelet does, so a real node
//! lifecycle controller does not mark the nodes `Unknown` and evict their pods. The rest of a
//! control plane (kube-scheduler, the Deployment controller, the garbage collector) is the
//! cluster's own.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fakecloud::{Account, FakeCloud};
use jiff::Timestamp;
use karpenter_core::catalog::Catalog;
use karpenter_core::seams::ec2::InstanceState;
use karpenter_core::seams::kube::{ListOptions, ObjectKey, Patch, ResourceKind};
use karpenter_core::seams::{Clock, KubeApi, KubeError};
use karpenter_kube::{ClientLimits, KubeClient};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use crate::kubelet::{Kubelet, KubeletConfig, TickReport};

/// The namespace of the kubelets' node Leases (the API server creates it on a real cluster).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet's node lease duration (its `nodeLeaseDurationSeconds` default).
pub const NODE_LEASE_SECONDS: i64 = 40;
/// How often a node's Lease is renewed: a quarter of its duration, as the kubelet does.
pub const NODE_LEASE_RENEW: Duration = Duration::from_secs(10);

/// What `karpenter-sim cloud` was asked for.
#[derive(Clone, Debug)]
pub struct RegistrarOptions {
    /// The cluster the nodes join.
    pub kubeconfig: PathBuf,
    /// The AWS endpoint's address (port 0: any free port).
    pub aws_listen: SocketAddr,
    /// The fake account: cluster name (discovery tags, node role, queue), seed, timings.
    pub cloud: fakecloud::Config,
    /// The kubelet stand-in's timings ([`KubeletConfig::cloud_nodes_only`] is always set).
    pub kubelet: KubeletConfig,
    /// Wall time between two ticks.
    pub tick_ms: u64,
}

impl RegistrarOptions {
    /// The defaults for cluster `cluster` seeded with `seed`, the cluster at `kubeconfig`.
    pub fn new(kubeconfig: PathBuf, aws_listen: SocketAddr, cluster: &str, seed: u64) -> Self {
        Self {
            kubeconfig,
            aws_listen,
            cloud: fakecloud::Config {
                seed,
                cluster_name: cluster.to_string(),
                ..fakecloud::Config::default()
            },
            kubelet: KubeletConfig::default(),
            tick_ms: 500,
        }
    }
}

/// Why the registrar could not start.
#[derive(Debug, thiserror::Error)]
pub enum RegistrarError {
    #[error("kubeconfig {0}: {1}")]
    Kubeconfig(PathBuf, String),
    #[error("the API server of {0} does not answer: {1}")]
    ApiServer(PathBuf, String),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
}

/// A running registrar: the AWS endpoint and the kubelet stand-in over the cluster's API.
pub struct Registrar {
    pub aws: Arc<fakecloud_serve::World>,
    aws_server: fakecloud_serve::Server,
    kube: Arc<dyn KubeApi>,
    kubelet: Kubelet,
    clock: Arc<dyn Clock>,
    tick: Duration,
    /// When the node Leases were last renewed.
    renewed: Option<Timestamp>,
}

/// Connects to the cluster, then starts the AWS endpoint (call inside a multi-threaded tokio
/// runtime). Fails early when the cluster does not answer, rather than ticking into errors.
pub async fn start(options: RegistrarOptions) -> Result<Registrar, RegistrarError> {
    let clock: Arc<dyn Clock> = Arc::new(fakecloud_serve::WallClock);
    let kube = connect(&options.kubeconfig, clock.clone()).await?;
    let account = Account::new(clock.clone(), Catalog::builtin(), options.cloud);
    let cloud = account.cloud.clone();
    let aws = fakecloud_serve::World::new(account);
    let aws_server = fakecloud_serve::serve(aws.clone(), options.aws_listen)
        .await
        .map_err(|e| RegistrarError::Listen(options.aws_listen, e))?;
    let kubelet = Kubelet::new(
        kube.clone(),
        clock.clone(),
        cloud,
        KubeletConfig {
            cloud_nodes_only: true,
            ..options.kubelet
        },
    );
    Ok(Registrar {
        aws,
        aws_server,
        kube,
        kubelet,
        clock,
        tick: Duration::from_millis(options.tick_ms),
        renewed: None,
    })
}

/// The production Kubernetes adapter over the kubeconfig's current context.
async fn connect(path: &Path, clock: Arc<dyn Clock>) -> Result<Arc<dyn KubeApi>, RegistrarError> {
    let bad = |e: String| RegistrarError::Kubeconfig(path.to_path_buf(), e);
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| bad(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| bad(e.to_string()))?;
    let client = kube::Client::try_from(config).map_err(|e| bad(e.to_string()))?;
    client
        .apiserver_version()
        .await
        .map_err(|e| RegistrarError::ApiServer(path.to_path_buf(), e.to_string()))?;
    Ok(Arc::new(KubeClient::new(
        client,
        ClientLimits::default(),
        clock,
        "karpenter-sim-registrar",
    )))
}

impl Registrar {
    /// `AWS_ENDPOINT_URL` for the controller (and the fake cloud's control API under it).
    pub fn aws_url(&self) -> String {
        self.aws_server.endpoint()
    }

    /// The fake cloud the nodes come from.
    pub fn cloud(&self) -> &Arc<FakeCloud> {
        &self.aws.account.cloud
    }

    /// One pass: the cloud catches up with the clock, the kubelet stand-in ticks, and the node
    /// Leases are renewed when due. Errors are printed and the next tick retries (a kubelet
    /// does not stop on one failed call either); what the kubelet did is printed as it happens.
    pub async fn tick(&mut self) -> Option<TickReport> {
        self.cloud().advance_to_now();
        let report = match self.kubelet.tick().await {
            Ok(report) => {
                print_report(&report);
                Some(report)
            }
            Err(e) => {
                eprintln!("kubelet: {e}");
                None
            }
        };
        let now = self.clock.now();
        // A kubelet creates its Lease right after registering its Node, then renews it.
        let registered = report.as_ref().is_some_and(|r| !r.registered.is_empty());
        let due = registered
            || self
                .renewed
                .is_none_or(|last| now.duration_since(last).unsigned_abs() >= NODE_LEASE_RENEW);
        if due {
            match self.renew_leases(now).await {
                Ok(()) => self.renewed = Some(now),
                Err(e) => eprintln!("node leases: {e}"),
            }
        }
        report
    }

    /// Ticks until `stop` resolves, then shuts the AWS endpoint down.
    pub async fn run_until(mut self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            self.tick().await;
            real_tokio::select! {
                _ = &mut stop => break,
                _ = real_tokio::time::sleep(self.tick) => {}
            }
        }
        self.aws_server.shutdown().await;
    }

    /// Renews the Lease of every node whose instance is alive (a stopped or terminated
    /// instance's kubelet renews nothing, so a real control plane sees it go `Unknown`).
    async fn renew_leases(&self, now: Timestamp) -> Result<(), KubeError> {
        let nodes = self
            .kube
            .list(&ResourceKind::NODE, &ListOptions::default())
            .await?;
        for node in &nodes.items {
            let Some(id) = instance_id(node) else {
                continue;
            };
            if matches!(
                self.cloud().instance_state(&id),
                Some(InstanceState::Pending | InstanceState::Running)
            ) {
                self.renew_lease(node, now).await?;
            }
        }
        Ok(())
    }

    /// Writes `renewTime` on the node's Lease, creating it (owned by the Node, so the garbage
    /// collector removes it with the Node) and its namespace when missing.
    async fn renew_lease(&self, node: &Value, now: Timestamp) -> Result<(), KubeError> {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        let key = ObjectKey::namespaced(NODE_LEASE_NAMESPACE, name);
        let spec = json!({
            "holderIdentity": name,
            "leaseDurationSeconds": NODE_LEASE_SECONDS,
            "renewTime": micro_time(now),
        });
        let patch = Patch::Merge(json!({ "spec": spec }));
        match self.kube.patch(&ResourceKind::LEASE, &key, &patch).await {
            Err(KubeError::NotFound(_)) => {}
            other => return other.map(|_| ()),
        }
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": name, "namespace": NODE_LEASE_NAMESPACE,
                "ownerReferences": [{
                    "apiVersion": "v1", "kind": "Node", "name": name,
                    "uid": node["metadata"]["uid"],
                }],
            },
            "spec": spec,
        });
        let created = match self.kube.create(&ResourceKind::LEASE, lease.clone()).await {
            Err(KubeError::NotFound(_)) => {
                self.create_lease_namespace().await?;
                self.kube.create(&ResourceKind::LEASE, lease).await
            }
            other => other,
        };
        match created {
            Ok(_) | Err(KubeError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `kube-node-lease`, which a real API server creates at start-up (the in-memory one
    /// does not).
    async fn create_lease_namespace(&self) -> Result<(), KubeError> {
        let namespace = json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": NODE_LEASE_NAMESPACE},
        });
        match self.kube.create(&ResourceKind::NAMESPACE, namespace).await {
            Ok(_) | Err(KubeError::AlreadyExists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// One line per thing the kubelet stand-in did, for the process's log.
fn print_report(report: &TickReport) {
    for node in &report.registered {
        println!("registered node {node}");
    }
    for node in &report.nodes_ready {
        println!("node {node} is Ready");
    }
    for node in &report.nodes_not_ready {
        println!("node {node} is NotReady (its instance stopped or went away)");
    }
    for node in &report.nodes_deleted {
        println!("deleted node {node} (its instance is gone)");
    }
    for id in &report.unknown_instance_types {
        println!("instance {id} not registered: the catalog does not know its instance type");
    }
}

/// The EC2 instance id in an `aws:///ZONE/INSTANCE_ID` provider id.
fn instance_id(node: &Value) -> Option<String> {
    let provider_id = node["spec"]["providerID"].as_str()?;
    let id = provider_id.strip_prefix("aws:///")?.rsplit('/').next()?;
    id.starts_with("i-").then(|| id.to_string())
}

/// `MicroTime`'s wire format: RFC 3339 with microseconds.
fn micro_time(time: Timestamp) -> String {
    time.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}
