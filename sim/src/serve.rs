//! `karpenter-sim serve`: the simulated world on the system clock, behind real sockets — the
//! Kubernetes REST API of [`fakekube_serve`] and the AWS endpoint of [`fakecloud_serve`] — so
//! kubectl, kube-rs and the real `karpenter controller` binary can drive it. Built only with
//! the `serve` feature: the `--cfg madsim` build of the simulation never links hyper.
//!
//! Unlike [`crate::world::World`], nothing here is stepped or replayable: the kubelet, the
//! kube-scheduler and the Deployment stand-ins tick every [`ServeOptions::tick_ms`] of wall
//! time, and the in-process controller (unless `--no-controller`) runs as the production
//! binary does, as [`Operator::spawn`]'s loops on tokio. The seams are the same objects the
//! simulation uses, so what kubectl sees is what the simulation's invariants look at.

pub mod deployments;
pub mod gc;
pub mod registrar;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fakecloud::Account;
use fakekube::{ApiServer, ApiServerConfig};
use karpenter_core::catalog::Catalog;
use karpenter_core::manifest::parse_documents;
use karpenter_core::operator::{self, Operator, OperatorHandle};
use karpenter_core::seams::{Clock, Ec2, KubeApi, Sqs};

use crate::kubelet::{Kubelet, KubeletConfig};
use crate::scenario::Scenario;
use crate::scheduler::{Backoff, Scheduler, SchedulerConfig};
use deployments::{DEPLOYMENT, Deployments};

/// What `karpenter-sim serve` was asked for.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The Kubernetes API's address (port 0: any free port).
    pub listen: SocketAddr,
    /// The AWS endpoint's address (port 0: any free port).
    pub aws_listen: SocketAddr,
    pub cluster: String,
    /// A built-in scenario or a scenario file: its cloud knobs, manifests and Deployments.
    pub scenario: Option<String>,
    pub seed: u64,
    /// Run the in-process controller (off with `--no-controller`: the real binary is it).
    pub controller: bool,
    /// Run the kubelet stand-in (off with `--no-kubelet`: a `karpenter-sim cloud` registrar
    /// plays the nodes over HTTP, with its own fake cloud, as it would against kind).
    pub kubelet: bool,
    pub kubeconfig: Option<PathBuf>,
    /// Wall time between two ticks of the stand-ins.
    pub tick_ms: u64,
}

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("scenario: {0}")]
    Scenario(String),
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, std::io::Error),
    #[error("cannot write the kubeconfig {0}: {1}")]
    Kubeconfig(PathBuf, std::io::Error),
    #[error("manifests: {0}")]
    Manifests(String),
}

/// A running `serve`: both servers, the stand-ins' state and the controller (if in process).
pub struct Running {
    pub api: Arc<ApiServer>,
    pub aws: Arc<fakecloud_serve::World>,
    kube_server: fakekube_serve::Server,
    aws_server: fakecloud_serve::Server,
    controller: Option<OperatorHandle>,
    kubelet: Option<Kubelet>,
    scheduler: Scheduler,
    deployments: Deployments,
    clock: Arc<dyn Clock>,
    tick: Duration,
}

impl Running {
    /// The Kubernetes API's URL (the kubeconfig's server).
    pub fn kube_url(&self) -> String {
        self.kube_server.url()
    }

    /// `AWS_ENDPOINT_URL` for the controller.
    pub fn aws_url(&self) -> String {
        self.aws_server.endpoint()
    }

    /// One pass of the stand-ins: fakecloud and the API server catch up with the clock, then
    /// the kubelet, the kube-scheduler and the Deployment controller. Errors are printed and the
    /// next tick retries (a real cluster's components do not stop on one failed call either).
    pub async fn tick(&mut self) {
        let cloud = &self.aws.account.cloud;
        cloud.advance_to_now();
        self.api.advance_to_now();
        if let Some(kubelet) = &self.kubelet
            && let Err(e) = kubelet.tick().await
        {
            eprintln!("kubelet: {e}");
        }
        if let Err(e) = self.scheduler.step().await {
            eprintln!("kube-scheduler: {e}");
        }
        let now = self.clock.now();
        if let Err(e) = self.deployments.reconcile(self.api.as_ref(), now).await {
            eprintln!("deployment controller: {e}");
        }
        if let Err(e) = gc::collect_node_claims(self.api.as_ref()).await {
            eprintln!("garbage collector: {e}");
        }
    }

    /// Ticks until `stop` resolves, then shuts both servers and the controller down.
    pub async fn run_until(mut self, stop: impl Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        loop {
            self.tick().await;
            real_tokio::select! {
                _ = &mut stop => break,
                _ = real_tokio::time::sleep(self.tick) => {}
            }
        }
        if let Some(controller) = self.controller.take() {
            controller.shutdown(operator::SHUTDOWN_DRAIN_MAX).await;
        }
        self.kube_server.shutdown().await;
        self.aws_server.shutdown().await;
    }
}

/// The kube-scheduler stand-in's settings here: kube-scheduler's backoff, a pod that failed
/// waiting 1 s, doubling to 10 s, before its next attempt. Without it each 500 ms tick rewrote
/// the condition of every pending pod whose message changed ("0/N nodes are available"):
/// 20,000 status writes a tick in `fleet-2000`, which overflowed every watch's history and made
/// every client re-list. The simulated worlds keep trying every pod each step (their scenarios'
/// timings were measured that way).
fn scheduler_config() -> SchedulerConfig {
    SchedulerConfig {
        backoff: Some(Backoff::KUBE_SCHEDULER),
        ..SchedulerConfig::default()
    }
}

