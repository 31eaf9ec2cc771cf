//! `karpenter controller`'s settings: upstream's environment variables (what the chart sets,
//! `docs/install.md`), each also a flag, with upstream's defaults. A value that does not parse
//! stops the process before anything starts, with the setting's name in the message (clap names
//! the flag and the value name, which is the variable's name).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use karpenter_core::scheduling::{MinValuesPolicy, PreferencePolicy, SchedulerConfiguration};
use karpenter_kube::rbac::LEADER_ELECTION_LEASE;
use serde_json::{Value, json};

/// Upstream's default `FEATURE_GATES` (the chart writes every gate out).
pub const FEATURE_GATES_DEFAULT: &str = "NodeRepair=false,NodeOverlay=false,ReservedCapacity=false,SpotToSpotConsolidation=false,StaticCapacity=false,CapacityBuffer=false";

/// Feature gates upstream knows that this controller does not implement: `=true` is refused at
/// start rather than silently ignored.
const GATES_NOT_IMPLEMENTED: [&str; 5] = [
    "NodeRepair",
    "NodeOverlay",
    "ReservedCapacity",
    "StaticCapacity",
    "CapacityBuffer",
];

/// The settings of the running controller.
#[derive(Clone, Debug, Args)]
pub struct Settings {
    /// The cluster's name: discovery tags, launch template and instance profile names (required).
    #[arg(long, env = "CLUSTER_NAME", value_name = "CLUSTER_NAME", value_parser = non_empty)]
    pub cluster_name: String,
    /// The API server URL nodes join (`https://...`); empty: from EKS DescribeCluster.
    #[arg(long, env = "CLUSTER_ENDPOINT", value_name = "CLUSTER_ENDPOINT", default_value = "", value_parser = endpoint)]
    pub cluster_endpoint: String,
    /// The cluster CA bundle (base64 PEM) nodes trust; empty: EKS, else the kube config's CA.
    #[arg(long, env = "CLUSTER_CA_BUNDLE", value_name = "CLUSTER_CA_BUNDLE", default_value = "", value_parser = ca_bundle)]
    pub cluster_ca_bundle: String,
    /// The SQS queue of interruption events; empty: no interruption handling.
    #[arg(
        long,
        env = "INTERRUPTION_QUEUE",
        value_name = "INTERRUPTION_QUEUE",
        default_value = ""
    )]
    pub interruption_queue: String,
    /// Longest a provisioning batch stays open (Go duration: `10s`, `1m30s`, `500ms`).
    #[arg(long, env = "BATCH_MAX_DURATION", value_name = "BATCH_MAX_DURATION", default_value = "10s", value_parser = positive_duration)]
    pub batch_max_duration: Duration,
    /// A batch closes after this long without a new pending pod.
    #[arg(long, env = "BATCH_IDLE_DURATION", value_name = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = positive_duration)]
    pub batch_idle_duration: Duration,
    /// Preferred affinities and spreads: `Respect` (relaxed one at a time) or `Ignore`.
    #[arg(
        long,
        env = "PREFERENCE_POLICY",
        value_name = "PREFERENCE_POLICY",
        default_value = "Respect"
    )]
    pub preference_policy: Preference,
    /// `minValues` that cannot be met: `Strict` (no NodeClaim) or `BestEffort` (lowered).
    #[arg(
        long,
        env = "MIN_VALUES_POLICY",
        value_name = "MIN_VALUES_POLICY",
        default_value = "Strict"
    )]
    pub min_values_policy: MinValues,
    /// The cluster's kube-scheduler default topology spread constraints, as YAML or JSON
    /// (`podTopologySpread.defaultConstraints`); applied while planning to pods that declare none.
    /// Empty: none.
    #[arg(long, env = "SCHEDULER_CONFIG", value_name = "SCHEDULER_CONFIG", default_value = "", value_parser = scheduler_config)]
    pub scheduler_config: SchedulerConfig,
    /// No Pricing API calls (a VPC without internet access): the built-in price table.
    #[arg(long, env = "ISOLATED_VPC", value_name = "ISOLATED_VPC", default_value = "false", value_parser = go_bool, action = clap::ArgAction::Set)]
    pub isolated_vpc: bool,
    /// Upstream's EKS-managed Karpenter mode; only `false` is supported here.
    #[arg(long, env = "EKS_CONTROL_PLANE", value_name = "EKS_CONTROL_PLANE", default_value = "false", value_parser = go_bool, action = clap::ArgAction::Set)]
    pub eks_control_plane: bool,
    /// Memory EC2 reports but the node does not see, as a fraction (0.075 = 7.5 %).
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", value_name = "VM_MEMORY_OVERHEAD_PERCENT", default_value = "0.075", value_parser = overhead_fraction)]
    pub vm_memory_overhead_percent: f64,
    /// ENIs kept back from pod networking when computing max pods.
    #[arg(long, env = "RESERVED_ENIS", value_name = "RESERVED_ENIS", default_value = "0", value_parser = reserved_enis)]
    pub reserved_enis: u32,
    /// `Name=bool,...`; unknown gates, and `=true` for a gate this controller lacks, are refused.
    #[arg(long, env = "FEATURE_GATES", value_name = "FEATURE_GATES", default_value = FEATURE_GATES_DEFAULT, value_parser = feature_gates)]
    pub feature_gates: FeatureGates,
    /// `debug`, `info`, `warn` or `error`.
    #[arg(
        long,
        env = "LOG_LEVEL",
        value_name = "LOG_LEVEL",
        default_value = "info"
    )]
    pub log_level: LogLevel,
    /// Port of `/metrics`.
    #[arg(long, env = "METRICS_PORT", value_name = "METRICS_PORT", default_value = "8080", value_parser = port)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_PORT", value_name = "HEALTH_PROBE_PORT", default_value = "8081", value_parser = port)]
    pub health_probe_port: u16,
    /// Requests per second to the API server, on average.
    #[arg(
        long,
        env = "KUBE_CLIENT_QPS",
        value_name = "KUBE_CLIENT_QPS",
        default_value = "200"
    )]
    pub kube_client_qps: NonZeroU32,
    /// Requests the client may send at once.
    #[arg(
        long,
        env = "KUBE_CLIENT_BURST",
        value_name = "KUBE_CLIENT_BURST",
        default_value = "300"
    )]
    pub kube_client_burst: NonZeroU32,
    /// Run without a leader lease (one replica only).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", value_name = "DISABLE_LEADER_ELECTION", default_value = "false", value_parser = go_bool, action = clap::ArgAction::Set)]
    pub disable_leader_election: bool,
    /// The leader-election Lease (the chart's Role grants get/patch on this name only).
    #[arg(long, env = "LEADER_ELECTION_NAME", value_name = "LEADER_ELECTION_NAME", default_value = LEADER_ELECTION_LEASE, value_parser = non_empty)]
    pub leader_election_name: String,
    /// Namespace of the Lease; empty: `SYSTEM_NAMESPACE`.
    #[arg(
        long,
        env = "LEADER_ELECTION_NAMESPACE",
        value_name = "LEADER_ELECTION_NAMESPACE",
        default_value = ""
    )]
    pub leader_election_namespace: String,
    /// The namespace the controller runs in (the chart sets it from the pod).
    #[arg(long, env = "SYSTEM_NAMESPACE", value_name = "SYSTEM_NAMESPACE", default_value = "kube-system", value_parser = non_empty)]
    pub system_namespace: String,
    /// Print the settings as resolved (JSON) and exit, without connecting to anything.
    #[arg(long)]
    pub print_settings: bool,
}

