//! `karpenter controller`: the container's entrypoint and the composition root.
//!
//! Start-up, in order, each failure a non-zero exit with the reason logged:
//! 1. settings ([`settings`]) parsed and checked: a bad value stops here, named;
//! 2. JSON logs ([`logging`]); the health endpoint is served from here on (not ready);
//! 3. the Kubernetes client from the kube config (`KUBECONFIG`, else in-cluster), checked with
//!    `GET /version` (the Kubernetes version AMI aliases resolve for);
//! 4. the AWS clients (`AWS_REGION`, `AWS_ENDPOINT_URL` honoured), the cluster's endpoint and CA
//!    ([`discovery`]), the instance catalog, the interruption queue if one is set;
//! 5. the operator, built now (its metrics are served from here on) and started
//!    ([`karpenter_core::operator::Operator::spawn`]) only while this replica holds the leader
//!    Lease ([`leading`]).
//!
//! SIGTERM (or Ctrl-C) ends it: readiness drops, the loops take no new work and finish what
//! they started within `karpenter_core::operator::SHUTDOWN_DRAIN_MAX`, the Lease is released
//! so a standby takes over at once, and the
//! process exits 0.

mod discovery;
mod http;
mod leading;
mod logging;
mod report_log;
pub mod settings;

use std::process::ExitCode;
use std::sync::Arc;

use karpenter_aws::Aws;
use karpenter_core::context::Context;
use karpenter_core::operator::{Operator, Options};
use karpenter_core::seams::{Clock, Ec2, KubeApi};
use karpenter_kube::{ClientLimits, KubeClient};

pub use settings::Settings;

/// Why the controller could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    #[error("kube config (KUBECONFIG or in-cluster): {0}")]
    KubeConfig(String),
    #[error("the Kubernetes API server: {0}")]
    ApiServer(String),
    #[error("AWS configuration: {0}")]
    Aws(String),
    #[error("cluster discovery: {0}")]
    Discovery(String),
    #[error("instance catalog: {0}")]
    Catalog(String),
    #[error("interruption queue {queue}: {message}")]
    Queue { queue: String, message: String },
    #[error("serving {what} on port {port}: {message}")]
    Serve {
        what: &'static str,
        port: u16,
        message: String,
    },
    #[error("leader election: {0}")]
    Leader(String),
    #[error("a controller loop stopped unexpectedly")]
    Degraded,
    #[error("runtime: {0}")]
    Runtime(String),
}

/// The system clock behind the `Clock` seam: the binary is the one place that reads it.
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }
}

/// Runs the controller until SIGTERM; the exit code says how it ended.
pub fn run(settings: Settings) -> ExitCode {
    if let Err(message) = settings.validate() {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    if settings.print_settings {
        println!("{}", settings.to_json());
        return ExitCode::SUCCESS;
    }
    logging::init(settings.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(start(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %error, "controller stopped");
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// This replica's leader-election identity (client-go: hostname, `_`, a UUID).
fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "karpenter".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// The composition: every seam built, then the leader loop.
async fn start(settings: Settings) -> Result<(), ControllerError> {
    tracing::info!(settings = %settings.to_json(), "starting karpenter controller");
    let health = Arc::new(http::Health::default());
    let probe = health.clone();
    http::serve(
        settings.health_probe_port,
        Arc::new(move |path| http::health_answer(&probe, path)),
    )
    .await
    .map_err(|e| ControllerError::Serve {
        what: "/healthz and /readyz",
        port: settings.health_probe_port,
        message: e.to_string(),
    })?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let config = kube::Config::infer()
        .await
        .map_err(|e| ControllerError::KubeConfig(e.to_string()))?;
    let kube_ca = discovery::kube_config_ca(&config);
    let client =
        kube::Client::try_from(config).map_err(|e| ControllerError::KubeConfig(e.to_string()))?;
    let version = client
        .apiserver_version()
        .await
        .map_err(|e| ControllerError::ApiServer(e.to_string()))?;
    let identity = identity();
    let limits = ClientLimits {
        qps: settings.kube_client_qps,
        burst: settings.kube_client_burst,
    };
    let kube: Arc<dyn KubeApi> = Arc::new(KubeClient::new(
        client,
        limits,
        clock.clone(),
        identity.clone(),
    ));
    let aws = Aws::load(karpenter_aws::Settings::default(), clock.clone())
        .await
        .map_err(|e| ControllerError::Aws(e.to_string()))?;
    let cluster = discovery::discover(&settings, &aws.eks(), kube_ca, &version).await?;
    let (catalog, live_catalog) =
        discovery::load_catalog(&aws, settings.isolated_vpc, clock.clone()).await?;
    let options = options(&settings, &cluster);
    let ec2: Arc<dyn Ec2> = Arc::new(aws.ec2());
    let mut ctx = Context::new(kube.clone(), ec2, clock.clone(), catalog, options)
        .with_ec2_economy()
        .with_iam(Arc::new(aws.iam()))
        .with_live_catalog(live_catalog);
    if !settings.interruption_queue.is_empty() {
        let sqs =
            aws.sqs(&settings.interruption_queue)
                .await
                .map_err(|e| ControllerError::Queue {
                    queue: settings.interruption_queue.clone(),
                    message: e.to_string(),
                })?;
        let url = sqs.queue_url().to_string();
        ctx = ctx.with_interruption_queue(Arc::new(sqs), url);
    }
    let operator = Operator::with_context(ctx);
    let metrics = operator.metrics().clone();
    // `karpenter_build_info`: this binary's version, and the revision the build was given
    // (`KARPENTER_COMMIT` at compile time; empty without one).
    metrics.set_build_info(&karpenter_core::metrics::BuildInfo::new(
        env!("CARGO_PKG_VERSION"),
        option_env!("KARPENTER_COMMIT").unwrap_or_default(),
    ));
    http::serve(
        settings.metrics_port,
        Arc::new(move |path| http::metrics_answer(&metrics, path)),
    )
    .await
    .map_err(|e| ControllerError::Serve {
        what: "/metrics",
        port: settings.metrics_port,
        message: e.to_string(),
    })?;
    let lease = (!settings.disable_leader_election).then(|| {
        karpenter_core::leader::LeaseConfig::new(
            settings.lease_namespace(),
            settings.leader_election_name.clone(),
            identity,
        )
    });
    leading::run(operator, kube, clock, lease, health).await
}

/// The core's options from the settings and what discovery found.
fn options(settings: &Settings, cluster: &discovery::Discovered) -> Options {
    let mut options = Options::default();
    options.provisioning.window.idle = settings.batch_idle_duration;
    options.provisioning.window.max = settings.batch_max_duration;
    options.provisioning.scheduling.preference_policy = settings.preference_policy();
    options.provisioning.scheduling.min_values_policy = settings.min_values_policy();
    options.disruption.scheduling = options.provisioning.scheduling;
    options.disruption.spot_to_spot = settings.feature_gates.spot_to_spot_consolidation;
    options.scheduler_config = settings.scheduler_config.0.clone();
    options.lifecycle.cluster_name = settings.cluster_name.clone();
    options.lifecycle.kubernetes_version = cluster.kubernetes_version.clone();
    options.lifecycle.cluster = cluster.cluster.clone();
    options
}
