//! Upstream's cloud-provider series: method durations and errors, the AWS provider's
//! instance-type gauges and batcher histograms, and `karpenter_build_info`.
//!
//! Upstream decorates its `CloudProvider` interface once, so every call of `Create`, `Delete`,
//! `Get`, `List`, `GetInstanceTypes` and `IsDrifted` is timed and its errors counted, labelled
//! with the calling controller. We have no such interface: the controllers call the EC2 seam
//! directly. Each upstream method therefore has exactly one place here that plays its part, and
//! that place goes through [`Metrics::cloud_call`] (or [`Metrics::cloud_call_sync`]):
//!
//! | method | ours | controller |
//! |---|---|---|
//! | `Create` | one launch attempt: adopt a tagged instance or launch one (`nodeclaim::launch`) | `nodeclaim.lifecycle` |
//! | `Delete` | one TerminateInstances of a terminating claim's instance (`termination::instance`), or of leaked instances (`nodeclaim::garbagecollection`) | `node.termination`, `instance.garbagecollection` |
//! | `Get` | the termination pass's DescribeInstances of the terminating claims' instances | `node.termination` |
//! | `List` | garbage collection's DescribeInstances of the cluster's Karpenter instances | `nodeclaim.garbagecollection` |
//! | `GetInstanceTypes` | one NodePool's instance types as its EC2NodeClass launches them (provisioning) | `provisioner` |
//! | `IsDrifted` | the drift pass's DescribeInstances refresh of the claims' placements | `nodeclaim.disruption` |

use std::future::Future;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tokio::time::Instant;

use super::{HistogramFamily, Metrics, SecondsGauge};
use crate::api::labels::{INSTANCE_CPU_LABEL, INSTANCE_MEMORY_LABEL};
use crate::catalog::{Catalog, UnavailableOfferings};
use crate::seams::ec2::Ec2Error;

/// The `provider` label: upstream's AWS provider names itself `aws`.
pub const PROVIDER: &str = "aws";

/// Upstream's `CloudProvider` methods we have an equivalent of (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CloudMethod {
    Create,
    Delete,
    Get,
    List,
    GetInstanceTypes,
    IsDrifted,
}

impl CloudMethod {
    /// The `method` label: upstream's Go method name.
    pub fn name(self) -> &'static str {
        match self {
            CloudMethod::Create => "Create",
            CloudMethod::Delete => "Delete",
            CloudMethod::Get => "Get",
            CloudMethod::List => "List",
            CloudMethod::GetInstanceTypes => "GetInstanceTypes",
            CloudMethod::IsDrifted => "IsDrifted",
        }
    }
}

/// What an error of a cloud-provider call is, in upstream's `error` label values:
/// `InsufficientCapacityError`, `NodeClaimNotFoundError`, `NodeClassNotReadyError`, or empty
/// for any other error (upstream's `MetricLabelErrorDefaultVal`).
pub trait CloudErrorKind {
    fn error_label(&self) -> &'static str;
}

/// Upstream's well-known error label values.
pub const INSUFFICIENT_CAPACITY_ERROR: &str = "InsufficientCapacityError";
pub const NODECLAIM_NOT_FOUND_ERROR: &str = "NodeClaimNotFoundError";
pub const NODECLASS_NOT_READY_ERROR: &str = "NodeClassNotReadyError";

impl CloudErrorKind for Ec2Error {
    fn error_label(&self) -> &'static str {
        match self {
            Ec2Error::InsufficientCapacity { .. } => INSUFFICIENT_CAPACITY_ERROR,
            // Upstream's Delete and Get answer NodeClaimNotFound for an instance EC2 no longer
            // knows.
            Ec2Error::NotFound { .. } => NODECLAIM_NOT_FOUND_ERROR,
            _ => "",
        }
    }
}

impl CloudErrorKind for std::convert::Infallible {
    fn error_label(&self) -> &'static str {
        match *self {}
    }
}

/// `controller`, `method`, `provider` (upstream's `cloudprovider_duration_seconds`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CloudCallLabels {
    pub controller: String,
    pub method: String,
    pub provider: String,
}

/// `controller`, `method`, `provider`, `error` (upstream's `cloudprovider_errors_total`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CloudErrorLabels {
    pub controller: String,
    pub method: String,
    pub provider: String,
    pub error: String,
}

/// `instance_type`, `capacity_type`, `zone` (upstream's offering gauges).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct OfferingLabels {
    pub instance_type: String,
    pub capacity_type: String,
    pub zone: String,
}

/// `instance_type` (upstream's `instance_type_cpu_cores` and `…_memory_bytes`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct InstanceTypeLabels {
    pub instance_type: String,
}

/// `batcher`: which batched EC2 call (`terminate_instances`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct BatcherLabels {
    pub batcher: String,
}