/// `SCHEDULER_CONFIG`, decoded and validated (`None`: empty, no default constraints).
#[derive(Clone, Debug, Default)]
pub struct SchedulerConfig(pub Option<Arc<SchedulerConfiguration>>);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum Preference {
    Respect,
    Ignore,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "verbatim")]
pub enum MinValues {
    Strict,
    BestEffort,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

impl LogLevel {
    pub fn filter(self) -> tracing::level_filters::LevelFilter {
        use tracing::level_filters::LevelFilter;
        match self {
            LogLevel::Debug => LevelFilter::DEBUG,
            LogLevel::Info => LevelFilter::INFO,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Error => LevelFilter::ERROR,
        }
    }
}

/// The gates this controller acts on (the others may only be `false`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    pub spot_to_spot_consolidation: bool,
}

impl Settings {
    /// The Lease's namespace: `LEADER_ELECTION_NAMESPACE`, else `SYSTEM_NAMESPACE`.
    pub fn lease_namespace(&self) -> &str {
        if self.leader_election_namespace.is_empty() {
            &self.system_namespace
        } else {
            &self.leader_election_namespace
        }
    }

    /// Checks across settings, and values this controller cannot honour yet (refused rather
    /// than ignored).
    pub fn validate(&self) -> Result<(), String> {
        if self.kube_client_burst < self.kube_client_qps {
            return Err(format!(
                "KUBE_CLIENT_BURST ({}) must be at least KUBE_CLIENT_QPS ({})",
                self.kube_client_burst, self.kube_client_qps
            ));
        }
        if self.batch_idle_duration > self.batch_max_duration {
            return Err(format!(
                "BATCH_IDLE_DURATION ({:?}) must not exceed BATCH_MAX_DURATION ({:?})",
                self.batch_idle_duration, self.batch_max_duration
            ));
        }
        if self.eks_control_plane {
            return Err("EKS_CONTROL_PLANE=true is not supported by this controller".into());
        }
        let overhead = karpenter_core::catalog::overhead::VM_MEMORY_OVERHEAD_PERCENT;
        if self.vm_memory_overhead_percent != overhead {
            return Err(format!(
                "VM_MEMORY_OVERHEAD_PERCENT={}: only the default {overhead} is supported yet (the instance catalog does not take another value)",
                self.vm_memory_overhead_percent
            ));
        }
        if self.reserved_enis != 0 {
            return Err(format!(
                "RESERVED_ENIS={}: only the default 0 is supported yet (the instance catalog does not take another value)",
                self.reserved_enis
            ));
        }
        if self.metrics_port == self.health_probe_port {
            return Err(format!(
                "METRICS_PORT and HEALTH_PROBE_PORT are both {}",
                self.metrics_port
            ));
        }
        Ok(())
    }

