//! Scenarios as data: the manifests a run starts from, the cloud's knobs, and the workload over
//! time. Files live in `sim/scenarios/`; the default one is embedded in the binary.

use std::time::Duration;

use serde::Deserialize;

use crate::faults::FaultMix;

/// Scenarios shipped with the simulator, by name.
pub const BUILTIN: [(&str, &str); 10] = [
    ("default", include_str!("../scenarios/default.yaml")),
    ("ami-roll", include_str!("../scenarios/ami-roll.yaml")),
    ("burst-1000", include_str!("../scenarios/burst-1000.yaml")),
    ("burst-3000", include_str!("../scenarios/burst-3000.yaml")),
    (
        "burst-spot-1000",
        include_str!("../scenarios/burst-spot-1000.yaml"),
    ),
    ("diurnal", include_str!("../scenarios/diurnal.yaml")),
    ("fleet-200", include_str!("../scenarios/fleet-200.yaml")),
    ("fleet-2000", include_str!("../scenarios/fleet-2000.yaml")),
    (
        "fleet-2000-day",
        include_str!("../scenarios/fleet-2000-day.yaml"),
    ),
    ("scale-in", include_str!("../scenarios/scale-in.yaml")),
];

/// Why a scenario could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("unknown scenario {0:?} (see `karpenter-sim scenarios`)")]
    Unknown(String),
    #[error("scenario {name}: {message}")]
    Invalid { name: String, message: String },
}

/// One scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Simulated time to run, e.g. `2h`.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// Controller step (simulated time between passes), e.g. `1s`.
    #[serde(with = "humantime_serde", default = "default_step")]
    pub step: Duration,
    /// Multi-document YAML applied at start (NodePools, EC2NodeClasses, Namespaces,
    /// PodDisruptionBudgets).
    pub manifests: String,
    #[serde(default)]
    pub cloud: CloudKnobs,
    #[serde(default)]
    pub workloads: Vec<WorkloadEvent>,
    /// Faults on from the start (see [`crate::faults`]; every one off by default), e.g.
    /// `faults: {spot-storm: {at: [10m], share: 0.3}, controller-crash: {every: 30m}}`.
    #[serde(default)]
    pub faults: FaultMix,
    /// The controller's settings, under the chart's names (`settings.featureGates.*`); upstream's
    /// defaults when absent.
    #[serde(default)]
    pub settings: Settings,
}

/// Controller settings a scenario may turn, named as the chart's `settings:` values.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub feature_gates: FeatureGates,
}

/// Upstream's feature gates (`settings.featureGates`); each off unless named, as upstream.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeatureGates {
    /// `SpotToSpotConsolidation`: spot nodes may be consolidated onto cheaper spot nodes.
    #[serde(default)]
    pub spot_to_spot_consolidation: bool,
}

fn default_step() -> Duration {
    Duration::from_secs(1)
}

/// One offering without capacity from `from` (since the start of the run) for `duration`,
/// whatever capacity waves do meanwhile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Drought {
    pub instance_type: String,
    pub zone: String,
    /// `spot` or `on-demand`.
    pub capacity_type: String,
    #[serde(with = "humantime_serde")]
    pub from: Duration,
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
}