/// `version`, `goversion`, `goarch`, `commit` (upstream's `build_info`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct BuildInfo {
    /// The release (the workspace's package version).
    pub version: String,
    /// The compiler that built the binary. There is no Go here: the label keeps upstream's name
    /// so dashboards find it, and holds the Rust compiler's version (`rustc 1.95.0 (...)`),
    /// which plays the same part; empty when the build did not record it.
    pub goversion: String,
    /// The CPU architecture in Go's names (`amd64`, `arm64`), as upstream's `runtime.GOARCH`,
    /// so the values dashboards filter on stay the same.
    pub goarch: String,
    /// The source revision, when the build was given one; empty otherwise.
    pub commit: String,
}

impl BuildInfo {
    /// This build's facts for `version` and `commit` (the binary passes its own): the
    /// architecture it was compiled for and the compiler version the core's build recorded.
    pub fn new(version: &str, commit: &str) -> Self {
        Self {
            version: version.to_string(),
            goversion: option_env!("KARPENTER_RUSTC_VERSION")
                .unwrap_or_default()
                .to_string(),
            goarch: go_arch(std::env::consts::ARCH).to_string(),
            commit: commit.to_string(),
        }
    }
}

/// Rust's name of a target architecture in Go's `GOARCH` spelling.
pub fn go_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// Prometheus's default buckets (upstream's duration histogram sets none).
fn default_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// Upstream's batcher `SizeBuckets()`.
fn size_histogram() -> Histogram {
    Histogram::new([
        1.0, 2.0, 4.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0,
        100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0, 275.0, 300.0, 350.0, 400.0, 450.0, 500.0,
        550.0, 600.0, 700.0, 800.0, 900.0, 1000.0,
    ])
}

/// The families of this module (fields of [`Metrics::cloud`]).
pub struct CloudProviderMetrics {
    /// `karpenter_cloudprovider_duration_seconds{controller, method, provider}`.
    pub duration: HistogramFamily<CloudCallLabels>,
    /// `karpenter_cloudprovider_errors_total{controller, method, provider, error}`.
    pub errors: Family<CloudErrorLabels, Counter>,
    /// `karpenter_cloudprovider_instance_type_offering_available{instance_type, capacity_type,
    /// zone}`: 1 when the catalog offers it and the unavailable-offerings cache does not hold it.
    pub offering_available: Family<OfferingLabels, Gauge>,
    /// `karpenter_cloudprovider_instance_type_offering_price_estimate{…}`: dollars per hour.
    pub offering_price: Family<OfferingLabels, SecondsGauge>,
    /// `karpenter_cloudprovider_instance_type_cpu_cores{instance_type}`: vCPUs.
    pub cpu_cores: Family<InstanceTypeLabels, Gauge>,
    /// `karpenter_cloudprovider_instance_type_memory_bytes{instance_type}`: EC2's memory size.
    pub memory_bytes: Family<InstanceTypeLabels, Gauge>,
    /// `karpenter_cloudprovider_batcher_batch_time_seconds{batcher}`: a batch window, from its
    /// first request to its close.
    pub batch_time: HistogramFamily<BatcherLabels>,
    /// `karpenter_cloudprovider_batcher_batch_size{batcher}`: requests (callers) in a batch.
    pub batch_size: HistogramFamily<BatcherLabels>,
    /// `karpenter_build_info{version, goversion, goarch, commit}`: 1 for this build.
    pub build_info: Family<BuildInfo, Gauge>,
}

impl Default for CloudProviderMetrics {
    fn default() -> Self {
        Self {
            duration: Family::new_with_constructor(default_histogram),
            errors: Family::default(),
            offering_available: Family::default(),
            offering_price: Family::default(),
            cpu_cores: Family::default(),
            memory_bytes: Family::default(),
            batch_time: Family::new_with_constructor(super::upstream_duration_histogram),
            batch_size: Family::new_with_constructor(size_histogram),
            build_info: Family::default(),
        }
    }
}

impl Metrics {
    /// Registers the families of this module.
    pub(super) fn register_cloudprovider(&mut self) {
        let c = &self.cloud;
        let r = &mut self.registry;
        r.register(
            "cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
            c.duration.clone(),
        );
        r.register(
            "cloudprovider_errors",
            "Total number of errors returned from CloudProvider calls.",
            c.errors.clone(),
        );
        r.register(
            "cloudprovider_instance_type_offering_available",
            "Instance type offering availability, based on instance type, capacity type, and zone",
            c.offering_available.clone(),
        );
        r.register(
            "cloudprovider_instance_type_offering_price_estimate",
            "Instance type offering estimated hourly price used when making informed decisions on node cost calculation, based on instance type, capacity type, and zone.",
            c.offering_price.clone(),
        );
        r.register(
            "cloudprovider_instance_type_cpu_cores",
            "VCPUs cores for a given instance type.",
            c.cpu_cores.clone(),
        );
        r.register(
            "cloudprovider_instance_type_memory_bytes",
            "Memory, in bytes, for a given instance type.",
            c.memory_bytes.clone(),
        );
        r.register(
            "cloudprovider_batcher_batch_time_seconds",
            "Duration of the batching window per batcher",
            c.batch_time.clone(),
        );
        r.register(
            "cloudprovider_batcher_batch_size",
            "Size of the request batch per batcher",
            c.batch_size.clone(),
        );
        r.register(
            "build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            c.build_info.clone(),
        );
    }