    pub fn preference_policy(&self) -> PreferencePolicy {
        match self.preference_policy {
            Preference::Respect => PreferencePolicy::Respect,
            Preference::Ignore => PreferencePolicy::Ignore,
        }
    }

    pub fn min_values_policy(&self) -> MinValuesPolicy {
        match self.min_values_policy {
            MinValues::Strict => MinValuesPolicy::Strict,
            MinValues::BestEffort => MinValuesPolicy::BestEffort,
        }
    }

    /// The resolved settings as JSON, keyed by variable name (`--print-settings`, logs).
    pub fn to_json(&self) -> Value {
        json!({
            "CLUSTER_NAME": self.cluster_name,
            "CLUSTER_ENDPOINT": self.cluster_endpoint,
            "CLUSTER_CA_BUNDLE": self.cluster_ca_bundle,
            "INTERRUPTION_QUEUE": self.interruption_queue,
            "BATCH_MAX_DURATION_MS": self.batch_max_duration.as_millis() as u64,
            "BATCH_IDLE_DURATION_MS": self.batch_idle_duration.as_millis() as u64,
            "PREFERENCE_POLICY": format!("{:?}", self.preference_policy),
            "MIN_VALUES_POLICY": format!("{:?}", self.min_values_policy),
            "SCHEDULER_CONFIG": self.scheduler_config.0.as_deref(),
            "ISOLATED_VPC": self.isolated_vpc,
            "EKS_CONTROL_PLANE": self.eks_control_plane,
            "VM_MEMORY_OVERHEAD_PERCENT": self.vm_memory_overhead_percent,
            "RESERVED_ENIS": self.reserved_enis,
            "FEATURE_GATES": {"SpotToSpotConsolidation": self.feature_gates.spot_to_spot_consolidation},
            "LOG_LEVEL": format!("{:?}", self.log_level).to_lowercase(),
            "METRICS_PORT": self.metrics_port,
            "HEALTH_PROBE_PORT": self.health_probe_port,
            "KUBE_CLIENT_QPS": self.kube_client_qps.get(),
            "KUBE_CLIENT_BURST": self.kube_client_burst.get(),
            "DISABLE_LEADER_ELECTION": self.disable_leader_election,
            "LEADER_ELECTION_NAME": self.leader_election_name,
            "LEADER_ELECTION_NAMESPACE": self.lease_namespace(),
            "SYSTEM_NAMESPACE": self.system_namespace,
        })
    }
}