/// Fakecloud knobs a scenario may turn.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CloudKnobs {
    /// Per-pool capacity (units) for every offering; fakecloud's default when absent.
    pub pool_capacity: Option<u32>,
    /// Fraction of instances that never boot (0..1).
    pub never_boot_fraction: Option<f64>,
    /// Fraction of instances that boot slowly (0..1).
    pub slow_boot_fraction: Option<f64>,
    /// EC2 DescribeInstances eventual-consistency lag.
    pub eventual_consistency_lag_ms: Option<u64>,
    /// Fraction of EC2 calls answered with `RequestLimitExceeded`.
    pub ec2_throttle_rate: Option<f64>,
    /// Fraction of EC2 calls that fail with a 5xx.
    pub ec2_unavailable_rate: Option<f64>,
    /// Fraction of cluster API calls that fail with a 503.
    pub api_unavailable_rate: Option<f64>,
    /// Fraction of cluster API writes that fail with a 409 conflict.
    pub api_conflict_rate: Option<f64>,
    /// Offerings without capacity at start: `[instance type, zone, capacity type]`.
    #[serde(default)]
    pub exhausted: Vec<(String, String, String)>,
    /// Offerings that run dry for a while and then come back, as EC2 runs out of one instance
    /// type in a zone (see [`Drought`]).
    #[serde(default)]
    pub droughts: Vec<Drought>,
    /// Value of the `karpenter.sh/discovery` tag on the cloud's subnets and security group
    /// (default: the cluster name, `sim`), so EC2NodeClasses written for another cluster's
    /// discovery tag find their network as written.
    pub discovery_tag: Option<String>,
    /// The API server endpoint the controller is configured with, when it is not the world's (a
    /// misconfigured controller: its nodes run and never join).
    pub controller_cluster_endpoint: Option<String>,
    /// How long registered nodes stay NotReady (default: drawn per seed, 2-30 s).
    pub kubelet_ready_delay_ms: Option<u64>,
    /// Security groups created besides the cluster's node group, by name, each tagged
    /// `Name: <name>` (what an EC2NodeClass's `securityGroupSelectorTerms` may move to mid-run).
    #[serde(default)]
    pub extra_security_groups: Vec<String>,
    /// How long EC2, SSM and SQS calls, and the API server's answers to the controller, take
    /// when nothing is wrong (`drawn`: each seed its own ranges within the realistic bounds,
    /// CreateFleet 1-3 s, Describe* 0.1-0.5 s, SQS 10-50 ms, the API server
    /// [`API_SERVER_LATENCY_MS`], the default; `realistic`: every call over the whole bounds;
    /// `none`: instant). Injected `ec2-latency` comes on top.
    #[serde(default)]
    pub latency: LatencyKnob,
}

/// A scenario's normal cloud latency (see [`CloudKnobs::latency`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyKnob {
    /// The seed's own ranges ([`fakecloud::LatencyProfile::drawn`]; the API server's,
    /// [`LatencyKnob::api_server_ms`]): the default.
    #[default]
    Drawn,
    /// Every action over its whole realistic range.
    Realistic,
    /// Every call answers at once (a scenario about something latency would only blur).
    None,
}

/// The bounds of the API server's answers to the controller, milliseconds: a request to an EKS
/// control plane in the cluster's region (issue 13: 5-30 ms a call).
pub const API_SERVER_LATENCY_MS: (u64, u64) = (5, 30);

impl LatencyKnob {
    /// How long each API-server call of the controller takes, milliseconds (`None`: at once):
    /// `realistic`, the whole [`API_SERVER_LATENCY_MS`]; `drawn`, the seed's own range within
    /// them (two draws from its own stream, the lower the range's start).
    pub fn api_server_ms(self, seed: u64) -> Option<(u64, u64)> {
        let (low, high) = API_SERVER_LATENCY_MS;
        match self {
            LatencyKnob::None => None,
            LatencyKnob::Realistic => Some((low, high)),
            LatencyKnob::Drawn => {
                let mut rng = fakekit::Streams::new(seed, "latency").stream("api-server");
                let a = rand::Rng::gen_range(&mut rng, low..=high);
                let b = rand::Rng::gen_range(&mut rng, low..=high);
                Some((a.min(b), a.max(b)))
            }
        }
    }

    /// The name a scenario and `--latency` use.
    pub fn name(self) -> &'static str {
        match self {
            LatencyKnob::Drawn => "drawn",
            LatencyKnob::Realistic => "realistic",
            LatencyKnob::None => "none",
        }
    }
}

/// Something the workload does at a point in simulated time.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadEvent {
    #[serde(with = "humantime_serde")]
    pub at: Duration,
    /// Set a Deployment's replica count (created on first use).
    pub deployment: Option<DeploymentSpec>,
    /// Create a batch of pods that finish after `run_for`.
    pub batch: Option<BatchSpec>,
    /// Set a StatefulSet's replica count (created on first use).
    pub statefulset: Option<StatefulSetSpec>,
    /// Edit the cluster's NodePools and EC2NodeClasses mid-run: multi-document YAML, each
    /// document merged into the object of its kind and name (a JSON merge patch, as `kubectl
    /// patch --type merge`; created when absent), e.g. a NodePool's template labels or an
    /// EC2NodeClass's `securityGroupSelectorTerms`. Checked as the API server would when the
    /// scenario is read.
    pub apply: Option<String>,
}