/// Builds the world and starts serving it (call inside a multi-threaded tokio runtime).
pub async fn start(options: &ServeOptions) -> Result<Running, ServeError> {
    let clock: Arc<dyn Clock> = Arc::new(fakecloud_serve::WallClock);
    let scenario = match &options.scenario {
        Some(name) => Some(Scenario::load(name).map_err(|e| ServeError::Scenario(e.to_string()))?),
        None => None,
    };
    let mut cloud_config = match &scenario {
        Some(s) => s.cloud.cloud_config(options.seed),
        None => fakecloud::Config {
            seed: options.seed,
            ..Default::default()
        },
    };
    if scenario
        .as_ref()
        .is_none_or(|s| s.cloud.discovery_tag.is_none())
    {
        cloud_config.cluster_name = options.cluster.clone();
    }
    let account = Account::new(clock.clone(), Catalog::builtin(), cloud_config);
    let cloud = account.cloud.clone();
    let account_iam = account.iam.clone();
    let api = Arc::new(ApiServer::new(
        clock.clone(),
        ApiServerConfig {
            seed: options.seed,
            // The simulated cluster is EKS: Windows pods get their address from its webhook.
            vpc_admission_webhook: true,
            ..ApiServerConfig::default()
        },
    ));
    if let Some(scenario) = &scenario {
        scenario.cloud.apply(options.seed, &cloud, &api);
        apply_scenario(&api, scenario).await?;
    }
    let aws = fakecloud_serve::World::new(account);
    let kube_server = fakekube_serve::serve(api.clone(), options.listen)
        .await
        .map_err(|e| ServeError::Listen(options.listen, e))?;
    let aws_server = fakecloud_serve::serve(aws.clone(), options.aws_listen)
        .await
        .map_err(|e| ServeError::Listen(options.aws_listen, e))?;
    if let Some(path) = &options.kubeconfig {
        let text = fakekube_serve::kubeconfig(&kube_server.url(), &options.cluster);
        std::fs::write(path, text).map_err(|e| ServeError::Kubeconfig(path.clone(), e))?;
    }
    let kube: Arc<dyn KubeApi> = api.clone();
    let controller = options.controller.then(|| {
        let ec2: Arc<dyn Ec2> = cloud.clone();
        let sqs: Arc<dyn Sqs> = cloud.clone();
        let mut controller_options = operator::Options::default();
        controller_options.lifecycle.cluster_name = cloud.cluster_name();
        // What the binary's startup discovery finds through EKS DescribeCluster.
        let identity = cloud.cluster_identity();
        controller_options.lifecycle.cluster =
            karpenter_core::nodeclass::cluster::ClusterInfo::new(
                &identity.name,
                &identity.endpoint,
                &identity.ca_bundle,
                Some(&identity.cidr),
                None,
            )
            .ok();
        let iam: Arc<dyn karpenter_core::seams::iam::InstanceProfiles> = account_iam.clone();
        Operator::with_context(
            karpenter_core::context::Context::new(
                kube.clone(),
                ec2,
                clock.clone(),
                Arc::new(Catalog::builtin()),
                controller_options,
            )
            .with_iam(iam)
            .with_ec2_economy(),
        )
        .with_interruption_queue(sqs, format!("fakecloud://sqs/{}", cloud.cluster_name()))
        .spawn()
    });
    Ok(Running {
        kubelet: options.kubelet.then(|| {
            Kubelet::new(
                kube.clone(),
                clock.clone(),
                cloud.clone(),
                KubeletConfig::default(),
            )
        }),
        scheduler: Scheduler::new(kube.clone(), clock.clone(), scheduler_config()),
        deployments: Deployments::default(),
        api,
        aws,
        kube_server,
        aws_server,
        controller,
        clock,
        tick: Duration::from_millis(options.tick_ms),
    })
}

/// The scenario's manifests, and its Deployments as `apps/v1` objects at their first replica
/// count (later workload events and batches are the stepped world's: not replayed here).
async fn apply_scenario(api: &ApiServer, scenario: &Scenario) -> Result<(), ServeError> {
    let documents =
        parse_documents(&scenario.manifests).map_err(|e| ServeError::Manifests(e.to_string()))?;
    for (index, document) in documents {
        let api_version = document["apiVersion"].as_str().unwrap_or_default();
        let kind = document["kind"].as_str().unwrap_or_default();
        let served = fakekube_serve::kinds::by_kind(api_version, kind).ok_or_else(|| {
            ServeError::Manifests(format!(
                "document {index}: {api_version} {kind} is not served"
            ))
        })?;
        api.create(&served.kind, document)
            .await
            .map_err(|e| ServeError::Manifests(format!("document {index}: {e}")))?;
    }
    let mut created = std::collections::BTreeSet::new();
    for event in &scenario.workloads {
        let Some(spec) = &event.deployment else {
            continue;
        };
        if !created.insert(spec.name.clone()) {
            continue;
        }
        let template = crate::workloads::Deployment::with_requests(
            &spec.name,
            spec.replicas as usize,
            &spec.cpu,
            Some(&spec.memory),
        )
        .template;
        let object = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": spec.name, "namespace": "default"},
            "spec": {"replicas": spec.replicas,
                "selector": {"matchLabels": template["metadata"]["labels"]},
                "template": template},
        });
        api.create(&DEPLOYMENT, object)
            .await
            .map_err(|e| ServeError::Manifests(format!("deployment {}: {e}", spec.name)))?;
    }
    Ok(())
}