/// Upstream's `ParseSchedulerConfiguration`: strict YAML/JSON, then kube-scheduler's checks.
fn scheduler_config(value: &str) -> Result<SchedulerConfig, String> {
    SchedulerConfiguration::parse(value)
        .map(|config| SchedulerConfig(config.map(Arc::new)))
        .map_err(|err| err.to_string())
}

fn non_empty(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() {
        return Err("must not be empty".into());
    }
    Ok(value.to_string())
}

fn endpoint(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value.is_empty() || value.starts_with("https://") && value.len() > "https://".len() {
        Ok(value.trim_end_matches('/').to_string())
    } else {
        Err("must be an https:// URL (or empty to discover it from EKS)".into())
    }
}

fn ca_bundle(value: &str) -> Result<String, String> {
    use base64::Engine;
    let value = value.trim();
    if value.is_empty() {
        return Ok(String::new());
    }
    let pem = base64::engine::general_purpose::STANDARD
        .decode(value)
        .map_err(|e| format!("not base64: {e}"))?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err("does not decode to a PEM certificate".into());
    }
    Ok(value.to_string())
}

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units (`ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `h`), such as `10s`, `1m30s`, `1.5s`, `500ms`.
pub fn go_duration(value: &str) -> Result<Duration, String> {
    let text = value.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let bad = || format!("{value:?} is not a duration (like 10s, 1m30s, 500ms)");
    if text.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let number: f64 = rest[..number_len].parse().map_err(|_| bad())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    Duration::try_from_secs_f64(total).map_err(|_| bad())
}

fn positive_duration(value: &str) -> Result<Duration, String> {
    let duration = go_duration(value)?;
    if duration.is_zero() {
        return Err("must be longer than 0".into());
    }
    Ok(duration)
}

/// Go's `strconv.ParseBool`.
fn go_bool(value: &str) -> Result<bool, String> {
    match value.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("{other:?} is not true or false")),
    }
}

fn overhead_fraction(value: &str) -> Result<f64, String> {
    let fraction: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))?;
    if !(0.0..1.0).contains(&fraction) {
        return Err(format!(
            "{fraction} must be a fraction in [0, 1) (0.075 is 7.5 %)"
        ));
    }
    Ok(fraction)
}

fn reserved_enis(value: &str) -> Result<u32, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("{value:?} is not a whole number of ENIs (0 or more)"))
}

fn port(value: &str) -> Result<u16, String> {
    match value.trim().parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(format!("{value:?} is not a port (1-65535)")),
    }
}

fn feature_gates(value: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, enabled) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not Name=true|false"))?;
        let enabled = go_bool(enabled).map_err(|e| format!("{name}: {e}"))?;
        match name.trim() {
            "SpotToSpotConsolidation" => gates.spot_to_spot_consolidation = enabled,
            known if GATES_NOT_IMPLEMENTED.contains(&known) => {
                if enabled {
                    return Err(format!(
                        "{known}=true: this controller does not implement {known}"
                    ));
                }
            }
            unknown => return Err(format!("unknown feature gate {unknown:?}")),
        }
    }
    Ok(gates)
}