/// A StatefulSet: `replicas` pods requesting `cpu` and `memory`, each with a claim of `storage`
/// from `storageClass` (which the scenario's manifests define).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatefulSetSpec {
    pub name: String,
    pub replicas: u32,
    pub cpu: String,
    pub memory: String,
    pub storage: String,
    pub storage_class: String,
    /// Spread the pods over zones (`maxSkew: 1`, `DoNotSchedule`).
    #[serde(default)]
    pub spread_by_zone: bool,
    /// The zone spread's `minDomains` (with `spreadByZone`): while fewer zones than this hold an
    /// eligible node, kube-scheduler takes the global minimum as 0, so replicas go one per zone
    /// from the start. Set to the number of zones the pools offer, a spread over zonal volumes
    /// cannot pack early replicas into one zone (see `DRAW_STATEFUL_SPREAD`).
    #[serde(default)]
    pub min_domains: Option<u32>,
    /// Its pods' `nodeSelector` (e.g. `karpenter.sh/nodepool: db`).
    #[serde(default)]
    pub node_selector: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentSpec {
    pub name: String,
    pub replicas: u32,
    pub cpu: String,
    pub memory: String,
    /// Annotations of its pods (e.g. `karpenter.sh/do-not-disrupt: "true"`).
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// Its pods' `nodeSelector` (e.g. `karpenter.sh/nodepool: pinned`).
    #[serde(default)]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// Its pods' `priorityClassName` (e.g. `system-cluster-critical`: a drain evicts such pods
    /// only after the ordinary ones are gone).
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// Its namespace (`default` when unset; critical cluster services run in `kube-system`).
    #[serde(default)]
    pub namespace: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BatchSpec {
    pub name: String,
    pub pods: u32,
    pub cpu: String,
    pub memory: String,
    #[serde(with = "humantime_serde")]
    pub run_for: Duration,
}

/// The documents of an `apply` event with their kinds: NodePools and EC2NodeClasses only, each
/// named. (Not validated whole: a merge patch may carry only the fields it changes.)
pub fn edits(
    text: &str,
) -> Result<Vec<(karpenter_core::seams::kube::ResourceKind, serde_json::Value)>, String> {
    use karpenter_core::seams::kube::ResourceKind;
    let documents =
        karpenter_core::manifest::parse_documents(text).map_err(|e| format!("apply: {e}"))?;
    if documents.is_empty() {
        return Err("apply: no document".into());
    }
    documents
        .into_iter()
        .map(|(index, document)| {
            let kind = match (document["apiVersion"].as_str(), document["kind"].as_str()) {
                (Some("karpenter.sh/v1"), Some("NodePool")) => ResourceKind::NODE_POOL,
                (Some("karpenter.k8s.aws/v1"), Some("EC2NodeClass")) => {
                    ResourceKind::EC2_NODE_CLASS
                }
                (api_version, kind) => {
                    return Err(format!(
                        "apply: document {index}: only karpenter.sh/v1 NodePools and \
                         karpenter.k8s.aws/v1 EC2NodeClasses can be edited, not {} {}",
                        api_version.unwrap_or("?"),
                        kind.unwrap_or("?")
                    ));
                }
            };
            if document["metadata"]["name"]
                .as_str()
                .is_none_or(str::is_empty)
            {
                return Err(format!(
                    "apply: document {index}: metadata.name is required"
                ));
            }
            Ok((kind, document))
        })
        .collect()
}

impl Scenario {
    /// A built-in scenario by name, or a file path.
    pub fn load(name: &str) -> Result<Self, ScenarioError> {
        let text = match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((_, text)) => text.to_string(),
            None => std::fs::read_to_string(name)
                .map_err(|_| ScenarioError::Unknown(name.to_string()))?,
        };
        Self::parse(name, &text)
    }

    pub fn parse(name: &str, text: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario =
            serde_yaml::from_str(text).map_err(|e| ScenarioError::Invalid {
                name: name.to_string(),
                message: e.to_string(),
            })?;
        scenario
            .faults
            .validate()
            .map_err(|message| ScenarioError::Invalid {
                name: name.to_string(),
                message: format!("faults: {message}"),
            })?;
        for event in &scenario.workloads {
            let kinds = [
                event.deployment.is_some(),
                event.batch.is_some(),
                event.statefulset.is_some(),
                event.apply.is_some(),
            ];
            let invalid = |message: String| ScenarioError::Invalid {
                name: name.to_string(),
                message: format!("workload at {:?}: {message}", event.at),
            };
            if kinds.iter().filter(|k| **k).count() != 1 {
                return Err(invalid(
                    "exactly one of deployment, batch, statefulset, apply".into(),
                ));
            }
            if let Some(text) = &event.apply {
                edits(text).map_err(invalid)?;
            }
        }
        Ok(scenario)
    }
}