    /// Makes `info` the one `karpenter_build_info` series (the binary calls it at start with
    /// its version and revision; until then the core's own version is shown).
    pub fn set_build_info(&self, info: &BuildInfo) {
        self.cloud.build_info.clear();
        self.cloud.build_info.get_or_create(info).set(1);
    }

    /// Awaits `call` as upstream's decorated `method` from `controller`: its duration is
    /// observed, and an error counted with its [`CloudErrorKind`].
    pub async fn cloud_call<T, E: CloudErrorKind>(
        &self,
        controller: &str,
        method: CloudMethod,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let started = Instant::now();
        let result = call.await;
        self.record_cloud_call(controller, method, started, result.as_ref().err());
        result
    }

    /// [`Self::cloud_call`] for a call that does not wait (instance types from the catalog).
    pub fn cloud_call_sync<T, E: CloudErrorKind>(
        &self,
        controller: &str,
        method: CloudMethod,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let started = Instant::now();
        let result = call();
        self.record_cloud_call(controller, method, started, result.as_ref().err());
        result
    }

    fn record_cloud_call<E: CloudErrorKind>(
        &self,
        controller: &str,
        method: CloudMethod,
        started: Instant,
        error: Option<&E>,
    ) {
        let labels = CloudCallLabels {
            controller: controller.to_string(),
            method: method.name().to_string(),
            provider: PROVIDER.to_string(),
        };
        self.cloud
            .duration
            .get_or_create(&labels)
            .observe(started.elapsed().as_secs_f64());
        if let Some(error) = error {
            self.cloud
                .errors
                .get_or_create(&CloudErrorLabels {
                    controller: labels.controller,
                    method: labels.method,
                    provider: labels.provider,
                    error: error.error_label().to_string(),
                })
                .inc();
        }
    }

    /// The instance-type gauges of `catalog` at `now`: vCPUs and memory per type, and per
    /// (type, capacity type, zone) whether it is offered and its price. Several reservations of
    /// one type in one zone are one series, available if any is (upstream's fold).
    pub fn record_catalog(
        &self,
        catalog: &Catalog,
        unavailable: &UnavailableOfferings,
        now: jiff::Timestamp,
    ) {
        let c = &self.cloud;
        for it in &catalog.instance_types {
            let labels = InstanceTypeLabels {
                instance_type: it.name.clone(),
            };
            let number = |key: &str| it.labels.get(key).and_then(|v| v.parse::<i64>().ok());
            if let Some(cpu) = number(INSTANCE_CPU_LABEL) {
                c.cpu_cores.get_or_create(&labels).set(cpu);
            }
            if let Some(mib) = number(INSTANCE_MEMORY_LABEL) {
                let bytes = mib.saturating_mul(1024 * 1024);
                c.memory_bytes.get_or_create(&labels).set(bytes);
            }
            let mut offered: std::collections::BTreeMap<OfferingLabels, (bool, f64)> =
                std::collections::BTreeMap::new();
            for o in &it.offerings {
                let available = o.available
                    && !unavailable.is_unavailable(&it.name, &o.zone, o.capacity_type, now);
                let key = OfferingLabels {
                    instance_type: it.name.clone(),
                    capacity_type: o.capacity_type.label().to_string(),
                    zone: o.zone.clone(),
                };
                let entry = offered.entry(key).or_insert((false, o.price));
                *entry = (entry.0 || available, o.price);
            }
            for (key, (available, price)) in offered {
                c.offering_available
                    .get_or_create(&key)
                    .set(i64::from(available));
                c.offering_price.get_or_create(&key).set(price);
            }
        }
    }

    /// One series of each family of this module, with placeholder labels ([`Self::touch_all`]).
    pub(super) fn touch_cloudprovider(&self) {
        let c = &self.cloud;
        let call = CloudCallLabels {
            controller: "nodeclaim.lifecycle".into(),
            method: "Create".into(),
            provider: PROVIDER.into(),
        };
        let _ = c.duration.get_or_create(&call);
        let _ = c.errors.get_or_create(&CloudErrorLabels {
            controller: call.controller,
            method: call.method,
            provider: call.provider,
            error: String::new(),
        });
        let offering = OfferingLabels {
            instance_type: "m5.large".into(),
            capacity_type: "spot".into(),
            zone: "us-west-2a".into(),
        };
        let _ = c.offering_available.get_or_create(&offering);
        let _ = c.offering_price.get_or_create(&offering);
        let it = InstanceTypeLabels {
            instance_type: "m5.large".into(),
        };
        let _ = c.cpu_cores.get_or_create(&it);
        let _ = c.memory_bytes.get_or_create(&it);
        let batcher = BatcherLabels {
            batcher: "terminate_instances".into(),
        };
        let _ = c.batch_time.get_or_create(&batcher);
        let _ = c.batch_size.get_or_create(&batcher);
    }
}
